#!/usr/bin/env node
// serve_drive.js - drives headless Chromium through the review page (apbot serve) the way a
// clerk would, for tests/t_serve.sh. It speaks the DevTools protocol over a pipe
// (--remote-debugging-pipe: file descriptors 3 and 4, NUL-separated JSON), so it needs nothing
// but node and Debian's chromium: no npm package, no websocket.
//
// Input (environment): CHROMIUM, SERVE_URL, SHOTS (directory for screenshots), PROFILE (a
// fresh user-data dir), ITEM_POSTED, ITEM_REQUEUE, ITEM_REJECT, ITEM_HOSTILE (item ids),
// RIGHT_DOC, WRONG_DOC, BASIC_URL and BASIC_PASSWORD (a second server that wants HTTP Basic).
// Every check prints "ok: ..." or "FAIL: ..."; the exit code is the number of failures (capped).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');

const env = (k) => {
    const v = process.env[k];
    if (!v) {
        console.error(`serve_drive: ${k} is not set`);
        process.exit(100);
    }
    return v;
};
const CHROMIUM = env('CHROMIUM');
const BASE = env('SERVE_URL');
const SHOTS = env('SHOTS');
const PROFILE = env('PROFILE');
const ID = {
    posted: env('ITEM_POSTED'),
    requeue: env('ITEM_REQUEUE'),
    reject: env('ITEM_REJECT'),
    hostile: env('ITEM_HOSTILE'),
};
const RIGHT_DOC = env('RIGHT_DOC');
const WRONG_DOC = env('WRONG_DOC');
const BASIC_URL = env('BASIC_URL');
const BASIC_PASSWORD = env('BASIC_PASSWORD');

let fails = 0;
const ok = (what) => console.log(`ok: ${what}`);
const fail = (what) => {
    console.log(`FAIL: ${what}`);
    fails++;
};
const check = (cond, what, detail) => (cond ? ok(what) : fail(detail ? `${what}: ${detail}` : what));

// ---- the DevTools protocol over a pipe ---------------------------------------------------
const browser = spawn(
    CHROMIUM,
    [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
        `--user-data-dir=${PROFILE}`, '--remote-debugging-pipe', '--window-size=1280,1000',
        'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
browser.stderr.on('data', () => {});
let inbuf = Buffer.alloc(0);
let nextId = 0;
const pending = new Map();
const listeners = [];
browser.stdio[4].on('data', (chunk) => {
    inbuf = Buffer.concat([inbuf, chunk]);
    let i;
    while ((i = inbuf.indexOf(0)) >= 0) {
        const msg = JSON.parse(inbuf.subarray(0, i).toString('utf8'));
        inbuf = inbuf.subarray(i + 1);
        if (msg.id && pending.has(msg.id)) {
            const p = pending.get(msg.id);
            pending.delete(msg.id);
            if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
            else p.resolve(msg.result);
        } else if (msg.method) {
            for (const l of listeners.slice()) l(msg);
        }
    }
});
function send(method, params = {}, sessionId) {
    const id = ++nextId;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    browser.stdio[3].write(JSON.stringify(msg) + '\0');
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
// Resolves on the first event `method` of session sid that pred accepts (20 s at most).
function waitEvent(sid, method, pred = () => true, ms = 20000) {
    return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
            listeners.splice(listeners.indexOf(l), 1);
            reject(new Error(`timeout waiting for ${method}`));
        }, ms);
        const l = (msg) => {
            if (msg.sessionId === sid && msg.method === method && pred(msg.params)) {
                clearTimeout(t);
                listeners.splice(listeners.indexOf(l), 1);
                resolve(msg.params);
            }
        };
        listeners.push(l);
    });
}

// A tab: navigate, evaluate, click-and-wait, screenshot; the document's HTTP status.
class Tab {
    static async open() {
        const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
        const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
        const t = new Tab(sessionId);
        await send('Page.enable', {}, sessionId);
        await send('Network.enable', {}, sessionId);
        listeners.push((msg) => {
            if (msg.sessionId === sessionId && msg.method === 'Network.responseReceived' &&
                msg.params.type === 'Document')
                t.status = msg.params.response.status;
        });
        return t;
    }
    constructor(sid) {
        this.sid = sid;
        this.status = 0;
    }
    async goto(url) {
        const loaded = waitEvent(this.sid, 'Page.loadEventFired');
        this.status = 0;
        await send('Page.navigate', { url }, this.sid);
        await loaded;
    }
    async eval(expr) {
        const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true }, this.sid);
        if (r.exceptionDetails) throw new Error(`evaluate ${expr}: ${r.exceptionDetails.text}`);
        return r.result.value;
    }
    // Runs expr (which submits a form) and waits for the next page.
    async submit(expr) {
        const loaded = waitEvent(this.sid, 'Page.loadEventFired');
        this.status = 0;
        await this.eval(expr);
        await loaded;
    }
    async shot(name) {
        const r = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true },
                             this.sid);
        fs.writeFileSync(path.join(SHOTS, name), Buffer.from(r.data, 'base64'));
    }
    text(sel) {
        return this.eval(`(document.querySelector(${JSON.stringify(sel)}) || {}).textContent || ''`);
    }
}

// Fills a decision form (action: posted, requeue, reject) and presses its button.
function decideExpr(action, fields) {
    const sets = Object.entries(fields)
        .map(([k, v]) => `f.querySelector('[name=${k}]').value = ${JSON.stringify(v)};`)
        .join(' ');
    return `(() => { const f = document.getElementById('form-${action}'); ${sets}
             f.querySelector('button').click(); return true; })()`;
}

async function main() {
    fs.mkdirSync(SHOTS, { recursive: true });
    await new Promise((r) => setTimeout(r, 300));
    const tab = await Tab.open();

    // ---- Today ---------------------------------------------------------------------------
    await tab.goto(`${BASE}/`);
    check(tab.status === 200, 'today: HTTP 200', `got ${tab.status}`);
    check((await tab.text('h1')).startsWith('Today'), 'today: heading');
    check((await tab.text('#state-manual-review')) === '3', 'today: three manual-review items',
          await tab.text('#state-manual-review'));
    check((await tab.text('#state-business-exception')) === '2', 'today: two business exceptions');
    check(await tab.eval(`!!document.querySelector('#chart-day rect.bar')`),
          'today: the day\'s chart has bars');
    check((await tab.text('#money-EUR-received-day')) !== '', 'today: money per currency');
    check(await tab.eval(`document.scripts.length === 0`), 'today: no script at all');
    await tab.shot('today.png');

    // ---- the review queue -----------------------------------------------------------------
    await tab.goto(`${BASE}/queue`);
    const order = await tab.eval(`[...document.querySelectorAll('#queue tr.item')].map(r => r.dataset.id)`);
    check(JSON.stringify(order) === JSON.stringify([ID.posted, ID.requeue, ID.reject]),
          'queue: manual-review items, oldest first', JSON.stringify(order));
    await tab.shot('queue.png');
    // the filter form, used as a clerk would: type a vendor, press Filter
    await tab.submit(`(() => { document.getElementById('f-vendor').value = 'nobody-like-this';
                       document.querySelector('form.filters button').click(); return 1; })()`);
    check((await tab.eval(`location.search`)).includes('vendor=nobody-like-this'),
          'queue: the filter is a GET form');
    check(await tab.eval(`document.querySelectorAll('#queue tr.item').length === 0`),
          'queue: a vendor filter that matches nothing');
    await tab.goto(`${BASE}/queue?tab=exceptions&reason=E102`);
    const exc = await tab.eval(`[...document.querySelectorAll('#queue tr.item')].map(r => r.dataset.id)`);
    check(JSON.stringify(exc) === JSON.stringify([ID.hostile]), 'exceptions: filtered by reason',
          JSON.stringify(exc));
    await tab.goto(`${BASE}/queue?tab=exceptions`);
    check(await tab.eval(`document.querySelectorAll('#queue tr.item').length === 2`),
          'exceptions: both business exceptions');
    await tab.shot('exceptions.png');

    // ---- escaping: a vendor and an ERP message with markup and script --------------------
    await tab.goto(`${BASE}/item/${ID.hostile}`);
    check(await tab.eval(`document.querySelectorAll('script').length === 0`),
          'hostile item: no script element in the page');
    check(await tab.eval(`document.querySelectorAll('main b, main i').length === 0`),
          'hostile item: no markup from the invoice or the ERP became elements');
    check((await tab.text('#vendor-name')) === '<script>alert(1)</script> & Co',
          'hostile item: the vendor name shown as text', await tab.text('#vendor-name'));
    check((await tab.eval(`[...document.querySelectorAll('pre.excerpt')].map(p => p.textContent).join('\\n')`))
              .includes('E102: Vendor <b>V</b><script>x()</script> does not exist.'),
          'hostile item: the ERP message shown as text in the evidence');
    check(!(await tab.eval(`document.body.innerText`)).includes('acme-demo'),
          'hostile item: no ERP password on the page');
    await tab.shot('item-hostile.png');

    // ---- posted as DOC: the wrong document is refused with the ERP's evidence -------------
    await tab.goto(`${BASE}/item/${ID.posted}`);
    check(tab.status === 200, 'posted item: HTTP 200');
    await tab.shot('item-review.png');
    await tab.submit(decideExpr('posted', { doc: WRONG_DOC, reviewer: 'alice', note: 'the clerk says so' }));
    check(tab.status === 409, 'wrong document: HTTP 409',
          `got ${tab.status}: ${await tab.text('#message')}`);
    const refused = await tab.text('#verdict');
    check(refused.includes('Refused') && refused.includes(`not ${WRONG_DOC}`),
          'wrong document: refused, naming the ERP\'s document', refused);
    check(await tab.eval(`!!document.querySelector('#verification pre.excerpt')`),
          'wrong document: the ERP\'s answer shown as evidence');
    check((await tab.text('#item-state')) === 'manual-review', 'wrong document: nothing recorded');
    await tab.shot('posted-refused.png');
    // the right document, from the page the refusal answered with
    await tab.submit(decideExpr('posted', { doc: RIGHT_DOC, reviewer: 'alice', note: 'ticket 42' }));
    check(tab.status === 200, 'right document: HTTP 200', `got ${tab.status}`);
    const done = await tab.text('#verdict');
    check(done.includes('manual-review -> completed by operator:alice') &&
              done.includes('verified in the ERP'),
          'right document: verified and recorded', done);
    check((await tab.text('#item-state')) === 'completed', 'right document: the item is completed');
    check((await tab.eval(`[...document.querySelectorAll('#timeline td.actor')].map(t => t.textContent)`))
              .includes('operator:alice'),
          'right document: audited in the timeline');
    await tab.shot('posted-done.png');

    // ---- the optimistic check: a decision from a page that is no longer current ----------
    const stale = await Tab.open();
    await stale.goto(`${BASE}/item/${ID.reject}`);
    await tab.goto(`${BASE}/item/${ID.reject}`);
    await tab.submit(decideExpr('reject', { reason: 'duplicate of an earlier invoice', reviewer: 'carol',
                                            note: 'vendor confirmed by phone' }));
    check(tab.status === 200 && (await tab.text('#item-state')) === 'business-exception',
          'reject: recorded', await tab.text('#verdict'));
    await tab.shot('rejected.png');
    await stale.submit(decideExpr('requeue', { reviewer: 'dave', note: 'try again' }));
    check(stale.status === 409, 'stale page: HTTP 409', `got ${stale.status}`);
    check((await stale.text('#verdict')).includes('changed since you saw it'),
          'stale page: refused as changed', await stale.text('#verdict'));
    check((await stale.text('#item-state')) === 'business-exception',
          'stale page: the item as it is now');
    await stale.shot('stale-refused.png');

    // ---- requeue ------------------------------------------------------------------------------
    await tab.goto(`${BASE}/item/${ID.requeue}`);
    await tab.submit(decideExpr('requeue', { reviewer: 'bob', note: 'wrong booking reversed' }));
    check(tab.status === 200 && (await tab.text('#item-state')) === 'new',
          'requeue: recorded, the item is new', await tab.text('#verdict'));

    // ---- CSRF ---------------------------------------------------------------------------------
    // a forged token on the page itself
    await tab.goto(`${BASE}/item/${ID.hostile}`);
    await tab.submit(`(() => { const f = document.getElementById('form-requeue');
        f.querySelector('[name=csrf]').value = '0'.repeat(64);
        f.querySelector('[name=reviewer]').value = 'mallory';
        f.querySelector('[name=note]').value = 'x';
        f.querySelector('button').click(); return 1; })()`);
    check(tab.status === 403, 'csrf: a wrong token is refused (403)', `got ${tab.status}`);
    // a form on another site that posts here
    await tab.goto(`data:text/html,<form id=f method=post action="${BASE}/item/${ID.hostile}/decide">` +
                   '<input name=csrf value=x><input name=version value=1><input name=action value=requeue>' +
                   '<input name=reviewer value=mallory><input name=note value=x></form>');
    await tab.submit(`document.getElementById('f').submit(), 1`);
    check(tab.status === 403, 'csrf: a post from another site is refused (403)', `got ${tab.status}`);
    await tab.goto(`${BASE}/item/${ID.hostile}`);
    check((await tab.text('#item-state')) === 'business-exception', 'csrf: nothing was recorded');

    // ---- HTTP Basic ---------------------------------------------------------------------------
    const guarded = await Tab.open();
    await guarded.goto(`${BASIC_URL}/`);
    check(guarded.status === 401, 'basic: without the password, 401', `got ${guarded.status}`);
    check(!(await guarded.eval(`document.body.innerText`)).includes('Today,'),
          'basic: nothing of the queue without the password');
    await send('Network.setExtraHTTPHeaders',
               { headers: { Authorization: 'Basic ' + Buffer.from('wrong:wrong-password').toString('base64') } },
               guarded.sid);
    await guarded.goto(`${BASIC_URL}/`);
    check(guarded.status === 401, 'basic: a wrong password, 401', `got ${guarded.status}`);
    await send('Network.setExtraHTTPHeaders',
               { headers: { Authorization: 'Basic ' + Buffer.from('lead:' + BASIC_PASSWORD).toString('base64') } },
               guarded.sid);
    await guarded.goto(`${BASIC_URL}/`);
    check(guarded.status === 200 && (await guarded.text('h1')).startsWith('Today'),
          'basic: with the password, the page');
    await guarded.shot('basic-auth.png');

    await send('Browser.close').catch(() => {});
}

main()
    .catch((e) => {
        fail(`driver: ${e.message}`);
    })
    .finally(() => {
        try { browser.kill('SIGKILL'); } catch (e) { /* gone */ }
        process.exit(Math.min(fails, 99));
    });
