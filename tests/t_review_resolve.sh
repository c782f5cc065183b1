#!/usr/bin/env bash
# t_review_resolve.sh - `apbot review` and `apbot resolve` from the outside, against the
# erp-sim program. A clerk books two invoices by hand with another amount before the run, so
# the bot's check-before-post finds a conflict and puts them in manual review; one invoice is
# booked by hand with the right amount (adopted: completed); one has a blocked vendor
# (business exception). Then: the review list and one item's timeline and evidence; the
# refusals (unknown id, completed, pending, different amount in the ERP, document the ERP does
# not hold, reject of a business exception); --posted verified against the ERP after the clerk
# fixed the booking; --force with its reason; --requeue; and the audit trail (operator and
# reason on every resolution event).
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC. Needs bash, curl, grep, sed.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml

. "$SRC/tests/lib/harness.sh"
harness_init review

# ---- the simulated ERP --------------------------------------------------------------------
start_sim

book() { # REF AMOUNT INVNO -> prints the document number
    curl -s --fail -X POST "$erp/_sim/book" --data-urlencode "vendor_id=100001" \
        --data-urlencode "invoice_number=$3" --data-urlencode "invoice_date=2026-11-03" \
        --data-urlencode "currency=EUR" --data-urlencode "amount=$2" \
        --data-urlencode "reference=$1"
}
delete_doc() { curl -s --fail -X POST "$erp/_sim/delete" --data-urlencode "doc=$1" >/dev/null; }

# ---- the queue --------------------------------------------------------------------------
cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Acme Supplies,RV-1,2026-11-03,EUR,6000,100.00,19.00
100001,Acme Supplies,RV-2,2026-11-03,EUR,6000,200.00,38.00
100001,Acme Supplies,RV-3,2026-11-03,EUR,6000,300.00,57.00
100090,Blocked Vendor,RV-4,2026-11-03,EUR,6000,400.00,76.00
100001,Acme Supplies,RV-5,2026-11-03,EUR,6000,500.00,95.00
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run list list --state new --json
key_of() { # INVOICE_NUMBER: its key from list --json
    tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep "\"$1\"" | sed -n 's/.*"key": *"\(AP1-[A-Z0-9]*\)".*/\1/p' | head -n1
}
id_of() {
    tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep "\"$1\"" | sed -n 's/.*"id": *\([0-9]*\).*/\1/p' | head -n1
}
k1=$(key_of RV-1); k2=$(key_of RV-2); k3=$(key_of RV-3)
i1=$(id_of RV-1); i2=$(id_of RV-2); i3=$(id_of RV-3); i4=$(id_of RV-4); i5=$(id_of RV-5)
for v in k1 k2 k3 i1 i2 i3 i4 i5; do
    [ -n "${!v}" ] || { echo "could not read $v from list --json" >&2; cat "$work/list.out" >&2; exit 1; }
done

# the clerk's bookings before the run: RV-1 and RV-2 with the wrong amount, RV-3 correctly
# (RV-5 is simply posted by the bot)
wrong1=$(book "$k1" 999.00 RV-1)
wrong2=$(book "$k2" 888.00 RV-2)
right3=$(book "$k3" 357.00 RV-3)
run run run --flow "$FLOW" --erp "$erp" --until-empty
expect_rc run 0
# the log (stderr is no terminal here): one key=value line per state change, plain words as
# they are, values with blanks quoted (docs/operations.md, "What it writes")
expect_grep run_log "$work/run.err" "^time=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z level=info item=$i1 key=$k1 from=new to=checking event=claimed worker=[0-9]+$"
expect_grep run_log "$work/run.err" "level=info item=$i5 key=AP1-[A-Z0-9]+ from=posting to=completed event=confirmed doc=[A-Z0-9-]+ detail=\"[^\"]+\" worker=[0-9]+$"
expect_grep run_log "$work/run.err" "level=info item=$i4 key=AP1-[A-Z0-9]+ from=posting to=business-exception event=rejected reason=\"[^\"]*E103"

# ---- review -----------------------------------------------------------------------------
run review review
expect_rc review 0
expect_grep review "$work/review.out" "^#$i1 +manual-review"
expect_grep review "$work/review.out" "^#$i2 +manual-review"
expect_grep review "$work/review.out" "vendor 100001 \(Acme Supplies\) +invoice RV-1 +119\.00 EUR"
expect_grep review "$work/review.out" "last ERP exchange .*lookup"
expect_no_grep review "$work/review.out" "RV-4"
run review_all review --all
expect_grep review_all "$work/review_all.out" "^#$i4 +business-exception"
expect_grep review_all "$work/review_all.out" "E103"
run review_json review --all --json
expect_grep review_json "$work/review_json.out" "\"invoice_number\": \"RV-4\""
run review_one review "$i1"
expect_rc review_one 0
expect_grep review_one "$work/review_one.out" "^events"
expect_grep review_one "$work/review_one.out" "checking +-> manual-review"
expect_grep review_one "$work/review_one.out" "^ERP evidence"
expect_grep review_one "$work/review_one.out" "search\?reference="
expect_no_grep review_one "$work/review_one.out" "acme-demo"
run review_missing review 999
expect_rc review_missing 3

# ---- refusals ---------------------------------------------------------------------------
run r_unknown resolve 999 --requeue --by alice
expect_rc r_unknown 3
expect_grep r_unknown "$work/r_unknown.err" "no item #999"
run r_completed resolve "$i3" --requeue --by alice
expect_rc r_completed 3
expect_grep r_completed "$work/r_completed.err" "completed \(document $right3\)"
printf '%s\n' 'vendor_id,invoice_number,invoice_date,currency,line_net,line_tax' \
    '100001,RV-6,2026-11-03,EUR,600.00,0' >"$work/late.csv"
run enqueue_late enqueue "$work/late.csv"
i6=$((i5 + 1))
run r_pending resolve "$i6" --reject "why not" --by alice
expect_rc r_pending 3
expect_grep r_pending "$work/r_pending.err" "is new"
run r_amount resolve "$i1" --posted "$wrong1" --flow "$FLOW" --erp "$erp" --by alice
expect_rc r_amount 3
expect_grep r_amount "$work/r_amount.err" "999\.00 EUR, but the invoice is 119\.00 EUR"
run r_amount_force resolve "$i1" --posted "$wrong1" --flow "$FLOW" --erp "$erp" --by alice \
    --force "clerk says so"
expect_rc r_amount_force 3
run r_reject_be resolve "$i4" --reject "again" --by alice
expect_rc r_reject_be 3
run r_usage resolve "$i1" --requeue --reject x --by alice
expect_rc r_usage 2
run r_noflow resolve "$i1" --posted AP-2026-000001 --by alice
expect_rc r_noflow 2
run r_badname resolve "$i1" --requeue --by 'bad name; rm'
expect_rc r_badname 2

# ---- --posted verified after the clerk fixed the booking ----------------------------------
delete_doc "$wrong1"
fixed1=$(book "$k1" 119.00 RV-1)
run r_wrongdoc resolve "$i1" --posted AP-2026-999999 --flow "$FLOW" --erp "$erp" --by alice
expect_rc r_wrongdoc 3
expect_grep r_wrongdoc "$work/r_wrongdoc.err" "as document $fixed1, not AP-2026-999999"
run r_posted resolve "$i1" --posted "$fixed1" --flow "$FLOW" --erp "$erp" --by alice \
    --note "ticket 42"
expect_rc r_posted 0
expect_grep r_posted "$work/r_posted.out" "manual-review -> completed by operator:alice"
run r_again resolve "$i1" --requeue --by alice
expect_rc r_again 3

# ---- --force: the ERP does not hold it (the clerk reversed the wrong booking) -------------
delete_doc "$wrong2"
run r_absent resolve "$i2" --posted AP-2026-000777 --flow "$FLOW" --erp "$erp" --by bob
expect_rc r_absent 3
expect_grep r_absent "$work/r_absent.err" "holds no document .*--force"
run r_force resolve "$i2" --posted AP-2026-000777 --flow "$FLOW" --erp "$erp" --by bob \
    --force "booked on paper, see ticket 43"
expect_rc r_force 0

# ---- --requeue and --reject -----------------------------------------------------------------
# the optimistic check: a decision names the version it was taken on (review ID --json)
run v4 review "$i4" --json
v4=$(tr -d '\n' <"$work/v4.out" | sed -n 's/.*"version": *\([0-9]*\).*/\1/p' | head -n1)
[ -n "$v4" ] || { echo "no version in review --json" >&2; cat "$work/v4.out" >&2; exit 1; }
run r_stale resolve "$i4" --requeue --by carol --expect-version $((v4 - 1))
expect_rc r_stale 3
expect_grep r_stale "$work/r_stale.err" "changed since you saw it"
run r_requeue resolve "$i4" --requeue --by carol --expect-version "$v4"
expect_rc r_requeue 0
expect_grep r_requeue "$work/r_requeue.out" "business-exception -> new by operator:carol"
run list_new list --state new --json
expect_grep list_new "$work/list_new.out" "\"RV-4\""

# ---- the audit trail ----------------------------------------------------------------------
run audit1 review "$i1" --json
expect_grep audit1 "$work/audit1.out" "\"actor\": \"operator:alice\""
expect_grep audit1 "$work/audit1.out" "verified in the ERP: key $k1 is document $fixed1 with 119\.00 EUR; note: ticket 42; by alice on the command line, OS user $(id -un) \(uid $(id -u)\)\""
expect_grep audit1 "$work/audit1.out" "\"erp_doc\": \"$fixed1\""
run audit2 review "$i2" --json
expect_grep audit2 "$work/audit2.out" "\"actor\": \"operator:bob\""
expect_grep audit2 "$work/audit2.out" "FORCED without verification .*: booked on paper, see ticket 43"
run audit4 review "$i4" --json
expect_grep audit4 "$work/audit4.out" "\"actor\": \"operator:carol\""
expect_grep audit4 "$work/audit4.out" "requeued: looked up again before any post \(was: E103"

# ---- a refused verification shows what the ERP answered -------------------------------------
expect_grep r_wrongdoc "$work/r_wrongdoc.err" "ERP lookup GET .*search\?reference="
run audit_ev review "$i1"
expect_grep audit_ev "$work/audit_ev.out" "verify:lookup"

# ---- control characters from invoices and ERP pages are escaped in review and list ----------
if command -v sqlite3 >/dev/null; then
    sqlite3 "$db" "UPDATE items SET vendor_name = 'Evil' || char(27) || '[31mRED' || char(7),
        reason = 'x' || char(27) || ']0;pwned' || char(7) || char(10) || 'forged line',
        invoice_number = 'RV' || char(27) || '[2J' WHERE id = $i2;"
    run esc_list list --state completed
    run esc_one review "$i2"
    run esc_json review "$i2" --json
    for n in esc_list esc_one; do
        if grep -q $'\x1b' "$work/$n.out" || grep -q $'\x07' "$work/$n.out"; then
            fail "$n: a raw control character reached the terminal"
        else
            ok "$n: no raw control characters"
        fi
    done
    expect_grep esc_list "$work/esc_list.out" ' RV\\x1B\[2J '
    expect_grep esc_one "$work/esc_one.out" 'invoice +RV\\x1B\[2J'
    expect_grep esc_one "$work/esc_one.out" 'Evil\\x1B\[31mRED\\x07'
    expect_grep esc_one "$work/esc_one.out" 'reason +x\\x1B\]0;pwned\\x07\\x0Aforged line'
    expect_no_grep esc_one "$work/esc_one.out" '^forged line'
    # JSON carries the text as it is, encoded by JSON's own rules
    expect_grep esc_json "$work/esc_json.out" 'Evil\\u001B\[31mRED'
else
    echo "SKIP: sqlite3 absent: the escaping checks did not run"
fi

harness_finish review/resolve
