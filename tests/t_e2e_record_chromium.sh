#!/usr/bin/env bash
# t_e2e_record_chromium.sh - `apbot flow record` on sessions recorded now: tests/record_har.sh
# drives headless Chromium through each simulator UI (acme, classic, spa) as a person would
# (log in, search, enter the sample invoice of tests/data/har/sample.csv, save, approve, search
# again, the day's list) and saves each session as a HAR; the apbot command writes a draft from
# each (exit 3: open decisions; the warning that the HAR is a secret; no password, cookie or
# token in the draft); then test_e2e_record runs on the fresh HARs what it runs on the
# committed ones (open decisions answered, the chaos scenario posted through the draft, every
# key booked at most once). Skipped, with a message, when chromium or node is absent (`make
# test` installs both). Env (set by ctest): ERPSIM_BIN, APBOT_BIN, APBOT_SRC,
# APBOT_TEST_E2E_RECORD (the test_e2e_record program).
set -euo pipefail

: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
: "${APBOT_BIN:?APBOT_BIN not set}"
: "${APBOT_TEST_E2E_RECORD:?APBOT_TEST_E2E_RECORD not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

. "$SRC/tests/lib/harness.sh"
harness_init record-chromium

if ! [ -x "$CHROMIUM" ] || ! command -v node >/dev/null; then
    echo "SKIP: $CHROMIUM or node is absent: no session was recorded (make test installs them)"
    exit 0
fi

rc=0
CHROMIUM=$CHROMIUM bash "$SRC/tests/record_har.sh" "$ERPSIM_BIN" "$work/har" \
    >"$work/record.out" 2>"$work/record.err" || rc=$?
cat "$work/record.out"
if [ "$rc" -ne 0 ]; then
    fail "recording the sessions: exit $rc"
    tail -n 20 "$work/record.err" >&2
    harness_finish "record-chromium"
fi
ok "three sessions recorded in Chromium"

for ui in acme classic spa; do
    har=$work/har/$ui.har
    expect_grep "$ui: the HAR holds the password" "$har" 'acme-demo|Y2xlcms6YWNtZS1kZW1v'
    run record-$ui flow record "$har" --invoice "$SRC/tests/data/har/sample.csv#1" \
        --out "$work/$ui.xml"
    expect_rc record-$ui 3
    expect_grep "$ui: the HAR is a secret" "$work/record-$ui.err" 'holds the password, the session cookies'
    expect_grep "$ui: the committing request" "$work/record-$ui.out" '^  - committing request: entry [0-9]+'
    expect_grep "$ui: the open decisions with their entries" "$work/record-$ui.out" \
        '^  errors-[a-z]+ \(entry [0-9]+\): '
    expect_no_grep "$ui: no password in the draft" "$work/$ui.xml" 'acme-demo|Y2xlcms6YWNtZS1kZW1v'
    run check-$ui flow check "$work/$ui.xml"
    expect_rc check-$ui 1
    expect_grep "$ui: flow check names the open decisions" "$work/check-$ui.out" 'open decision'
done

# What test_e2e_record checks on the committed HARs, on these.
rc=0
APBOT_RECORD_HAR_DIR=$work/har "$APBOT_TEST_E2E_RECORD" >"$work/e2e.out" 2>&1 || rc=$?
grep -E 'invoices through|OK|FAILED' "$work/e2e.out" || true
if [ "$rc" -ne 0 ]; then
    fail "test_e2e_record on the fresh HARs: exit $rc"
    tail -n 40 "$work/e2e.out" >&2
else
    ok "the fresh drafts, answered, post the chaos scenario's invoices"
fi
harness_finish "record-chromium"
