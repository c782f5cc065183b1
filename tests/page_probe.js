#!/usr/bin/env node
// page_probe.js - loads pages in headless Chromium and reports what a script reads on each,
// for the shell tests that need a browser's layout (how wide a page is drawn, what text it
// shows). It speaks the DevTools protocol over a pipe, as serve_drive.js does, so it needs
// nothing but node and Debian's chromium.
//
// Usage: page_probe.js URL EXPR [URL EXPR ...]; environment CHROMIUM, PROFILE (a fresh
// user-data dir), WIDTH and HEIGHT (the window, default 1024x768). For each pair it prints one
// line of JSON: {"url", "status" (the document's HTTP status), "value" (EXPR evaluated in the
// loaded page, by value)}. Exit 0, or 1 when a page could not be loaded or evaluated.
'use strict';
const { spawn } = require('child_process');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const PROFILE = process.env.PROFILE;
const WIDTH = process.env.WIDTH || '1024';
const HEIGHT = process.env.HEIGHT || '768';
const pairs = process.argv.slice(2);
if (!PROFILE || pairs.length === 0 || pairs.length % 2) {
    console.error('usage: PROFILE=DIR page_probe.js URL EXPR [URL EXPR ...]');
    process.exit(2);
}

const browser = spawn(
    CHROMIUM,
    [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
        `--user-data-dir=${PROFILE}`, '--remote-debugging-pipe', `--window-size=${WIDTH},${HEIGHT}`,
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
function waitEvent(sid, method, ms = 20000) {
    return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
            listeners.splice(listeners.indexOf(l), 1);
            reject(new Error(`timeout waiting for ${method}`));
        }, ms);
        const l = (msg) => {
            if (msg.sessionId === sid && msg.method === method) {
                clearTimeout(t);
                listeners.splice(listeners.indexOf(l), 1);
                resolve(msg.params);
            }
        };
        listeners.push(l);
    });
}

async function main() {
    await new Promise((r) => setTimeout(r, 300));
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId: sid } = await send('Target.attachToTarget', { targetId, flatten: true });
    await send('Page.enable', {}, sid);
    await send('Network.enable', {}, sid);
    let status = 0;
    listeners.push((msg) => {
        if (msg.sessionId === sid && msg.method === 'Network.responseReceived' &&
            msg.params.type === 'Document')
            status = msg.params.response.status;
    });
    for (let i = 0; i < pairs.length; i += 2) {
        const url = pairs[i], expr = pairs[i + 1];
        const loaded = waitEvent(sid, 'Page.loadEventFired');
        status = 0;
        await send('Page.navigate', { url }, sid);
        await loaded;
        const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true }, sid);
        if (r.exceptionDetails) throw new Error(`evaluate on ${url}: ${r.exceptionDetails.text}`);
        console.log(JSON.stringify({ url, status, value: r.result.value }));
    }
    await send('Browser.close').catch(() => {});
}

let rc = 0;
main()
    .catch((e) => {
        console.error(`page_probe: ${e.message}`);
        rc = 1;
    })
    .finally(() => {
        try { browser.kill('SIGKILL'); } catch (e) { /* gone */ }
        process.exit(rc);
    });
