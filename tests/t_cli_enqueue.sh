#!/usr/bin/env bash
# t_cli_enqueue.sh - `apbot enqueue`, `status` and `list` from the outside: queued / already
# queued / conflicting / refused with file:line, exit codes, the summary line, status --json
# counts and list --json fields; then the same relations on the shared fixtures when present;
# CII and Factur-X PDF by content, a FIFO refused without hanging, control characters from input
# escaped on stderr, and no database created when nothing is queued.
# Env (set by ctest): APBOT_BIN, APBOT_SRC, APBOT_FIXTURES, APBOT_SAMPLES. Needs bash, grep, sed,
# sqlite3, mkfifo, timeout.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
DATA=$SRC/tests/data
FIX=${APBOT_FIXTURES:-$SRC/fixtures}/invoices

. "$SRC/tests/lib/harness.sh"
harness_init enqueue

# json_int FILE KEY: the integer value of "KEY": N in status --json output
json_int() {
    sed -n 's/.*"'"$2"'": *\([0-9][0-9]*\).*/\1/p' "$1" | head -n1
}

sql() { sqlite3 "$db" "$1"; }

# ---- our own small inputs: exact numbers ----

run first enqueue "$DATA/store-good.csv"
expect_rc first 0
expect_grep first "$work/first.out" '^queued 3, already queued 0, conflicting 0, refused 0$'

run again enqueue "$DATA/store-good.csv"
expect_rc again 0
expect_grep again "$work/again.out" '^queued 0, already queued 3, conflicting 0, refused 0$'

run conflict enqueue "$DATA/store-conflict.csv"
expect_rc conflict 3
expect_grep conflict "$work/conflict.out" '^queued 0, already queued 0, conflicting 1, refused 0$'
id1001=$(sql "SELECT id FROM items WHERE invoice_number = 'INV-1001'")
expect_grep conflict "$work/conflict.err" \
    "^conflict: [^ ]*store-conflict\.csv:2: .*#$id1001 .*store-good\.csv:2.*state new"
expect_eq "INV-1001 total unchanged" "$(sql "SELECT total FROM items WHERE id = $id1001")" 119000

run bad enqueue "$DATA/store-bad.csv"
expect_rc bad 3
expect_grep bad "$work/bad.out" '^queued 2, already queued 0, conflicting 0, refused 4$'
for line in 2 4 5 6; do
    expect_grep bad "$work/bad.err" "^refused: [^ ]*store-bad\.csv:$line: ."
done

# A file that cannot be read fails the run (exit 1) but the other files are still processed.
run missing enqueue "$work/no-such-file.csv" "$DATA/store-good.csv"
expect_rc missing 1
expect_grep missing "$work/missing.err" 'no-such-file\.csv'
expect_grep missing "$work/missing.out" '^queued 0, already queued 3, conflicting 0, refused 0$'

run usage enqueue
expect_rc usage 2

# Every queued item has exactly one event, and nothing else wrote any.
expect_eq "items" "$(sql 'SELECT COUNT(*) FROM items')" 5
expect_eq "enqueued events" "$(sql "SELECT COUNT(*) FROM events WHERE event = 'enqueued'")" 5
expect_eq "all events" "$(sql 'SELECT COUNT(*) FROM events')" 5
expect_eq "journal mode" "$(sql 'PRAGMA journal_mode')" wal

# ---- status ----
run status status --json
expect_rc status 0
for key in new checking posting reconciling completed business-exception manual-review total \
    oldest_pending_age_s review_depth; do
    expect_grep status "$work/status.out" "\"$key\":"
done
expect_eq "status new" "$(json_int "$work/status.out" new)" 5
expect_eq "status total" "$(json_int "$work/status.out" total)" 5
expect_eq "status completed" "$(json_int "$work/status.out" completed)" 0
expect_eq "status review_depth" "$(json_int "$work/status.out" review_depth)" 0

run status_text status
expect_rc status_text 0
expect_grep status_text "$work/status_text.out" '^new +5$'

# ---- list ----
run list list --state new --json
expect_rc list 0
expect_grep list "$work/list.out" '^\['
for key in id key state vendor_id invoice_number doc_type issue_date currency total erp_doc \
    reason; do
    expect_grep list "$work/list.out" "\"$key\":"
done
expect_eq "list rows" "$(grep -c '"key":"AP1-' "$work/list.out")" 5
expect_grep list "$work/list.out" '"invoice_number":"INV-1002"[^}]*"currency":"EUR","total":"272.50"'
expect_grep list "$work/list.out" '"invoice_number":"7781"[^}]*"total":"13200"'
expect_grep list "$work/list.out" '"erp_doc":null,"reason":null'

run list_limit list --state new --json --limit 2
expect_eq "list --limit 2" "$(grep -c '"key":"AP1-' "$work/list_limit.out")" 2
run list_empty list --state completed --json
expect_rc list_empty 0
expect_grep list_empty "$work/list_empty.out" '^\[\]$'
run list_text list --state new
expect_grep list_text "$work/list_text.out" 'INV-1002 .* 272\.50'
run list_bad list --state nonsense
expect_rc list_bad 2

# ---- the shared fixtures, when they exist: relations, not exact numbers ----
if [ -f "$FIX/month-end.csv" ]; then
    db=$work/fixtures.db
    run fx1 enqueue "$FIX/month-end.csv"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "fx1: exit $rc"
    n1=$(sed -n 's/^queued \([0-9]*\),.*/\1/p' "$work/fx1.out")
    run fx2 enqueue "$FIX/month-end.csv"
    expect_grep fx2 "$work/fx2.out" "^queued 0, already queued $n1, conflicting 0, "
    if [ -f "$FIX/month-end-resubmit.csv" ]; then
        run fx_resubmit enqueue "$FIX/month-end-resubmit.csv"
        expect_grep fx_resubmit "$work/fx_resubmit.out" '^queued [0-9]+, already queued [1-9]'
    fi
    if [ -f "$FIX/month-end-conflict.csv" ]; then
        run fx_conflict enqueue "$FIX/month-end-conflict.csv"
        expect_rc fx_conflict 3
        expect_grep fx_conflict "$work/fx_conflict.err" '^conflict: .*month-end-conflict\.csv:[0-9]+: .*#[0-9]+'
    fi
    run fx_status status --json
    total=$(json_int "$work/fx_status.out" total)
    expect_eq "fixture items = status total" "$(sql 'SELECT COUNT(*) FROM items')" "$total"
else
    echo "skip: $FIX/month-end.csv not present"
fi

# ---- e-invoices by content, input hygiene ----
SAMPLES=${APBOT_SAMPLES:-$SRC/tests/data/einvoices}
db=$work/einv.db

# Nothing queued (a missing file, refusals only): no database is created.
run nodb enqueue "$work/no-such-file.xml"
expect_rc nodb 1
[ ! -e "$db" ] && ok "nodb: no database created" || fail "nodb: $db was created"
run refused_only enqueue "$SAMPLES/facturx/factur-x-minimum.xml"
expect_rc refused_only 3
expect_grep refused_only "$work/refused_only.err" 'no invoice lines and no VAT breakdown'
[ ! -e "$db" ] && ok "refused_only: no database created" || fail "refused_only: $db was created"

run einv enqueue "$SAMPLES/cii/01.01a-INVOICE_uncefact.xml" "$SAMPLES/facturx/invoice_EN16931.pdf"
expect_rc einv 0
expect_grep einv "$work/einv.out" '^queued 2, already queued 0, conflicting 0, refused 0$'
# the UBL version of the CII case is the same invoice, to the last field of its payload
run einv_ubl enqueue "$SAMPLES/ubl/01.01a-INVOICE_ubl.xml"
expect_grep einv_ubl "$work/einv_ubl.out" '^queued 0, already queued 1, conflicting 0, refused 0$'

# A FIFO is refused at once (a writer waiting on it is not served, nothing hangs).
mkfifo "$work/pipe.csv"
rc=0
timeout 20 "$APBOT_BIN" --db "$db" enqueue "$work/pipe.csv" >"$work/fifo.out" 2>"$work/fifo.err" ||
    rc=$?
expect_rc fifo 1
expect_grep fifo "$work/fifo.err" 'pipe\.csv: a FIFO \(named pipe\), not a regular file'

# UTF-16 text is not read as CSV.
printf '\xff\xfev\0e\0n\0d\0o\0r\0\n\0' >"$work/utf16.csv"
run utf16 enqueue "$work/utf16.csv"
expect_rc utf16 1
expect_grep utf16 "$work/utf16.err" 'UTF-16 text that is not XML'

# Control characters from an input file are escaped on the terminal, never sent raw.
esc=$(printf '\033')
printf 'vendor_id,invoice_number,invoice_date,currency,line_net,line_tax\n100001,X%s]0;pwned\a%s[2J,2026-11-03,EUR,1.001,0\n' \
    "$esc" "$esc" >"$work/esc.csv"
run esc enqueue "$work/esc.csv"
expect_rc esc 3
expect_grep esc "$work/esc.err" '^refused: .*esc\.csv:2: invoice X\\x1B\]0;pwned\\x07\\x1B\[2J'
if grep -q "$esc" "$work/esc.err" "$work/esc.out"; then fail "esc: a raw ESC reached the terminal"; else
    ok "esc: no raw ESC on stderr"; fi
run escname enqueue "$work/no${esc}[2Jfile.csv"
expect_rc escname 1
if grep -q "$esc" "$work/escname.err"; then fail "escname: raw ESC in the error line"; else
    ok "escname: file name escaped"; fi

harness_finish enqueue
