#!/usr/bin/env bash
# t_sim_spa_client.sh - the spa UI's own client (GET / and /app.js of erp-sim --ui spa) in
# headless Chromium: fixtures/erp-sim/spa/drive.js logs in (after a refused password), enters
# an invoice with two lines, tax and a comment with quotes, a backslash, a newline and
# non-ASCII letters, saves the draft, posts it, finds it by reference and logs out, and checks
# the page, the ledger (/_sim/document) and every call the page sent against the contract.
# Skipped, with a message, when chromium or node is absent (`make test` installs both).
# Env (set by ctest): ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

. "$SRC/tests/lib/harness.sh"
harness_init sim-spa-client

if ! [ -x "$CHROMIUM" ] || ! command -v node >/dev/null; then
    echo "SKIP: $CHROMIUM or node is absent: the headless-browser run did not happen (make test installs them)"
    exit 0
fi

sim_launch --ui spa --seed 5

drc=0
HOME=$work CHROMIUM=$CHROMIUM SIM_URL=http://127.0.0.1:$port \
    PROFILE=$(mktemp -d "$work/chromium.XXXXXX") \
    timeout 180 node "$SRC/fixtures/erp-sim/spa/drive.js" >"$work/drive.out" 2>"$work/drive.err" ||
    drc=$?
cat "$work/drive.out"
if [ "$drc" -ne 0 ]; then
    fail "the browser run: $drc check(s) failed"
    tail -n 20 "$work/drive.err" >&2
else
    ok "the browser run ($(grep -c '^ok:' "$work/drive.out") checks)"
fi
harness_finish "spa client"
