#!/usr/bin/env bash
# t_reviewer.sh - `apbot reviewer` from the outside: the reviewers file made, changed and listed
# without an editor. A password comes from standard input (one line) or the terminal (twice,
# not echoed: driven through script(1)'s pseudo-terminal), never from the command line; the
# file is 0600, holds only hashes (yescrypt), and is refused when others may read it; a login
# taken (in any case) or unknown is refused with exit 3; every command names its file by
# --file or APBOT_REVIEWERS.
# Env (set by ctest): APBOT_BIN, APBOT_SRC.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$SRC/tests/lib/harness.sh"
harness_init reviewer
rv=$work/reviewers
pw_alice="alice's long password"

# rv_run NAME [STDIN] ARGS...: apbot reviewer with --file $rv, stdin from the text given
rv_run() {
    local name=$1 input=$2
    shift 2
    rc=0
    printf '%s' "$input" | "$APBOT_BIN" reviewer "$@" --file "$rv" \
        >"$work/$name.out" 2>"$work/$name.err" || rc=$?
}

rv_run add_alice "$pw_alice"$'\n' add alice --role reviewer --name "Alice Example: AP"
expect_rc add_alice 0
expect_eq "mode of a new file" "$(stat -c %a "$rv")" 600
expect_grep file "$rv" '^alice:reviewer:\$y\$[^:]+:Alice Example: AP$'
expect_no_grep file "$rv" "long password"
rv_run add_vera "" add vera --role viewer --no-password
expect_rc add_vera 0
rv_run add_vera_again "" add VERA --role reviewer --no-password
expect_rc add_vera_again 3
expect_grep add_vera_again "$work/add_vera_again.err" "vera is already in"
rv_run add_short "short pw"$'\n' add bob --role reviewer
expect_rc add_short 2
expect_grep add_short "$work/add_short.err" "12 characters at least"
rv_run add_none "" add bob --role reviewer
expect_rc add_none 2
expect_grep add_none "$work/add_none.err" "no password on standard input"
rv_run add_argv "" add bob --role reviewer --password "bob's long password"
expect_rc add_argv 2
expect_grep add_argv "$work/add_argv.err" "never given on the command line"
rv_run add_norole "" add bob --no-password
expect_rc add_norole 2
rv_run add_badrole "" add bob --role admin --no-password
expect_rc add_badrole 2
rv_run add_badname "" add "bob smith" --role viewer --no-password
expect_rc add_badname 2
expect_no_grep file "$rv" '^bob'

rv_run list "" list
expect_rc list 0
expect_grep list "$work/list.out" '^alice +reviewer +yescrypt +Alice Example: AP$'
expect_grep list "$work/list.out" '^vera +viewer +none +vera$'
expect_no_grep list "$work/list.out" '\$y\$'
rv_run list_json "" list --json
expect_grep list_json "$work/list_json.out" '"login": "alice", "display_name": "Alice Example: AP", "role": "reviewer", "password": "yescrypt"'
if /usr/bin/python3 -c 'import json, sys; l = json.load(open(sys.argv[1])); assert [r["login"] for r in l] == ["alice", "vera"], l' "$work/list_json.out" 2>"$work/list_json.py"; then
    ok "list --json: a JSON array of both reviewers"
else
    fail "list --json is not the JSON array of both reviewers: $(cat "$work/list_json.py")"
fi

rv_run set_vera "" set vera --role reviewer --name "Vera V."
expect_rc set_vera 0
expect_grep set "$rv" '^vera:reviewer:\*:Vera V\.$'
rv_run set_nothing "" set vera
expect_rc set_nothing 2
rv_run set_unknown "" set nobody --role viewer
expect_rc set_unknown 3

# passwd from standard input: a new salted hash
before=$(grep '^alice:' "$rv")
rv_run passwd "alice's newer password"$'\n' passwd alice
expect_rc passwd 0
after=$(grep '^alice:' "$rv")
[ "$before" != "$after" ] && ok "passwd: a new hash" || fail "passwd: the hash did not change"
# the same password again gives another hash (a fresh salt)
rv_run passwd2 "alice's newer password"$'\n' passwd alice
[ "$after" != "$(grep '^alice:' "$rv")" ] && ok "passwd: salted" || fail "passwd: same hash twice"

# passwd from the terminal: asked twice, never echoed; two different answers change nothing
if command -v script >/dev/null; then
    tty_pw="typed at the terminal"
    before=$(grep '^alice:' "$rv")
    (sleep 1; printf '%s\n' "$tty_pw"; sleep 1; printf '%s\n' "$tty_pw") |
        timeout 30 script -qec "'$APBOT_BIN' reviewer passwd alice --file '$rv'" /dev/null \
        >"$work/tty.out" 2>&1 || true
    expect_grep tty "$work/tty.out" "New password for alice"
    expect_grep tty "$work/tty.out" "The same again"
    expect_grep tty "$work/tty.out" "new password for alice: reviewer"
    expect_no_grep tty "$work/tty.out" "$tty_pw"
    [ "$before" != "$(grep '^alice:' "$rv")" ] && ok "tty: a new hash" || fail "tty: no new hash"
    before=$(grep '^alice:' "$rv")
    (sleep 1; printf 'first answer given\n'; sleep 1; printf 'second answer given\n') |
        timeout 30 script -qec "'$APBOT_BIN' reviewer passwd alice --file '$rv'" /dev/null \
        >"$work/tty2.out" 2>&1 || true
    expect_grep tty2 "$work/tty2.out" "the two passwords differ"
    expect_eq "tty: nothing changed" "$(grep '^alice:' "$rv")" "$before"
else
    echo "SKIP: no script(1): the terminal part did not run"
fi

rv_run remove "" remove VERA
expect_rc remove 0
expect_no_grep file "$rv" '^vera'
rv_run remove_again "" remove vera
expect_rc remove_again 3

# the file by APBOT_REVIEWERS; none at all is a usage error
rc=0
APBOT_REVIEWERS=$rv "$APBOT_BIN" reviewer list >"$work/env.out" 2>"$work/env.err" || rc=$?
expect_rc env 0
expect_grep env "$work/env.out" '^alice '
rc=0
env -u APBOT_REVIEWERS "$APBOT_BIN" reviewer list >"$work/nofile.out" 2>"$work/nofile.err" || rc=$?
expect_rc nofile 2
expect_grep nofile "$work/nofile.err" "APBOT_REVIEWERS"

# readable by others: refused, and so is a line apbot cannot read
chmod 644 "$rv"
rv_run open_mode "" list
expect_rc open_mode 1
expect_grep open_mode "$work/open_mode.err" "may read it \(mode 644\)"
chmod 600 "$rv"
echo 'mallory:root:*:Mallory' >>"$rv"
rv_run bad_line "" list
expect_rc bad_line 1
expect_grep bad_line "$work/bad_line.err" "reviewers:[0-9]+: the role is neither viewer nor reviewer"
rv_run bad_line_add "" add bob --role viewer --no-password
expect_rc bad_line_add 1
expect_no_grep file "$rv" '^bob'
[ "$(find "$work" -name 'reviewers.*.tmp' | wc -l)" = 0 ] && ok "no temporary file left" ||
    fail "a temporary file was left"

harness_finish reviewer
