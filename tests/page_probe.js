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
const path = require('path');
const cdp = require(path.join(__dirname, 'lib', 'cdp.js'));

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const PROFILE = process.env.PROFILE;
const WIDTH = process.env.WIDTH || '1024';
const HEIGHT = process.env.HEIGHT || '768';
const pairs = process.argv.slice(2);
if (!PROFILE || pairs.length === 0 || pairs.length % 2) {
    console.error('usage: PROFILE=DIR page_probe.js URL EXPR [URL EXPR ...]');
    process.exit(2);
}

const { send, waitEvent, on, close } =
    cdp.launch({ chromium: CHROMIUM, profile: PROFILE, args: [`--window-size=${WIDTH},${HEIGHT}`] });

async function main() {
    await new Promise((r) => setTimeout(r, 300));
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId: sid } = await send('Target.attachToTarget', { targetId, flatten: true });
    await send('Page.enable', {}, sid);
    await send('Network.enable', {}, sid);
    let status = 0;
    on((msg) => {
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
        close();
        process.exit(rc);
    });
