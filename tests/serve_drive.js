#!/usr/bin/env node
// serve_drive.js - drives headless Chromium through the review page (apbot serve) the way the
// people who work the queue would, for tests/t_serve.sh. It speaks the DevTools protocol over a
// pipe (--remote-debugging-pipe: file descriptors 3 and 4, NUL-separated JSON), so it needs
// nothing but node and Debian's chromium: no npm package, no websocket. Each person signs in
// through the page's own form in a browser context of their own (their own cookies).
//
// Input (environment): CHROMIUM, SERVE_URL (a server with a reviewers file), SHOTS (directory
// for screenshots), PROFILE (a fresh user-data dir), ITEM_POSTED, ITEM_REQUEUE, ITEM_REJECT,
// ITEM_HOSTILE (item ids), RIGHT_DOC, WRONG_DOC, PASSWORDS (JSON: login -> password for alice,
// bob, carol, dave and vera, the viewer), SHARED_URL and SHARED_PASSWORD (a second server with
// one shared password), and TLS_URL (optional: a third one over TLS, whose certificate
// TLS_SPKI pins, and TLS_ITEM, a business exception to requeue there).
// Every check prints "ok: ..." or "FAIL: ..."; the exit code is the number of failures (capped).
'use strict';
const fs = require('fs');
const path = require('path');
const cdp = require(path.join(__dirname, 'lib', 'cdp.js'));

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
const PASSWORDS = JSON.parse(env('PASSWORDS'));
const SHARED_URL = env('SHARED_URL');
const SHARED_PASSWORD = env('SHARED_PASSWORD');
const TLS_URL = process.env.TLS_URL || '';
const TLS_SPKI = process.env.TLS_SPKI || '';
const TLS_ITEM = process.env.TLS_ITEM || '';

let fails = 0;
const ok = (what) => console.log(`ok: ${what}`);
const fail = (what) => {
    console.log(`FAIL: ${what}`);
    fails++;
};
const check = (cond, what, detail) => (cond ? ok(what) : fail(detail ? `${what}: ${detail}` : what));

// ---- the DevTools protocol over a pipe (tests/lib/cdp.js) --------------------------------
const { send, waitEvent, on, close } = cdp.launch({
    chromium: CHROMIUM,
    profile: PROFILE,
    args: [
        '--window-size=1280,1000',
        ...(TLS_SPKI ? [`--ignore-certificate-errors-spki-list=${TLS_SPKI}`] : []),
    ],
});

// A tab: navigate, evaluate, click-and-wait, screenshot; the document's HTTP status and
// response headers (of the last document: after a redirect, the page it landed on). ctx: a
// browser context (its own cookies), or the default one.
class Tab {
    static async open(ctx) {
        const params = { url: 'about:blank' };
        if (ctx) params.browserContextId = ctx;
        const { targetId } = await send('Target.createTarget', params);
        const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
        const t = new Tab(sessionId);
        await send('Page.enable', {}, sessionId);
        await send('Network.enable', {}, sessionId);
        on((msg) => {
            if (msg.sessionId === sessionId && msg.method === 'Network.responseReceived' &&
                msg.params.type === 'Document') {
                t.status = msg.params.response.status;
                t.headers = msg.params.response.headers;
            }
        });
        return t;
    }
    constructor(sid) {
        this.sid = sid;
        this.status = 0;
        this.headers = {};
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
    where() {
        return this.eval('location.pathname');
    }
    // Signs in through the page's form (from wherever the tab is sent to sign in).
    async signIn(base, name, password) {
        await this.goto(`${base}/login`);
        await this.submit(`(() => { document.getElementById('login-name').value = ${JSON.stringify(name)};
            document.getElementById('login-password').value = ${JSON.stringify(password)};
            document.querySelector('#login button').click(); return 1; })()`);
    }
    async signOut() {
        await this.submit(`document.querySelector('#logout button').click(), 1`);
    }
    // The value of the page's cookie as the browser holds it (HttpOnly: not for the page).
    async cookie(base) {
        const { cookies } = await send('Network.getCookies', { urls: [base] }, this.sid);
        return cookies.find((c) => c.name === 'apbot_session');
    }
}

// A person: a browser context of their own, a tab in it, signed in.
async function person(name, base = BASE, password = PASSWORDS[name]) {
    const { browserContextId } = await send('Target.createBrowserContext', {});
    const tab = await Tab.open(browserContextId);
    tab.ctx = browserContextId;
    await tab.signIn(base, name, password);
    return tab;
}

// Fills a decision form (action: posted, requeue, reject) and presses its button.
function decideExpr(action, fields) {
    const sets = Object.entries(fields)
        .map(([k, v]) => `f.querySelector('[name=${k}]').value = ${JSON.stringify(v)};`)
        .join(' ');
    return `(() => { const f = document.getElementById('form-${action}'); ${sets}
             f.querySelector('button').click(); return true; })()`;
}

// The CSP of the last document: present, and without any script source.
function cspChecks(tab, what) {
    const csp = tab.headers['Content-Security-Policy'] || tab.headers['content-security-policy'] || '';
    check(csp.includes("default-src 'none'") && !csp.includes('script-src') &&
              !csp.includes('unsafe-inline'),
          `${what}: Content-Security-Policy forbids every script`, csp);
}

async function main() {
    fs.mkdirSync(SHOTS, { recursive: true });
    await new Promise((r) => setTimeout(r, 300));

    // ---- nobody signed in: the sign-in page, whatever is asked ----------------------------
    const anon = await Tab.open();
    await anon.goto(`${BASE}/item/${ID.posted}`);
    check((await anon.where()) === '/login' && anon.status === 200,
          'not signed in: sent to the sign-in page', `${await anon.where()} ${anon.status}`);
    check(!(await anon.eval(`document.body.innerText`)).includes('Vendor'),
          'not signed in: nothing of the queue');
    check(await anon.eval(`!document.querySelector('input[name=reviewer]')`),
          'sign-in page: no free name field beside the login');
    cspChecks(anon, 'sign-in page');
    await anon.shot('sign-in.png');
    // a wrong password: refused, on the page again
    await anon.submit(`(() => { document.getElementById('login-name').value = 'alice';
        document.getElementById('login-password').value = 'not her password';
        document.querySelector('#login button').click(); return 1; })()`);
    check(anon.status === 401 && (await anon.text('#message')).includes('Wrong name or password'),
          'a wrong password: 401, refused', `${anon.status} ${await anon.text('#message')}`);

    // ---- a forged proxy header from an address that is no trusted proxy -------------------
    const { browserContextId: forgerCtx } = await send('Target.createBrowserContext', {});
    const forger = await Tab.open(forgerCtx);
    await send('Network.setExtraHTTPHeaders', { headers: { 'X-Remote-User': 'alice' } }, forger.sid);
    await forger.goto(`${BASE}/`);
    check((await forger.where()) === '/login', 'forged proxy header: ignored, sent to sign in',
          await forger.where());
    check(!(await forger.eval(`document.body.innerText`)).includes('Today,'),
          'forged proxy header: nothing of the queue');

    // ---- the viewer: sees everything, decides nothing -------------------------------------
    const vera = await person('vera');
    check((await vera.where()) === '/' && (await vera.text('h1')).startsWith('Today'),
          'viewer: signed in, on Today', await vera.where());
    check((await vera.text('#who')).includes('vera, viewer'), 'viewer: the header says who',
          await vera.text('#who'));
    const jar = await vera.cookie(BASE);
    check(jar && jar.httpOnly && jar.sameSite === 'Strict' && !jar.secure && jar.value.length === 64,
          'session cookie: HttpOnly, SameSite=Strict, a fresh server-side id',
          JSON.stringify(jar));
    check((await vera.text('#state-manual-review')) === '3', 'today: three manual-review items',
          await vera.text('#state-manual-review'));
    check((await vera.text('#state-business-exception')) === '2', 'today: two business exceptions');
    check(await vera.eval(`!!document.querySelector('#chart-day rect.bar')`),
          'today: the day\'s chart has bars');
    check((await vera.text('#money-EUR-received-day')) !== '', 'today: money per currency');
    check(await vera.eval(`document.scripts.length === 0`), 'today: no script at all');
    cspChecks(vera, 'today');
    await vera.shot('today.png');

    await vera.goto(`${BASE}/queue`);
    const order = await vera.eval(`[...document.querySelectorAll('#queue tr.item')].map(r => r.dataset.id)`);
    check(JSON.stringify(order) === JSON.stringify([ID.posted, ID.requeue, ID.reject]),
          'queue: manual-review items, oldest first', JSON.stringify(order));
    await vera.shot('queue.png');
    await vera.submit(`(() => { document.getElementById('f-vendor').value = 'nobody-like-this';
                       document.querySelector('form.filters button').click(); return 1; })()`);
    check((await vera.eval(`location.search`)).includes('vendor=nobody-like-this'),
          'queue: the filter is a GET form');
    check(await vera.eval(`document.querySelectorAll('#queue tr.item').length === 0`),
          'queue: a vendor filter that matches nothing');
    await vera.goto(`${BASE}/queue?tab=exceptions&reason=E102`);
    const exc = await vera.eval(`[...document.querySelectorAll('#queue tr.item')].map(r => r.dataset.id)`);
    check(JSON.stringify(exc) === JSON.stringify([ID.hostile]), 'exceptions: filtered by reason',
          JSON.stringify(exc));
    await vera.goto(`${BASE}/queue?tab=exceptions`);
    check(await vera.eval(`document.querySelectorAll('#queue tr.item').length === 2`),
          'exceptions: both business exceptions');
    await vera.shot('exceptions.png');

    await vera.goto(`${BASE}/item/${ID.requeue}`);
    check(vera.status === 200 && (await vera.text('#item-state')) === 'manual-review',
          'viewer: sees the item');
    check(await vera.eval(`!document.querySelector('form.decision') && !document.querySelector('#decide')`),
          'viewer: no decision form is shown');
    check((await vera.text('#readonly')).includes('vera is a viewer'), 'viewer: the page says why',
          await vera.text('#readonly'));
    await vera.shot('viewer-item.png');
    // the viewer forges the form a reviewer would have, with her own valid CSRF token
    await vera.submit(`(() => { const f = document.createElement('form');
        f.method = 'post'; f.action = '/item/${ID.requeue}/decide';
        const add = (n, v) => { const i = document.createElement('input'); i.type = 'hidden';
            i.name = n; i.value = v; f.appendChild(i); };
        add('csrf', document.querySelector('#logout [name=csrf]').value);
        const ver = [...document.querySelectorAll('dl.fields dt')]
            .find((d) => d.textContent === 'Version').nextElementSibling.textContent;
        add('version', ver); add('action', 'requeue'); add('note', 'let me');
        document.body.appendChild(f); f.submit(); return 1; })()`);
    check(vera.status === 403, 'viewer: a decision posted anyway is refused (403)',
          `got ${vera.status}`);
    await vera.goto(`${BASE}/item/${ID.requeue}`);
    check((await vera.text('#item-state')) === 'manual-review', 'viewer: nothing was recorded');

    // ---- a reviewer: escaping, then posted as DOC, refused and accepted --------------------
    const alice = await person('alice');
    check((await alice.text('#who')).includes('Alice Example') &&
              (await alice.text('#who')).includes('alice, reviewer'),
          'reviewer: the header says who', await alice.text('#who'));
    await alice.goto(`${BASE}/item/${ID.hostile}`);
    check(await alice.eval(`document.querySelectorAll('script').length === 0`),
          'hostile item: no script element in the page');
    check(await alice.eval(`document.querySelectorAll('main b, main i').length === 0`),
          'hostile item: no markup from the invoice or the ERP became elements');
    check((await alice.text('#vendor-name')) === '<script>alert(1)</script> & Co',
          'hostile item: the vendor name shown as text', await alice.text('#vendor-name'));
    check((await alice.eval(`[...document.querySelectorAll('pre.excerpt')].map(p => p.textContent).join('\\n')`))
              .includes('E102: Vendor <b>V</b><script>x()</script> does not exist.'),
          'hostile item: the ERP message shown as text in the evidence');
    check(!(await alice.eval(`document.body.innerText`)).includes('acme-demo'),
          'hostile item: no ERP password on the page');
    cspChecks(alice, 'item page');
    await alice.shot('item-hostile.png');

    await alice.goto(`${BASE}/item/${ID.posted}`);
    check(alice.status === 200, 'posted item: HTTP 200');
    check(await alice.eval(`!document.querySelector('[name=reviewer]')`),
          'decision forms: no free "by" field');
    check((await alice.text('#form-posted .signer')).includes('Alice Example (alice)'),
          'decision forms: say whom the decision is recorded as', await alice.text('#form-posted .signer'));
    await alice.shot('item-review.png');
    await alice.submit(decideExpr('posted', { doc: WRONG_DOC, note: 'the clerk says so' }));
    check(alice.status === 409, 'wrong document: HTTP 409',
          `got ${alice.status}: ${await alice.text('#message')}`);
    const refused = await alice.text('#verdict');
    check(refused.includes('Refused') && refused.includes(`not ${WRONG_DOC}`),
          'wrong document: refused, naming the ERP\'s document', refused);
    check(await alice.eval(`!!document.querySelector('#verification pre.excerpt')`),
          'wrong document: the ERP\'s answer shown as evidence');
    check((await alice.text('#item-state')) === 'manual-review', 'wrong document: nothing recorded');
    await alice.shot('posted-refused.png');
    await alice.submit(decideExpr('posted', { doc: RIGHT_DOC, note: 'ticket 42' }));
    check(alice.status === 200, 'right document: HTTP 200', `got ${alice.status}`);
    const done = await alice.text('#verdict');
    check(done.includes('manual-review -> completed by operator:alice') &&
              done.includes('verified in the ERP') &&
              done.includes('by alice (Alice Example), signed in with their own password'),
          'right document: verified and recorded, signed by the session', done);
    check((await alice.text('#item-state')) === 'completed', 'right document: the item is completed');
    check((await alice.eval(`[...document.querySelectorAll('#timeline td.actor')].map(t => t.textContent)`))
              .includes('operator:alice'),
          'right document: audited in the timeline');
    await alice.shot('posted-done.png');

    // ---- the optimistic check: a decision from a page that is no longer current ----------
    const dave = await person('dave');
    await dave.goto(`${BASE}/item/${ID.reject}`);
    const carol = await person('carol');
    await carol.goto(`${BASE}/item/${ID.reject}`);
    await carol.submit(decideExpr('reject', { reason: 'duplicate of an earlier invoice',
                                              note: 'vendor confirmed by phone' }));
    check(carol.status === 200 && (await carol.text('#item-state')) === 'business-exception',
          'reject: recorded', await carol.text('#verdict'));
    await carol.shot('rejected.png');
    await dave.submit(decideExpr('requeue', { note: 'try again' }));
    check(dave.status === 409, 'stale page: HTTP 409', `got ${dave.status}`);
    check((await dave.text('#verdict')).includes('changed since you saw it'),
          'stale page: refused as changed', await dave.text('#verdict'));
    check((await dave.text('#item-state')) === 'business-exception',
          'stale page: the item as it is now');
    await dave.shot('stale-refused.png');

    // ---- requeue ------------------------------------------------------------------------------
    const bob = await person('bob');
    await bob.goto(`${BASE}/item/${ID.requeue}`);
    await bob.submit(decideExpr('requeue', { note: 'wrong booking reversed' }));
    check(bob.status === 200 && (await bob.text('#item-state')) === 'new',
          'requeue: recorded, the item is new', await bob.text('#verdict'));

    // ---- CSRF ---------------------------------------------------------------------------------
    await alice.goto(`${BASE}/item/${ID.hostile}`);
    await alice.submit(`(() => { const f = document.getElementById('form-requeue');
        f.querySelector('[name=csrf]').value = '0'.repeat(64);
        f.querySelector('[name=note]').value = 'x';
        f.querySelector('button').click(); return 1; })()`);
    check(alice.status === 403, 'csrf: a wrong token is refused (403)', `got ${alice.status}`);
    // another site's form that posts here, in the reviewer's browser
    await alice.goto(`data:text/html,<form id=f method=post action="${BASE}/item/${ID.hostile}/decide">` +
                     '<input name=csrf value=x><input name=version value=1><input name=action value=requeue>' +
                     '<input name=note value=x></form>');
    await alice.submit(`document.getElementById('f').submit(), 1`);
    check(alice.status === 403, 'csrf: a post from another site is refused (403)', `got ${alice.status}`);
    // another site's sign-in form (login CSRF)
    await alice.goto(`data:text/html,<form id=f method=post action="${BASE}/login">` +
                     '<input name=csrf value=x><input name=name value=mallory><input name=password value=x></form>');
    await alice.submit(`document.getElementById('f').submit(), 1`);
    check(alice.status === 403, 'csrf: another site\'s sign-in form is refused (403)', `got ${alice.status}`);
    await alice.goto(`${BASE}/item/${ID.hostile}`);
    check((await alice.text('#item-state')) === 'business-exception', 'csrf: nothing was recorded');
    check((await alice.text('#who')).includes('alice, reviewer'), 'csrf: alice is still alice');

    // ---- a stolen cookie stops working at sign-out --------------------------------------------
    const stolen = await bob.cookie(BASE);
    const { browserContextId: thiefCtx } = await send('Target.createBrowserContext', {});
    const thief = await Tab.open(thiefCtx);
    await send('Network.setCookie', { name: 'apbot_session', value: stolen.value, url: BASE,
                                      httpOnly: true, sameSite: 'Strict' }, thief.sid);
    await thief.goto(`${BASE}/queue`);
    check((await thief.where()) === '/queue' && (await thief.text('#who')).includes('bob, reviewer'),
          'stolen cookie: works while bob is signed in', await thief.where());
    await bob.signOut();
    check((await bob.where()) === '/login' && (await bob.text('#message')).includes('signed out'),
          'sign-out: back to the sign-in page', await bob.text('#message'));
    const after = await bob.cookie(BASE);
    check(!after, 'sign-out: the session cookie is dropped', JSON.stringify(after));
    await thief.goto(`${BASE}/queue`);
    check((await thief.where()) === '/login', 'stolen cookie: dead after sign-out',
          await thief.where());
    check(!(await thief.eval(`document.body.innerText`)).includes('Review queue'),
          'stolen cookie: nothing of the queue');
    await thief.shot('stolen-cookie.png');
    // signing in again gives another session than the one stolen (rotation)
    await bob.signIn(BASE, 'bob', PASSWORDS.bob);
    const again = await bob.cookie(BASE);
    check(again && again.value !== stolen.value && (await bob.where()) === '/',
          'sign-in: a new session id each time', await bob.where());

    // ---- the shared password (a small shop) ---------------------------------------------------
    const shared = await Tab.open((await send('Target.createBrowserContext', {})).browserContextId);
    await shared.goto(`${SHARED_URL}/`);
    check((await shared.where()) === '/login', 'shared password: sent to sign in');
    await shared.signIn(SHARED_URL, 'erin', 'not the password at all');
    check(shared.status === 401, 'shared password: a wrong one, 401', `got ${shared.status}`);
    await shared.signIn(SHARED_URL, 'erin', SHARED_PASSWORD);
    check((await shared.text('h1')).startsWith('Today') && (await shared.text('#who')).includes('erin'),
          'shared password: signed in with a name', await shared.text('#who'));
    await shared.shot('shared-password.png');

    // ---- over TLS -------------------------------------------------------------------------------
    if (TLS_URL) {
        const t = await person('alice', TLS_URL);
        check((await t.where()) === '/' && (await t.text('h1')).startsWith('Today'),
              'tls: signed in over https', await t.where());
        const c = await t.cookie(TLS_URL);
        check(c && c.secure && c.httpOnly && c.sameSite === 'Strict', 'tls: the cookie is Secure',
              JSON.stringify(c));
        await t.goto(`${TLS_URL}/item/${TLS_ITEM}`);
        await t.submit(`(() => { const f = document.getElementById('form-requeue');
            f.querySelector('[name=note]').value = 'over tls';
            f.querySelector('button').click(); return 1; })()`);
        check(t.status === 200 && (await t.text('#item-state')) === 'new',
              'tls: a decision from the https page (its origin) is recorded', `${t.status} ${await t.text('#verdict')}`);
        await t.shot('tls.png');
    }

    await send('Browser.close').catch(() => {});
}

main()
    .catch((e) => {
        fail(`driver: ${e.message}`);
    })
    .finally(() => {
        close();
        process.exit(Math.min(fails, 99));
    });
