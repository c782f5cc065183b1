#!/usr/bin/env bash
# record_har.sh - records the HAR of one person's session against each simulator UI (acme,
# classic, spa) with tests/record_har.js in headless Chromium: what `apbot flow record` reads.
# The committed fixtures tests/data/har/{acme,classic,spa}.har come from here; re-run it when a
# UI changes:
#     tests/record_har.sh build/erp-sim tests/data/har
# tests/t_record_chromium.sh records into a temp dir with it and runs the recorder's checks on
# the fresh files. Exit 0 when every UI was recorded, 1 otherwise; 77 when chromium or node is
# absent (nothing recorded).
# Usage: record_har.sh ERPSIM_BIN OUT_DIR [UI...]
set -euo pipefail

sim_bin=${1:?usage: record_har.sh ERPSIM_BIN OUT_DIR [UI...]}
out=${2:?usage: record_har.sh ERPSIM_BIN OUT_DIR [UI...]}
shift 2
uis=("$@")
[ ${#uis[@]} -gt 0 ] || uis=(acme classic spa)
src=$(cd "$(dirname "$0")/.." && pwd)
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if ! [ -x "$CHROMIUM" ] || ! command -v node >/dev/null; then
    echo "record_har.sh: $CHROMIUM or node is absent: nothing recorded" >&2
    exit 77
fi
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/apbot-record-har.XXXXXX")
sim_pid=""
cleanup() {
    if [ -n "$sim_pid" ]; then
        kill "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    # Chromium's helpers may still be writing their profile for a moment after the kill
    rm -rf "$tmp" 2>/dev/null || { sleep 1; rm -rf "$tmp" 2>/dev/null || true; }
}
trap cleanup EXIT

status=0
for ui in "${uis[@]}"; do
    # The ERP as a person meets it: no faults, quick answers, a short search index lag.
    printf '%s\n' 'slots = 4' 'index_lag_ms = 100' >"$tmp/rec.scn"
    : >"$tmp/sim.out" # there before the simulator opens it: read at once below
    "$sim_bin" --port 0 --ui "$ui" --admin --scenario "$tmp/rec.scn" --seed 29 \
        >"$tmp/sim.out" 2>"$tmp/sim.err" &
    sim_pid=$!
    port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/sim.out" | head -n1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    if [ -z "$port" ]; then
        echo "record_har.sh: erp-sim --ui $ui did not start" >&2
        cat "$tmp/sim.err" >&2
        exit 1
    fi
    profile=$(mktemp -d "$tmp/profile.XXXXXX") # a fresh one: the last may still be in use
    if ! HOME=$tmp CHROMIUM=$CHROMIUM SIM_URL=http://127.0.0.1:$port UI=$ui \
        PROFILE=$profile OUT=$out/$ui.har ERP_USER=clerk ERP_PASSWORD=acme-demo \
        timeout 180 node "$src/tests/record_har.js"; then
        echo "record_har.sh: the $ui session failed" >&2
        status=1
    fi
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
done
exit $status
