#!/usr/bin/env bash
# t_doc_flows.sh - the flow examples in docs/writing-flows.md are real. Every ```xml block is
# either a whole flow (it must pass `apbot flow check`) or a piece of a bundled flow: with XML
# comments dropped and white space collapsed, each of its parts between "..." elisions must occur
# in flows/acme.xml, flows/classic.xml or flows/spa.xml (which t_flow_check keeps valid), so an
# example cannot drift from the flows it quotes. A block marked by the line `<!-- illustration -->` right above
# its fence shows something no bundled flow has and is checked for well-formed parts only.
# Every "FILE.xml:LINE: message" quoted from a file in tests/data/flows/ must be what
# `apbot flow check` says about that file today.
# Env (set by ctest): APBOT_BIN, APBOT_SRC. Needs bash, perl.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
DOC=$SRC/docs/writing-flows.md

. "$SRC/tests/lib/harness.sh"
harness_init docflows

# norm FILE: comments dropped, white space collapsed, on one line
norm() { perl -0777 -pe 's/<!--.*?-->//gs; s/\s+/ /g; s/^ //; s/ $//' "$1"; }
for f in acme classic spa; do norm "$SRC/flows/$f.xml" >"$work/$f.norm"; done

# Split the guide's ```xml blocks into files: block.N (its text) and block.N.line (where it
# starts), block.N.illus when the line above its fence is <!-- illustration -->.
perl -ne '
    BEGIN { $n = 0; $in = 0; $prev = ""; }
    if (!$in && /^\s*```xml\s*$/) {
        $in = 1; $n++;
        open(OUT, ">", "'"$work"'/block.$n") or die;
        open(L, ">", "'"$work"'/block.$n.line") or die; print L "$.\n"; close L;
        if ($prev =~ /^\s*<!-- illustration -->\s*$/) {
            open(I, ">", "'"$work"'/block.$n.illus") or die; close I;
        }
        next;
    }
    if ($in && /^\s*```\s*$/) { $in = 0; close OUT; next; }
    print OUT $_ if $in;
    $prev = $_ if /\S/;
' "$DOC"

blocks=0
whole=0
pieces=0
for b in "$work"/block.[0-9]*; do
    case $b in *.line | *.illus | *.norm | *.xml) continue ;; esac
    blocks=$((blocks + 1))
    line=$(cat "$b.line")
    if grep -q '<flow ' "$b" && grep -q '</flow>' "$b" && ! grep -q '\.\.\.' "$b"; then
        whole=$((whole + 1))
        cp "$b" "$b.xml"
        if out=$("$APBOT_BIN" flow check "$b.xml" 2>&1); then
            ok "writing-flows.md:$line: a whole flow passes flow check"
        else
            fail "writing-flows.md:$line: the flow example does not pass flow check: $out"
        fi
        continue
    fi
    norm "$b" >"$b.norm"
    # the parts between elisions ("..." alone or inside a tag)
    n_parts=0
    while IFS= read -r part; do
        part=$(printf '%s' "$part" | sed 's/^ *//; s/ *$//')
        [ -n "$part" ] || continue
        n_parts=$((n_parts + 1))
        if [ -e "$b.illus" ]; then
            continue
        fi
        if grep -qF -- "$part" "$work/acme.norm" || grep -qF -- "$part" "$work/classic.norm" ||
            grep -qF -- "$part" "$work/spa.norm"; then
            pieces=$((pieces + 1))
        else
            fail "writing-flows.md:$line: not in flows/acme.xml, classic.xml or spa.xml: $part"
        fi
    done < <(perl -pe 's/\.\.\./\n/g; $_ .= "\n"' "$b.norm")
    [ "$n_parts" -gt 0 ] || fail "writing-flows.md:$line: an empty example"
done
[ "$blocks" -ge 20 ] || fail "only $blocks xml examples found in the guide (the extraction broke?)"
ok "$blocks xml examples: $whole whole flow(s), $pieces quoted parts found in the bundled flows"

# The flow check messages the guide quotes from tests/data/flows/.
quoted=0
while IFS= read -r entry; do
    file=${entry%%:*}
    rest=${entry#*:}
    lno=${rest%%:*}
    msg=${rest#*: }
    data=$SRC/tests/data/flows/$(basename "$file")
    [ -e "$data" ] || continue
    quoted=$((quoted + 1))
    "$APBOT_BIN" flow check "$data" >"$work/check.out" 2>&1 || true
    if grep -qF -- "$(basename "$file"):$lno: $msg" "$work/check.out"; then
        ok "quoted message of $(basename "$file"):$lno"
    else
        fail "the guide quotes '$entry', flow check says: $(cat "$work/check.out")"
    fi
done < <(grep -E '^(tests/data/flows/)?[a-z0-9-]+\.xml:[0-9]+: ' "$DOC")
[ "$quoted" -ge 5 ] || fail "only $quoted quoted flow check messages found"

# The round-2 messages the guide quotes for "your file" (my-erp.xml): made from classic.xml
# broken the four ways they describe, each message must be what flow check says.
C=$SRC/flows/classic.xml
sed 's/(?&lt;doc&gt;AP-\\d{4}-\\d{6}) saved as draft/(?\&lt;doc\&gt;\\d*) saved as draft/' "$C" >"$work/r1.xml"
perl -pe 's|<field name="id">\$\{doc\}</field>|<field name="id">0</field>|' "$C" >"$work/r2.xml"
sed '/<finished column/d' "$C" >"$work/r3.xml"
# the approve as a form on its page, with a field no follow-up step can know
perl -0777 -pe 's|<step name="approve">.*?</step>|<step name="approve" get="/ap.pl?action=edit&amp;id=\$\{doc\|url\}"><form xpath="//form[\@name=\x27invoice\x27]" submit="action" submit-value="approve"><field name="token">\$\{capture.token\}</field></form></step>|s' "$C" >"$work/r4.xml"
: >"$work/r.out"
for r in r1 r2 r3 r4; do
    "$APBOT_BIN" flow check "$work/$r.xml" >>"$work/r.out" 2>&1 && fail "$r.xml: flow check passed"
done
mine=0
while IFS= read -r entry; do
    mine=$((mine + 1))
    msg=${entry#my-erp.xml:*: }
    if grep -qF -- ": $msg" "$work/r.out"; then
        ok "quoted message '${msg:0:40}...'"
    else
        fail "the guide quotes '$entry', flow check says: $(cat "$work/r.out")"
    fi
done < <(grep -E '^my-erp\.xml:[0-9]+: ' "$DOC")
[ "$mine" -eq 4 ] || fail "$mine my-erp.xml messages quoted, want the 4 checked here"

harness_finish "writing-flows.md example"
