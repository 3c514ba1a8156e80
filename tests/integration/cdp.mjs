// cdp.mjs -- a tiny headless-Chromium driver for the integration tests
// (test_stream.c).  No npm package: Node 20's --experimental-websocket gives
// a WebSocket client for the DevTools protocol.
//
//   node --experimental-websocket cdp.mjs [chromium-binary]
//
// Starts chromium --headless=new --no-sandbox --remote-debugging-port=0 with
// a throw-away profile, attaches to its page, then reads one JSON command per
// line on stdin and answers one JSON line on stdout:
//   {"op":"nav","url":"http://..."}   -> {"ok":true}
//   {"op":"eval","expr":"..."}        -> {"ok":true,"value":<JSON value>}
//                                        (promises are awaited)
//   {"op":"viewport","width":390,"height":844}
//                                     -> {"ok":true} (a phone: mobile metrics,
//                                        device scale 2; test_manage.c)
//   {"op":"click","selector":"#id"}   -> {"ok":true} once the page the click
//                                        led to has loaded
//   {"op":"shot","path":"/x.png"}     -> {"ok":true} (PNG of the viewport)
//   errors                             -> {"ok":false,"error":"..."}
// First line printed: {"ok":true,"ready":true} once the page is attached.
// stdin EOF: chromium is stopped, the profile removed, exit 0.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const bin = process.argv[2] || 'chromium';
const profile = mkdtempSync(join(tmpdir(), 'pin-cdp-'));
const chrome = spawn(bin, ['--headless=new', '--no-sandbox', '--disable-gpu',
	'--no-first-run', '--no-default-browser-check', '--disable-extensions',
	'--remote-debugging-port=0', `--user-data-dir=${profile}`, 'about:blank'],
	{ stdio: ['ignore', 'ignore', 'ignore'] });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cleanup() {
	try { chrome.kill('SIGKILL'); } catch (e) { /* gone */ }
	try { rmSync(profile, { recursive: true, force: true }); } catch (e) { /* */ }
}
process.on('exit', cleanup);

async function devtoolsPort() {
	const f = join(profile, 'DevToolsActivePort');
	for (let i = 0; i < 300; i++) {
		if (existsSync(f)) {
			const p = readFileSync(f, 'utf8').split('\n')[0].trim();
			if (p) return p;
		}
		await sleep(100);
	}
	throw new Error('chromium did not publish its DevTools port');
}

let ws, seq = 0;
const pending = new Map();
const events = [];

function send(method, params = {}) {
	const id = ++seq;
	ws.send(JSON.stringify({ id, method, params }));
	return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

async function attach() {
	const port = await devtoolsPort();
	let page;
	for (let i = 0; i < 100 && !page; i++) {
		const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
		page = list.find((t) => t.type === 'page');
		if (!page) await sleep(100);
	}
	if (!page) throw new Error('no page target');
	ws = new WebSocket(page.webSocketDebuggerUrl);
	await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
	ws.onmessage = (m) => {
		const msg = JSON.parse(m.data);
		if (msg.id && pending.has(msg.id)) {
			const p = pending.get(msg.id);
			pending.delete(msg.id);
			if (msg.error) p.reject(new Error(msg.error.message));
			else p.resolve(msg.result);
		} else if (msg.method) {
			events.push(msg.method);
		}
	};
	await send('Page.enable');
	await send('Runtime.enable');
}

async function handle(cmd) {
	if (cmd.op === 'nav') {
		events.length = 0;
		const r = await send('Page.navigate', { url: cmd.url });
		if (r.errorText) throw new Error(r.errorText);
		for (let i = 0; i < 100 && !events.includes('Page.loadEventFired'); i++)
			await sleep(50);
		return {};
	}
	if (cmd.op === 'eval') {
		const r = await send('Runtime.evaluate', { expression: cmd.expr,
			awaitPromise: true, returnByValue: true });
		if (r.exceptionDetails)
			throw new Error(r.exceptionDetails.exception?.description ||
				r.exceptionDetails.text);
		return { value: r.result.value === undefined ? null : r.result.value };
	}
	if (cmd.op === 'viewport') {
		await send('Emulation.setDeviceMetricsOverride', { width: cmd.width,
			height: cmd.height, deviceScaleFactor: 2, mobile: true });
		return {};
	}
	if (cmd.op === 'click') {
		events.length = 0;
		const r = await send('Runtime.evaluate', { expression:
			`document.querySelector(${JSON.stringify(cmd.selector)}).click()`,
			returnByValue: true });
		if (r.exceptionDetails)
			throw new Error(r.exceptionDetails.exception?.description ||
				r.exceptionDetails.text);
		for (let i = 0; i < 200 && !events.includes('Page.loadEventFired'); i++)
			await sleep(50);
		if (!events.includes('Page.loadEventFired'))
			throw new Error('no page loaded after the click');
		return {};
	}
	if (cmd.op === 'shot') {
		const r = await send('Page.captureScreenshot', { format: 'png' });
		writeFileSync(cmd.path, Buffer.from(r.data, 'base64'));
		return {};
	}
	throw new Error(`unknown op ${cmd.op}`);
}

try {
	await attach();
	out({ ok: true, ready: true });
} catch (e) {
	out({ ok: false, error: String(e.message || e) });
	process.exit(1);
}
const rl = createInterface({ input: process.stdin });
let chain = Promise.resolve();
rl.on('line', (line) => {
	chain = chain.then(async () => {
		try {
			out({ ok: true, ...(await handle(JSON.parse(line))) });
		} catch (e) {
			out({ ok: false, error: String(e.message || e) });
		}
	});
});
rl.on('close', () => { chain.then(() => { cleanup(); process.exit(0); }); });
