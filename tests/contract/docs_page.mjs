// docs_page.mjs URL -- loads the API reference page (/api/docs/) in headless
// Chromium and checks that every operation of api/openapi.yaml is listed
// (its summary and its path appear in the rendered page).  The page renders
// after load with timers, so this drives Chromium over the DevTools protocol
// (Node 20: run with --experimental-websocket).  Exit 0 ok, 1 missing, 2 setup.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const tools = resolve(process.env.PIN_CONTRACT_TOOLS || join(root, '.dev', 'contract-tools'));
const yaml = createRequire(join(tools, 'package.json'))('js-yaml');
const url = process.argv[2];
const timeoutMs = Number(process.env.PIN_DOCS_TIMEOUT_MS || 45000);
if (!url) {
	console.error('usage: node --experimental-websocket docs_page.mjs URL');
	process.exit(2);
}

const doc = yaml.load(readFileSync(process.env.PIN_OPENAPI || join(root, 'api', 'openapi.yaml'), 'utf8'));
const wanted = [];
for (const [path, item] of Object.entries(doc.paths))
	for (const [m, op] of Object.entries(item))
		if (op && op.operationId) wanted.push({ id: op.operationId, method: m.toUpperCase(), path,
			summary: op.summary, tags: op.tags || [] });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const profile = mkdtempSync(join(tmpdir(), 'pin-docs-chromium-'));
const browser = spawn(process.env.PIN_CHROMIUM || 'chromium', ['--headless=new', '--no-sandbox',
	'--disable-gpu', '--no-first-run', '--remote-debugging-port=0',
	`--user-data-dir=${profile}`, 'about:blank'], { stdio: ['ignore', 'ignore', 'ignore'] });
let rc = 2;

async function main() {
	const portFile = join(profile, 'DevToolsActivePort');
	const t0 = Date.now();
	while (!existsSync(portFile) || readFileSync(portFile, 'utf8').split('\n').length < 2) {
		if (Date.now() - t0 > 20000) throw new Error('chromium did not open its DevTools port');
		await sleep(100);
	}
	const port = readFileSync(portFile, 'utf8').split('\n')[0].trim();
	let page;
	while (!page) {
		const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
		page = list.find((t) => t.type === 'page');
		if (!page) await sleep(100);
	}
	const ws = new WebSocket(page.webSocketDebuggerUrl);
	await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
	let seq = 0;
	const pending = new Map();
	ws.onmessage = (e) => {
		const m = JSON.parse(e.data);
		if (m.id && pending.has(m.id)) {
			pending.get(m.id)(m);
			pending.delete(m.id);
		}
	};
	const send = (method, params = {}) => new Promise((res) => {
		const id = ++seq;
		pending.set(id, res);
		ws.send(JSON.stringify({ id, method, params }));
	});
	await send('Page.enable');
	// the reference opens on the overview; each tag's group lists its
	// operations (summary + method) once its section is shown: visit them
	const found = new Set();
	let text = '', status = null;
	const tags = [...new Set(wanted.flatMap((w) => w.tags))];
	for (const tag of tags) {
		const nav = await send('Page.navigate', { url: `${url.split('#')[0]}#/${encodeURIComponent(tag)}` });
		if (nav.result?.errorText) throw new Error(`navigate: ${nav.result.errorText}`);
		const ops = wanted.filter((w) => w.tags.includes(tag));
		const deadline = Date.now() + timeoutMs;
		while (Date.now() < deadline) {
			await sleep(300);
			const r = await send('Runtime.evaluate', { returnByValue: true, expression:
				'JSON.stringify({t: document.body ? document.body.innerText : "", ' +
				's: (performance.getEntriesByType("navigation")[0]||{}).responseStatus})' });
			const v = JSON.parse(r.result?.result?.value || '{}');
			text = v.t || '';
			status = v.s;
			for (const w of ops)
				if (text.includes(w.summary)) found.add(w);
			if (ops.every((w) => found.has(w))) break;
		}
	}
	const missing = wanted.filter((w) => !found.has(w));
	ws.close();
	if (status && status !== 200) {
		console.error(`docs page: ${url} answered ${status}`);
		return 1;
	}
	if (missing.length) {
		for (const w of missing) console.error(`docs page: not listed: ${w.method} ${w.path} (${w.summary})`);
		console.error(`docs page: ${wanted.length - missing.length}/${wanted.length} operations listed ` +
			`(page text ${text.length} chars: ${text.slice(0, 200).replace(/\s+/g, ' ')})`);
		return 1;
	}
	console.error(`docs page: ${url}: all ${wanted.length} operations listed`);
	return 0;
}

try {
	rc = await main();
} catch (e) {
	console.error(`docs page: ${e.message || e}`);
	rc = 2;
} finally {
	browser.kill('SIGTERM');
	await Promise.race([new Promise((r) => browser.on('exit', r)), sleep(3000)]);
	if (browser.exitCode === null) browser.kill('SIGKILL');
	// chromium's helper processes may still write into the profile after the
	// browser exited (ENOTEMPTY seen in CI): retry, and never let the clean-up
	// of a temporary directory decide the check
	try {
		rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
	} catch (e) {
		console.error(`docs page: temporary profile ${profile} left behind: ${e.code || e}`);
	}
}
process.exit(rc);
