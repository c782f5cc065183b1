#!/usr/bin/env bash
# t_audit.sh - `apbot audit` from the outside, on a SQLite queue that `apbot run` worked
# against the erp-sim program: the chain verifies (exit 0, text and JSON); `audit head` and the
# daily report (text, JSON, HTML) print the same head for the day; a head kept before still
# verifies after more events; then, with the append-only triggers dropped as someone with the
# file's write access would, an UPDATE of a past event, a deleted event and two events that
# swap ids each make `audit verify` exit 7 naming the event and what differs, and the last
# event deleted is found by the kept head; usage errors exit 2, a missing queue 1.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC. Needs bash, grep, sed, sqlite3.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml

. "$SRC/tests/lib/harness.sh"
harness_init audit

sql() { sqlite3 "$db" "$1"; }
today=$(date +%F)

start_sim
cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Acme Supplies,AU-1,2026-11-03,EUR,6000,100.00,19.00
100002,Müller & Söhne,AU-2,2026-11-03,EUR,6000,200.00,38.00
100003,Plain Vendor,AU-3,2026-11-03,EUR,6000,300.00,0
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run run run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run 0
events=$(sql "SELECT count(*) FROM events")

# ---- intact ---------------------------------------------------------------------------------
run verify audit verify
expect_rc verify 0
expect_grep verify "$work/verify.out" "^audit chain intact: $events events verified"
run verify_json audit verify --json
expect_rc verify_json 0
expect_grep verify_json "$work/verify_json.out" '"intact": true'
expect_grep verify_json "$work/verify_json.out" "\"event_id\": $events"
expect_grep verify_json "$work/verify_json.out" '"break": null'

# ---- the head of the day: audit head and the report say the same ----------------------------
run head audit head --date "$today"
expect_rc head 0
head=$(sed -n 's/^audit chain head at the end of [0-9-]*: \([0-9]*:[0-9a-f]\{64\}\)$/\1/p' "$work/head.out")
expect_eq "head's event" "${head%%:*}" "$events"
run head_now audit head --json
expect_rc head_now 0
expect_grep head_now "$work/head_now.out" "\"head\": \"$head\""
run head_before audit head --date 2000-01-01
expect_rc head_before 0
expect_grep head_before "$work/head_before.out" ": 0:0{64}$"
run report report --flow "$FLOW" --erp "$erp"
expect_rc report 0
expect_grep report "$work/report.out" "^audit chain head at the end of the day: $head$"
run report_json report --flow "$FLOW" --erp "$erp" --format json
expect_grep report_json "$work/report_json.out" "\"head\": \"$head\""
run report_html report --flow "$FLOW" --erp "$erp" --format html
expect_grep report_html "$work/report_html.out" "id=\"audit-head\"[^>]*>Audit chain head at the end of the day: $head<"

# a head kept now still holds after more events
printf '%s\n' "vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax" \
    "100004,Later Vendor,AU-4,2026-11-04,EUR,6000,10.00,1.90" >"$work/inv2.csv"
run enqueue2 enqueue "$work/inv2.csv"
expect_rc enqueue2 0
run kept audit verify --head "$head"
expect_rc kept 0
expect_grep kept "$work/kept.out" "^audit chain intact: $((events + 1)) events verified"

# ---- tampering, as someone with write access to the file would -------------------------------
sql "DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete"
sql "CREATE TABLE saved AS SELECT * FROM events"
last=$(sql "SELECT max(id) FROM events")
restore() {
    sql "DELETE FROM events; INSERT INTO events SELECT * FROM saved"
    run restored audit verify
    expect_rc restored 0
}

# an UPDATE of a past event
sql "UPDATE events SET detail = 'booked by hand' WHERE id = 3"
run changed audit verify
expect_rc changed 7
expect_grep changed "$work/changed.out" "^audit chain BROKEN \(changed\): event #3 \(item #[0-9]+\) no longer matches its hash"
expect_grep changed "$work/changed.out" "^last intact event: 2:[0-9a-f]{64}$"
run changed_json audit verify --json
expect_rc changed_json 7
expect_grep changed_json "$work/changed_json.out" '"kind": "changed"'
expect_grep changed_json "$work/changed_json.out" '"event_id": 3,'
run changed_head audit verify --head "$head"
expect_rc changed_head 7
restore

# a deleted event
sql "DELETE FROM events WHERE id = 5"
run deleted audit verify --json
expect_rc deleted 7
expect_grep deleted "$work/deleted.out" '"kind": "missing"'
expect_grep deleted "$work/deleted.out" '"missing_from": 5'
expect_grep deleted "$work/deleted.out" 'event #5 is missing before event #6'
restore

# a reordered pair: events 6 and 7 swap ids
sql "UPDATE events SET id = -1 WHERE id = 7; UPDATE events SET id = 7 WHERE id = 6; UPDATE events SET id = 6 WHERE id = -1"
run swapped audit verify
expect_rc swapped 7
expect_grep swapped "$work/swapped.out" "^audit chain BROKEN \(order\): event #6 .* holds the event appended as #7"
restore

# the last event deleted: the chain alone cannot tell (nothing comes after it); a kept head can
sql "DELETE FROM events WHERE id = $last"
run tail_only audit verify
expect_rc tail_only 0
run tail_kept audit verify --head "$last:$(sql "SELECT lower(hex(hash)) FROM saved WHERE id = $last")"
expect_rc tail_kept 7
expect_grep tail_kept "$work/tail_kept.out" "^audit chain BROKEN \(head\): the kept head names event #$last, but the chain ends at event #$((last - 1))"
restore

# ---- usage ----------------------------------------------------------------------------------
run usage audit
expect_rc usage 2
run usage2 audit verify --head 12
expect_rc usage2 2
run usage3 audit head --date 2026-02-30
expect_rc usage3 2
rc=0
"$APBOT_BIN" --db "$work/nothing.db" audit verify >"$work/none.out" 2>"$work/none.err" || rc=$?
expect_rc none 1
expect_grep none "$work/none.err" "no queue database"

harness_finish audit
