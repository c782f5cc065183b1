// cdp.js - the DevTools protocol over a pipe, for the scripts that drive headless Chromium
// (tests/page_probe.js, tests/serve_drive.js, tests/record_har.js,
// fixtures/erp-sim/spa/drive.js). Chromium runs with --remote-debugging-pipe: commands go to
// its file descriptor 3 and answers and events come from 4, each a JSON message ended by a NUL
// byte. Nothing but node's built-ins: no npm package, no websocket.
//
//   const cdp = require(path.join(__dirname, 'lib', 'cdp.js'));
//   const { browser, send, waitEvent, on, close } =
//       cdp.launch({ chromium, profile, args: ['--window-size=1280,1000'] });
//
// launch() starts Chromium (headless, a fresh user-data dir `profile`, the extra flags `args`,
// about:blank) and returns:
//   browser                    the child process
//   send(method, params, sid)  a promise of the command's result (rejected with
//                              "method: message" on a protocol error); sid: a flattened
//                              session (Target.attachToTarget), none for the browser's own
//   waitEvent(sid, method, [pred], [ms])
//                              a promise of the params of the first event `method` of session
//                              sid that pred accepts (default: any), rejected after ms
//                              (default 20 s)
//   on(listener)               listener(msg) sees every event ({method, params, sessionId});
//                              returns a function that removes it
//   listeners                  the array of those listeners
//   close()                    kills Chromium (SIGKILL); harmless when it is gone
'use strict';
const { spawn } = require('child_process');

const BASE_FLAGS = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];

function launch({ chromium, profile, args = [] }) {
    if (!chromium || !profile) throw new Error('cdp.launch: chromium and profile are required');
    const browser = spawn(
        chromium,
        [...BASE_FLAGS, `--user-data-dir=${profile}`, '--remote-debugging-pipe', ...args,
         'about:blank'],
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

    function on(listener) {
        listeners.push(listener);
        return () => {
            const k = listeners.indexOf(listener);
            if (k >= 0) listeners.splice(k, 1);
        };
    }

    function waitEvent(sid, method, pred, ms) {
        if (typeof pred === 'number') [pred, ms] = [undefined, pred];
        if (!pred) pred = () => true;
        if (ms === undefined) ms = 20000;
        return new Promise((resolve, reject) => {
            let off = null;
            const t = setTimeout(() => {
                off();
                reject(new Error(`timeout waiting for ${method}`));
            }, ms);
            off = on((msg) => {
                if (msg.sessionId === sid && msg.method === method && pred(msg.params)) {
                    clearTimeout(t);
                    off();
                    resolve(msg.params);
                }
            });
        });
    }

    function close() {
        try { browser.kill('SIGKILL'); } catch (e) { /* gone */ }
    }

    return { browser, send, waitEvent, on, listeners, close };
}

module.exports = { launch };
