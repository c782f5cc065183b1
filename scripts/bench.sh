#!/usr/bin/env bash
# bench.sh - the performance figures (`make bench`): `apbot run` pushing N invoices through
# the simulated ERP's calm and month-end scenarios (bench-run: invoices/s, ERP requests per
# invoice, CPU ms per invoice and peak RSS of the apbot process, bookings and duplicates),
# then the enqueue benchmark (bench-enqueue: 100,000 generated invoices through `apbot enqueue`,
# invoices/s, peak RSS, `apbot status` latency), then the queue per backend (bench-store: SQLite
# and PostgreSQL side by side; PostgreSQL on a throw-away server started by tests/lib/pg.sh with
# fsync on, as a real one runs).
# Usage: scripts/bench.sh BUILD_DIR   (BENCH_N=500 by default)
set -euo pipefail

BUILD=${1:-build}
cd "$(dirname "$0")/.."
N=${BENCH_N:-500}
for f in "$BUILD/apbot" "$BUILD/bench-run" "$BUILD/bench-enqueue" "$BUILD/bench-store"; do
  [ -x "$f" ] || { echo "bench: $f is missing; run 'make' first" >&2; exit 1; }
done
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
unset APBOT_DB APBOT_ERP_URL

echo "== apbot run: $N invoices per scenario, flows/acme.xml policy, sessions = max-sessions"
"$BUILD/bench-run" --apbot "$BUILD/apbot" --src . --n "$N" calm month-end

echo
echo "== apbot enqueue: ${BENCH_ENQUEUE_N:-100000} generated invoices"
"$BUILD/bench-enqueue" --apbot "$BUILD/apbot" --count "${BENCH_ENQUEUE_N:-100000}"

echo
echo "== the queue per backend: enqueue ${BENCH_ENQUEUE_N:-100000}, claims/s (8 workers, 2 processes), status"
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
