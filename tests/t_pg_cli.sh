#!/usr/bin/env bash
# t_pg_cli.sh - every apbot command once against a real PostgreSQL queue (the test server of
# the ctest fixture `pg`, a fresh schema of its own), with the erp-sim program as the ERP:
# enqueue (queued / already / conflict), run to the end, status, list, review (a clerk booked
# one invoice with another amount: manual review), resolve (--reject), report, and migrate
# (SQLite file -> PostgreSQL, verified; a second time refused). Passwords: --db carrying one
# is refused without echoing it; a wrong one through APBOT_DB fails without echoing it, and
# stops `run` at once (no outage to ride out). A server that does not answer: `run` waits
# --queue-outage-max, then exits 8; apbot --help says so.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC, APBOT_TEST_PG_ENV.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
FLOW=$SRC/flows/acme.xml

if [ -z "${APBOT_TEST_PG_ENV:-}" ] || [ ! -f "$APBOT_TEST_PG_ENV" ]; then
    echo "SKIP (PostgreSQL): no test server (tests/lib/pg.sh found no server binaries, or not run through ctest)"
    exit 0
fi
# shellcheck disable=SC1090
. "$APBOT_TEST_PG_ENV"

. "$SRC/tests/lib/harness.sh"
harness_init pg-cli
schema="t_cli_$$_$RANDOM"
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$APBOT_TEST_PG" -c "$1" >/dev/null; }
psql_q "SET client_min_messages = warning; CREATE SCHEMA $schema; CREATE SCHEMA ${schema}_m"
pg_cleanup() {
    psql_q "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE;
            DROP SCHEMA IF EXISTS ${schema}_m CASCADE" || true
    harness_cleanup
}
trap pg_cleanup EXIT
db="$APBOT_TEST_PG options='-c search_path=$schema'"

start_sim
book() { # REF AMOUNT INVNO
    curl -s --fail -X POST "$erp/_sim/book" --data-urlencode "vendor_id=100001" \
        --data-urlencode "invoice_number=$3" --data-urlencode "invoice_date=2026-11-03" \
        --data-urlencode "currency=EUR" --data-urlencode "amount=$2" \
        --data-urlencode "reference=$1"
}

# ---- enqueue ---------------------------------------------------------------------------------
cat >"$work/inv.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,invoice_date,currency,line_gl_account,line_net,line_tax
100001,Acme Supplies,PG-1,2026-11-03,EUR,6000,100.00,19.00
100001,Acme Supplies,PG-2,2026-11-03,EUR,6000,200.00,38.00
100001,Acme Supplies,PG-3,2026-11-03,EUR,6000,300.00,57.00
100090,Blocked Vendor,PG-4,2026-11-03,EUR,6000,400.00,76.00
EOF
run enqueue enqueue "$work/inv.csv"
expect_rc enqueue 0
expect_grep enqueue "$work/enqueue.out" "queued 4, already queued 0"
run enqueue_again enqueue "$work/inv.csv"
expect_grep enqueue_again "$work/enqueue_again.out" "queued 0, already queued 4"
sed 's/300.00,57.00/301.00,57.00/' "$work/inv.csv" >"$work/changed.csv"
run enqueue_conflict enqueue "$work/changed.csv"
expect_rc enqueue_conflict 3

# ---- list, then a clerk's booking with another amount, then run ---------------------------------
run list_new list --state new --json
expect_rc list_new 0
k1=$(tr -d '\n' <"$work/list_new.out" | sed 's/},/}\n/g' | grep '"PG-1"' |
    sed -n 's/.*"key": *"\(AP1-[A-Z0-9]*\)".*/\1/p' | head -n1)
[ -n "$k1" ] || { echo "no key for PG-1 in list --json" >&2; exit 1; }
book "$k1" 999.00 PG-1 >/dev/null
run run run --flow "$FLOW" --erp "$erp" --until-empty --quiet
expect_rc run 0

# ---- status, list, review, resolve, report -----------------------------------------------------
run status status --json
expect_rc status 0
expect_grep status "$work/status.out" '"completed": 2'
expect_grep status "$work/status.out" '"business-exception": 1'
expect_grep status "$work/status.out" '"manual-review": 1'
expect_grep status "$work/status.out" '"total": 4'
run list_done list --state completed
expect_rc list_done 0
expect_grep list_done "$work/list_done.out" "PG-2"
expect_grep list_done "$work/list_done.out" "PG-3"
run review review
expect_rc review 0
expect_grep review "$work/review.out" "manual-review"
expect_grep review "$work/review.out" "PG-1"
id1=$(sed -n 's/^#\([0-9]*\) .*manual-review.*/\1/p' "$work/review.out" | head -n1)
[ -n "$id1" ] || { echo "no item id in review" >&2; cat "$work/review.out" >&2; exit 1; }
run review_one review "$id1"
expect_rc review_one 0
expect_grep review_one "$work/review_one.out" "^ERP evidence"
expect_no_grep review_one "$work/review_one.out" "acme-demo"
run resolve resolve "$id1" --reject "booked by hand with the wrong amount" --by alice
expect_rc resolve 0
run status_after status --json
expect_grep status_after "$work/status_after.out" '"manual-review": 0'
run report report --flow "$FLOW" --erp "$erp" --date 2026-11-03 --format json
if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; then ok "report: exit $rc"; else
    fail "report: exit $rc"
    sed 's/^/  | /' "$work/report.err" >&2
fi
expect_grep report "$work/report.out" "\"completed\""

# ---- migrate: a SQLite queue into an empty PostgreSQL schema ------------------------------------
"$APBOT_BIN" --db "$work/local.db" enqueue "$work/inv.csv" >/dev/null
dst="$APBOT_TEST_PG options='-c search_path=${schema}_m'"
rc=0
"$APBOT_BIN" migrate --from "$work/local.db" --to "$dst" >"$work/migrate.out" 2>"$work/migrate.err" || rc=$?
expect_rc migrate 0
expect_grep migrate "$work/migrate.out" "^items +4 +4"
expect_grep migrate "$work/migrate.out" "^events +4 +4"
expect_grep migrate "$work/migrate.out" "verified"
rc=0
"$APBOT_BIN" migrate --from "$work/local.db" --to "$dst" >"$work/migrate2.out" 2>"$work/migrate2.err" || rc=$?
expect_rc migrate2 3
expect_grep migrate2 "$work/migrate2.err" "not empty"
rc=0
"$APBOT_BIN" --db "$dst" status --json >"$work/mstatus.out" 2>"$work/mstatus.err" || rc=$?
expect_rc mstatus 0
expect_grep mstatus "$work/mstatus.out" '"new": 4'

# ---- passwords ------------------------------------------------------------------------------------
secret="not-$APBOT_TEST_PG_PASSWORD"
rc=0
"$APBOT_BIN" --db "postgresql://$APBOT_TEST_PG_PWUSER:$secret@/apbot?host=$APBOT_TEST_PG_DIR" \
    status >"$work/pw_argv.out" 2>"$work/pw_argv.err" || rc=$?
expect_rc pw_argv 2
expect_no_grep pw_argv "$work/pw_argv.err" "$secret"
rc=0
APBOT_DB="postgresql://$APBOT_TEST_PG_PWUSER:$secret@/apbot?host=$APBOT_TEST_PG_DIR" \
    "$APBOT_BIN" status >"$work/pw_env.out" 2>"$work/pw_env.err" || rc=$?
expect_rc pw_env 1
expect_grep pw_env "$work/pw_env.err" "password authentication failed"
expect_no_grep pw_env "$work/pw_env.err" "$secret"
expect_no_grep pw_env "$work/pw_env.out" "$secret"
# A wrong password is a setting to fix, not an outage: `run` stops at once (exit 1).
rc=0
APBOT_DB="postgresql://$APBOT_TEST_PG_PWUSER:$secret@/apbot?host=$APBOT_TEST_PG_DIR" \
    "$APBOT_BIN" run --flow "$FLOW" --erp "$erp" --until-empty --queue-outage-max 60 \
    >"$work/pw_run.out" 2>"$work/pw_run.err" || rc=$?
expect_rc pw_run 1
expect_no_grep pw_run "$work/pw_run.err" "queue unavailable"

# ---- a queue that cannot be reached ---------------------------------------------------------------
# A server that does not answer is an outage: ridden out for --queue-outage-max, then exit 8.
down="host=$work/no-server-here dbname=apbot connect_timeout=2"
rc=0
"$APBOT_BIN" --db "$down" run --flow "$FLOW" --erp "$erp" --until-empty --queue-outage-max 2 \
    >"$work/down.out" 2>"$work/down.err" || rc=$?
expect_rc down 8
expect_grep down "$work/down.err" 'msg="queue unavailable"'
expect_grep down "$work/down.err" "the queue was unavailable for longer than 2 s"
expect_grep down "$work/down.out" "stopped \\(queue\\).*still pending unknown"
run outage_usage run --flow "$FLOW" --queue-outage-max soon
expect_rc outage_usage 2
rc=0
"$APBOT_BIN" --help >"$work/help.out" 2>&1 || rc=$?
expect_grep help "$work/help.out" "^  8  run stopped because the queue stayed unavailable"
expect_grep help "$work/help.out" "--queue-outage-max SECONDS"

harness_finish "PostgreSQL CLI"
