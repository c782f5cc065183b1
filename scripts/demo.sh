#!/usr/bin/env bash
# demo.sh - apbot's main job end to end on the bundled simulated ERP (`make demo`), against
# each of its three user interfaces: "ACME Financials" (a login form, two-step entry,
# flows/acme.xml), the classic CGI-era ERP (HTTP Basic, buttons that share a name, save then
# approve, one update per invoice line, flows/classic.xml) and the single-page ERP whose client
# speaks JSON (a token in a header, everything by id, create then post, flows/spa.xml).
#
# For each: starts erp-sim with the month-end scenario (the ERP's reference guard off, as in a
# real ERP), queues fixtures/invoices/month-end.csv (with refused lines), a resubmitted file
# (already queued) and a conflicting invoice, runs `apbot run --until-empty` with its progress
# line, then prints what the queue says next to what the ERP's ground truth says: zero keys
# booked twice, zero re-posts of a booked invoice, every completed item booked and approved.
# Writes the day's report. Exits non-zero when an invariant fails.
# Usage: scripts/demo.sh BUILD_DIR [acme|classic|spa ...]
set -euo pipefail

BUILD=${1:-build}
shift || true
UIS=("$@")
[ ${#UIS[@]} -gt 0 ] || UIS=(acme classic spa)
cd "$(dirname "$0")/.."
APBOT=$BUILD/apbot
SIM=$BUILD/erp-sim
for f in "$APBOT" "$SIM"; do
  [ -x "$f" ] || { echo "demo: $f is missing; run 'make' first" >&2; exit 1; }
done
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
unset APBOT_DB APBOT_ERP_URL

SIM_PID=
stop_sim() {
  if [ -n "$SIM_PID" ] && kill -0 "$SIM_PID" 2>/dev/null; then
    kill "$SIM_PID" 2>/dev/null || true
    wait "$SIM_PID" 2>/dev/null || true
  fi
  SIM_PID=
}
trap stop_sim EXIT
trap 'stop_sim; exit 130' INT TERM

# demo_ui UI: the whole job against one user interface; sets FAILED=1 on a broken invariant.
FAILED=0
demo_ui() {
local UI=$1
local FLOW=flows/$UI.xml
local OUT=out/demo/$UI
rm -rf "$OUT"
mkdir -p "$OUT"
local DB=$OUT/queue.db

echo
echo "######## the $UI ERP ($FLOW)"
echo "== starting the simulated ERP (month-end scenario, seed 7, --ui $UI)"
"$SIM" --port 0 --ui "$UI" --scenario fixtures/scenarios/month-end.scn --admin --seed 7 \
  >"$OUT/erp-sim.out" 2>"$OUT/erp-sim.err" &
SIM_PID=$!
URL=
for _ in $(seq 1 100); do
  line=$(head -n 1 "$OUT/erp-sim.out" 2>/dev/null || true)
  case "$line" in
    "listening on "*) URL=${line#listening on }; break ;;
  esac
  kill -0 "$SIM_PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$URL" ] || { echo "demo: erp-sim did not start:" >&2; cat "$OUT/erp-sim.err" >&2; exit 1; }
echo "   $URL"

# enqueue FILE EXPECTED_EXIT...: runs apbot enqueue and says whether the exit was expected.
enqueue() {
  local file=$1; shift
  local rc=0
  "$APBOT" --db "$DB" enqueue --vendors fixtures/invoices/vendors.csv "$file" \
    >"$OUT/enqueue-$(basename "$file" .csv).log" 2>&1 || rc=$?
  tail -n 1 "$OUT/enqueue-$(basename "$file" .csv).log" | sed 's/^/   /'
  for want in "$@"; do [ "$rc" = "$want" ] && return 0; done
  echo "demo: apbot enqueue $file exited $rc (expected $*)" >&2
  return 1
}
echo "== queueing month-end.csv (contains refused lines: exit 3 expected)"
enqueue fixtures/invoices/month-end.csv 3 0
echo "== queueing month-end-resubmit.csv (the same invoices again: already queued)"
enqueue fixtures/invoices/month-end-resubmit.csv 0 3
echo "== queueing month-end-conflict.csv (same invoice, other content: refused, exit 3)"
enqueue fixtures/invoices/month-end-conflict.csv 3

local run_rc=0
if [ -t 2 ]; then
  echo "== apbot run --until-empty (progress below; warnings and errors scroll above it)"
  "$APBOT" --db "$DB" run --flow "$FLOW" --erp "$URL" --until-empty --max-seconds 900 \
    || run_rc=$?
else
  echo "== apbot run --until-empty (log: $OUT/run.log)"
  "$APBOT" --db "$DB" run --flow "$FLOW" --erp "$URL" --until-empty --max-seconds 900 \
    2>"$OUT/run.log" || run_rc=$?
  tail -n 2 "$OUT/run.log" | sed 's/^/   /'
fi

# ---- what the queue says, what the ERP holds --------------------------------------------
"$APBOT" --db "$DB" status --json >"$OUT/status.json"
count() { sed -n "s/^ *\"$1\": *\([0-9]*\).*/\1/p" "$OUT/status.json"; }
"$APBOT" --db "$DB" list --state completed --json --limit 1000000 >"$OUT/completed.json"
curl -fsS "$URL/_sim/ledger.csv" >"$OUT/ledger.csv"
curl -fsS "$URL/_sim/stats" >"$OUT/erp-stats.json"

queued=$(count total)
completed=$(count completed)
bexc=$(count business-exception)
review=$(count manual-review)
pending=$(( $(count new) + $(count checking) + $(count posting) + $(count reconciling) \
            + $(count finishing) ))
reposts=$(sed -n 's/.*"reposts_of_booked": *\([0-9]*\).*/\1/p' "$OUT/erp-stats.json")
reposts=${reposts:-unknown}
# a completed invoice left as a draft (its approval never went through) would be drift
drafts=$(awk -F, 'NR > 1 && $NF == "draft" { d++ } END { print d + 0 }' "$OUT/ledger.csv")
bookings=$(( $(wc -l <"$OUT/ledger.csv") - 1 ))
# reference is the third-to-last ledger column (before booked_at and status), the document
# number the first
dups=$(awk -F, 'NR > 1 { n[$(NF-2)]++ } END { d = 0; for (k in n) if (n[k] > 1) d++; print d }' \
  "$OUT/ledger.csv")
sed -n 's/.*"key":"\([^"]*\)".*"erp_doc":"\([^"]*\)".*/\1 \2/p' "$OUT/completed.json" \
  >"$OUT/completed.txt"
# (the spa UI names a document by its id, the number at the end of the ledger's AP-YYYY-NNNNNN)
missing=$(awk -F'[ ,]' -v ui="$UI" '
  FNR == NR { if (FNR > 1) { d = $1; if (ui == "spa") { sub(/^.*-0*/, "", d) } doc[$(NF-2)] = d }
              next }
  !($1 in doc) || doc[$1] != $2 { m++ } END { print m + 0 }' \
  "$OUT/ledger.csv" "$OUT/completed.txt")

# ---- the day's report, while the ERP is still up ------------------------------------------
report_rc=skipped
if "$APBOT" report --help >/dev/null 2>&1; then
  report_rc=0
  "$APBOT" --db "$DB" report --flow "$FLOW" --erp "$URL" --date "$(date +%F)" \
    --format html --out "$OUT/report.html" >"$OUT/report.log" 2>&1 || report_rc=$?
  "$APBOT" --db "$DB" report --flow "$FLOW" --erp "$URL" --date "$(date +%F)" \
    --format text >"$OUT/report.txt" 2>&1 || true
fi
stop_sim

echo
echo "== summary ($UI)"
printf '  %-42s %8s\n' "invoices queued" "$queued"
printf '  %-42s %8s\n' "completed (booked in the ERP)" "$completed"
printf '  %-42s %8s\n' "business exception (ERP rejected)" "$bexc"
printf '  %-42s %8s\n' "manual review (a human decides)" "$review"
printf '  %-42s %8s\n' "pending" "$pending"
printf '  %-42s %8s\n' "bookings in the ERP's ground truth" "$bookings"
printf '  %-42s %8s\n' "keys booked more than once (must be 0)" "$dups"
printf '  %-42s %8s\n' "completed items not booked (must be 0)" "$missing"
printf '  %-42s %8s\n' "re-posts of a booked invoice (must be 0)" "$reposts"
printf '  %-42s %8s\n' "drafts left unapproved in the ERP" "$drafts"
printf '  %-42s %8s\n' "apbot run exit code" "$run_rc"
printf '  %-42s %8s\n' "apbot report exit code (5 = drift)" "$report_rc"
[ "$report_rc" = skipped ] || echo "  report: $OUT/report.html (text: $OUT/report.txt)"

local fail=0
[ "$dups" = 0 ] || { echo "demo: FAILED: $dups keys booked more than once" >&2; fail=1; }
[ "$missing" = 0 ] || { echo "demo: FAILED: $missing completed items not in the ERP" >&2; fail=1; }
[ "$reposts" = 0 ] || { echo "demo: FAILED: $reposts re-posts of booked invoices" >&2; fail=1; }
[ "$pending" = 0 ] || { echo "demo: FAILED: $pending items still pending" >&2; fail=1; }
[ "$run_rc" = 0 ] || { echo "demo: FAILED: apbot run exited $run_rc" >&2; fail=1; }
[ "$completed" -gt 0 ] || { echo "demo: FAILED: nothing completed" >&2; fail=1; }
[ "$fail" = 0 ] || FAILED=1
}

rm -rf out/demo
for ui in "${UIS[@]}"; do
  demo_ui "$ui"
done
exit "$FAILED"
