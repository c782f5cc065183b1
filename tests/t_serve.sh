#!/usr/bin/env bash
# t_serve.sh - the review page (`apbot serve`) from the outside, against the erp-sim program.
# A clerk books three invoices by hand with the wrong amount before the run (the bot puts them
# in manual review); a vendor id and name with markup and <script> make the ERP answer an error
# message with markup in it (a business exception), a blocked vendor another. Then:
#  - the protocol rules with curl: the safety headers, the Host check, CSRF (no session, wrong
#    token, another origin), the content type, the refusal of a non-loopback address without a
#    password, HTTP Basic on every request when one is set;
#  - headless Chromium (tests/serve_drive.js, DevTools protocol over a pipe) through the pages
#    as a clerk: Today, the queue and its filters, the hostile item shown as text, a posted
#    document refused (wrong document, with the ERP's evidence) then accepted (verified,
#    audited, completed), a reject, a decision from a stale page refused, a requeue, a forged
#    CSRF token and a cross-site form refused, HTTP Basic; screenshots are kept under the build
#    directory ($APBOT_SHOTS, default ./serve-screenshots beside the test);
#  - the CLI sees the same decisions and audit, and the next run picks the requeued item up.
# The Chromium part is skipped, with a message, only when chromium or node is absent
# (`make test` installs both).
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=${APBOT_SHOTS:-$PWD/serve-screenshots}

. "$SRC/tests/lib/harness.sh"
harness_init serve
serve_pids=()
serve_cleanup() {
    for p in "${serve_pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    harness_cleanup
}
trap serve_cleanup EXIT

# start_serve NAME ARGS...: apbot serve in the background; sets $serve_url.
start_serve() {
    local name=$1
    shift
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --erp "$erp" "$@" \
        >"$work/$name.out" 2>"$work/$name.err" &
    serve_pids+=($!)
    serve_url=""
    for _ in $(seq 1 100); do
        # the background shell may not have opened the output file yet
        serve_url=$(sed -n 's|^listening on \(http://[^ ]*\)$|\1|p' "$work/$name.out" \
            2>/dev/null | head -n1 || true)
        [ -n "$serve_url" ] && break
        sleep 0.05
    done
    [ -n "$serve_url" ] || { echo "apbot serve did not start" >&2; cat "$work/$name.err" >&2; exit 1; }
}

# status URL [curl args...]: the HTTP status
status() {
    local url=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' "$@" "$url"
}

start_sim
book() { # REF AMOUNT INVNO -> the document number
    curl -s --fail -X POST "$erp/_sim/book" --data-urlencode "vendor_id=100001" \
        --data-urlencode "invoice_number=$3" --data-urlencode "invoice_date=2026-11-03" \
        --data-urlencode "currency=EUR" --data-urlencode "amount=$2" \
        --data-urlencode "reference=$1"
}
delete_doc() { curl -s --fail -X POST "$erp/_sim/delete" --data-urlencode "doc=$1" >/dev/null; }

cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Acme Supplies,SV-1,2026-11-03,EUR,6000,100.00,19.00
100001,Acme Supplies,SV-2,2026-11-03,EUR,6000,200.00,38.00
100001,Acme Supplies,SV-3,2026-11-03,EUR,6000,300.00,57.00
<b>V</b><script>x()</script>,<script>alert(1)</script> & Co,SV-4,2026-11-03,EUR,6000,10.00,0
100090,Blocked Vendor,SV-5,2026-11-03,EUR,6000,20.00,0
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run list list --state new --json
field_of() { # INVOICE_NUMBER FIELD
    tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep "\"$1\"" |
        sed -n "s/.*\"$2\": *\"\\{0,1\\}\\([A-Z0-9-]*\\).*/\\1/p" | head -n1
}
i1=$(field_of SV-1 id); i2=$(field_of SV-2 id); i3=$(field_of SV-3 id); i4=$(field_of SV-4 id)
k1=$(field_of SV-1 key); k2=$(field_of SV-2 key); k3=$(field_of SV-3 key)
for v in i1 i2 i3 i4 k1 k2 k3; do
    [ -n "${!v}" ] || { echo "could not read $v from list --json" >&2; cat "$work/list.out" >&2; exit 1; }
done
wrong1=$(book "$k1" 999.00 SV-1)
wrong2=$(book "$k2" 888.00 SV-2)
book "$k3" 777.00 SV-3 >/dev/null
run run1 run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run1 0
expect_grep run1 "$work/run1.out" "business-exception 2, manual-review 3"

# ---- the page, from the protocol side -------------------------------------------------------
start_serve serve --listen 127.0.0.1:0
base=$serve_url
curl -s -D "$work/h_today.txt" -o "$work/today.html" "$base/"
curl -s -D "$work/h_item.txt" -o "$work/item.html" -c "$work/jar" "$base/item/$i2"
expect_grep headers "$work/h_today.txt" "^HTTP/1.1 200"
expect_grep headers "$work/h_today.txt" "^Content-Security-Policy: default-src 'none'; style-src 'self';"
expect_no_grep headers "$work/h_today.txt" "script-src|unsafe-inline"
expect_grep headers "$work/h_today.txt" "^X-Frame-Options: DENY"
expect_grep headers "$work/h_item.txt" "^Cache-Control: no-store"
expect_grep headers "$work/h_item.txt" "^Set-Cookie: apbot_review=[0-9a-f.]*; Path=/; HttpOnly; SameSite=Strict"
expect_no_grep today "$work/today.html" "<script"
port_of_base=${base##*:}
expect_eq "host: a rebinding name" "$(status "$base/" -H "Host: evil.example:$port_of_base")" 421
expect_eq "host: localhost" "$(status "$base/" -H "Host: localhost:$port_of_base")" 200
expect_eq "unknown page" "$(status "$base/nothing-here")" 404
expect_eq "unknown item" "$(status "$base/item/99999")" 404
expect_eq "method" "$(status "$base/" -X DELETE)" 405

csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$work/item.html" | head -n1 | sed 's/.*value="//; s/"//')
ver=$(grep -o 'name="version" value="[0-9]*"' "$work/item.html" | head -n1 | sed 's/.*value="//; s/"//')
[ -n "$csrf" ] && [ -n "$ver" ] || { echo "no decision form on the item page" >&2; exit 1; }
form="csrf=$csrf&version=$ver&action=reject&reason=x&reviewer=mallory&note=x"
expect_eq "csrf: no session cookie" "$(status "$base/item/$i2/decide" -d "$form")" 403
expect_eq "csrf: wrong token" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -d "csrf=$(printf '0%.0s' $(seq 64))&version=$ver&action=reject&reason=x&reviewer=m&note=x")" 403
expect_eq "csrf: another origin" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Origin: http://evil.example" -d "$form")" 403
expect_eq "csrf: another site (fetch metadata)" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Sec-Fetch-Site: cross-site" -d "$form")" 403
expect_eq "content type" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Content-Type: text/plain" --data-binary "$form")" 415
run state2 review "$i2" --json
expect_grep csrf "$work/state2.out" '"state": "manual-review"'

# ---- exposure: not loopback without a password is refused; with one, Basic everywhere -------
rc=0
APBOT_REVIEW_PASSWORD= "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --listen 0.0.0.0:0 \
    >"$work/open.out" 2>"$work/open.err" || rc=$?
expect_eq "exposure: 0.0.0.0 without a password exits" "$rc" 2
expect_grep exposure "$work/open.err" "not loopback, without a password"
rc=0
APBOT_REVIEW_PASSWORD=short "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --listen 0.0.0.0:0 \
    >"$work/short.out" 2>"$work/short.err" || rc=$?
expect_eq "exposure: a short password exits" "$rc" 2
basic_pw="correct horse battery staple"
APBOT_REVIEW_PASSWORD=$basic_pw start_serve guarded --listen 0.0.0.0:0
guarded_url="http://127.0.0.1:${serve_url##*:}"
expect_eq "basic: none" "$(status "$guarded_url/")" 401
expect_eq "basic: on every page" "$(status "$guarded_url/app.css")" 401
expect_eq "basic: wrong" "$(status "$guarded_url/" -u "lead:nope")" 401
expect_eq "basic: right" "$(status "$guarded_url/" -u "lead:$basic_pw")" 200
curl -s -D "$work/h_basic.txt" -o /dev/null "$guarded_url/"
expect_grep basic "$work/h_basic.txt" '^WWW-Authenticate: Basic realm="apbot review"'

# ---- the clerk fixes two bookings in the ERP before deciding ---------------------------------
delete_doc "$wrong1"
right1=$(book "$k1" 119.00 SV-1)
delete_doc "$wrong2"

# ---- headless Chromium through the pages -----------------------------------------------------
if [ -x "$CHROMIUM" ] && command -v node >/dev/null; then
    mkdir -p "$SHOTS"
    drc=0
    HOME=$work CHROMIUM=$CHROMIUM SERVE_URL=$base SHOTS=$SHOTS \
        PROFILE=$(mktemp -d "$work/chromium.XXXXXX") ITEM_POSTED=$i1 ITEM_REQUEUE=$i2 \
        ITEM_REJECT=$i3 ITEM_HOSTILE=$i4 RIGHT_DOC=$right1 WRONG_DOC=AP-2026-999999 \
        BASIC_URL=$guarded_url BASIC_PASSWORD=$basic_pw \
        timeout 180 node "$SRC/tests/serve_drive.js" >"$work/drive.out" 2>"$work/drive.err" || drc=$?
    cat "$work/drive.out"
    if [ "$drc" -ne 0 ]; then
        fail "the browser run: $drc check(s) failed"
        tail -n 20 "$work/drive.err" >&2
    else
        ok "the browser run ($(grep -c '^ok:' "$work/drive.out") checks); screenshots in $SHOTS"
    fi

    # ---- what the CLI sees afterwards: same decisions, same audit ---------------------------
    run a1 review "$i1" --json
    expect_grep a1 "$work/a1.out" '"state": "completed"'
    expect_grep a1 "$work/a1.out" "\"erp_doc\": \"$right1\""
    expect_grep a1 "$work/a1.out" '"actor": "operator:alice"'
    expect_grep a1 "$work/a1.out" "verified in the ERP: key $k1 is document $right1 with 119\.00 EUR; note: ticket 42"
    expect_grep a1 "$work/a1.out" '"step": "verify:lookup"'
    run a3 review "$i3" --json
    expect_grep a3 "$work/a3.out" '"state": "business-exception"'
    expect_grep a3 "$work/a3.out" '"actor": "operator:carol"'
    expect_grep a3 "$work/a3.out" 'rejected: duplicate of an earlier invoice; note: vendor confirmed by phone'
    expect_no_grep a3 "$work/a3.out" 'operator:dave'
    run a2 review "$i2" --json
    expect_grep a2 "$work/a2.out" '"state": "new"'
    expect_grep a2 "$work/a2.out" '"actor": "operator:bob"'
    run a4 review "$i4" --json
    expect_grep a4 "$work/a4.out" '"state": "business-exception"'
    expect_no_grep a4 "$work/a4.out" 'mallory'

    # ---- the requeued item is picked up by the next run -------------------------------------
    run run2 run --flow "$FLOW" --erp "$erp" --until-empty --quiet
    expect_rc run2 0
    run a2b review "$i2" --json
    expect_grep a2b "$work/a2b.out" '"state": "completed"'
    # the page shows it too, and the balance still holds in money
    curl -s -o "$work/today2.html" "$base/"
    expect_grep today2 "$work/today2.html" 'id="state-manual-review">0<'
    expect_grep today2 "$work/today2.html" 'id="money-EUR-balanced-total"[^>]*>yes<'
else
    echo "SKIP: $CHROMIUM or node is absent: the headless-browser run did not happen (make test installs them)"
fi

# ---- the ERP down: the page keeps serving, only posted-as-DOC needs the ERP -----------------
kill "$sim_pid" 2>/dev/null || true
wait "$sim_pid" 2>/dev/null || true
sim_pid=""
curl -s -o "$work/today_down.html" -w '%{http_code}' "$base/" >"$work/today_down.code"
expect_eq "erp down: today" "$(cat "$work/today_down.code")" 200
expect_grep erp_down "$work/today_down.html" 'The ERP could not be read'
expect_eq "erp down: queue" "$(status "$base/queue?tab=exceptions")" 200
curl -s -c "$work/jar2" -b "$work/jar2" -o "$work/item5.html" "$base/item/$i4"
csrf=$(grep -o 'name="csrf" value="[0-9a-f]*"' "$work/item5.html" | head -n1 | sed 's/.*value="//; s/"//')
ver=$(grep -o 'name="version" value="[0-9]*"' "$work/item5.html" | head -n1 | sed 's/.*value="//; s/"//')
code=$(curl -s -b "$work/jar2" -o "$work/down_posted.html" -w '%{http_code}' "$base/item/$i4/decide" \
    -d "csrf=$csrf&version=$ver&action=posted&doc=AP-2026-000001&reviewer=erin&note=booked")
expect_eq "erp down: posted as DOC cannot be verified" "$code" 503
expect_grep erp_down "$work/down_posted.html" 'The ERP did not answer, nothing was recorded'
code=$(curl -s -b "$work/jar2" -o "$work/down_requeue.html" -w '%{http_code}' "$base/item/$i4/decide" \
    -d "csrf=$csrf&version=$ver&action=requeue&reviewer=erin&note=vendor+id+fixed")
expect_eq "erp down: requeue still works" "$code" 200
expect_grep erp_down "$work/serve.err" "item=$i4 decision=requeue by=erin"

harness_finish serve
