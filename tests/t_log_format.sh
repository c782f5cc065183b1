#!/usr/bin/env bash
# t_log_format.sh - apbot run --log-format json: every log line is one JSON object (parsed by
# node's JSON.parse, not by a pattern), with the fields of the key=value line in the same
# order (time, level, then item, key, from, to, event, ..., or msg, detail); one line per state
# change, their targets the states the queue ends in (test_runlog holds the escaping of
# quotes, backslashes, line breaks and bytes that are not UTF-8 to its table). The text format
# is unchanged: a second run's key=value lines name the same fields. A wrong format is a usage
# error.
# Env (set by ctest): APBOT_BIN, ERPSIM_BIN, APBOT_SRC. Skipped without node.
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
: "${ERPSIM_BIN:?ERPSIM_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}

. "$SRC/tests/lib/harness.sh"
harness_init logformat
if ! command -v node >/dev/null; then
    echo "SKIP: node is absent (make test installs it)"
    exit 0
fi
start_sim

# three invoices; the third names an account the ERP refuses (a business exception whose
# reason is the ERP's message)
cat >"$work/in.csv" <<'EOF'
vendor_id,vendor_name,invoice_number,doc_type,invoice_date,due_date,currency,line_description,line_gl_account,line_net,line_tax,total
100001,"Caf\ ""Zur Post""
GmbH",LOG-1,invoice,2026-11-03,,EUR,Paper,6000,100.00,19.00,119.00
100002,Büro AG,LOG-2,invoice,2026-11-03,,EUR,Toner,6000,10.00,1.90,11.90
100003,Other,LOG-3,invoice,2026-11-03,,EUR,Nothing,1000,10.00,1.90,11.90
EOF
run enqueue enqueue "$work/in.csv"
expect_rc enqueue 0

run usage run --flow "$SRC/flows/acme.xml" --erp "$erp" --log-format yaml
expect_rc usage 2

run json run --flow "$SRC/flows/acme.xml" --erp "$erp" --until-empty --max-seconds 60 \
    --log-format json
expect_rc json 0
run status status --json

node - "$work/json.err" "$work/status.out" <<'EOF' >"$work/check.out" 2>&1 || fail "the JSON lines: $(cat "$work/check.out")"
'use strict';
const fs = require('fs');
const [logPath, statusPath] = process.argv.slice(2);
const lines = fs.readFileSync(logPath, 'utf8').split('\n').filter((l) => l.length > 0);
const status = JSON.parse(fs.readFileSync(statusPath, 'utf8'));
let bad = 0;
const say = (m) => { console.log(m); bad++; };
const finalTo = {};
let transitions = 0;
for (const [i, l] of lines.entries()) {
    let o;
    try { o = JSON.parse(l); } catch (e) { say(`line ${i + 1} is not JSON: ${l}`); continue; }
    const keys = Object.keys(o);
    if (keys[0] !== 'time' || keys[1] !== 'level') say(`line ${i + 1}: starts with ${keys}`);
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(o.time)) say(`line ${i + 1}: time ${o.time}`);
    if (!['info', 'warn', 'error'].includes(o.level)) say(`line ${i + 1}: level ${o.level}`);
    for (const k of keys)
        if (typeof o[k] !== 'string') say(`line ${i + 1}: ${k} is not a string`);
    if ('item' in o) {
        transitions++;
        const want = ['time', 'level', 'item', 'key', 'from', 'to', 'event'];
        if (keys.slice(0, 7).join() !== want.join()) say(`line ${i + 1}: fields ${keys}`);
        finalTo[o.item] = o.to;
    } else if (!('msg' in o)) {
        say(`line ${i + 1}: neither a state change nor a message: ${l}`);
    }
}
const ends = Object.values(finalTo);
const count = (s) => ends.filter((t) => t === s).length;
if (Object.keys(finalTo).length !== 3) say(`state changes of ${Object.keys(finalTo).length} items, want 3`);
if (count('completed') !== status.completed) say(`completed ${count('completed')} vs ${status.completed}`);
if (count('business-exception') !== status['business-exception'])
    say(`business-exception ${count('business-exception')} vs ${status['business-exception']}`);
if (status.completed !== 2 || status['business-exception'] !== 1)
    say(`the queue: ${JSON.stringify(status)}`);
if (!lines.some((l) => JSON.parse(l).msg === 'run stopped')) say('no "run stopped" line');
console.log(`${lines.length} lines, ${transitions} state changes`);
process.exit(bad ? 1 : 0);
EOF
[ -s "$work/check.out" ] && ok "the JSON lines: $(tail -n 1 "$work/check.out")"

# the text format still names the same fields
db=$work/q2.db
run enqueue2 enqueue "$work/in.csv"
run text run --flow "$SRC/flows/acme.xml" --erp "$erp" --until-empty --max-seconds 60
expect_rc text 0
expect_grep text "$work/text.err" '^time=[0-9T:.-]+Z level=info item=[0-9]+ key=AP1-[A-Z0-9]+ from=[a-z-]+ to=[a-z-]+ event=[a-z-]+'
expect_grep text "$work/text.err" '^time=[0-9T:.-]+Z level=info msg="run stopped" detail='

harness_finish log-format
