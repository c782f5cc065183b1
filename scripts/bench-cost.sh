#!/usr/bin/env bash
# bench-cost.sh - what one invoice costs apbot, counted instead of timed: the user-space
# instructions (valgrind's callgrind) and the system calls (strace -c) of `apbot run` posting
# N generated invoices through one session to the simulated ERP's calm scenario, per
# completed invoice. Counts hardly depend on what else the machine is doing (CPU times on 2
# shared cores vary by half from one hour to the next), so an older binary measured beside
# the new one gives a before/after that holds on any day. One session: with more, the disk
# syncs workers share depend on timing. Start-up (the flow's schema, the login) is included.
#
# usage: scripts/bench-cost.sh BUILD_DIR N APBOT [APBOT...]   (needs valgrind and strace)
set -euo pipefail

BUILD=$1
N=$2
shift 2
cd "$(dirname "$0")/.."
src=$(pwd)
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
unset APBOT_DB APBOT_ERP_URL

work=$(mktemp -d "${TMPDIR:-/tmp}/apbot-cost.XXXXXX")
sim=""
cleanup() {
    if [ -n "$sim" ]; then
        kill "$sim" 2>/dev/null || true
        wait "$sim" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

"$BUILD/gen-invoices" --seed 11 --count "$N" --vendors 100001-100040 --month 2026-11 \
    --out "$work/invoices.csv"

# One measured run of apbot ($1) under a tool (the rest), on a fresh queue and a fresh ERP;
# sets $done to the items it completed.
done=0
run_one() {
    local apbot=$1 url
    shift
    rm -f "$work"/q.db* "$work"/ledger.db* "$work/sim.out"
    "$BUILD/erp-sim" --port 0 --scenario "$src/fixtures/scenarios/calm.scn" --seed 1 \
        --db "$work/ledger.db" >"$work/sim.out" 2>/dev/null &
    sim=$!
    for _ in $(seq 100); do grep -q listening "$work/sim.out" 2>/dev/null && break; sleep 0.05; done
    url=$(grep -o 'http://[0-9.:]*' "$work/sim.out" | head -1)
    APBOT_DB="$work/q.db" "$apbot" enqueue --vendors "$src/fixtures/invoices/vendors.csv" \
        "$work/invoices.csv" >/dev/null 2>&1 || true
    APBOT_DB="$work/q.db" "$@" "$apbot" run --flow "$src/flows/acme.xml" --erp "$url" \
        --until-empty --concurrency 1 >/dev/null 2>"$work/run.log" || true
    kill "$sim" 2>/dev/null || true
    wait "$sim" 2>/dev/null || true
    sim=""
    done=$(sqlite3 "$work/q.db" "SELECT count(*) FROM items WHERE state = 'completed'")
}

# strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall
calls() { awk -v s="$1" '$NF == s { n = $4 } END { print n + 0 }' "$work/strace.txt"; }
# The binary's last three path parts (BENCH_BEFORE is often another checkout's build/apbot).
label() { awk -F/ '{ n = NF; print (n >= 3 ? $(n - 2) "/" : "") (n >= 2 ? $(n - 1) "/" : "") $n }' <<<"$1"; }
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.1f", (n > 0 ? a / n : 0) }'; }

printf '%-28s %5s %12s %9s %9s %7s %7s %7s %7s %7s\n' "apbot" "done" "instr/inv" "sysc/inv" \
    "fdatasync" "pwrite" "pread" "fcntl" "connect" "poll"
for apbot in "$@"; do
    run_one "$apbot" valgrind --tool=callgrind --callgrind-out-file="$work/cg.out"
    done_cg=$done
    ir=$(callgrind_annotate "$work/cg.out" 2>/dev/null |
        awk '/PROGRAM TOTALS/ { gsub(",", "", $1); n = $1 } END { print n + 0 }')
    run_one "$apbot" strace -f -c -o "$work/strace.txt"
    printf '%-28s %5s %12s %9s %9s %7s %7s %7s %7s %7s\n' \
        "$(label "$apbot")" "$done_cg" \
        "$(awk -v a="$ir" -v n="$done_cg" 'BEGIN { printf "%.0f", (n > 0 ? a / n : 0) }')" \
        "$(per "$(calls total)" "$done")" "$(per "$(calls fdatasync)" "$done")" \
        "$(per "$(calls pwrite64)" "$done")" "$(per "$(calls pread64)" "$done")" \
        "$(per "$(calls fcntl)" "$done")" "$(per "$(calls connect)" "$done")" \
        "$(per "$(calls poll)" "$done")"
done
echo "instructions: user space only (callgrind); system calls: every thread (strace -c);" \
    "$N invoices, one session, calm"
