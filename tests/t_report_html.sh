#!/usr/bin/env bash
# t_report_html.sh - `apbot report` from the outside against the erp-sim program: a clean day
# exits 0; after a clerk books one invoice a second time and books an unknown apbot key, the
# report exits 5 and every format says so; the HTML page, rendered by headless Chromium
# (--dump-dom), shows the counts in its DOM and shows a vendor named
# <script>alert(1)</script> as text (no script element); an unreadable ERP exits 1 without a
# report; an item in no bucket makes it exit 6; --out does not follow a symlink planted at its
# temporary name. The Chromium part is skipped, with a message,
# only when /usr/bin/chromium is absent (`make test` installs it).
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC. Needs bash, curl, grep, sed; sqlite3
# for the unbalanced case.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml
CHROMIUM=/usr/bin/chromium

. "$SRC/tests/lib/harness.sh"
harness_init report

# count_in FILE ID: the text of the element with id="ID" (a number)
count_in() {
    tr -d '\n' <"$1" | grep -o "id=\"$2\"[^>]*>[^<]*" | head -n1 | sed 's/.*>//' | tr -d ' '
}

start_sim

cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,<script>alert(1)</script>,HT-1,2026-11-03,EUR,6000,100.00,19.00
100002,Müller & Söhne,HT-2,2026-11-03,EUR,6000,200.00,38.00
100003,Plain Vendor,HT-3,2026-11-03,EUR,6000,300.00,0
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run run run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run 0

# ---- a clean day ----------------------------------------------------------------------------
run clean report --flow "$FLOW" --erp "$erp"
expect_rc clean 0
expect_grep clean "$work/clean.out" "STATUS: CLEAN"
expect_grep clean "$work/clean.out" "matched 3"

# ---- drift: the clerk books HT-1 again by hand, and an unknown apbot key -------------------
run list list --state completed --json
key1=$(tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep '"HT-1"' |
    sed -n 's/.*"key": *"\(AP1-[A-Z0-9]*\)".*/\1/p' | head -n1)
[ -n "$key1" ] || { echo "no key for HT-1" >&2; exit 1; }
curl -s --fail -X POST "$erp/_sim/book" --data-urlencode vendor_id=100001 \
    --data-urlencode invoice_number=HT-1 --data-urlencode invoice_date=2026-11-03 \
    --data-urlencode currency=EUR --data-urlencode amount=119.00 \
    --data-urlencode "reference=$key1" >/dev/null
curl -s --fail -X POST "$erp/_sim/book" --data-urlencode vendor_id=100009 \
    --data-urlencode invoice_number=BYHAND --data-urlencode invoice_date=2026-11-03 \
    --data-urlencode currency=EUR --data-urlencode amount=5.00 \
    --data-urlencode "reference=AP1-NOTINTHISQUEUE0000" >/dev/null

run drift_text report --flow "$FLOW" --erp "$erp"
expect_rc drift_text 5
expect_grep drift_text "$work/drift_text.out" "STATUS: DRIFT"
expect_grep drift_text "$work/drift_text.out" "Duplicates \(1\)"
expect_grep drift_text "$work/drift_text.out" "AP1-NOTINTHISQUEUE0000"
run drift_csv report --flow "$FLOW" --erp "$erp" --format csv
expect_rc drift_csv 5
expect_grep drift_csv "$work/drift_csv.out" '^"date","section","kind"'
expect_grep drift_csv "$work/drift_csv.out" '"drift","duplicate"'
expect_grep drift_csv "$work/drift_csv.out" '"drift","orphan"'
run drift_json report --flow "$FLOW" --erp "$erp" --format json
expect_rc drift_json 5
expect_grep drift_json "$work/drift_json.out" '"status": "drift"'
expect_grep drift_json "$work/drift_json.out" '"duplicate": 1'
run drift_html report --flow "$FLOW" --erp "$erp" --format html --out "$work/report.html"
expect_rc drift_html 5
expect_grep drift_html "$work/drift_html.err" "DRIFT .* -> "
# the page as written: escaped by construction
expect_grep html_file "$work/report.html" "&lt;script&gt;alert\(1\)&lt;/script&gt;"
expect_no_grep html_file "$work/report.html" "<script"
expect_eq "file count-duplicates" "$(count_in "$work/report.html" count-duplicates)" 1
expect_eq "file count-orphans" "$(count_in "$work/report.html" count-orphans)" 1
# the money: 119.00 + 238.00 + 300.00 received and completed; the listing adds HT-1's second
# booking (119.00) and the orphan (5.00): a difference of 124.00, named by its two documents
expect_eq "money received" "$(count_in "$work/report.html" money-EUR-received-total)" 657.00
expect_eq "money completed" "$(count_in "$work/report.html" money-EUR-completed-total)" 657.00
expect_eq "money pending" "$(count_in "$work/report.html" money-EUR-pending-total)" 0.00
expect_eq "money expected" "$(count_in "$work/report.html" money-EUR-expected)" 657.00
expect_eq "money ERP total" "$(count_in "$work/report.html" money-EUR-erp-total)" 781.00
expect_eq "money difference" "$(count_in "$work/report.html" money-EUR-difference)" 124.00
expect_eq "money difference rows" "$(grep -c 'class="money-diff"' "$work/report.html")" 2
expect_grep html_file "$work/report.html" 'data-why="duplicate"'
expect_grep html_file "$work/report.html" 'data-why="orphan"'
expect_grep html_file "$work/report.html" '<svg id="chart-day"'
expect_grep drift_text "$work/drift_text.out" "difference +124\.00"

# ---- --out never follows a symlink planted at its temporary name ---------------------------
# bash -c ... exec keeps the shell's PID, so the symlink sits exactly at FILE.tmp.PID
echo precious >"$work/victim.txt"
rc=0
bash -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" --db "$4" report --flow "$5" --erp "$6" \
    --format html --out "$2"' _ "$work/victim.txt" "$work/planted.html" "$APBOT_BIN" "$db" \
    "$FLOW" "$erp" >"$work/planted.out" 2>"$work/planted.err" || rc=$?
expect_rc planted 5
expect_eq "planted: the symlink's target" "$(cat "$work/victim.txt")" precious
expect_grep planted "$work/planted.html" 'id="status"'
planted_links=$(find "$work" -maxdepth 1 -name 'planted.html.tmp.*' -type l | wc -l)
planted_files=$(find "$work" -maxdepth 1 -name 'planted.html.tmp.*' -type f | wc -l)
expect_eq "planted: the symlink left as it was" "$planted_links" 1
expect_eq "planted: no temporary file left behind" "$planted_files" 0

# ---- the page as a browser sees it ----------------------------------------------------------
if [ -x "$CHROMIUM" ]; then
    profile=$(mktemp -d "$work/chromium.XXXXXX")
    crc=0
    HOME=$work timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
        --no-first-run --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --dump-dom "file://$work/report.html" \
        >"$work/dom.html" 2>"$work/chromium.err" || crc=$?
    if [ "$crc" -ne 0 ] || [ ! -s "$work/dom.html" ]; then
        fail "chromium exited $crc"
        tail -n 20 "$work/chromium.err" >&2
    else
        expect_eq "dom count-duplicates" "$(count_in "$work/dom.html" count-duplicates)" 1
        expect_eq "dom count-orphans" "$(count_in "$work/dom.html" count-orphans)" 1
        expect_eq "dom count-missing" "$(count_in "$work/dom.html" count-missing)" 0
        expect_eq "dom count-drift" "$(count_in "$work/dom.html" count-drift)" 2
        expect_eq "dom count-received-total" "$(count_in "$work/dom.html" count-received-total)" 3
        expect_eq "dom count-completed-total" "$(count_in "$work/dom.html" count-completed-total)" 3
        expect_eq "dom count-matched" "$(count_in "$work/dom.html" count-matched)" 2
        expect_grep dom "$work/dom.html" 'id="status"[^>]*>DRIFT'
        expect_eq "dom money difference" "$(count_in "$work/dom.html" money-EUR-difference)" \
            124.00
        # the chart is an SVG element the browser built (three bars' worth of outcomes)
        expect_grep dom "$work/dom.html" '<svg id="chart-day"[^>]*viewBox'
        expect_grep dom "$work/dom.html" 'class="bar" data-hour="[0-9]+" data-outcome="completed"'
        # the vendor name is text: escaped in the serialised DOM, and no script element exists
        expect_grep dom "$work/dom.html" "&lt;script&gt;alert\(1\)&lt;/script&gt;"
        expect_no_grep dom "$work/dom.html" "<script"
    fi
else
    echo "SKIP: $CHROMIUM is absent: the headless-browser checks did not run (apt-get install chromium)"
fi

# ---- an unreadable ERP: no report, exit 1 ---------------------------------------------------
run noerp report --flow "$FLOW" --erp "http://127.0.0.1:9" --format html --out "$work/none.html"
expect_rc noerp 1
[ ! -e "$work/none.html" ] && ok "noerp: no report file" || fail "noerp: a report file was written"
run badfmt report --flow "$FLOW" --erp "$erp" --format pdf
expect_rc badfmt 2

# ---- an item in no bucket: does not balance, exit 6 ----------------------------------------
if command -v sqlite3 >/dev/null; then
    sqlite3 "$db" "UPDATE items SET state = 'lost' WHERE invoice_number = 'HT-3';"
    run unbalanced report --flow "$FLOW" --erp "$erp"
    expect_rc unbalanced 6
    expect_grep unbalanced "$work/unbalanced.out" "DOES NOT BALANCE"
else
    echo "SKIP: sqlite3 absent: the unbalanced case did not run"
fi

harness_finish report
