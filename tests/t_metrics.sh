#!/usr/bin/env bash
# t_metrics.sh - the figures operations scrape, read with the Prometheus project's own parser
# (tests/lib/prom_parse.py, Debian's python3-prometheus-client) and held to the truth:
#  - `apbot run --metrics-file`: the textfile is there from the start, rewritten whole while the
#    run goes on (running 1, requests counted) and at the end with the exit code; ERP requests
#    per step add up to what the simulator served, its overload answers (429, 503) to apbot's,
#    the posts to the bookings in the ERP's ground truth, the items finished to `apbot status`;
#    every histogram's count is its step's requests; no label carries a key, vendor or
#    document; a refused login ends with exit code 4 and the breaker tripped; a path that
#    cannot be written stops the run before anything is sent;
#  - `apbot serve`'s GET /metrics in OpenMetrics (and in the text format 0.0.4 when asked):
#    the items per state equal `apbot status --json`, the day's completed items and money per
#    currency equal the queue's, the settle delay and the longest late commit `status --flow`'s;
#    behind HTTP Basic when a password is set.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml
GEN=$(dirname "$APBOT_BIN")/gen-invoices
# Debian's interpreter, where python3-prometheus-client is (not a python3 earlier on PATH)
PY=${APBOT_TEST_PYTHON:-/usr/bin/python3}

. "$SRC/tests/lib/harness.sh"
harness_init metrics

"$PY" -c 'import prometheus_client' 2>/dev/null || {
    echo "t_metrics: $PY has no prometheus_client (python3-prometheus-client; make test-deps)" >&2
    exit 1
}

# parse FORMAT FILE OUT: the samples, one per line; a parse error fails the test
parse() {
    if ! "$PY" "$SRC/tests/lib/prom_parse.py" --format "$1" "$2" >"$3" 2>"$3.err"; then
        fail "$2 is not valid $1: $(cat "$3.err")"
        sed 's/^/  | /' "$2" | head -n 40 >&2
        return 1
    fi
}
# val FILE SAMPLE: the value of one sample line (name{labels}), "" when absent
val() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
# sum FILE REGEX: the sum of the samples whose name{labels} matches
sum() { awk -v re="$2" '$1 ~ re { s += $2 } END { printf "%d\n", s }' "$1"; }
# simstat EXPR: a figure of the simulator's /_sim/stats (d: its JSON)
simstat() { curl -fsS "$erp/_sim/stats" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

# An ERP with four slots, posts of 100-200 ms and a few overload answers: the run lasts some
# seconds, long enough to see its file rewritten.
scn=$work/busy.scn
printf '%s\n' 'slots = 4' 'service_ms.login = 5' 'service_ms.form = 5..10' \
    'service_ms.check = 5..10' 'service_ms.post = 100..200' 'service_ms.search = 10..20' \
    'service_ms.journal = 5' 'index_lag_ms = 0' 'fault.overload503 = 0.04' \
    'fault.overload429 = 0.03' >"$scn"
sim_launch --scenario "$scn" --seed 33
unset APBOT_ERP_URL APBOT_DB APBOT_REVIEW_PASSWORD

"$GEN" --month-end --head 60 --out "$work/invoices.csv"
run enqueue enqueue --vendors "$SRC/fixtures/invoices/vendors.csv" "$work/invoices.csv"
expect_rc enqueue 3 # one refused line in the set

# ---- 1. a path that cannot be written: nothing is sent ------------------------------------
logins_before=$(simstat "d['requests']['login']")
run nodir run --flow "$FLOW" --erp "$erp" --until-empty --max-seconds 60 \
    --metrics-file "$work/no/such/dir/apbot.prom"
expect_rc nodir 1
expect_grep nodir "$work/nodir.err" "--metrics-file: .*no/such/dir/apbot.prom"
expect_eq "logins after a refused --metrics-file" "$(simstat "d['requests']['login']")" "$logins_before"
run nodir-status status --json
expect_grep nodir-status "$work/nodir-status.out" '"completed": 0'

# ---- 2. the run's textfile, during and after the run ---------------------------------------
mkdir "$work/textfile"
prom=$work/textfile/apbot.prom
"$APBOT_BIN" --db "$db" run --flow "$FLOW" --erp "$erp" --until-empty --max-seconds 120 \
    --concurrency 4 --metrics-file "$prom" --metrics-interval 1 >"$work/run.out" 2>"$work/run.err" &
run_pid=$!
seen_running=no
for _ in $(seq 1 200); do
    if [ -f "$prom" ]; then
        cp "$prom" "$work/mid.prom"
        if parse prometheus "$work/mid.prom" "$work/mid.txt" &&
            [ "$(val "$work/mid.txt" 'apbot_run_running{}')" = 1 ] &&
            [ "$(sum "$work/mid.txt" '^apbot_erp_requests_total')" -gt 0 ]; then
            seen_running=yes
            break
        fi
    fi
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.1
done
rc=0
wait "$run_pid" || rc=$?
expect_eq "run exit" "$rc" 0
expect_eq "a file of the running run, with requests counted" "$seen_running" yes
expect_no_grep mid "$work/mid.txt" '^apbot_run_exit_code'

parse prometheus "$prom" "$work/end.txt"
ls "$work/textfile" >"$work/textfile.ls"
expect_eq "files beside the textfile (no temporary left)" "$(cat "$work/textfile.ls")" "apbot.prom"
expect_eq "mode of the textfile" "$(stat -c %a "$prom")" 644
expect_eq "running at the end" "$(val "$work/end.txt" 'apbot_run_running{}')" 0
expect_eq "exit code" "$(val "$work/end.txt" 'apbot_run_exit_code{}')" 0
start=$(val "$work/end.txt" 'apbot_run_start_time_seconds{}')
end=$(val "$work/end.txt" 'apbot_run_end_time_seconds{}')
now=$(date +%s)
awk -v s="$start" -v e="$end" -v n="$now" 'BEGIN { exit !(s > n - 300 && s <= e && e <= n + 1) }' ||
    fail "start $start and end $end are not around now ($now)"

run status status --json
completed=$(sed -n 's/^ *"completed": *\([0-9]*\).*/\1/p' "$work/status.out")
bex=$(sed -n 's/^ *"business-exception": *\([0-9]*\).*/\1/p' "$work/status.out")
review=$(sed -n 's/^ *"manual-review": *\([0-9]*\).*/\1/p' "$work/status.out")
[ "${completed:-0}" -gt 40 ] || fail "too few completed: $completed"
expect_eq "completed items" "$(val "$work/end.txt" 'apbot_run_items_total{state="completed"}')" "$completed"
expect_eq "business exceptions" \
    "$(val "$work/end.txt" 'apbot_run_items_total{state="business-exception"}')" "$bex"
expect_eq "manual review" "$(val "$work/end.txt" 'apbot_run_items_total{state="manual-review"}')" "$review"

# against the ERP's ground truth and its own counts: every committing request is a post, the
# confirmed ones are the bookings (the others met an overload answer and booked nothing); the
# ERP served every request apbot counted, and the redirects to its home page that a login
# follows inside its exchange
booked=$(curl -fsS "$erp/_sim/ledger.csv" | tail -n +2 | wc -l)
expect_eq "confirmed posts against bookings in the ERP" \
    "$(val "$work/end.txt" 'apbot_erp_requests_total{outcome="confirmed",step="post"}')" "$booked"
expect_eq "posts against requests of the post step" "$(val "$work/end.txt" 'apbot_run_posts_total{}')" \
    "$(sum "$work/end.txt" '^apbot_erp_requests_total[{]outcome="[^"]*",step="post"[}]')"
served=$(simstat "d['requests']['total'] - d['requests']['admin'] - d['requests']['home']")
expect_eq "ERP requests against those the ERP served" \
    "$(sum "$work/end.txt" '^apbot_erp_requests_total')" "$served"
overload=$(simstat "d['answers_429'] + d['answers_503']")
[ "$overload" -gt 0 ] || fail "the scenario made no overload answer"
expect_eq "overload answers against the ERP's" \
    "$(val "$work/end.txt" 'apbot_erp_overload_answers_total{}')" "$overload"
expect_eq "login requests against the ERP's" \
    "$(sum "$work/end.txt" '^apbot_erp_requests_total[{]outcome="[^"]*",step="login"[}]')" \
    "$(simstat "d['requests']['login']")"
expect_eq "logins against logged-in answers" "$(val "$work/end.txt" 'apbot_run_logins_total{}')" \
    "$(val "$work/end.txt" 'apbot_erp_requests_total{outcome="logged-in",step="login"}')"
# each step's histogram counts its requests
for step in $(sed -n 's/^apbot_erp_request_duration_seconds_count{step="\([^"]*\)"}.*/\1/p' "$work/end.txt"); do
    expect_eq "latency observations of step $step" \
        "$(val "$work/end.txt" "apbot_erp_request_duration_seconds_count{step=\"$step\"}")" \
        "$(sum "$work/end.txt" "^apbot_erp_requests_total[{]outcome=\"[^\"]*\",step=\"$step\"[}]")"
done
expect_grep steps "$work/end.txt" '^apbot_erp_requests_total[{]outcome="confirmed",step="post"[}]'
expect_eq "breaker closed" "$(val "$work/end.txt" 'apbot_run_breaker_state{state="closed"}')" 1
expect_eq "sessions limit" "$(val "$work/end.txt" 'apbot_run_sessions{}')" 4
# bounded labels: no key, vendor, invoice or document number
expect_no_grep labels "$prom" 'AP1-|Vendor|R2026|DOC|\?'

# ---- 3. apbot serve's GET /metrics against the queue ----------------------------------------
# start_serve NAME: apbot serve on a free loopback port; sets $serve_url
start_serve() {
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --erp "$erp" --listen 127.0.0.1:0 \
        >"$work/$1.out" 2>"$work/$1.err" &
    serve_pid=$!
    serve_url=""
    for _ in $(seq 1 100); do
        serve_url=$(sed -n 's|^listening on \(http://[^ ]*\)$|\1|p' "$work/$1.out" 2>/dev/null | head -n1 || true)
        [ -n "$serve_url" ] && break
        sleep 0.05
    done
    [ -n "$serve_url" ] || { echo "apbot serve did not start" >&2; cat "$work/$1.err" >&2; exit 1; }
}
stop_serve() {
    kill "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=""
}
start_serve serve
curl -fsS -D "$work/om.head" -o "$work/om.raw" "$serve_url/metrics" || fail "GET /metrics"
expect_grep om-type "$work/om.head" '^Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8'
expect_no_grep om-cookie "$work/om.head" '^Set-Cookie'
parse openmetrics "$work/om.raw" "$work/om.txt"
run status-flow status --json --flow "$FLOW"
for state in new checking posting reconciling finishing completed business-exception manual-review; do
    want=$(sed -n "s/^ *\"$state\": *\([0-9]*\).*/\1/p" "$work/status-flow.out")
    expect_eq "items $state" "$(val "$work/om.txt" "apbot_queue_items{state=\"$state\"}")" "$want"
done
expect_eq "review depth" "$(val "$work/om.txt" 'apbot_queue_review_depth{}')" "$review"
# everything settled today: the day's items are the queue's
expect_eq "completed today" "$(val "$work/om.txt" 'apbot_today_items{state="completed"}')" "$completed"
expect_eq "business exceptions today" \
    "$(val "$work/om.txt" 'apbot_today_items{state="business-exception"}')" "$bex"
settle_ms=$(sed -n 's/^ *"settle_ms": *\([0-9]*\).*/\1/p' "$work/status-flow.out")
late_ms=$(sed -n 's/^ *"max_late_commit_ms": *\([0-9]*\).*/\1/p' "$work/status-flow.out")
expect_eq "settle delay" "$(val "$work/om.txt" 'apbot_settle_delay_seconds{}')" "$((settle_ms / 1000))"
expect_eq "late commit" "$(val "$work/om.txt" 'apbot_late_commit_max_seconds{}')" "$((late_ms / 1000))"
# money per currency: the exact decimal of the completed items' minor units, as apbot list shows them
run list list --state completed --json --limit 100000
"$PY" - "$work/list.out" >"$work/money.want" <<'PYEOF'
import json, sys
from decimal import Decimal
sums = {}
for it in json.load(open(sys.argv[1])):
    c = it["currency"]
    sums[c] = sums.get(c, Decimal(0)) + Decimal(it["total_minor"]).scaleb(-it["exponent"])
for c in sorted(sums):
    text = format(sums[c], "f")
    if "." in text:
        text = text.rstrip("0")
        text = text + "0" if text.endswith(".") else text
    print('apbot_today_amount{state="completed",currency="%s"} %s' % (c, text))
PYEOF
grep '^apbot_today_amount{state="completed"' "$work/om.raw" >"$work/money.got" || true
[ "$(wc -l <"$work/money.want")" -ge 2 ] || fail "fewer than two currencies completed"
if diff "$work/money.want" "$work/money.got" >&2; then ok "money per currency completed today"; else
    fail "money per currency completed today differs from the queue's"; fi
# the text format 0.0.4 for a scraper that asks for it
curl -fsS -H 'Accept: text/plain;version=0.0.4' -D "$work/prom.head" -o "$work/prom.raw" \
    "$serve_url/metrics" || fail "GET /metrics as text/plain"
expect_grep prom-type "$work/prom.head" '^Content-Type: text/plain; version=0.0.4; charset=utf-8'
parse prometheus "$work/prom.raw" "$work/prom.txt"
expect_eq "0.0.4: completed" "$(val "$work/prom.txt" 'apbot_queue_items{state="completed"}')" "$completed"
expect_eq "another Host" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "$serve_url/metrics")" 421
stop_serve
# with a password set, /metrics needs it as every page does (Prometheus: basic_auth)
APBOT_REVIEW_PASSWORD=metrics-scrape-secret start_serve serve-pw
expect_eq "without the password" "$(curl -s -o /dev/null -w '%{http_code}' "$serve_url/metrics")" 401
expect_eq "with it" "$(curl -s -o /dev/null -w '%{http_code}' -u prometheus:metrics-scrape-secret "$serve_url/metrics")" 200
stop_serve

# ---- 4. a refused login: the breaker, exit 4 -----------------------------------------------
run enqueue2 enqueue --vendors "$SRC/fixtures/invoices/vendors.csv" "$SRC/fixtures/invoices/good.csv"
APBOT_ERP_PASSWORD=wrong-password run refused run --flow "$FLOW" --erp "$erp" --until-empty \
    --max-seconds 60 --metrics-file "$prom"
expect_rc refused 4
parse prometheus "$prom" "$work/refused.txt"
expect_eq "exit code after a refused login" "$(val "$work/refused.txt" 'apbot_run_exit_code{}')" 4
expect_eq "breaker tripped" "$(val "$work/refused.txt" 'apbot_run_breaker_state{state="tripped"}')" 1
expect_eq "breaker trips" "$(val "$work/refused.txt" 'apbot_run_breaker_trips_total{}')" 1
expect_eq "posts of the refused run" "$(val "$work/refused.txt" 'apbot_run_posts_total{}')" 0
expect_no_grep refused-secret "$prom" 'wrong-password|acme-demo'

harness_finish metrics
