#!/usr/bin/env node
// record_har.js - records, in headless Chromium, what a person records in the browser's
// developer tools before `apbot flow record` (docs/recording.md): one session against a
// simulator UI (erp-sim --ui acme|classic|spa), saved as a HAR 1.2 file. The steps are the
// user's: log in, search for the reference (nothing yet), enter the sample invoice of
// tests/data/har/sample.csv by hand with its values in the ERP's own formats, save it (and
// approve it, where the ERP has that step), search for it again (found), open the day's list.
//
// It speaks the DevTools protocol over a pipe (--remote-debugging-pipe, through tests/lib/cdp.js
// as tests/serve_drive.js and fixtures/erp-sim/spa/drive.js do: nothing but node and Chromium)
// and writes the Network domain's events as a HAR the way the developer tools export one:
// every request with its headers (cookies and Authorization included, from the ...ExtraInfo
// events), postData with text (and params for a form), every answer with its headers and body
// (Network.getResponseBody, base64 for binary bodies), each redirect hop an entry with its
// redirectURL.
//
// Input (environment): CHROMIUM, SIM_URL (http://127.0.0.1:PORT of erp-sim with that UI), UI
// (acme, classic or spa), PROFILE (a fresh user-data dir), OUT (the HAR file to write),
// ERP_USER and ERP_PASSWORD (the clerk's login; the HAR holds them, as a real one does). Prints what
// it does; exit 0 when the session went as a person's would, else 1 with the reason.
// tests/t_record_chromium.sh runs it for each UI; re-run it when a UI changes:
//   tests/record_har.sh   (writes tests/data/har/*.har)
'use strict';
const path = require('path');
const fs = require('fs');
const cdp = require(path.join(__dirname, 'lib', 'cdp.js'));

const env = (k) => {
    const v = process.env[k];
    if (!v) {
        console.error(`record_har.js: ${k} is not set`);
        process.exit(100);
    }
    return v;
};
const CHROMIUM = env('CHROMIUM');
const BASE = env('SIM_URL');
const UI = env('UI');
const PROFILE = env('PROFILE');
const OUT = env('OUT');
const USER = env('ERP_USER');
const PASSWORD = env('ERP_PASSWORD');

// The sample invoice, as tests/data/har/sample.csv holds it (row 1): the person types these
// values into the ERP's screens in the ERP's formats. The reference is what they typed into
// the ERP's reference field (apbot writes its key there).
const SAMPLE = {
    vendor: '100001',
    vendorName: 'Papier Müller GmbH',
    number: 'REC-4711',
    reference: 'REC-REF-88213',
    issue: { y: 2026, m: 11, d: 16 },
    due: { y: 2026, m: 12, d: 16 },
    currency: 'EUR',
    tax: '234.57',
    payable: '1469.13',
    lines: [
        { gl: '5700', text: 'Paper A4', net: '1000.00' },
        { gl: '6000', text: 'Toner cartridges', net: '234.56' },
    ],
};
const p2 = (n) => String(n).padStart(2, '0');
const de = (d) => `${p2(d.d)}.${p2(d.m)}.${d.y}`;
const us = (d) => `${p2(d.m)}/${p2(d.d)}/${d.y}`;
const iso = (d) => `${d.y}-${p2(d.m)}-${p2(d.d)}`;
// "1469.13" in German ("1.469,13") and US ("1,469.13") writing.
const grouped = (a, dec, grp) => {
    const [i, f] = a.split('.');
    return i.replace(/\B(?=(\d{3})+$)/g, grp) + dec + f;
};

const fail = (why) => {
    throw new Error(why);
};

// ---- the DevTools protocol over a pipe (tests/lib/cdp.js) --------------------------------
const { send, waitEvent, on, close } =
    cdp.launch({ chromium: CHROMIUM, profile: PROFILE, args: ['--window-size=1280,1000'] });
const nap = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the HAR: Network events into entries ------------------------------------------------
class Har {
    constructor() {
        this.entries = []; // in the order the requests were sent
        this.hops = new Map(); // requestId -> its entries, one per redirect hop, in order
        // ExtraInfo events (the headers as sent and received: Cookie, Authorization and
        // Set-Cookie are only there) come once per hop, in order, but not always before the
        // hop's other events: each goes to the next hop of its request that has none yet.
        this.extra = new Map(); // requestId -> { req: [headers...], resp: [...], ri, si }
        this.bodies = [];
    }
    static headerList(h) {
        return Object.entries(h || {}).flatMap(([name, v]) =>
            String(v).split('\n').map((value) => ({ name, value })));
    }
    static query(url) {
        const u = new URL(url);
        return [...u.searchParams].map(([name, value]) => ({ name, value }));
    }
    static cookiePairs(text) {
        return text.split(/;\s*/).filter((kv) => kv.includes('=')).map((kv) => {
            const i = kv.indexOf('=');
            return { name: kv.slice(0, i).trim(), value: kv.slice(i + 1).trim() };
        });
    }
    x(requestId) {
        if (!this.extra.has(requestId)) this.extra.set(requestId, { req: [], resp: [], ri: 0, si: 0 });
        return this.extra.get(requestId);
    }
    sync(requestId) {
        const hops = this.hops.get(requestId) || [];
        const x = this.x(requestId);
        while (x.ri < x.req.length && x.ri < hops.length) {
            const e = hops[x.ri];
            e.request.headers = Har.headerList(x.req[x.ri++]);
            e.request.cookies = e.request.headers.filter((h) => /^cookie$/i.test(h.name))
                .flatMap((h) => Har.cookiePairs(h.value));
        }
        while (x.si < x.resp.length && x.si < hops.length && hops[x.si].response.status) {
            const e = hops[x.si];
            e.response.headers = Har.headerList(x.resp[x.si++]);
            e.response.cookies = e.response.headers.filter((h) => /^set-cookie$/i.test(h.name))
                .map((h) => Har.cookiePairs(h.value.split(';')[0])[0]).filter(Boolean);
        }
    }
    request(p) {
        const hops = this.hops.get(p.requestId) || [];
        if (p.redirectResponse && hops.length) {
            // The previous hop was answered by a redirect: its entry ends here, without a body.
            const prev = hops[hops.length - 1];
            this.respond(prev, p.redirectResponse);
            prev.response.redirectURL = p.request.url;
            prev.done = true;
        }
        const r = p.request;
        const e = {
            startedDateTime: new Date(p.wallTime * 1000).toISOString(),
            time: 0,
            request: {
                method: r.method, url: r.url, httpVersion: 'HTTP/1.1',
                headers: Har.headerList(r.headers), queryString: Har.query(r.url), cookies: [],
                headersSize: -1, bodySize: r.postData ? Buffer.byteLength(r.postData) : 0,
            },
            response: {
                status: 0, statusText: '', httpVersion: 'HTTP/1.1', headers: [], cookies: [],
                content: { size: 0, mimeType: 'x-unknown' }, redirectURL: '', headersSize: -1,
                bodySize: -1,
            },
            cache: {},
            timings: { send: 0, wait: 0, receive: 0 },
            _resourceType: (p.type || 'Other').toLowerCase(),
        };
        if (r.postData !== undefined) {
            const ct = (r.headers['Content-Type'] || r.headers['content-type'] || '');
            e.request.postData = { mimeType: ct, text: r.postData };
            if (ct.startsWith('application/x-www-form-urlencoded')) {
                e.request.postData.params = [...new URLSearchParams(r.postData)].map(
                    ([name, value]) => ({ name, value }));
            }
        }
        this.entries.push(e);
        hops.push(e);
        this.hops.set(p.requestId, hops);
        this.sync(p.requestId);
    }
    extraRequest(p) {
        this.x(p.requestId).req.push(p.headers);
        this.sync(p.requestId);
    }
    respond(e, resp) {
        e.response.status = resp.status;
        e.response.statusText = resp.statusText || '';
        e.response.httpVersion = resp.protocol ? resp.protocol.toUpperCase() : 'HTTP/1.1';
        if (!e.response.headers.length) e.response.headers = Har.headerList(resp.headers);
        e.response.content.mimeType = resp.mimeType || 'x-unknown';
        if (resp.fromDiskCache || resp.fromServiceWorker) e._fromCache = 'disk';
    }
    response(p) {
        const hops = this.hops.get(p.requestId);
        if (!hops) return;
        this.respond(hops[hops.length - 1], p.response);
        this.sync(p.requestId);
    }
    extraResponse(p) {
        this.x(p.requestId).resp.push(p.headers);
        this.sync(p.requestId);
    }
    finished(p, sid) {
        const hops = this.hops.get(p.requestId);
        const e = hops && hops[hops.length - 1];
        if (!e || e.done) return;
        e.done = true;
        this.bodies.push(send('Network.getResponseBody', { requestId: p.requestId }, sid)
            .then((b) => {
                e.response.content.size = b.base64Encoded
                    ? Buffer.from(b.body, 'base64').length : Buffer.byteLength(b.body);
                e.response.content.text = b.body;
                if (b.base64Encoded) e.response.content.encoding = 'base64';
            })
            .catch(() => {}));
    }
    async write(path, title) {
        await Promise.all(this.bodies);
        await nap(100);
        for (const id of this.hops.keys()) this.sync(id);
        const entries = this.entries.filter((e) => e.response.status !== 0).map((e) => {
            delete e.done;
            e.pageref = 'page_1';
            return e;
        });
        const har = {
            log: {
                version: '1.2',
                creator: { name: 'apbot tests/record_har.js', version: '1' },
                browser: { name: 'Chromium', version: this.version || '' },
                pages: [{ startedDateTime: entries.length ? entries[0].startedDateTime : '',
                          id: 'page_1', title, pageTimings: {} }],
                entries,
            },
        };
        fs.writeFileSync(path, JSON.stringify(har, null, 1) + '\n');
        return entries.length;
    }
}

class Tab {
    static async open(har) {
        const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
        const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
        const t = new Tab(sessionId);
        await send('Page.enable', {}, sessionId);
        await send('Network.enable', { maxPostDataSize: 1 << 20 }, sessionId);
        await send('Network.setCacheDisabled', { cacheDisabled: false }, sessionId);
        await send('Runtime.enable', {}, sessionId);
        on((msg) => {
            if (msg.sessionId !== sessionId) return;
            const p = msg.params;
            switch (msg.method) {
            case 'Network.requestWillBeSent': har.request(p); break;
            case 'Network.requestWillBeSentExtraInfo': har.extraRequest(p); break;
            case 'Network.responseReceived': har.response(p); break;
            case 'Network.responseReceivedExtraInfo': har.extraResponse(p); break;
            case 'Network.loadingFinished': har.finished(p, sessionId); break;
            case 'Runtime.exceptionThrown': t.errors.push(p.exceptionDetails); break;
            case 'Fetch.requestPaused':
                send('Fetch.continueRequest', { requestId: p.requestId }, sessionId).catch(() => {});
                break;
            case 'Fetch.authRequired':
                // The browser's own dialog for HTTP Basic, answered as the person would.
                send('Fetch.continueWithAuth', {
                    requestId: p.requestId,
                    authChallengeResponse: { response: 'ProvideCredentials', username: USER,
                                             password: PASSWORD },
                }, sessionId).catch(() => {});
                break;
            default: break;
            }
        });
        return t;
    }
    constructor(sid) {
        this.sid = sid;
        this.errors = [];
    }
    async goto(url) {
        const loaded = waitEvent(this.sid, 'Page.loadEventFired');
        await send('Page.navigate', { url }, this.sid);
        await loaded;
        await nap(50);
    }
    async eval(expr) {
        const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true,
                                                   awaitPromise: true }, this.sid);
        if (r.exceptionDetails) throw new Error(`evaluate ${expr}: ${r.exceptionDetails.text}`);
        return r.result.value;
    }
    // Clicks what sel finds and waits for the page it loads.
    async clickLoad(sel) {
        const loaded = waitEvent(this.sid, 'Page.loadEventFired');
        await this.click(sel);
        await loaded;
        await nap(50);
    }
    click(sel) {
        return this.eval(`(() => { const e = document.querySelector(${JSON.stringify(sel)});
                          if (!e) throw new Error('no ' + ${JSON.stringify(sel)});
                          e.click(); return true; })()`);
    }
    // Types value into the control sel finds (a select: the option whose label starts with it).
    type(sel, value) {
        return this.eval(`(() => { const e = document.querySelector(${JSON.stringify(sel)});
            if (!e) throw new Error('no ' + ${JSON.stringify(sel)});
            const v = ${JSON.stringify(value)};
            if (e.tagName === 'SELECT') {
                const o = [...e.options].find((o) => o.value === v || o.text.startsWith(v));
                if (!o) throw new Error('no option ' + v);
                e.value = o.value;
            } else {
                e.value = v;
            }
            e.dispatchEvent(new Event('input', { bubbles: true }));
            e.dispatchEvent(new Event('change', { bubbles: true }));
            return true; })()`);
    }
    text(sel) {
        return this.eval(`(document.querySelector(${JSON.stringify(sel)}) || {}).textContent || ''`);
    }
    async until(expr, ms = 10000) {
        const end = Date.now() + ms;
        while (Date.now() < end) {
            if (await this.eval(expr)) return true;
            await nap(50);
        }
        return false;
    }
}

// ---- the sessions ------------------------------------------------------------------------
async function acme(tab) {
    const s = SAMPLE;
    await tab.goto(`${BASE}/`);
    await tab.type('#j_username', USER);
    await tab.type('#j_password', PASSWORD);
    await tab.clickLoad('input[name=login]');
    if (!(await tab.text('h1')).startsWith('Welcome')) fail('acme: the login did not land home');
    // The search first: nothing has this reference yet.
    await tab.clickLoad('#menuSearch');
    await tab.type('#reference', s.reference);
    await tab.clickLoad('input[name=search]');
    if (!(await tab.eval(`!!document.getElementById('noResults')`))) fail('acme: a hit before the entry');
    // The entry: German dates and amounts, two lines (the second row by "Add line").
    await tab.clickLoad('#menuNewInvoice');
    await tab.type('#vendorNo', s.vendor);
    await tab.type('#vendorInvNo', s.number);
    await tab.type('#invDate', de(s.issue));
    await tab.type('#dueDate', de(s.due));
    await tab.type('#currency', s.currency);
    await tab.type('#amount', grouped(s.payable, ',', '.'));
    await tab.type('#taxAmount', grouped(s.tax, ',', '.'));
    await tab.type('#glAccount', s.lines[0].gl);
    await tab.type('#reference', s.reference);
    await tab.type('#memo', s.lines[0].text);
    await tab.click('#addLine');
    for (let i = 0; i < s.lines.length; i++) {
        const l = s.lines[i];
        await tab.type(`input[name=lineGl_${i + 1}]`, l.gl);
        await tab.type(`input[name=lineAmount_${i + 1}]`, grouped(l.net, ',', '.'));
        await tab.type(`input[name=lineText_${i + 1}]`, l.text);
    }
    await tab.clickLoad('input[name=check]');
    if (!(await tab.eval(`!!document.getElementById('apConfirm')`)))
        fail(`acme: check did not confirm: ${await tab.text('.msgText')}`);
    await tab.clickLoad('input[name=post]');
    const msg = await tab.text('.msgText');
    if (!/^I020: Document AP-\d{4}-\d{6} was posted\.$/.test(msg)) fail(`acme: post answered ${msg}`);
    console.log(`acme: ${msg}`);
    // Found now (the search index lags a little behind the post).
    let found = false;
    for (let i = 0; i < 20 && !found; i++) {
        await nap(150);
        await tab.clickLoad('#menuSearch');
        await tab.type('#reference', s.reference);
        await tab.clickLoad('input[name=search]');
        found = await tab.eval(`document.querySelectorAll('#resultTable tr.row').length === 1`);
    }
    if (!found) fail('acme: the search never found the invoice');
    // The day's postings: the journal offers today's date; paged on until the invoice shows.
    await tab.clickLoad('#menuJournal');
    await tab.clickLoad('input[name=show]');
    const shown = () => tab.eval(`[...document.querySelectorAll('#journalTable td.reference')]
                                  .some((td) => td.textContent === ${JSON.stringify(s.reference)})`);
    for (let i = 0; i < 20 && !(await shown()); i++) {
        if (!(await tab.eval(`!!document.getElementById('nextPage')`))) break;
        await tab.clickLoad('#nextPage');
    }
    if (!(await shown())) fail('acme: the journal does not show the invoice');
}

async function classic(tab) {
    const s = SAMPLE;
    await tab.goto(`${BASE}/login.pl`);
    await tab.clickLoad('a[href*=authenticate]');
    if (!(await tab.eval(`document.body.innerText.startsWith('Success')`))) fail('classic: login');
    const search = async () => {
        await tab.goto(`${BASE}/app/ap/search`);
        await tab.type('input[name=reference]', s.reference);
        await tab.clickLoad('button[value=search]');
    };
    await search();
    if (!(await tab.eval(`!!document.getElementById('noResults')`))) fail('classic: a hit before the entry');
    // The entry: one line per Update, as the screen wants; US dates and amounts.
    await tab.goto(`${BASE}/ap.pl?action=add`);
    await tab.type('input[name=vendor]', s.vendor);
    await tab.type('select[name=currency]', s.currency);
    await tab.type('select[name=doctype]', 'Invoice');
    await tab.type('input[name=invnumber]', s.number);
    await tab.type('input[name=ponumber]', s.reference);
    await tab.type('input[name=transdate]', us(s.issue));
    await tab.type('input[name=duedate]', us(s.due));
    await tab.type('input[name=tax]', s.tax);
    await tab.type('input[name=invtotal]', grouped(s.payable, '.', ','));
    await tab.type('textarea[name=notes]', s.lines[0].text);
    for (let i = 0; i < s.lines.length; i++) {
        const l = s.lines[i];
        await tab.type(`select[name=account_${i + 1}]`, `${l.gl}--`);
        await tab.type(`input[name=amount_${i + 1}]`, grouped(l.net, '.', ','));
        await tab.type(`input[name=description_${i + 1}]`, l.text);
        await tab.clickLoad('button[value=update]');
        if (!(await tab.eval(`!!document.querySelector('select[name=account_${i + 2}]')`)))
            fail(`classic: update ${i + 1}: ${await tab.text('h2.error')}`);
    }
    await tab.clickLoad('button[value=save]');
    const info = await tab.text('p.info');
    const m = /^Invoice (AP-\d{4}-\d{6}) saved as draft$/.exec(info);
    if (!m) fail(`classic: save answered ${info} ${await tab.text('h2.error')}`);
    console.log(`classic: ${info}`);
    // Found by the reference; the hit opened; approved there.
    let found = false;
    for (let i = 0; i < 20 && !found; i++) {
        await nap(150);
        await search();
        found = await tab.eval(`document.querySelectorAll('#results tbody tr').length === 1`);
    }
    if (!found) fail('classic: the search never found the invoice');
    await tab.clickLoad('#results td.id a');
    await tab.clickLoad('button[value=approve]');
    if ((await tab.text('p.info')) !== 'Draft Posted') fail('classic: approve');
    // The listing selects by invoice date: the invoice's day.
    await tab.goto(`${BASE}/app/ap/list`);
    await tab.type('input[name=from]', us(s.issue));
    await tab.type('input[name=to]', us(s.issue));
    await tab.clickLoad('button[value=list]');
    if (!(await tab.eval(`document.querySelectorAll('#listing tbody tr').length >= 1`)))
        fail('classic: the listing shows nothing');
}

async function spa(tab) {
    const s = SAMPLE;
    await tab.goto(`${BASE}/`);
    await tab.type('#user', USER);
    await tab.type('#password', PASSWORD);
    await tab.click('#login');
    if (!(await tab.until(`!document.getElementById('appView').hidden`))) fail('spa: login');
    await tab.until(`document.getElementById('currency').options.length > 0`);
    const search = async () => {
        await tab.type('#searchRef', s.reference);
        await tab.eval(`document.getElementById('status').textContent = ''`);
        await tab.click('#search');
        await tab.until(`document.getElementById('status').textContent !== ''`);
    };
    await search();
    if (!(await tab.eval(`document.querySelectorAll('#results tr.row').length === 0`)))
        fail('spa: a hit before the entry');
    await tab.type('#vendor', s.vendor);
    await tab.type('#documentType', 'invoice');
    await tab.type('#supplierInvoice', s.number);
    await tab.type('#reference', s.reference);
    await tab.type('#invoiceDate', iso(s.issue));
    await tab.type('#dueDate', iso(s.due));
    await tab.type('#currency', s.currency);
    await tab.click('#addLine');
    for (let i = 0; i < s.lines.length; i++) {
        const l = s.lines[i];
        await tab.eval(`(() => { const r = document.querySelectorAll('#lines tr')[${i}];
            r.querySelector('.lineAccount').value = ${JSON.stringify(l.gl)};
            r.querySelector('.lineDescription').value = ${JSON.stringify(l.text)};
            r.querySelector('.lineAmount').value = ${JSON.stringify(l.net)};
            return true; })()`);
    }
    await tab.type('#tax', s.tax);
    await tab.type('#comment', s.vendorName);
    await tab.click('#save');
    if (!(await tab.until(`document.getElementById('draftId').textContent !== ''`)))
        fail(`spa: save: ${await tab.text('#status')}`);
    await tab.click('#post');
    if (!(await tab.until(`document.getElementById('number').textContent.startsWith('AP-')`)))
        fail(`spa: post: ${await tab.text('#status')}`);
    console.log(`spa: draft ${await tab.text('#draftId')} posted as ${await tab.text('#number')}`);
    let found = false;
    for (let i = 0; i < 20 && !found; i++) {
        await nap(150);
        await search();
        found = await tab.eval(`document.querySelectorAll('#results tr.row').length === 1`);
    }
    if (!found) fail('spa: the search never found the invoice');
}

// A used ERP holds documents already: its document numbers and ids are not the first ones.
async function usedErp() {
    for (let i = 1; i <= 57; i++) {
        const body = new URLSearchParams({
            vendor_id: String(100001 + (i % 40)), invoice_number: `OLD-${i}`,
            invoice_date: '2026-10-20', currency: 'EUR', amount: `${100 + i}.00`,
            reference: `OLD-REF-${i}`,
        });
        const r = await fetch(`${BASE}/_sim/book`, { method: 'POST', body });
        if (!r.ok) fail(`/_sim/book: ${r.status} ${await r.text()}`);
    }
}

async function main() {
    await nap(300);
    await usedErp();
    const har = new Har();
    const v = await send('Browser.getVersion');
    har.version = (v.product || '').replace(/^[^/]*\//, '');
    const tab = await Tab.open(har);
    if (UI === 'classic') {
        await send('Fetch.enable', { handleAuthRequests: true, patterns: [{ urlPattern: '*' }] },
                   tab.sid);
    }
    const drive = { acme, classic, spa }[UI];
    if (!drive) fail(`unknown UI ${UI}`);
    await drive(tab);
    await nap(200);
    if (tab.errors.length) fail(`script errors: ${tab.errors.map((e) => e.text).join('; ')}`);
    const n = await har.write(OUT, `${UI} ${BASE}`);
    console.log(`${UI}: ${n} entries written to ${OUT}`);
}

main()
    .then(() => {
        close();
        process.exit(0);
    })
    .catch((e) => {
        console.log(`record_har.js: FAIL: ${e.message}`);
        close();
        process.exit(1);
    });
