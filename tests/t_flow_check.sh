#!/usr/bin/env bash
# t_flow_check.sh - `apbot flow check`: acme.xml and classic.xml pass (exit 0, "FILE: ok",
# nothing on stderr); broken flows fail with exit 1 and "FILE:LINE: message" for every problem,
# sorted by line; libxml2 prints nothing of its own; hostile flows (an XPath nested 50,000
# deep, a huge file) are refused without a crash; --help and usage errors behave.
set -u

: "${APBOT_BIN:?APBOT_BIN must name the apbot binary}"
: "${APBOT_SRC:?APBOT_SRC must name the source tree}"

flows="$APBOT_SRC/flows"
data="$APBOT_SRC/tests/data/flows"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# run CMD...: sets out, err, rc
run() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

# The bundled flow is valid.
run "$APBOT_BIN" flow check "$flows/acme.xml"
[ "$rc" -eq 0 ] || fail "acme.xml: exit $rc, output: $out $err"
[ "$out" = "$flows/acme.xml: ok" ] || fail "acme.xml: unexpected output: $out"
[ -z "$err" ] || fail "acme.xml: stderr not empty: $err"

# The classic ERP's draft flow and the test flow with every round-2 element are valid.
for f in "$flows/classic.xml" "$flows/spa.xml" "$data/ok-full.xml"; do
    run "$APBOT_BIN" flow check "$f"
    [ "$rc" -eq 0 ] || fail "$f: exit $rc, output: $out $err"
    [ "$out" = "$f: ok" ] || fail "$f: unexpected output: $out"
    [ -z "$err" ] || fail "$f: stderr not empty: $err"
done

# Round-2 checks through the CLI, each with its line: a saved rule on a step that does not
# commit, a secret in a post field, a completed rule whose document number could be empty,
# a follow-up step that cannot be re-run on the document.
sed -e 's/<rule name="enter-invalid" outcome="rejected"/<rule name="enter-invalid" outcome="saved"/' \
    -e 's/<field name="ref">${key}</<field name="ref">${key}${secret.password}</' \
    -e 's/<step name="approve" get="\/edit?id=${doc|url}">/<step name="approve" get="\/edit">/' \
    "$data/ok-full.xml" >"$tmp/round2.xml"
run "$APBOT_BIN" flow check "$tmp/round2.xml"
[ "$rc" -eq 1 ] || fail "round2: exit $rc (want 1): $out"
l_ref=$(grep -n '<field name="ref">' "$tmp/round2.xml" | cut -d: -f1)
l_rule=$(grep -n '<rule name="enter-invalid"' "$tmp/round2.xml" | cut -d: -f1)
l_step=$(grep -n '<step name="approve"' "$tmp/round2.xml" | cut -d: -f1)
grep -qF "$tmp/round2.xml:$l_ref: field 'ref': \${secret.password} is not available here" \
    "$tmp/out" || fail "round2: secret: $out"
grep -qF "$tmp/round2.xml:$l_rule: rule 'enter-invalid': outcome 'saved' only on the committing step" \
    "$tmp/out" || fail "round2: saved: $out"
grep -qF "$tmp/round2.xml:$l_step: step 'approve': the first step after the committing one" \
    "$tmp/out" || fail "round2: follow-up: $out"
sed -n "s|^$tmp/round2.xml:\([0-9]*\): .*|\1|p" "$tmp/out" | sort -c -n ||
    fail "round2: problems not sorted by line: $out"
[ -z "$err" ] || fail "round2: stderr not empty: $err"

sed -e 's/Saved as (?&lt;doc&gt;D-\\d+)/Saved as (?\&lt;doc\&gt;\\d*)/' "$data/ok-minimal.xml" >"$tmp/emptydoc.xml"
run "$APBOT_BIN" flow check "$tmp/emptydoc.xml"
[ "$rc" -eq 1 ] || fail "emptydoc: exit $rc (want 1): $out"
grep -qF "emptydoc.xml:28: rule 'booked': a completed rule must yield the document number, but its (?<doc>...) group can match the empty string" \
    "$tmp/out" || fail "emptydoc: $out"

# An XPath nested 50,000 deep crashed libxml2's compiler: now refused, no crash.
deep=$(head -c 50000 /dev/zero | tr '\0' '(')1$(head -c 50000 /dev/zero | tr '\0' ')')
sed -e "s|rows=\"//tr\[@class='row'\]\" empty|rows=\"//tr[$deep]\" empty|" "$data/ok-minimal.xml" >"$tmp/deep.xml"
run "$APBOT_BIN" flow check "$tmp/deep.xml"
[ "$rc" -eq 1 ] || fail "deep XPath: exit $rc (want 1, no crash)"
grep -qF "deep.xml:15: lookup table rows: XPath longer than 1024 bytes" "$tmp/out" ||
    fail "deep XPath: $(head -c 300 "$tmp/out")"

# A file far larger than any flow is refused before it is parsed.
{ cat "$data/ok-minimal.xml"; head -c 2000000 /dev/zero | tr '\0' ' '; } >"$tmp/huge.xml"
run "$APBOT_BIN" flow check "$tmp/huge.xml"
[ "$rc" -eq 1 ] || fail "huge: exit $rc (want 1)"
grep -qF "huge.xml: larger than" "$tmp/out" || fail "huge: $out"

# A broken flow: exit 1, the problem with its line, nothing from libxml2 on stderr.
run "$APBOT_BIN" flow check "$data/bad-regex.xml"
[ "$rc" -eq 1 ] || fail "bad-regex.xml: exit $rc (want 1)"
grep -qF "$data/bad-regex.xml:28: rule 'booked': bad pattern: missing closing parenthesis at offset 21" \
    "$tmp/out" || fail "bad-regex.xml: message missing: $out"
[ -z "$err" ] || fail "bad-regex.xml: stderr not empty: $err"

run "$APBOT_BIN" flow check "$data/schema-unknown-element.xml"
[ "$rc" -eq 1 ] || fail "schema: exit $rc (want 1)"
grep -qE "schema-unknown-element\.xml:14: schema: " "$tmp/out" || fail "schema: $out"
[ -z "$err" ] || fail "schema: stderr not empty: $err"

run "$APBOT_BIN" flow check "$data/not-xml.xml"
[ "$rc" -eq 1 ] || fail "not-xml: exit $rc (want 1)"
grep -qE "not-xml\.xml:4: " "$tmp/out" || fail "not-xml: $out"
[ -z "$err" ] || fail "not-xml: stderr not empty: $err"

# Several problems in one file: all reported, sorted by line.
sed -e 's/status="503"/status="6xx"/' -e 's/\${key|url}/${kez|url}/' -e 's/td\[2\]/td[[2/' \
    "$data/ok-minimal.xml" >"$tmp/multi.xml"
run "$APBOT_BIN" flow check "$tmp/multi.xml"
[ "$rc" -eq 1 ] || fail "multi: exit $rc (want 1)"
[ "$(grep -c "^$tmp/multi.xml:[0-9]*: " "$tmp/out")" -eq 3 ] || fail "multi: want 3 problems: $out"
lines=$(sed -n "s|^$tmp/multi.xml:\([0-9]*\): .*|\1|p" "$tmp/out" | tr '\n' ' ')
[ "$lines" = "14 17 30 " ] || fail "multi: lines '$lines', want '14 17 30 '"

# Several files: each reported, exit 1 when any fails.
run "$APBOT_BIN" flow check "$flows/acme.xml" "$data/no-commit.xml" "$data/ok-minimal.xml"
[ "$rc" -eq 1 ] || fail "mixed: exit $rc (want 1)"
grep -qF "$flows/acme.xml: ok" "$tmp/out" || fail "mixed: acme not ok: $out"
grep -qF "$data/ok-minimal.xml: ok" "$tmp/out" || fail "mixed: ok-minimal not ok: $out"
grep -qF "no-commit.xml:20: post: no step has commits=\"true\"" "$tmp/out" || fail "mixed: $out"

# A missing file.
run "$APBOT_BIN" flow check "$tmp/nope.xml"
[ "$rc" -eq 1 ] || fail "missing file: exit $rc (want 1)"
grep -qF "$tmp/nope.xml: cannot open" "$tmp/out" || fail "missing file: $out"

# Help and usage.
run "$APBOT_BIN" flow check --help
[ "$rc" -eq 0 ] || fail "--help: exit $rc"
grep -q "usage: apbot flow check FILE" "$tmp/out" || fail "--help: $out"
run "$APBOT_BIN" flow --help
[ "$rc" -eq 0 ] || fail "flow --help: exit $rc"
run "$APBOT_BIN" flow check
[ "$rc" -eq 2 ] || fail "no file: exit $rc (want 2)"
run "$APBOT_BIN" flow frobnicate
[ "$rc" -eq 2 ] || fail "unknown subcommand: exit $rc (want 2)"
run "$APBOT_BIN" flow check --bogus "$flows/acme.xml"
[ "$rc" -eq 2 ] || fail "unknown option: exit $rc (want 2)"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed" >&2
    exit 1
fi
echo "t_flow_check: ok"
