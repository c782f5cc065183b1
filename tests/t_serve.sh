#!/usr/bin/env bash
# t_serve.sh - the review page (`apbot serve`) from the outside, against the erp-sim program.
# A clerk books three invoices by hand with the wrong amount before the run (the bot puts them
# in manual review); a vendor id and name with markup and <script> make the ERP answer an error
# message with markup in it (a business exception), a blocked vendor another. People sign in
# from a reviewers file made with `apbot reviewer add` (reviewers, a viewer, a person the login
# proxy vouches for). Then:
#  - the protocol rules with curl: the sign-in page for everything but the style sheet, the
#    session cookie (HttpOnly, SameSite=Strict, a new server-side id at sign-in), the safety
#    headers, the Host check, CSRF (no session, wrong token, another origin, another site),
#    the content type, failed sign-ins logged without the password and throttled per name and
#    per address (429, Retry-After), sessions ended when idle, when the person is removed from
#    the file or gets a new password, the login proxy's header believed from the trusted
#    address only (and the role from the file), the refusal of a non-loopback address where
#    nobody signs in, the read-only page without reviewers;
#  - headless Chromium (tests/serve_drive.js, DevTools protocol over a pipe) through the pages
#    as the people who work the queue: the sign-in page, a forged proxy header ignored, the
#    viewer who sees everything and cannot decide (no forms; a forged POST refused), the
#    hostile item shown as text, a posted document refused then accepted (verified, audited
#    under the signed-in login), a reject, a decision from a stale page refused, a requeue, a
#    forged CSRF token and cross-site forms refused, a stolen cookie dead after sign-out, the
#    shared password, a decision over TLS (the certificate pinned); screenshots are kept under
#    the build directory ($APBOT_SHOTS, default ./serve-screenshots beside the test);
#  - TLS without a proxy (--tls-cert/--tls-key, a self-signed certificate made with openssl):
#    curl with the certificate as its trust anchor, Secure cookies, TLS 1.1 and plain http
#    refused, a key others may read and a key of another certificate refused;
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

# start_serve NAME ARGS...: apbot serve in the background; sets $serve_url and $serve_pid.
start_serve() {
    local name=$1
    shift
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --erp "$erp" "$@" \
        >"$work/$name.out" 2>"$work/$name.err" &
    serve_pid=$!
    serve_pids+=("$serve_pid")
    serve_url=""
    for _ in $(seq 1 100); do
        # the background shell may not have opened the output file yet
        serve_url=$(sed -n 's|^listening on \(https\{0,1\}://[^ ]*\)$|\1|p' "$work/$name.out" \
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

# csrf_of FILE: the first CSRF token in a page
csrf_of() { grep -o 'name="csrf" value="[0-9a-f]*"' "$1" | head -n1 | sed 's/.*value="//; s/"//'; }

# sign_in BASE JAR NAME PASSWORD [curl args...]: signs in through the form; prints the status
sign_in() {
    local base=$1 jar=$2 name=$3 pw=$4
    shift 4
    curl -s -c "$jar" -b "$jar" -o "$work/signin.html" "$@" "$base/login"
    curl -s -c "$jar" -b "$jar" -o "$work/signin2.html" -w '%{http_code}' "$@" "$base/login" \
        --data-urlencode "csrf=$(csrf_of "$work/signin.html")" --data-urlencode "name=$name" \
        --data-urlencode "password=$pw" --data-urlencode "next=/"
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
i5=$(field_of SV-5 id)
k1=$(field_of SV-1 key); k2=$(field_of SV-2 key); k3=$(field_of SV-3 key)
for v in i1 i2 i3 i4 i5 k1 k2 k3; do
    [ -n "${!v}" ] || { echo "could not read $v from list --json" >&2; cat "$work/list.out" >&2; exit 1; }
done
wrong1=$(book "$k1" 999.00 SV-1)
wrong2=$(book "$k2" 888.00 SV-2)
book "$k3" 777.00 SV-3 >/dev/null
run run1 run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run1 0
expect_grep run1 "$work/run1.out" "business-exception 2, manual-review 3"

# ---- who may sign in: the reviewers file, made with apbot reviewer ----------------------------
rv=$work/reviewers
declare -A pw=([alice]="alice's own password" [bob]="bob's own password"
    [carol]="carol's own password" [dave]="dave's own password" [vera]="vera only looks at it"
    [trudy]="trudy's own password" [gone]="gone's own password" [pat]="pat's own password"
    [prometheus]="the scraper's password")
for who in alice bob carol dave vera trudy gone pat prometheus; do
    role=reviewer
    [ "$who" = vera ] || [ "$who" = prometheus ] && role=viewer
    name=$who
    [ "$who" = alice ] && name="Alice Example"
    printf '%s\n' "${pw[$who]}" | "$APBOT_BIN" reviewer add "$who" --role "$role" --name "$name" \
        --file "$rv" >/dev/null
done
"$APBOT_BIN" reviewer add p.roxy --role reviewer --name "Proxy Person" --no-password \
    --file "$rv" >/dev/null
"$APBOT_BIN" reviewer add proxyviewer --role viewer --no-password --file "$rv" >/dev/null
expect_eq "the reviewers file's mode" "$(stat -c %a "$rv")" 600

# ---- the page, from the protocol side -------------------------------------------------------
start_serve serve --listen 127.0.0.1:0 --reviewers "$rv" --trusted-proxy 127.0.0.2
base=$serve_url
port_of_base=${base##*:}
curl -s -D "$work/h_anon.txt" -o /dev/null "$base/"
expect_grep anon "$work/h_anon.txt" "^HTTP/1.1 303"
expect_grep anon "$work/h_anon.txt" "^Location: /login\?next=/"
expect_eq "not signed in: an item" "$(status "$base/item/$i1")" 303
expect_eq "not signed in: an unknown page too" "$(status "$base/nothing-here")" 303
expect_eq "not signed in: the style sheet" "$(status "$base/app.css")" 200
curl -s -D "$work/h_login.txt" -o "$work/login.html" -c "$work/jar_pre" "$base/login"
expect_grep headers "$work/h_login.txt" "^Content-Security-Policy: default-src 'none'; style-src 'self';"
expect_no_grep headers "$work/h_login.txt" "script-src|unsafe-inline"
expect_grep headers "$work/h_login.txt" "^X-Frame-Options: DENY"
expect_grep headers "$work/h_login.txt" "^Cache-Control: no-store"
expect_no_grep headers "$work/h_login.txt" "WWW-Authenticate"
expect_no_grep login "$work/login.html" "<script"

# a sign-in: a new session id (not the visitor's), HttpOnly, SameSite=Strict, not Secure on http
expect_grep visitor "$work/h_login.txt" "^Set-Cookie: apbot_visit=[0-9a-f]{32}\.[0-9a-f]{32}; Path=/; HttpOnly; SameSite=Strict"
pre=$(awk '$6 == "apbot_visit" {print $7}' "$work/jar_pre")
cp "$work/jar_pre" "$work/jar"
code=$(curl -s -D "$work/h_signin.txt" -o /dev/null -c "$work/jar" -b "$work/jar" "$base/login" \
    --data-urlencode "csrf=$(csrf_of "$work/login.html")" --data-urlencode "name=alice" \
    --data-urlencode "password=${pw[alice]}" --data-urlencode "next=/item/$i2" -w '%{http_code}')
expect_eq "sign-in: 303" "$code" 303
expect_grep signin "$work/h_signin.txt" "^Location: /item/$i2"
expect_grep signin "$work/h_signin.txt" "^Set-Cookie: apbot_session=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Strict"
expect_no_grep signin "$work/h_signin.txt" "Secure"
post=$(awk '$6 == "apbot_session" {print $7}' "$work/jar")
[ -n "$pre" ] && [ -n "$post" ] && [ "$pre" != "$post" ] && ok "sign-in: the session id is new" ||
    fail "sign-in: the cookie was not rotated ($pre -> $post)"
expect_grep signin "$work/serve.err" "signed in: alice \(reviewer\) from=127.0.0.1 by password"
curl -s -D "$work/h_item.txt" -o "$work/item.html" -b "$work/jar" "$base/item/$i2"
expect_grep headers "$work/h_item.txt" "^HTTP/1.1 200"
expect_grep headers "$work/h_item.txt" "^Content-Security-Policy: default-src 'none'; style-src 'self';"
expect_grep item "$work/item.html" "signed in as"
expect_no_grep item "$work/item.html" 'name="reviewer"'
expect_eq "host: a rebinding name" "$(status "$base/app.css" -H "Host: evil.example:$port_of_base")" 421
expect_eq "host: localhost" "$(status "$base/app.css" -H "Host: localhost:$port_of_base")" 200
expect_eq "unknown page" "$(status "$base/nothing-here" -b "$work/jar")" 404
expect_eq "unknown item" "$(status "$base/item/99999" -b "$work/jar")" 404
expect_eq "method" "$(status "$base/" -X DELETE -b "$work/jar")" 405

csrf=$(csrf_of "$work/item.html")
ver=$(grep -o 'name="version" value="[0-9]*"' "$work/item.html" | head -n1 | sed 's/.*value="//; s/"//')
[ -n "$csrf" ] && [ -n "$ver" ] || { echo "no decision form on the item page" >&2; exit 1; }
form="csrf=$csrf&version=$ver&action=reject&reason=x&note=x"
expect_eq "csrf: no session cookie" "$(status "$base/item/$i2/decide" -d "$form")" 403
expect_eq "csrf: wrong token" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -d "csrf=$(printf '0%.0s' $(seq 64))&version=$ver&action=reject&reason=x&note=x")" 403
expect_eq "csrf: another origin" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Origin: http://evil.example" -d "$form")" 403
expect_eq "csrf: another site (fetch metadata)" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Sec-Fetch-Site: cross-site" -d "$form")" 403
expect_eq "csrf: the https origin of a page served over http" "$(status "$base/item/$i2/decide" \
    -b "$work/jar" -H "Origin: https://127.0.0.1:$port_of_base" -d "$form")" 403
expect_eq "content type" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -H "Content-Type: text/plain" --data-binary "$form")" 415
# a "by" field in the form changes nothing: the session signs (a wrong document: refused)
expect_eq "a forged by field" "$(status "$base/item/$i2/decide" -b "$work/jar" \
    -d "csrf=$csrf&version=$ver&action=posted&doc=AP-2026-999999&note=x&reviewer=mallory&by=mallory")" 409
expect_grep by "$work/serve.err" "item=$i2 decision=posted by=alice auth=password from=127.0.0.1 verdict=refused"
expect_no_grep by "$work/serve.err" "mallory"
run state2 review "$i2" --json
expect_grep csrf "$work/state2.out" '"state": "manual-review"'
expect_no_grep csrf "$work/state2.out" 'mallory'

# ---- GET /metrics: a scraper gives a login's name and password by HTTP Basic -------------------
curl -s -D "$work/h_metrics.txt" -o /dev/null "$base/metrics"
expect_grep metrics "$work/h_metrics.txt" "^HTTP/1.1 401"
expect_grep metrics "$work/h_metrics.txt" '^WWW-Authenticate: Basic realm="apbot metrics"'
code=$(curl -s -o "$work/metrics.txt" -w '%{http_code}' -u "prometheus:${pw[prometheus]}" "$base/metrics")
expect_eq "metrics: a viewer's credentials" "$code" 200
expect_grep metrics "$work/metrics.txt" '^apbot_queue_review_depth 3$'
expect_eq "metrics: a wrong password"     "$(status "$base/metrics" -u "prometheus:not the scraper's password")" 401
expect_grep metrics "$work/serve.err" "metrics: sign-in failed: name=prometheus from=127.0.0.1"
expect_eq "metrics: a signed-in session" "$(status "$base/metrics" -b "$work/jar")" 200
expect_eq "metrics: Basic opens no page" "$(status "$base/" -u "prometheus:${pw[prometheus]}")" 303

# ---- failed sign-ins: logged without the password, throttled per name and per address --------
wrong="Tr0ub4dor&3-not-it"
expect_eq "sign-in: a wrong password" "$(sign_in "$base" "$work/jar_w" alice "$wrong")" 401
expect_eq "sign-in: an unknown name" "$(sign_in "$base" "$work/jar_w" nobody "$wrong")" 401
expect_eq "sign-in: a proxy-only person has no password" \
    "$(sign_in "$base" "$work/jar_w" p.roxy "$wrong")" 401
expect_grep failed "$work/serve.err" "sign-in failed: name=alice from=127.0.0.1: wrong name or password"
expect_grep failed "$work/serve.err" "sign-in failed: name=nobody from=127.0.0.1"
expect_no_grep failed "$work/serve.err" "Tr0ub4dor"
expect_no_grep failed "$work/serve.err" "alice's own password"
for n in 1 2 3 4 5; do sign_in "$base" "$work/jar_t" trudy "$wrong $n" >/dev/null; done
code=$(sign_in "$base" "$work/jar_t" trudy "${pw[trudy]}" -D "$work/h_throttle.txt")
expect_eq "throttle: a sixth try for one name, even with the right password" "$code" 429
expect_grep throttle "$work/h_throttle.txt" "^Retry-After: [0-9]+"
expect_grep throttle "$work/serve.err" "sign-in refused: too many failed attempts for name=trudy"
expect_eq "throttle: another name signs in" "$(sign_in "$base" "$work/jar_b" bob "${pw[bob]}")" 303
# twenty failures from one address (127.0.0.3), whatever the names: that address waits
for n in $(seq 1 20); do
    sign_in "$base" "$work/jar_a" "guess$n" "$wrong" --interface 127.0.0.3 >/dev/null
done
expect_eq "throttle: the address waits" \
    "$(sign_in "$base" "$work/jar_a" carol "${pw[carol]}" --interface 127.0.0.3)" 429
expect_eq "throttle: other addresses do not" "$(sign_in "$base" "$work/jar_c" carol "${pw[carol]}")" 303

# ---- sessions end: a person removed from the file, a new password -----------------------------
expect_eq "gone: signed in" "$(sign_in "$base" "$work/jar_g" gone "${pw[gone]}")" 303
expect_eq "pat: signed in" "$(sign_in "$base" "$work/jar_p" pat "${pw[pat]}")" 303
expect_eq "gone: a page" "$(status "$base/" -b "$work/jar_g")" 200
"$APBOT_BIN" reviewer remove gone --file "$rv" >/dev/null
printf '%s\n' "pat's newer password" | "$APBOT_BIN" reviewer passwd pat --file "$rv" >/dev/null
expect_eq "removed from the file: signed out" "$(status "$base/" -b "$work/jar_g")" 303
expect_grep ended "$work/serve.err" "session of gone ended: no longer in the reviewers file"
expect_eq "a new password: signed out" "$(status "$base/" -b "$work/jar_p")" 303
expect_grep ended "$work/serve.err" "session of pat ended: the password was changed"
expect_eq "pat: the old password no longer signs in" "$(sign_in "$base" "$work/jar_p" pat "${pw[pat]}")" 401
expect_eq "pat: the new one does" "$(sign_in "$base" "$work/jar_p" pat "pat's newer password")" 303
expect_eq "alice: still signed in" "$(status "$base/" -b "$work/jar")" 200
# a reviewer made a viewer: the session goes on, the decision form it still holds does not
curl -s -o "$work/item_pat.html" -b "$work/jar_p" "$base/item/$i2"
pcsrf=$(csrf_of "$work/item_pat.html")
pver=$(grep -o 'name="version" value="[0-9]*"' "$work/item_pat.html" | head -n1 | sed 's/.*value="//; s/"//')
[ -n "$pcsrf" ] && [ -n "$pver" ] || fail "pat: no decision form while a reviewer"
"$APBOT_BIN" reviewer set pat --role viewer --file "$rv" >/dev/null
expect_eq "made a viewer: a decision from the page before is refused" \
    "$(status "$base/item/$i2/decide" -b "$work/jar_p" \
        -d "csrf=$pcsrf&version=$pver&action=requeue&note=x")" 403
expect_grep demoted "$work/serve.err" "refused: viewer pat may not decide \(item=$i2 "
curl -s -o "$work/item_pat.html" -b "$work/jar_p" "$base/item/$i2"
expect_grep demoted "$work/item_pat.html" "pat, viewer"
expect_no_grep demoted "$work/item_pat.html" 'id="form-requeue"'
run state_pat review "$i2" --json
expect_grep demoted "$work/state_pat.out" '"state": "manual-review"'

# ---- the login proxy: believed from 127.0.0.2 only, the role from the file ---------------------
code=$(curl -s -o "$work/proxy_vera.html" -w '%{http_code}' --interface 127.0.0.2 \
    -H "X-Remote-User: vera" "$base/item/$i2")
expect_eq "proxy: a viewer's page" "$code" 200
expect_grep proxy "$work/proxy_vera.html" "vera, viewer"
expect_no_grep proxy "$work/proxy_vera.html" 'id="form-requeue"'
expect_eq "proxy: the header from anywhere else is ignored" \
    "$(status "$base/" -H "X-Remote-User: alice")" 303
expect_grep proxy "$work/serve.err" "ignored X-Remote-User: alice from 127.0.0.1, which is not a trusted proxy"
expect_eq "proxy: someone not in the file" \
    "$(status "$base/" --interface 127.0.0.2 -H "X-Remote-User: mallory")" 403
expect_grep proxy "$work/serve.err" "the login proxy names mallory, who is not in the reviewers file"
expect_eq "proxy: the header's case" "$(status "$base/" --interface 127.0.0.2 -H "X-Remote-User: P.Roxy")" 200
# a decision vouched for by the proxy (a proxy-only reviewer), with the anchor cookie's token
curl -s -c "$work/jar_x" -b "$work/jar_x" -o "$work/proxy_item.html" --interface 127.0.0.2 \
    -H "X-Remote-User: p.roxy" "$base/item/$i4"
pcsrf=$(csrf_of "$work/proxy_item.html")
pver=$(grep -o 'name="version" value="[0-9]*"' "$work/proxy_item.html" | head -n1 | sed 's/.*value="//; s/"//')
code=$(curl -s -b "$work/jar_x" -o /dev/null -w '%{http_code}' --interface 127.0.0.2 \
    -H "X-Remote-User: proxyviewer" "$base/item/$i4/decide" \
    -d "csrf=$pcsrf&version=$pver&action=requeue&note=vendor+id+fixed")
expect_eq "proxy: the token of one person does not serve another" "$code" 403
code=$(curl -s -b "$work/jar_x" -o "$work/proxy_decide.html" -w '%{http_code}' --interface 127.0.0.2 \
    -H "X-Remote-User: p.roxy" "$base/item/$i4/decide" \
    -d "csrf=$pcsrf&version=$pver&action=requeue&note=vendor+id+fixed")
expect_eq "proxy: a reviewer's decision" "$code" 200
run proxy_audit review "$i4" --json
expect_grep proxy "$work/proxy_audit.out" '"actor": "operator:p.roxy"'
expect_grep proxy "$work/proxy_audit.out" 'note: vendor id fixed; by p.roxy \(Proxy Person\), identified by the company.s login proxy'
expect_grep proxy "$work/serve.err" "item=$i4 decision=requeue by=p.roxy auth=proxy"
# the requeued item goes back to the ERP, is refused again: a business exception once more
run run_i4 run --flow "$FLOW" --erp "$erp" --until-empty --quiet
run state4 review "$i4" --json
expect_grep proxy "$work/state4.out" '"state": "business-exception"'

# ---- a session ends when idle ------------------------------------------------------------------
# (this server logs as JSON: --log-format json, checked below)
start_serve idle --listen 127.0.0.1:0 --reviewers "$rv" --session-idle 2 --log-format json
idle_url=$serve_url
expect_eq "idle: a wrong password" "$(sign_in "$idle_url" "$work/jar_i" alice wrong)" 401
expect_eq "idle: signed in" "$(sign_in "$idle_url" "$work/jar_i" alice "${pw[alice]}")" 303
expect_eq "idle: a page" "$(status "$idle_url/" -b "$work/jar_i")" 200
sleep 3
expect_eq "idle: signed out after 2 s unused" "$(status "$idle_url/" -b "$work/jar_i")" 303
expect_grep idle "$work/idle.err" "session of alice ended: idle too long"
# --log-format json: every line one JSON object {"time","level","msg"}, parsed, not grepped
if /usr/bin/python3 - "$work/idle.err" >"$work/idle_json.out" 2>&1 <<'PY'; then
import json, re, sys
want = {("warn", "sign-in failed: name=alice from=127.0.0.1: wrong name or password"),
        ("info", "session of alice ended: idle too long")}
seen = set()
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    o = json.loads(line)
    assert list(o) == ["time", "level", "msg"], (n, line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["time"]), (n, line)
    assert o["level"] in ("info", "warn", "error"), (n, line)
    seen.add((o["level"], o["msg"]))
    if o["msg"].startswith("signed in: alice"):
        seen.add(("info", "signed in: alice"))
missing = (want | {("info", "signed in: alice")}) - seen
assert not missing, missing
PY
    ok "serve --log-format json: every line parses, levels and messages as logged"
else
    fail "serve --log-format json: $(cat "$work/idle_json.out")"
fi
run serve_fmt serve --flow "$FLOW" --log-format yaml
expect_rc serve_fmt 2

# ---- exposure: not loopback where nobody signs in is refused -----------------------------------
rc=0
APBOT_REVIEW_PASSWORD= "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --listen 0.0.0.0:0 \
    >"$work/open.out" 2>"$work/open.err" || rc=$?
expect_eq "exposure: 0.0.0.0 where nobody signs in exits" "$rc" 2
expect_grep exposure "$work/open.err" "not loopback, where nobody needs to sign in"
rc=0
APBOT_REVIEW_PASSWORD=short "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --listen 0.0.0.0:0 \
    >"$work/short.out" 2>"$work/short.err" || rc=$?
expect_eq "exposure: a short password exits" "$rc" 2
rc=0
"$APBOT_BIN" --db "$db" serve --flow "$FLOW" --trusted-proxy 127.0.0.2 \
    >"$work/proxy_alone.out" 2>"$work/proxy_alone.err" || rc=$?
expect_eq "a trusted proxy without a reviewers file exits" "$rc" 2
expect_grep exposure "$work/proxy_alone.err" "needs --reviewers"
rc=0
"$APBOT_BIN" --db "$db" serve --flow "$FLOW" --reviewers "$rv" --trusted-proxy proxy.example \
    >"$work/proxy_name.out" 2>"$work/proxy_name.err" || rc=$?
expect_eq "a trusted proxy by name exits" "$rc" 2
cp "$rv" "$work/rv_open" && chmod 644 "$work/rv_open"
rc=0
"$APBOT_BIN" --db "$db" serve --flow "$FLOW" --reviewers "$work/rv_open" \
    >"$work/rv_open.out" 2>"$work/rv_open.err" || rc=$?
expect_eq "a reviewers file others may read exits" "$rc" 1
expect_grep exposure "$work/rv_open.err" "reviewers file: .*may read it \(mode 644\)"
APBOT_REVIEW_PASSWORD="not used at all" start_serve exposed --listen 0.0.0.0:0 --reviewers "$rv"
expect_grep exposure "$work/exposed.err" "APBOT_REVIEW_PASSWORD is not used"
exposed_url="http://127.0.0.1:${serve_url##*:}"
expect_eq "exposed with a reviewers file: sign in first" "$(status "$exposed_url/")" 303

# ---- the shared password (a small shop, no reviewers file) -------------------------------------
shared_pw="correct horse battery staple"
APBOT_REVIEW_PASSWORD=$shared_pw start_serve shared --listen 0.0.0.0:0
shared_url="http://127.0.0.1:${serve_url##*:}"
expect_eq "shared: sign in first" "$(status "$shared_url/")" 303
expect_eq "shared: a wrong password" "$(sign_in "$shared_url" "$work/jar_s" erin "nope nope nope")" 401
expect_eq "shared: a name and the password" "$(sign_in "$shared_url" "$work/jar_s" erin "$shared_pw")" 303
expect_eq "shared: a page" "$(status "$shared_url/" -b "$work/jar_s")" 200

# ---- without reviewers or a password: read-only, on loopback ------------------------------------
APBOT_REVIEW_PASSWORD= start_serve open_ro --listen 127.0.0.1:0
open_url=$serve_url
curl -s -c "$work/jar_o" -o "$work/open_item.html" -w '%{http_code}' "$open_url/item/$i3" >"$work/open_item.code"
expect_eq "read-only: the item" "$(cat "$work/open_item.code")" 200
expect_grep readonly "$work/open_item.html" 'id="readonly"'
expect_no_grep readonly "$work/open_item.html" 'class="decision"'
code=$(curl -s -b "$work/jar_o" -o /dev/null -w '%{http_code}' "$open_url/item/$i3/decide" \
    -d "csrf=$(csrf_of "$work/open_item.html")&version=1&action=requeue&note=x")
expect_eq "read-only: a decision is refused" "$code" 403
expect_grep readonly "$work/open_ro.err" "refused: a decision from someone not signed in"

# ---- TLS without a proxy: a self-signed certificate for 127.0.0.1 -------------------------------
tls_url=""
if command -v openssl >/dev/null; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
        -days 2 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
    chmod 600 "$work/key.pem"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/other_key.pem" \
        -out "$work/other_cert.pem" -days 2 -subj "/CN=127.0.0.1" 2>/dev/null
    chmod 600 "$work/other_key.pem"
    start_serve tls --listen 127.0.0.1:0 --reviewers "$rv" --tls-cert "$work/cert.pem" \
        --tls-key "$work/key.pem"
    tls_url=$serve_url
    expect_eq "tls: announced as https" "${tls_url%%://*}" https
    expect_grep tls "$work/tls.err" "https with the certificate /CN=127.0.0.1, valid until"
    code=$(curl -s --cacert "$work/cert.pem" -D "$work/h_tls.txt" -o /dev/null -w '%{http_code}' \
        "$tls_url/login")
    expect_eq "tls: the sign-in page with the certificate as trust anchor" "$code" 200
    expect_grep tls "$work/h_tls.txt" "^Set-Cookie: apbot_visit=[0-9a-f.]+; Path=/; HttpOnly; SameSite=Strict; Secure"
    expect_eq "tls: signed in" "$(sign_in "$tls_url" "$work/jar_tls" alice "${pw[alice]}" \
        --cacert "$work/cert.pem" -D "$work/h_tls_in.txt")" 303
    expect_grep tls "$work/h_tls_in.txt" "^Set-Cookie: apbot_session=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Strict; Secure"
    rc=0
    curl -s -o /dev/null "$tls_url/login" || rc=$?
    expect_eq "tls: a client without the certificate refuses the server (curl exit 60)" "$rc" 60
    rc=0
    curl -s -o /dev/null --cacert "$work/cert.pem" --tls-max 1.1 "$tls_url/login" || rc=$?
    [ "$rc" -ne 0 ] && ok "tls: TLS 1.1 is refused (curl exit $rc)" || fail "tls: TLS 1.1 was accepted"
    rc=0
    curl -s -o /dev/null "http://${tls_url#https://}/login" || rc=$?
    [ "$rc" -ne 0 ] && ok "tls: no plain http on the https port (curl exit $rc)" ||
        fail "tls: plain http was answered"
    # refused before anything listens: a key others may read, a key of another certificate,
    # one file without the other
    chmod 640 "$work/other_key.pem"
    rc=0
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --tls-cert "$work/cert.pem" \
        --tls-key "$work/other_key.pem" >"$work/tls_mode.out" 2>"$work/tls_mode.err" || rc=$?
    expect_eq "tls: a key its group may read exits" "$rc" 1
    expect_grep tls "$work/tls_mode.err" "--tls-key: .*may read it \(mode 640\)"
    chmod 600 "$work/other_key.pem"
    rc=0
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --tls-cert "$work/cert.pem" \
        --tls-key "$work/other_key.pem" >"$work/tls_pair.out" 2>"$work/tls_pair.err" || rc=$?
    expect_eq "tls: the key of another certificate exits" "$rc" 1
    expect_grep tls "$work/tls_pair.err" "other_key.pem does not belong to the certificate of --tls-cert .*cert.pem"
    rc=0
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --tls-cert "$work/other_key.pem" \
        --tls-key "$work/other_key.pem" >"$work/tls_nocert.out" 2>"$work/tls_nocert.err" || rc=$?
    expect_eq "tls: a key given as the certificate exits" "$rc" 1
    expect_grep tls "$work/tls_nocert.err" "--tls-cert: .*other_key.pem: not a PEM X.509 certificate"
    rc=0
    "$APBOT_BIN" --db "$db" serve --flow "$FLOW" --tls-cert "$work/cert.pem" \
        >"$work/tls_half.out" 2>"$work/tls_half.err" || rc=$?
    expect_eq "tls: a certificate without its key is a usage error" "$rc" 2
    tls_spki=$(openssl x509 -pubkey -noout -in "$work/cert.pem" | openssl pkey -pubin -outform der |
        openssl dgst -sha256 -binary | base64)
else
    echo "SKIP: no openssl: the TLS part did not run"
fi

# ---- the clerk fixes two bookings in the ERP before deciding ---------------------------------
delete_doc "$wrong1"
right1=$(book "$k1" 119.00 SV-1)
delete_doc "$wrong2"

# ---- headless Chromium through the pages -----------------------------------------------------
if [ -x "$CHROMIUM" ] && command -v node >/dev/null; then
    mkdir -p "$SHOTS"
    drc=0
    passwords=$(printf '{"alice": "%s", "bob": "%s", "carol": "%s", "dave": "%s", "vera": "%s"}' \
        "${pw[alice]}" "${pw[bob]}" "${pw[carol]}" "${pw[dave]}" "${pw[vera]}")
    HOME=$work CHROMIUM=$CHROMIUM SERVE_URL=$base SHOTS=$SHOTS \
        PROFILE=$(mktemp -d "$work/chromium.XXXXXX") ITEM_POSTED=$i1 ITEM_REQUEUE=$i2 \
        ITEM_REJECT=$i3 ITEM_HOSTILE=$i4 RIGHT_DOC=$right1 WRONG_DOC=AP-2026-999999 \
        PASSWORDS=$passwords SHARED_URL=$shared_url SHARED_PASSWORD=$shared_pw \
        TLS_URL=$tls_url TLS_SPKI=${tls_spki:-} TLS_ITEM=$i5 \
        timeout 240 node "$SRC/tests/serve_drive.js" >"$work/drive.out" 2>"$work/drive.err" || drc=$?
    cat "$work/drive.out"
    if [ "$drc" -ne 0 ]; then
        fail "the browser run: $drc check(s) failed"
        tail -n 20 "$work/drive.err" >&2
    else
        ok "the browser run ($(grep -c '^ok:' "$work/drive.out") checks); screenshots in $SHOTS"
    fi

    # ---- what the CLI and the log see afterwards: same decisions, signed by the sessions -----
    run a1 review "$i1" --json
    expect_grep a1 "$work/a1.out" '"state": "completed"'
    expect_grep a1 "$work/a1.out" "\"erp_doc\": \"$right1\""
    expect_grep a1 "$work/a1.out" '"actor": "operator:alice"'
    expect_grep a1 "$work/a1.out" "verified in the ERP: key $k1 is document $right1 with 119\.00 EUR; note: ticket 42; by alice \(Alice Example\), signed in with their own password\""
    expect_grep a1 "$work/a1.out" '"step": "verify:lookup"'
    run a3 review "$i3" --json
    expect_grep a3 "$work/a3.out" '"state": "business-exception"'
    expect_grep a3 "$work/a3.out" '"actor": "operator:carol"'
    expect_grep a3 "$work/a3.out" 'rejected: duplicate of an earlier invoice; note: vendor confirmed by phone; by carol'
    expect_no_grep a3 "$work/a3.out" 'operator:dave'
    run a2 review "$i2" --json
    expect_grep a2 "$work/a2.out" '"state": "new"'
    expect_grep a2 "$work/a2.out" '"actor": "operator:bob"'
    expect_no_grep a2 "$work/a2.out" 'operator:vera'
    run a4 review "$i4" --json
    expect_grep a4 "$work/a4.out" '"state": "business-exception"'
    expect_no_grep a4 "$work/a4.out" 'mallory'
    expect_grep log "$work/serve.err" "refused: viewer vera may not decide \(item=$i2 from=127.0.0.1\)"
    expect_grep log "$work/serve.err" "signed out: bob from=127.0.0.1"
    expect_grep log "$work/serve.err" "item=$i1 decision=posted by=alice auth=password from=127.0.0.1 verdict=done"
    expect_no_grep log "$work/serve.err" "alice's own password|bob's own password|only looks at it"
    if [ -n "$tls_url" ]; then
        run a5 review "$i5" --json
        expect_grep tls "$work/a5.out" '"state": "new"'
        expect_grep tls "$work/a5.out" 'note: over tls; by alice \(Alice Example\), signed in with their own password'
    fi

    # ---- the requeued item is picked up by the next run -------------------------------------
    run run2 run --flow "$FLOW" --erp "$erp" --until-empty --quiet
    expect_rc run2 0
    run a2b review "$i2" --json
    expect_grep a2b "$work/a2b.out" '"state": "completed"'
    # the page shows it too, and the balance still holds in money
    curl -s -b "$work/jar" -o "$work/today2.html" "$base/"
    expect_grep today2 "$work/today2.html" 'id="state-manual-review">0<'
    expect_grep today2 "$work/today2.html" 'id="money-EUR-balanced-total"[^>]*>yes<'
else
    echo "SKIP: $CHROMIUM or node is absent: the headless-browser run did not happen (make test installs them)"
fi

# ---- the ERP down: the page keeps serving, only posted-as-DOC needs the ERP -----------------
kill "$sim_pid" 2>/dev/null || true
wait "$sim_pid" 2>/dev/null || true
sim_pid=""
curl -s -b "$work/jar" -o "$work/today_down.html" -w '%{http_code}' "$base/" >"$work/today_down.code"
expect_eq "erp down: today" "$(cat "$work/today_down.code")" 200
expect_grep erp_down "$work/today_down.html" 'The ERP could not be read'
expect_eq "erp down: queue" "$(status "$base/queue?tab=exceptions" -b "$work/jar")" 200
curl -s -c "$work/jar_s" -b "$work/jar_s" -o "$work/item5.html" "$shared_url/item/$i4"
csrf=$(csrf_of "$work/item5.html")
ver=$(grep -o 'name="version" value="[0-9]*"' "$work/item5.html" | head -n1 | sed 's/.*value="//; s/"//')
code=$(curl -s -b "$work/jar_s" -o "$work/down_posted.html" -w '%{http_code}' "$shared_url/item/$i4/decide" \
    -d "csrf=$csrf&version=$ver&action=posted&doc=AP-2026-000001&note=booked")
expect_eq "erp down: posted as DOC cannot be verified" "$code" 503
expect_grep erp_down "$work/down_posted.html" 'The ERP did not answer, nothing was recorded'
code=$(curl -s -b "$work/jar_s" -o "$work/down_requeue.html" -w '%{http_code}' "$shared_url/item/$i4/decide" \
    -d "csrf=$csrf&version=$ver&action=requeue&note=vendor+id+fixed")
expect_eq "erp down: requeue still works" "$code" 200
expect_grep erp_down "$work/shared.err" "item=$i4 decision=requeue by=erin auth=shared-password"
run a4b review "$i4" --json
expect_grep erp_down "$work/a4b.out" 'by erin, signed in with the shared review password \(the name is as typed at sign-in\)'

harness_finish serve
