#!/usr/bin/env bash
# memcheck.sh - apbot under valgrind's memcheck, end to end: what ASan cannot see (reads of
# bytes never written; PCRE2's JIT code, which no compiler instruments). Registered for plain
# builds only (ASan's runtime and valgrind exclude each other).
#   1. test_erp_view (every outcome rule over canned, mutated and generated pages, the JIT on);
#   2. per UI, the month-end demo set's first 60 invoices (a refused line, two the ERP
#      rejects) enqueued, run on a simulator with faults (acme: month-end's 503, 429 and
#      timeouts; classic and spa: chaos - ambiguous posts, expiring sessions, validation with
#      500; the spa UI's JSON calls, tagged values and header token), then status and the
#      day's report.
# Every apbot command must report no memcheck error and no definite leak (exit 99 otherwise),
# and the ground truth must hold: each key booked at most once, no re-post of a booked
# invoice, nothing pending, every completed item booked, nothing booked for the two
# rejections (business exceptions) or for an item still queued; an item in manual review may
# have been booked (the ERP committed late; the report shows it) but never twice.
# Usage: memcheck.sh TEST_ERP_VIEW GEN_INVOICES
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
VIEW=${1:?usage: memcheck.sh TEST_ERP_VIEW GEN_INVOICES}
GEN=${2:?usage: memcheck.sh TEST_ERP_VIEW GEN_INVOICES}

. "$SRC/tests/lib/harness.sh"
harness_init memcheck

if ! command -v valgrind >/dev/null; then
    echo "valgrind is not installed (make test installs it)" >&2
    exit 1
fi
VG=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --num-callers=30)

memcheck() { # NAME WANT_RC CMD...: runs CMD under memcheck, output in $work/NAME.{out,err}
    local name=$1 want=$2
    shift 2
    rc=0
    "${VG[@]}" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
    if [ "$rc" -eq 99 ]; then
        fail "$name: memcheck found errors"
        grep -E '^==[0-9]+== ' "$work/$name.err" | head -n 60 | sed 's/^/  | /' >&2
    else
        expect_rc "$name" "$want"
    fi
}

memcheck erp_view 0 "$VIEW"

"$GEN" --month-end --head 60 --out "$work/invoices.csv"

one_ui() { # UI FLOW SCENARIO
    local ui=$1 flow=$SRC/flows/$2 scn=$SRC/fixtures/scenarios/$3 q=$work/$1.db
    "$ERPSIM_BIN" --port 0 --admin --ui "$ui" --scenario "$scn" --seed 7 \
        >"$work/sim-$ui.out" 2>"$work/sim-$ui.err" &
    sim_pid=$!
    port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/sim-$ui.out" |
            head -n1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "erp-sim did not start" >&2; cat "$work/sim-$ui.err" >&2; exit 1; }
    local erp=http://127.0.0.1:$port
    export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
    unset APBOT_ERP_URL APBOT_DB

    # exit 3: the refused line (invoice 37)
    memcheck "$ui-enqueue" 3 "$APBOT_BIN" --db "$q" enqueue \
        --vendors "$SRC/fixtures/invoices/vendors.csv" "$work/invoices.csv"
    memcheck "$ui-run" 0 "$APBOT_BIN" --db "$q" run --flow "$flow" --erp "$erp" --until-empty \
        --concurrency 4 --max-seconds 400
    memcheck "$ui-status" 0 "$APBOT_BIN" --db "$q" status --json
    memcheck "$ui-report" 0 "$APBOT_BIN" --db "$q" report --flow "$flow" --erp "$erp" \
        --date "$(date +%F)" --format text

    local s=$work/$ui-status.out ledger=$work/ledger-$ui.csv
    count() { sed -n "s/^ *\"$1\": *\([0-9]*\).*/\1/p" "$s"; }
    curl -fsS "$erp/_sim/ledger.csv" >"$ledger"
    local reposts dups
    reposts=$(curl -fsS "$erp/_sim/stats" | grep -o '"reposts_of_booked":[0-9]*' | cut -d: -f2)
    # the reference (the item's key) is the ledger's third-to-last column
    awk -F, 'NR > 1 { print $(NF-2) }' "$ledger" | sort >"$work/booked-$ui"
    dups=$(uniq -d "$work/booked-$ui" | wc -l)
    keys() { # STATE: the keys of the items in it, sorted
        "$APBOT_BIN" --db "$q" list --state "$1" --json --limit 1000 |
            sed -n 's/.*"key":"\([^"]*\)".*/\1/p' | sort
    }
    keys completed >"$work/completed-$ui"
    keys manual-review >"$work/review-$ui"
    expect_eq "$ui: keys booked more than once" "$dups" 0
    expect_eq "$ui: re-posts of a booked invoice" "$reposts" 0
    expect_eq "$ui: queued" "$(count total)" 59
    expect_eq "$ui: pending" "$(($(count new) + $(count checking) + $(count posting) \
        + $(count reconciling) + $(count finishing)))" 0
    expect_eq "$ui: business exceptions" "$(count business-exception)" 2
    expect_eq "$ui: completed + business exceptions + manual review" \
        "$(($(count completed) + $(count business-exception) + $(count manual-review)))" 59
    expect_eq "$ui: completed items" "$(wc -l <"$work/completed-$ui")" "$(count completed)"
    expect_eq "$ui: completed items not booked" \
        "$(comm -23 "$work/completed-$ui" "$work/booked-$ui" | wc -l)" 0
    expect_eq "$ui: bookings of no completed item or one in review" \
        "$(sort -u "$work/completed-$ui" "$work/review-$ui" | comm -13 - "$work/booked-$ui" |
            wc -l)" 0
    # what the morning review would read of each item in review, and whether the ERP holds it
    local id key
    for id in $("$APBOT_BIN" --db "$q" list --state manual-review | awk 'NR > 1 { print $1 }'); do
        "$APBOT_BIN" --db "$q" review "$id" | sed -n '1,/^ERP evidence/p' | sed 's/^/  review: /'
        key=$("$APBOT_BIN" --db "$q" review "$id" | awk '$1 == "key" { print $2 }')
        grep -c -- "$key" "$work/booked-$ui" | sed 's/^/  review: bookings in the ERP: /' || true
    done

    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
}

one_ui acme acme.xml month-end.scn
one_ui classic classic.xml chaos.scn
one_ui spa spa.xml chaos.scn

harness_finish memcheck
