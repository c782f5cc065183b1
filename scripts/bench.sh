#!/usr/bin/env bash
# bench.sh - the performance figures (`make bench`), about half an hour on 2 cores:
#  1. apbot run against the simulated ERP (bench-run): one table per scenario - calm,
#     month-end, varying (8 slots, 2 for a while, 8 again; a shorter schedule than the
#     scenario file's, so that a row takes 36 s), shared-cpu (2 cores shared by the requests
#     in service, ~1.1 s a request: rows of 120 s at 1, 2, 3, 4 and auto, a 30 s time-out) -
#     with a row per concurrency (fixed 1, 2, 4, 8, 16 and auto): throughput, the ERP's
#     capacity bound and how close the row got, requests per invoice against the flow's floor,
#     the ERP's work per invoice against one session's, overload and time-outs, latency,
#     apbot's CPU and RSS, and duplicates and lost invoices checked on the simulator's ledger;
#     the limit of `auto` second by second. Every scenario then runs a batch until the queue
#     is empty (calm 3000, month-end and varying 600, shared-cpu 40 invoices; auto and the
#     best fixed setting): its span against the ideal (invoices / bound, phase by phase on
#     the varying ERP, + the settle delay) and what it took beyond the settle delay after its
#     last ambiguous outcome. Then the CGI-era ERP (--ui classic, flows/classic.xml: a form
#     page, an update round trip, save, approve by id) on calm and month-end at 1, 4, 16 and
#     auto: its requests per invoice against the floor of 4 and its RSS with big pages. Then
#     apbot run's peak RSS with 100,000 invoices queued (the flow as shipped, 4 sessions, and
#     16).
#  2. apbot enqueue of 100,000 generated invoices (bench-enqueue).
#  3. the queue per backend (bench-store: SQLite and PostgreSQL side by side; PostgreSQL on a
#     throw-away server started by tests/lib/pg.sh with fsync on, as a real one runs),
#     `apbot audit verify` of the 100,000 events among them.
#  4. what one invoice costs, counted instead of timed (scripts/bench-cost.sh: user-space
#     instructions and system calls per invoice, calm, one session), for BENCH_BEFORE too.
# The machine may be shared: every row says the load average it started at.
# Usage: scripts/bench.sh BUILD_DIR
#   BENCH_SCENARIOS="calm month-end varying shared-cpu"  BENCH_ROWS=1,2,4,8,16,auto
#   BENCH_SHARED_ROWS=1,2,3,4,auto  BENCH_SECONDS=T  BENCH_BATCH=600  BENCH_SHARED_BATCH=40
#   BENCH_CALM_BATCH=3000  BENCH_VARYING_BATCH=600
#   BENCH_CLASSIC_SCENARIOS="calm month-end" (empty: none)  BENCH_CLASSIC_ROWS=1,4,16,auto
#   BENCH_BEFORE=PATH  an older apbot binary: calm is run with it too, as the "before" table,
#                      and its cost per invoice is counted beside this one's
set -euo pipefail

BUILD=${1:-build}
cd "$(dirname "$0")/.."
for f in "$BUILD/apbot" "$BUILD/bench-run" "$BUILD/bench-enqueue" "$BUILD/bench-store"; do
  [ -x "$f" ] || { echo "bench: $f is missing; run 'make' first" >&2; exit 1; }
done
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
unset APBOT_DB APBOT_ERP_URL

ROWS=${BENCH_ROWS:-1,2,4,8,16,auto}
SECS=()
[ -n "${BENCH_SECONDS:-}" ] && SECS=(--seconds "$BENCH_SECONDS")
VARYING_SCHEDULE="0:8, 12000:2, 26000:8"
status=0

echo "== apbot run against the simulated ERP (seed 7); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for scn in ${BENCH_SCENARIOS:-calm month-end varying shared-cpu}; do
  opts=(--rows "$ROWS")
  # the commas are bench-run's lists, one argument each
  # shellcheck disable=SC2054
  case "$scn" in
    calm) opts+=(--batch "${BENCH_CALM_BATCH:-3000}" --batch-rows auto,16) ;;
    varying) opts+=(--capacity "$VARYING_SCHEDULE" --batch "${BENCH_VARYING_BATCH:-600}"
                    --batch-rows auto,8) ;;
    month-end) opts+=(--batch "${BENCH_BATCH:-600}" --batch-rows auto,8) ;;
    shared-cpu) opts=(--rows "${BENCH_SHARED_ROWS:-1,2,3,4,auto}" --timeout-ms 30000
                      --batch "${BENCH_SHARED_BATCH:-40}" --batch-rows auto,2) ;;
  esac
  "$BUILD/bench-run" --apbot "$BUILD/apbot" --src . "${opts[@]}" "${SECS[@]}" "$scn" || status=1
done
for scn in ${BENCH_CLASSIC_SCENARIOS-calm month-end}; do
  "$BUILD/bench-run" --apbot "$BUILD/apbot" --src . --ui classic \
    --rows "${BENCH_CLASSIC_ROWS:-1,4,16,auto}" "${SECS[@]}" "$scn" || status=1
done
if [ -n "${BENCH_BEFORE:-}" ]; then
  echo
  echo "== before: the same calm rows with $BENCH_BEFORE"
  "$BUILD/bench-run" --apbot "$BENCH_BEFORE" --src . --rows "$ROWS" "${SECS[@]}" calm || status=1
fi
"$BUILD/bench-run" --apbot "$BUILD/apbot" --src . --big "${BENCH_ENQUEUE_N:-100000}" || status=1

echo
echo "== apbot enqueue: ${BENCH_ENQUEUE_N:-100000} generated invoices"
"$BUILD/bench-enqueue" --apbot "$BUILD/apbot" --count "${BENCH_ENQUEUE_N:-100000}"

echo
echo "== the queue per backend: enqueue ${BENCH_ENQUEUE_N:-100000}, status, audit verify of their events, claims/s (8 workers, 2 processes)"
pgstate=$(mktemp -d "${TMPDIR:-/tmp}/apbot-bench-pg.XXXXXX")
trap 'bash tests/lib/pg.sh stop "$pgstate"; rm -rf "$pgstate"' EXIT
bash tests/lib/pg.sh start "$pgstate" --durable
pg=""
if [ -f "$pgstate/env" ]; then
  # shellcheck disable=SC1091
  pg=$(. "$pgstate/env" && printf '%s' "$APBOT_TEST_PG")
fi
"$BUILD/bench-store" --apbot "$BUILD/apbot" --count "${BENCH_ENQUEUE_N:-100000}" \
  --claims "${BENCH_CLAIMS:-20000}" ${pg:+--pg "$pg"}

echo
echo "== what one invoice costs, counted: ${BENCH_COST_N:-200} invoices, calm, one session"
scripts/deps.sh valgrind strace
scripts/bench-cost.sh "$BUILD" "${BENCH_COST_N:-200}" ${BENCH_BEFORE:+"$BENCH_BEFORE"} \
    "$BUILD/apbot" || status=1
exit $status
