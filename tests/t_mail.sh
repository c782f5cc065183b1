#!/usr/bin/env bash
# t_mail.sh - the morning mail (`apbot report --mail-to ... --smtp ...`) received by a real
# SMTP server the test starts (tests/lib/smtp_sink.py, Debian's python3-aiosmtpd, on
# 127.0.0.1 with a certificate made here by openssl), read back with Python's email parser:
#  - smtp:// with STARTTLS required and AUTH (credentials from APBOT_SMTP_USER and
#    APBOT_SMTP_PASSWORD_FILE): one message to both recipients, over TLS, authenticated; RFC
#    5322 headers (Date, From, To, Message-ID, MIME-Version), DRIFT in the subject, a
#    multipart/mixed with the text (status, balance, review depth, the oldest items in
#    review, the review page's link) and the attachment byte for byte what the same command
#    wrote with --format html --out; CRLF lines of at most 78 characters;
#  - smtps:// with a --mail-subject-prefix that is not ASCII (and carries a line break): the
#    subject RFC 2047 encoded, decoded equal, the break a space;
#  - refused, nothing delivered: a server that offers no STARTTLS, a certificate not signed by
#    the CA given, a wrong password (never printed); addresses that would inject a header, and
#    one with a display name, are usage errors;
#  - an ERP that cannot be read: exit 1, and a NO REPORT mail.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml
PY=${APBOT_TEST_PYTHON:-/usr/bin/python3}

. "$SRC/tests/lib/harness.sh"
harness_init mail
sink_pid=""
mail_cleanup() {
    if [ -n "$sink_pid" ]; then
        kill "$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
    fi
    harness_cleanup
}
trap mail_cleanup EXIT

"$PY" -c 'import aiosmtpd' 2>/dev/null || {
    echo "t_mail: $PY has no aiosmtpd (python3-aiosmtpd; make test-deps)" >&2
    exit 1
}
umask 077

# a CA and the server's certificate for 127.0.0.1, and another CA that did not sign it
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=apbot test CA" \
    -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$work/srv.key" \
    -out "$work/srv.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$work/ext"
openssl x509 -req -in "$work/srv.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
    -days 2 -extfile "$work/ext" -out "$work/srv.pem" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=other CA" \
    -keyout "$work/other.key" -out "$work/other.pem" 2>/dev/null

# start_sink MODE: the SMTP server; sets $smtp_port and $inbox
start_sink() {
    [ -z "$sink_pid" ] || { kill "$sink_pid"; wait "$sink_pid" 2>/dev/null || true; }
    sinks=$((${sinks:-0} + 1))
    inbox=$work/inbox-$sinks-$1
    mkdir -p "$inbox"
    rm -f "$work/sink.port"
    "$PY" "$SRC/tests/lib/smtp_sink.py" --mode "$1" --dir "$inbox" --port-file "$work/sink.port" \
        --cert "$work/srv.pem" --key "$work/srv.key" --user mailer --password 'smtp-Secret-42' \
        2>"$work/sink-$1.err" &
    sink_pid=$!
    for _ in $(seq 1 100); do
        [ -f "$work/sink.port" ] && break
        sleep 0.05
    done
    [ -f "$work/sink.port" ] || { echo "smtp sink did not start" >&2; cat "$work/sink-$1.err" >&2; exit 1; }
    smtp_port=$(cat "$work/sink.port")
}
delivered() { find "$inbox" -name '*.eml' | wc -l; }

start_sim
export APBOT_SMTP_USER=mailer
printf 'smtp-Secret-42\n' >"$work/smtp-password"
export APBOT_SMTP_PASSWORD_FILE=$work/smtp-password
book() { # REF AMOUNT INVNO
    curl -s --fail -X POST "$erp/_sim/book" --data-urlencode "vendor_id=100001" \
        --data-urlencode "invoice_number=$3" --data-urlencode "invoice_date=$(date +%F)" \
        --data-urlencode "currency=EUR" --data-urlencode "amount=$2" \
        --data-urlencode "reference=$1" >/dev/null
}

# A day with one item in manual review (the ERP holds it with another amount), one orphan
# booking carrying an apbot key the queue does not know (drift), the rest completed.
cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Acme Supplies,ML-1,2026-11-03,EUR,6000,100.00,19.00
100001,Acme Supplies,ML-2,2026-11-03,EUR,6000,200.00,38.00
100001,Acme Supplies,ML-3,2026-11-03,EUR,6000,300.00,57.00
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
run list list --state new --json
k1=$(tr -d '\n' <"$work/list.out" | sed 's/},/}\n/g' | grep '"ML-1"' |
    sed -n 's/.*"key": *"\([A-Z0-9-]*\)".*/\1/p')
[ -n "$k1" ] || { echo "no key for ML-1" >&2; exit 1; }
book "$k1" 999.00 ML-1
book AP1-ORPHAN0000000000000 55.00 ML-X
run run run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run 0
expect_grep run "$work/run.out" "completed 2, business-exception 0, manual-review 1"

mail_args=(--mail-to 'finance@example.org, controller@example.org' --mail-from apbot@example.org
    --smtp-ca "$work/ca.pem" --review-url "http://127.0.0.1:8470/queue")

# ---- 1. smtp:// with STARTTLS required, AUTH ------------------------------------------------
start_sink starttls
run report1 report --flow "$FLOW" --erp "$erp" --format html --out "$work/report.html" \
    "${mail_args[@]}" --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc report1 5
expect_grep report1 "$work/report1.err" "mailed to 2 recipients through smtp://127.0.0.1:$smtp_port"
expect_eq "messages delivered" "$(delivered)" 1
expect_no_grep report1-secret "$work/report1.err" "smtp-Secret-42"
"$PY" - "$inbox/1.eml" "$inbox/1.json" "$work/report.html" >"$work/check1.out" 2>&1 <<'PYEOF' || fail "the message as received: $(cat "$work/check1.out")"
import email, email.policy, email.utils, json, re, sys
raw = open(sys.argv[1], "rb").read()
meta = json.load(open(sys.argv[2]))
html = open(sys.argv[3], "rb").read()
def need(cond, what):
    if not cond:
        raise SystemExit("not so: " + what)
need(meta["tls"] is True, "received over TLS")
need(meta["auth_user"] == "mailer", "authenticated as mailer")
need(meta["mail_from"] == "apbot@example.org", "envelope sender")
need(sorted(meta["rcpt_tos"]) == ["controller@example.org", "finance@example.org"], "envelope recipients")
lines = raw.split(b"\r\n")
need(raw.endswith(b"\r\n") and b"\n" not in raw.replace(b"\r\n", b""), "CRLF line ends only")
need(max(len(l) for l in lines) <= 78, "lines of at most 78 characters")
m = email.message_from_bytes(raw, policy=email.policy.default)
need(not m.defects, "no defects: %s" % m.defects)
need(m["From"] == "apbot@example.org", "From")
need([a.addr_spec for a in m["To"].addresses] == ["finance@example.org", "controller@example.org"], "To")
need(email.utils.parsedate_to_datetime(m["Date"]) is not None, "a Date")
need(re.fullmatch(r"<[0-9a-f]{32}@example\.org>", m["Message-ID"]), "a Message-ID: " + m["Message-ID"])
need(m["MIME-Version"] == "1.0", "MIME-Version")
need(m["Auto-Submitted"] == "auto-generated", "Auto-Submitted")
need(re.fullmatch(r"apbot report \d{4}-\d\d-\d\d \(acme\): DRIFT \(1 finding\)", m["Subject"]), "subject: " + m["Subject"])
need(m.get_content_type() == "multipart/mixed", "multipart/mixed")
parts = list(m.iter_parts())
need(len(parts) == 2, "two parts")
text = parts[0]
need(text.get_content_type() == "text/plain" and text.get_content_charset() == "utf-8", "text/plain utf-8")
body = text.get_content().replace("\r\n", "\n")  # canonical CRLF line ends
for want in ["Status: DRIFT - 1 finding where the queue and the ERP disagree",
             "Balance of the day: 3 received = 2 completed + 0 business exceptions + 1 in manual review + 0 pending (balanced).",
             "EUR completed 595.00, in the ERP's listing 1,649.00, difference 1,054.00",
             "Review depth: 1 in manual review, 0 business exceptions.",
             "Oldest in review:\n  #1 Acme Supplies, ML-1, EUR 119.00, waiting ",
             "Review page: http://127.0.0.1:8470/queue",
             "Audit chain head at the end of the day: ",
             "The full report is attached: apbot-report-"]:
    need(want in body, "the text says %r:\n%r" % (want, body))
att = parts[1]
need(att.get_content_type() == "text/html", "text/html attachment")
need(att.get_content_disposition() == "attachment", "an attachment")
need(re.fullmatch(r"apbot-report-\d{4}-\d\d-\d\d\.html", att.get_filename()), "its file name")
need(att.get_payload(decode=True) == html, "the attachment is the report --format html wrote")
print("ok")
PYEOF
expect_grep check1 "$work/check1.out" '^ok$'

# ---- 2. smtps://, a prefix in UTF-8 with a line break: the subject encoded -----------------
start_sink smtps
run report2 report --flow "$FLOW" --erp "$erp" "${mail_args[@]}" \
    --mail-subject-prefix $'Kreditoren Größe – Süd\r\nBcc: spy@example.net' --smtp "smtps://127.0.0.1:$smtp_port"
expect_rc report2 5
expect_eq "messages delivered over smtps" "$(delivered)" 1
expect_grep subject-raw "$inbox/1.eml" '^Subject: =\?UTF-8\?B\?'
expect_no_grep no-bcc "$inbox/1.eml" '^Bcc:'
"$PY" - "$inbox/1.eml" "$inbox/1.json" >"$work/check2.out" 2>&1 <<'PYEOF' || fail "smtps message: $(cat "$work/check2.out")"
import email, email.policy, json, sys
m = email.message_from_bytes(open(sys.argv[1], "rb").read(), policy=email.policy.default)
meta = json.load(open(sys.argv[2]))
assert meta["tls"] and meta["auth_user"] == "mailer", meta
assert meta["rcpt_tos"] == ["finance@example.org", "controller@example.org"], meta
assert m["Subject"].startswith("Kreditoren Größe – Süd  Bcc: spy@example.net apbot report "), m["Subject"]
assert m["Subject"].endswith("(acme): DRIFT (1 finding)"), m["Subject"]
assert m["Bcc"] is None
assert "apbot daily report for " in m.get_body(("plain",)).get_content()
print("ok")
PYEOF
expect_grep check2 "$work/check2.out" '^ok$'

# ---- 3. refused: nothing delivered, nothing of the password shown -----------------------------
start_sink plain
run plain report --flow "$FLOW" --erp "$erp" "${mail_args[@]}" --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc plain 1
expect_grep plain "$work/plain.err" "the report was not mailed: smtp: .*(SSL|TLS|STARTTLS)"
expect_eq "delivered without STARTTLS" "$(delivered)" 0
start_sink starttls
run otherca report --flow "$FLOW" --erp "$erp" --mail-to finance@example.org \
    --mail-from apbot@example.org --smtp-ca "$work/other.pem" --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc otherca 1
expect_grep otherca "$work/otherca.err" "not mailed: smtp: .*(certificate|SSL)"
printf 'wrong-password-7\n' >"$work/bad-password"
APBOT_SMTP_PASSWORD_FILE=$work/bad-password run badpw report --flow "$FLOW" --erp "$erp" \
    "${mail_args[@]}" --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc badpw 1
expect_grep badpw "$work/badpw.err" "not mailed: smtp: .*(Login denied|auth)"
expect_no_grep badpw-secret "$work/badpw.err" "wrong-password-7|smtp-Secret-42"
expect_eq "delivered with a wrong CA or password" "$(delivered)" 0
for bad in $'finance@example.org\r\nBcc: spy@example.net' 'Finance <finance@example.org>' \
    'finance@example.org;spy@example.net' 'finance' '"a b"@example.org'; do
    run badaddr report --flow "$FLOW" --erp "$erp" --mail-to "$bad" \
        --smtp "smtp://127.0.0.1:$smtp_port" --smtp-ca "$work/ca.pem"
    expect_rc badaddr 2
done
run badfrom report --flow "$FLOW" --erp "$erp" --mail-to finance@example.org \
    --mail-from $'apbot@example.org\nX-Injected: 1' --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc badfrom 2
run badurl report --flow "$FLOW" --erp "$erp" --mail-to finance@example.org \
    --smtp "smtp://user:pw@127.0.0.1:$smtp_port"
expect_rc badurl 2
run nosmtp report --flow "$FLOW" --erp "$erp" --mail-to finance@example.org
expect_rc nosmtp 2
expect_eq "delivered after usage errors" "$(delivered)" 0

# ---- 4. no report: the ERP cannot be read, NO REPORT is mailed --------------------------------
run noreport report --flow "$FLOW" --erp "http://127.0.0.1:1" "${mail_args[@]}" \
    --smtp "smtp://127.0.0.1:$smtp_port"
expect_rc noreport 1
expect_grep noreport "$work/noreport.err" "mailed NO REPORT to 2 recipients"
expect_eq "NO REPORT delivered" "$(delivered)" 1
"$PY" - "$inbox/1.eml" >"$work/check4.out" 2>&1 <<'PYEOF' || fail "NO REPORT message: $(cat "$work/check4.out")"
import email, email.policy, sys
m = email.message_from_bytes(open(sys.argv[1], "rb").read(), policy=email.policy.default)
assert m["Subject"].endswith("(acme): NO REPORT"), m["Subject"]
body = m.get_body(("plain",)).get_content()
assert "apbot could not make the daily report" in body and "Why: " in body, body
print("ok")
PYEOF
expect_grep check4 "$work/check4.out" '^ok$'

harness_finish mail
