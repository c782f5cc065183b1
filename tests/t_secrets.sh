#!/usr/bin/env bash
# t_secrets.sh - credentials the way services receive them, from the outside: apbot run logs in
# with APBOT_ERP_PASSWORD_FILE and with systemd's $CREDENTIALS_DIRECTORY (the invoices booked
# in the ERP's ground truth); a secret file its group or others may read, and both forms at
# once, stop the command before anything is sent, naming the file or the variables and never
# the secret; a password given in the environment is gone from /proc/PID/environ of a running
# apbot (serve) and from its environment.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}

. "$SRC/tests/lib/harness.sh"
harness_init secrets
start_sim
unset APBOT_ERP_PASSWORD
umask 077

booked() { curl -fsS "$erp/_sim/ledger.csv" | tail -n +2 | wc -l; }

# 1. APBOT_ERP_PASSWORD_FILE
printf 'acme-demo\n' >"$work/erp-password"
run enqueue1 enqueue --vendors "$SRC/fixtures/invoices/vendors.csv" "$SRC/fixtures/invoices/good.csv"
expect_rc enqueue1 0
APBOT_ERP_PASSWORD_FILE=$work/erp-password run run1 run --flow "$SRC/flows/acme.xml" --erp "$erp" \
    --until-empty --max-seconds 60
expect_rc run1 0
run status1 status --json
completed=$(sed -n 's/^ *"completed": *\([0-9]*\).*/\1/p' "$work/status1.out")
[ "${completed:-0}" -gt 0 ] || fail "nothing completed with the _FILE form"
expect_eq "bookings in the ERP after the run with the _FILE form" "$(booked)" "$completed"
expect_no_grep run1-log "$work/run1.err" "acme-demo"

# 2. a file others may read: refused, nothing sent, the file named, not the secret
run enqueue2 enqueue --vendors "$SRC/fixtures/invoices/vendors.csv" \
    "$SRC/fixtures/invoices/base-example-as-csv.csv"
expect_rc enqueue2 0
chmod 644 "$work/erp-password"
before=$(curl -fsS "$erp/_sim/stats" | grep -o '"login":[0-9]*' | head -n1)
APBOT_ERP_PASSWORD_FILE=$work/erp-password run run2 run --flow "$SRC/flows/acme.xml" \
    --erp "$erp" --until-empty --max-seconds 60
expect_rc run2 1
expect_grep run2 "$work/run2.err" "APBOT_ERP_PASSWORD_FILE: .*erp-password: its group or others may read it \(mode 644\)"
expect_no_grep run2 "$work/run2.err" "acme-demo"
chmod 600 "$work/erp-password"

# 3. both forms at once
APBOT_ERP_PASSWORD=other APBOT_ERP_PASSWORD_FILE=$work/erp-password run run3 run \
    --flow "$SRC/flows/acme.xml" --erp "$erp" --until-empty --max-seconds 60
expect_rc run3 1
expect_grep run3 "$work/run3.err" "both APBOT_ERP_PASSWORD and APBOT_ERP_PASSWORD_FILE"
expect_no_grep run3 "$work/run3.err" "other|acme-demo"
after=$(curl -fsS "$erp/_sim/stats" | grep -o '"login":[0-9]*' | head -n1)
expect_eq "logins at the ERP by the refused commands" "$after" "$before"

# 4. systemd's credentials (LoadCredential=erp-password:...): the invoice left new is booked
mkdir -m 700 "$work/creds"
printf 'acme-demo' >"$work/creds/erp-password"
chmod 400 "$work/creds/erp-password"
run status3 status --json
expect_grep status3 "$work/status3.out" '"new": *[1-9]'
CREDENTIALS_DIRECTORY=$work/creds run run4 run --flow "$SRC/flows/acme.xml" --erp "$erp" \
    --until-empty --max-seconds 60
expect_rc run4 0
run status4 status --json
expect_grep status4 "$work/status4.out" '"completed": *[1-9]'
expect_grep status4 "$work/status4.out" '"new": *0,'

# 5. a password given in the environment: not in /proc/PID/environ of the running command
APBOT_ERP_PASSWORD=acme-demo-in-env "$APBOT_BIN" --db "$db" serve --flow "$SRC/flows/acme.xml" \
    --erp "$erp" --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 1 100); do
    grep -q '^listening on' "$work/serve.out" && break
    sleep 0.05
done
if grep -q '^listening on' "$work/serve.out"; then
    if tr '\0' '\n' <"/proc/$serve_pid/environ" | grep -q 'acme-demo-in-env'; then
        fail "the password given in the environment is in /proc/$serve_pid/environ"
    else
        ok "the password is not in /proc/PID/environ of apbot serve"
    fi
    if tr '\0' '\n' <"/proc/$serve_pid/environ" | grep -q '^APBOT_ERP_PASSWORD=.'; then
        fail "APBOT_ERP_PASSWORD still has a value in /proc/PID/environ"
    else
        ok "APBOT_ERP_PASSWORD has no value left in /proc/PID/environ"
    fi
else
    fail "apbot serve did not start: $(cat "$work/serve.err")"
fi
kill "$serve_pid" 2>/dev/null || true
wait "$serve_pid" 2>/dev/null || true

harness_finish secrets
