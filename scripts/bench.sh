#!/usr/bin/env bash
# bench.sh - the performance figures (`make bench`): `apbot run` pushing N invoices through
# the simulated ERP's calm and month-end scenarios (bench-run: invoices/s, ERP requests per
# invoice, CPU ms per invoice and peak RSS of the apbot process, bookings and duplicates),
# then the enqueue benchmark when scripts/bench-enqueue.sh exists.
# Usage: scripts/bench.sh BUILD_DIR   (BENCH_N=500 by default)
set -euo pipefail

BUILD=${1:-build}
cd "$(dirname "$0")/.."
N=${BENCH_N:-500}
for f in "$BUILD/apbot" "$BUILD/bench-run"; do
  [ -x "$f" ] || { echo "bench: $f is missing; run 'make' first" >&2; exit 1; }
done
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
unset APBOT_DB APBOT_ERP_URL

echo "== apbot run: $N invoices per scenario, flows/acme.xml policy, sessions = max-sessions"
"$BUILD/bench-run" --apbot "$BUILD/apbot" --src . --n "$N" calm month-end

if [ -x scripts/bench-enqueue.sh ]; then
  echo
  scripts/bench-enqueue.sh "$BUILD"
fi
