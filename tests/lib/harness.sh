# harness.sh - shared by the CLI-level tests (tests/t_*.sh), sourced after `set -euo pipefail`.
# harness_init NAME makes a temp dir $work with the queue $db inside and removes it (and stops
# a simulator started by sim_launch or start_sim, and an `apbot serve` whose pid is in
# $serve_pid) on exit. The checks count failures in $fails;
# harness_finish prints the verdict and exits 1 when any check failed.

harness_init() { # NAME
    work=$(mktemp -d "${TMPDIR:-/tmp}/apbot-t-$1.XXXXXX")
    db=$work/q.db
    fails=0
    sim_pid=""
    serve_pid=""
    trap harness_cleanup EXIT
}

harness_cleanup() {
    local pid
    for pid in "$serve_pid" "$sim_pid"; do
        if [ -n "$pid" ]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    # a browser's helper processes may still be writing into a profile under $work
    rm -rf "$work" 2>/dev/null || { sleep 0.5 && rm -rf "$work"; } || true
}

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

run() { # NAME ARGS...: apbot with --db; output in $work/NAME.{out,err}, exit code in $rc
    local name=$1
    shift
    rc=0
    "$APBOT_BIN" --db "$db" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
}

expect_rc() { # NAME WANT
    if [ "$rc" -ne "$2" ]; then
        fail "$1: exit $rc, want $2"
        sed 's/^/  | /' "$work/$1.out" "$work/$1.err" >&2
    else
        ok "$1: exit $2"
    fi
}

expect_grep() { # NAME FILE PATTERN
    if grep -Eq -- "$3" "$2"; then ok "$1: /$3/"; else
        fail "$1: no /$3/ in $(basename "$2")"
        head -c 3000 "$2" | sed 's/^/  | /' >&2
    fi
}

expect_no_grep() { # NAME FILE PATTERN
    if grep -Eq -- "$3" "$2"; then
        fail "$1: unexpected /$3/ in $(basename "$2")"
        head -c 3000 "$2" | sed 's/^/  | /' >&2
    else ok "$1: no /$3/"; fi
}

expect_eq() { # WHAT GOT WANT
    if [ "$2" = "$3" ]; then ok "$1 = $3"; else fail "$1: got '$2', want '$3'"; fi
}

# fast_scenario FILE [LINE...]: a scenario of four slots, no service times and no search lag,
# then the LINEs given.
fast_scenario() {
    local scn=$1
    shift
    printf '%s\n' 'slots = 4' 'service_ms.login = 0' 'service_ms.form = 0' \
        'service_ms.check = 0' 'service_ms.post = 0' 'service_ms.search = 0' \
        'service_ms.journal = 0' 'index_lag_ms = 0' "$@" >"$scn"
}

# sim_launch ARGS...: the erp-sim program ($ERPSIM_BIN) on a free port with admin on and ARGS
# (--ui, --scenario, --seed); sets $sim_pid, $port and $erp, and the clerk's credentials in the
# environment.
sim_launch() {
    : >"$work/sim.out"
    "$ERPSIM_BIN" --port 0 --admin "$@" >"$work/sim.out" 2>"$work/sim.err" &
    sim_pid=$!
    port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/sim.out" | head -n1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "erp-sim did not start" >&2; cat "$work/sim.err" >&2; exit 1; }
    erp=http://127.0.0.1:$port
    export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
    unset APBOT_ERP_URL APBOT_DB
}

# start_sim: the acme UI on a fast scenario (fast_scenario).
start_sim() {
    fast_scenario "$work/fast.scn"
    sim_launch --scenario "$work/fast.scn"
}

harness_finish() { # WHAT
    if [ "$fails" -ne 0 ]; then
        echo "$fails check(s) failed" >&2
        exit 1
    fi
    echo "all $1 checks passed"
}
