#!/usr/bin/env bash
# t_flow_trace.sh - `apbot flow trace` against the erp-sim program, both UIs. Ground truth is
# the simulator's (/_sim/stats, /_sim/ledger.csv, /_sim/lines.csv), never the trace's own word:
# --dry-run sends no committing request and books nothing; the output names every control with
# where its value came from (classic: the account option chosen by label prefix, the buttons
# action=update and action=save, the second line's fields; acme: the line controls added), the
# rule, the capture; a real trace books once, with its lines, approved, and says so; a second one
# finds the booking and posts nothing; a draft the lookup finds gets its follow-up steps (not
# under --dry-run); an account the ERP does not offer is a business exception naming field and
# value (exit 3) with nothing of the step sent; an invoice in a closed period (classic: no Save
# button after update) is a business exception with the rule's reason, no save sent; a wrong
# password is one login, exit 1; the password never shows; the queue database is never
# created. Usage errors exit 2.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC. Needs bash, curl, grep, sed.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
INV=$SRC/fixtures/invoices/good.csv

. "$SRC/tests/lib/harness.sh"
harness_init trace

# start_ui UI [LINE...]: the erp-sim program with that UI on a fast scenario, and the scenario
# lines given.
start_ui() {
    fast_scenario "$work/fast.scn" "${@:2}"
    sim_launch --ui "$1" --scenario "$work/fast.scn"
}

stop_ui() {
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
}

stat() { # KEY: a number from /_sim/stats (the first "KEY":N)
    curl -s --fail "$erp/_sim/stats" | grep -o "\"$1\":[0-9]*" | head -n1 | cut -d: -f2
}
ledger() { curl -s --fail "$erp/_sim/ledger.csv" | tail -n +2; }
lines_of() { curl -s --fail "$erp/_sim/lines.csv" | grep "^$1," || true; }

# block NAME FROM TO: the lines of NAME's output from the first /FROM/ up to the next /TO/
block() { sed -n "/$2/,/$3/p" "$work/$1.out"; }

# What every trace's output must never hold: the password, the user name, a raw ESC.
no_secrets() { # NAME
    expect_no_grep "$1" "$work/$1.out" "acme-demo|clerk"
    if grep -q $'\033' "$work/$1.out" "$work/$1.err"; then fail "$1: a raw ESC in the output"; fi
    [ ! -e "$db" ] || fail "$1: the queue database $db was created"
}

# ---- usage, without an ERP ----------------------------------------------------------------
run help flow trace --help
expect_rc help 0
expect_grep help "$work/help.out" "REALLY POSTED"
expect_grep help "$work/help.out" "--dry-run"
run no_invoice flow trace "$SRC/flows/acme.xml"
expect_rc no_invoice 2
run no_flow flow trace --invoice "$INV"
expect_rc no_flow 2
run bad_n flow trace "$SRC/flows/acme.xml" --invoice "$INV#0"
expect_rc bad_n 2
run bad_opt flow trace "$SRC/flows/acme.xml" --invoice "$INV" --bogus
expect_rc bad_opt 2
run bad_flow flow trace "$SRC/tests/data/flows/bad-regex.xml" --invoice "$INV"
expect_rc bad_flow 1
expect_grep bad_flow "$work/bad_flow.err" "bad-regex.xml:28: rule 'booked': bad pattern"
n_inv=$(tail -n +2 "$INV" | cut -d, -f3 | sort -u | wc -l | tr -d ' ')
run past_end flow trace "$SRC/flows/acme.xml" --invoice "$INV#$((n_inv + 1))" --erp http://127.0.0.1:1
expect_rc past_end 1
expect_grep past_end "$work/past_end.err" "holds $n_inv readable invoices \(0 refused\), not #$((n_inv + 1))"
# An ERP that does not answer: the header (and the key) is printed, the login fails, exit 1.
export APBOT_ERP_USER=clerk APBOT_ERP_PASSWORD=acme-demo
run down flow trace "$SRC/flows/classic.xml" --invoice "$INV#3" --erp http://127.0.0.1:1
expect_rc down 1
expect_grep down "$work/down.out" "invoice JP-5 of 2026-11-05, JPY 13,200"
expect_grep down "$work/down.out" "login failed"
key3=$(sed -n 's/^  key       \(AP1-[A-Z0-9]*\) .*/\1/p' "$work/down.out")
[ -n "$key3" ] || fail "down: no key in the header"
no_secrets down

for ui in acme classic; do
    start_ui "$ui"
    flow=$SRC/flows/$ui.xml
    if [ "$ui" = acme ]; then commit=post; else commit=save; fi

    # ---- --dry-run: everything up to the committing request, which is shown, not sent ----
    run "${ui}_dry" flow trace "$flow" --invoice "$INV" --erp "$erp" --dry-run
    expect_rc "${ui}_dry" 0
    expect_eq "$ui dry: bookings" "$(stat bookings)" 0
    expect_eq "$ui dry: committing requests ($commit)" "$(stat "$commit")" 0
    expect_eq "$ui dry: ledger rows" "$(ledger | wc -l | tr -d ' ')" 0
    out=$work/${ui}_dry.out
    expect_grep "${ui}_dry" "$out" "^== login "
    expect_grep "${ui}_dry" "$out" "result    not-found: "
    expect_grep "${ui}_dry" "$out" "THE COMMITTING STEP"
    expect_grep "${ui}_dry" "$out" "^\[[0-9]+\] POST .* NOT SENT$"
    expect_grep "${ui}_dry" "$out" "^dry run: stopped before the committing step '$commit'"
    expect_grep "${ui}_dry" "$out" "committing requests sent 0"
    expect_no_grep "${ui}_dry" "$out" "COMMITTING REQUEST"
    key=$(sed -n 's/^  key       \(AP1-[A-Z0-9]*\) .*/\1/p' "$out")
    [ -n "$key" ] || fail "$ui dry: no key in the header"
    expect_grep "${ui}_dry" "$out" "= \"$key\" +<- template \\$\\{key\\} \(line [0-9]+\)"
    no_secrets "${ui}_dry"
    if [ "$ui" = classic ]; then
        # two lines: one update round trip each; the account chosen by its label's prefix
        expect_eq "classic dry: updates" "$(stat update)" 2
        expect_grep classic_dry "$out" "account_1 += \"6000--General Expenses\" +<- option chosen by label '6000--General Expenses'; <lines> option=\"label-prefix\" \\$\\{line.gl_account\\}--"
        expect_grep classic_dry "$out" "account_2 += \"6010--Printing and Toner\" +<- option chosen by label"
        expect_grep classic_dry "$out" "amount_2 += \"30.00\" +<- template \\$\\{line.net"
        expect_grep classic_dry "$out" "description_2 += \"Toner\" +<- template"
        expect_grep classic_dry "$out" "rowcount += \"2\" +<- template \\$\\{invoice.line_count\\}"
        expect_grep classic_dry "$out" "action += \"update\" +<- button pressed: <form submit=\"action\" submit-value=\"update\">"
        expect_grep classic_dry "$out" "\(submission 2\)"
        # the request that was not sent carries the save button and the lines the ERP echoed
        block classic_dry "NOT SENT" "^    answer" >"$work/notsent.out"
        expect_grep classic_notsent "$work/notsent.out" "action += \"save\" +<- button pressed: <form submit=\"action\" submit-value=\"save\">"
        expect_grep classic_notsent "$work/notsent.out" "account_2 += \"6010--Printing and Toner\" +<- page default"
        expect_grep classic_dry "$out" "HTTP Basic on it"
        # The sample in docs/writing-flows.md ("Start here") is this very run: every line it
        # shows (elisions aside) is a line of the real output, one-time tokens aside.
        sed -e "s|127.0.0.1:$port|127.0.0.1:8080|g" -e "s|$SRC/||g" -e 's/"[0-9a-f]\{24\}"/"TOKEN"/' "$out" >"$work/real.txt"
        awk '/^```text$/ { f = 1; next } /^```$/ { f = 0 } f' "$SRC/docs/writing-flows.md" |
            grep -v '^\$ \|^ *\.\.\.$' | sed 's/"[0-9a-f]\{24\}"/"TOKEN"/' >"$work/doc.txt"
        [ "$(wc -l <"$work/doc.txt")" -ge 30 ] || fail "the guide's sample trace was not found"
        while IFS= read -r l; do
            grep -qxF -- "$l" "$work/real.txt" || fail "the guide's sample trace shows a line the trace does not print: $l"
        done <"$work/doc.txt"
    else
        expect_grep acme_dry "$out" "lineAmount_2 += \"30,00\" +<- added \(not on the page\); <lines>"
        expect_grep acme_dry "$out" "j_password += \"\\*\\*\\*\" +<- template \\$\\{secret.password\\}"
        expect_grep acme_dry "$out" "check += \"Check\" +<- button pressed: <form submit=\"check\">"
        block acme_dry "NOT SENT" "^    answer" >"$work/notsent.out"
        expect_grep acme_notsent "$work/notsent.out" "post += \"Post\" +<- button pressed"
    fi

    # ---- a real trace: booked once, with its lines, every step done ----
    run "${ui}_real" flow trace "$flow" --invoice "$INV" --erp "$erp"
    expect_rc "${ui}_real" 0
    out=$work/${ui}_real.out
    expect_eq "$ui real: bookings" "$(stat bookings)" 1
    expect_eq "$ui real: committing requests ($commit)" "$(stat "$commit")" 1
    row=$(ledger | grep ",$key," || true)
    doc=${row%%,*}
    [ -n "$doc" ] || fail "$ui real: key $key not in the ledger: $(ledger)"
    expect_eq "$ui real: status" "${row##*,}" posted
    expect_eq "$ui real: lines" "$(lines_of "$doc" | cut -d, -f3,4 | tr '\n' ' ')" "6000,100.00 6010,30.00 "
    expect_grep "${ui}_real" "$out" "COMMITTING REQUEST \(sent once\)"
    expect_grep "${ui}_real" "$out" "^completed: booked and every step done"
    expect_grep "${ui}_real" "$out" "^document  $doc$"
    expect_grep "${ui}_real" "$out" "committing requests sent 1$"
    expect_grep "${ui}_real" "$out" "result    confirmed: "
    if [ "$ui" = classic ]; then
        expect_grep classic_real "$out" "rule      'saved' \(line [0-9]+\): outcome saved, matched on status 200 \+ pattern"
        expect_grep classic_real "$out" "captured  doc = \"$doc\""
        expect_grep classic_real "$out" "saved     the ERP holds the document as $doc"
        expect_grep classic_real "$out" "^== step 'approve' \(3 of 3, line [0-9]+\): a follow-up step"
        # the approve is sent by the document's id alone: no edit page fetched for it
        expect_grep classic_real "$out" "^      id     = \"$doc\" +<- the step's <send>"
        expect_grep classic_real "$out" "^      action = \"approve\" +<- the step's <send>"
        expect_no_grep classic_real "$out" "GET $erp/ap.pl\?action=edit"
        expect_eq "classic real: approvals" "$(stat approvals)" 1
    else
        expect_grep acme_real "$out" "rule      'posted-banner' \(line [0-9]+\): outcome completed"
    fi
    no_secrets "${ui}_real"

    # ---- again: the lookup finds it; nothing is posted ----
    run "${ui}_again" flow trace "$flow" --invoice "$INV" --erp "$erp"
    expect_rc "${ui}_again" 0
    expect_grep "${ui}_again" "$work/${ui}_again.out" "hit       $doc"
    expect_grep "${ui}_again" "$work/${ui}_again.out" "in the ERP as $doc; nothing was posted"
    expect_eq "$ui again: bookings" "$(stat bookings)" 1
    expect_eq "$ui again: committing requests" "$(stat "$commit")" 1
    expect_eq "$ui again: reposts_of_booked" "$(stat reposts_of_booked)" 0

    if [ "$ui" = classic ]; then
        # ---- a draft carrying the key: the follow-up steps, never a post ----
        curl -s --fail -X POST "$erp/_sim/book" --data-urlencode vendor_id=100003 \
            --data-urlencode invoice_number=JP-5 --data-urlencode invoice_date=2026-11-05 \
            --data-urlencode currency=JPY --data-urlencode amount=13200 \
            --data-urlencode "reference=$key3" --data-urlencode status=draft >"$work/draft.doc"
        draft=$(cat "$work/draft.doc")
        run draft_dry flow trace "$flow" --invoice "$INV#3" --erp "$erp" --dry-run
        expect_rc draft_dry 0
        expect_grep draft_dry "$work/draft_dry.out" "hit       $draft, .*status draft.*\(saved, not finished\)"
        expect_grep draft_dry "$work/draft_dry.out" "not under --dry-run"
        expect_eq "draft dry: approvals" "$(stat approvals)" 1
        run draft_real flow trace "$flow" --invoice "$INV#3" --erp "$erp"
        expect_rc draft_real 0
        expect_grep draft_real "$work/draft_real.out" "^== step 'approve' "
        expect_no_grep draft_real "$work/draft_real.out" "^== step '(enter|save)' "
        expect_eq "draft real: approvals" "$(stat approvals)" 2
        expect_eq "draft real: saves" "$(stat save)" 1
        expect_eq "draft real: status" "$(ledger | grep "^$draft," | sed 's/.*,//')" posted

        # ---- an account the ERP does not offer: a business exception, nothing sent ----
        printf '%s\n' 'vendor_id,vendor_name,invoice_number,invoice_date,currency,line_description,line_gl_account,line_net,line_tax' \
            '100001,Acme,UO-1,2026-11-03,EUR,Thing,7000,10.00,1.90' >"$work/unknown.csv"
        updates=$(stat update)
        run unknown flow trace "$flow" --invoice "$work/unknown.csv" --erp "$erp"
        expect_rc unknown 3
        expect_grep unknown "$work/unknown.out" "the G/L account 7000 is not one this ERP accepts \\(field account_1\\)"
        expect_grep unknown "$work/unknown.out" "^business-exception: "
        expect_grep unknown "$work/unknown.out" "^\[[0-9]+\] POST .* NOT SENT"
        expect_eq "unknown: updates" "$(stat update)" "$updates"
        expect_eq "unknown: bookings" "$(stat bookings)" 2

        # ---- a wrong password: one login, refused, exit 1 ----
        logins=$(stat login)
        APBOT_ERP_PASSWORD=wrong-password run refused flow trace "$flow" --invoice "$INV" --erp "$erp"
        expect_rc refused 1
        expect_grep refused "$work/refused.out" "^login REFUSED"
        expect_grep refused "$work/refused.out" "rule      'bad-credentials'"
        expect_no_grep refused "$work/refused.out" "wrong-password"
        expect_eq "refused: logins" "$(stat login)" $((logins + 1))
    fi
    stop_ui
done

# ---- a closed period: update answers without its Save button; the rule says why ----
# (classic, books closed through October): a business exception with the rule's reason, the
# save not sent, nothing booked - not "the form changed".
start_ui classic 'closed_to = 2026-10-31'
printf '%s\n' 'vendor_id,vendor_name,invoice_number,invoice_date,currency,line_description,line_gl_account,line_net,line_tax' \
    '100001,Acme,OCT-1,2026-10-30,EUR,Thing,6000,10.00,1.90' >"$work/closed.csv"
run closed flow trace "$SRC/flows/classic.xml" --invoice "$work/closed.csv" --erp "$erp"
expect_rc closed 3
expect_grep closed "$work/closed.out" "^business-exception: "
expect_grep closed "$work/closed.out" "^reason +The invoice date is in a closed period$"
expect_grep closed "$work/closed.out" "^exchanges [0-9]+, committing requests sent 0$"
expect_grep closed "$work/closed.out" "rule 'period-closed' says why"
expect_no_grep closed "$work/closed.out" "the form changed"
expect_eq "closed: updates" "$(stat update)" 1
expect_eq "closed: saves" "$(stat save)" 0
expect_eq "closed: bookings" "$(stat bookings)" 0
no_secrets closed
stop_ui

harness_finish "flow trace"
