#!/usr/bin/env bash
# t_review_classic.sh - the morning's pages for a CGI-era ERP (the erp-sim program's classic UI,
# whose report has no currency column: list_currency = off), as issue 30 found them, from the
# outside: `apbot run`, `report`, `review` and `serve` with flows/classic.xml (its lookup URL
# made as long as a real ERP's: the search form's every column flag).
#  - A G/L account the ERP does not offer is a business exception a clerk can read: "the G/L
#    account 1060 is not one this ERP accepts (field account_1)".
#  - A blocked vendor, refused with the ERP's error page (HTTP 500): its evidence is the page's
#    text, escaped once - no raw tags, no "\\x0A" - in `apbot review` and on the item page.
#  - Seven bookings from another queue on the same day: the report reads their amounts in the
#    flow's declared currency (EUR), groups them (count, money, the first five, a link to
#    all), says which invoice dates it read and why; no "(none)" row in any money table, on
#    the report or on Today.
#  - Headless Chromium: the item page with the long URLs is not wider than the window (no
#    sideways scrolling), the excerpt is text, Today and the report as above.
# The Chromium part is skipped, with a message, only when chromium or node is absent.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

. "$SRC/tests/lib/harness.sh"
harness_init reviewclassic

# ---- the classic ERP, its report without a currency column ----------------------------------
fast_scenario "$work/classic.scn" 'list_currency = off'
sim_launch --ui classic --scenario "$work/classic.scn"

# The search as a CGI-era ERP's URL has it: every column flag of the search form (the
# simulator reads only the reference).
flow=$work/classic.xml
long='reference=${key|url}'
for col in transdate invnumber ordnumber ponumber name vendornumber description amount netamount \
    tax paid datepaid due duedate notes employee manager shippingpoint shipvia curr exchangerate; do
    long="$long&amp;l_$col=Y"
done
FROM='/app/ap/search?reference=${key|url}' \
    TO="/app/ap/search?$long&amp;sort=transdate&amp;direction=ASC&amp;summary=1&amp;open=1" \
    perl -pe 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$SRC/flows/classic.xml" >"$flow"
grep -q 'l_exchangerate=Y' "$flow" || { echo "the flow copy has no long lookup URL" >&2; exit 1; }
run check flow check "$flow"
expect_rc check 0

today=$(date +%F)
cat >"$work/inv.csv" <<EOF
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Nordwind Bürobedarf GmbH,CL-1,$today,EUR,6000,100.00,19.00
100002,Rheinland Logistik AG,CL-2,$today,EUR,1060,50.00,9.50
100090,Insolvent Handels GmbH,CL-3,$today,EUR,6000,20.00,0
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run run run --flow "$flow" --erp "$erp" --until-empty --quiet
expect_rc run 0
expect_grep run "$work/run.out" "completed 1, business-exception 2"
run list list --state all --json
id_of() { # INVOICE_NUMBER
    tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep "\"$1\"" |
        sed -n 's/.*"id": *\([0-9]*\).*/\1/p' | head -n1
}
i2=$(id_of CL-2)
i3=$(id_of CL-3)
[ -n "$i2" ] && [ -n "$i3" ] || { echo "no ids in list --json" >&2; cat "$work/list.out" >&2; exit 1; }

# ---- a reason a clerk can read; an error page's text escaped once ---------------------------
run r2 review "$i2" --json
expect_grep r2 "$work/r2.out" '"reason": "the G/L account 1060 is not one this ERP accepts \(field account_1\)"'
expect_no_grep r2 "$work/r2.out" 'has no option whose label'
run r3 review "$i3"
expect_grep r3 "$work/r3.out" 'page: ACME Ledger - Error Vendor 100090 is on hold\. Back'
expect_no_grep r3 "$work/r3.out" '\\\\x0A|\\x0A|<h2|&lt;h2'
run r3j review "$i3" --json
expect_grep r3j "$work/r3j.out" '"excerpt": "ACME Ledger - Error '
expect_no_grep r3j "$work/r3j.out" '\\\\x0A|<h2'

# ---- another queue's bookings on the same day -----------------------------------------------
orphan_cents=0
for n in 1 2 3 4 5 6 7; do
    curl -s --fail -X POST "$erp/_sim/book" --data-urlencode vendor_id=100003 \
        --data-urlencode "invoice_number=OTHER-$n" --data-urlencode "invoice_date=$today" \
        --data-urlencode currency=EUR --data-urlencode "amount=1$n.0$n" \
        --data-urlencode "reference=AP1-OTHERQUEUE00000000$n" >/dev/null
    orphan_cents=$((orphan_cents + 1000 + n * 100 + n))
done
orphan_sum=$(printf '%d.%02d' $((orphan_cents / 100)) $((orphan_cents % 100)))
run rep report --flow "$flow" --erp "$erp"
expect_rc rep 5
expect_no_grep rep "$work/rep.out" '\(none\)|cannot be read'
expect_grep rep "$work/rep.out" "^$today is the day the bot worked, not an invoice date"
expect_grep rep "$work/rep.out" "7 ERP document\(s\) carry an apbot key this queue does not know"
expect_grep rep "$work/rep.out" "EUR $orphan_sum in 7 document\(s\)"
expect_grep rep "$work/rep.out" '\.\.\. and 2 more'
run rephtml report --flow "$flow" --erp "$erp" --format html --out "$work/report.html"
expect_rc rephtml 5
expect_no_grep rephtml "$work/report.html" '\(none\)'
expect_grep rephtml "$work/report.html" "id=\"orphans-EUR-amount\" data-minor=\"$orphan_cents\""
expect_grep rephtml "$work/report.html" 'href="#orphans-all"'
expect_grep rephtml "$work/report.html" 'id="days" data-listed-by="invoice"'

# ---- the pages ------------------------------------------------------------------------------
"$APBOT_BIN" --db "$db" serve --flow "$flow" --erp "$erp" --listen 127.0.0.1:0 \
    >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
base=""
for _ in $(seq 1 100); do
    base=$(sed -n 's|^listening on \(http://[^ ]*\)$|\1|p' "$work/serve.out" 2>/dev/null | head -n1 || true)
    [ -n "$base" ] && break
    sleep 0.05
done
[ -n "$base" ] || { echo "apbot serve did not start" >&2; cat "$work/serve.err" >&2; exit 1; }
curl -s -o "$work/today.html" "$base/"
expect_no_grep today "$work/today.html" '\(none\)'
expect_grep today "$work/today.html" 'id="money-EUR-erp-total"'
curl -s -o "$work/item3.html" "$base/item/$i3"
expect_grep item3 "$work/item3.html" 'l_exchangerate=Y'
expect_no_grep item3 "$work/item3.html" '\\\\x0A|&lt;h2'

if [ -x "$CHROMIUM" ] && command -v node >/dev/null; then
    # What a clerk's browser draws, at a laptop's width: the widest element must fit.
    wide='(() => { const d = document.documentElement; const over = [...document.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > d.clientWidth + 1).map(e => e.tagName + "." + e.className).slice(0, 5); return {scroll: d.scrollWidth, client: d.clientWidth, over: over, excerpts: [...document.querySelectorAll("pre.excerpt")].map(p => p.textContent).join(" | "), reason: (document.getElementById("reason") || {}).textContent || "", none: document.body.innerText.includes("(none)")}; })()'
    prc=0
    HOME=$work PROFILE=$(mktemp -d "$work/chromium.XXXXXX") CHROMIUM=$CHROMIUM WIDTH=1024 \
        timeout 120 node "$SRC/tests/page_probe.js" "$base/item/$i3" "$wide" "$base/item/$i2" "$wide" \
        "$base/" "$wide" "$base/report" "$wide" >"$work/probe.out" 2>"$work/probe.err" || prc=$?
    if [ "$prc" -ne 0 ]; then
        fail "the browser run: exit $prc"
        cat "$work/probe.err" >&2
    else
        line() { sed -n "${1}p" "$work/probe.out"; }
        num() { sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" <<<"$1"; }
        for n in 1 2 3 4; do
            l=$(line $n)
            s=$(num "$l" scroll)
            c=$(num "$l" client)
            if [ -n "$s" ] && [ -n "$c" ] && [ "$s" -le "$c" ]; then
                ok "page $n: drawn within the window ($s <= $c px)"
            else
                fail "page $n: wider than the window: $l"
            fi
            grep -q '"none":false' <<<"$l" && ok "page $n: no (none)" || fail "page $n: shows (none): $l"
        done
        l=$(line 1)
        grep -q '"status":200' <<<"$l" && ok "item: HTTP 200" || fail "item: $l"
        grep -Eq '"excerpts":"[^"]*ACME Ledger - Error ' <<<"$l" && ok "item: the error page's text" ||
            fail "item: no error page text: $l"
        grep -Eq '\\\\x0A|<h2' <<<"$l" && fail "item: escaped twice or raw tags: $l" ||
            ok "item: the excerpt escaped once, no tags"
        grep -q 'the G/L account 1060 is not one this ERP accepts (field account_1)' <<<"$(line 2)" &&
            ok "item: the reason in a clerk's words" || fail "item: reason: $(line 2)"
    fi
else
    echo "SKIP: $CHROMIUM or node is absent: the headless-browser run did not happen"
fi

harness_finish reviewclassic
