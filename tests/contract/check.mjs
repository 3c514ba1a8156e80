// check.mjs -- checks the running service against api/openapi.yaml and
// api/asyncapi.yaml (issue 16).  Node 20; the npm tools live in the folder
// named by PIN_CONTRACT_TOOLS (installed by ./dev, pinned in its package.json).
//
//   node check.mjs routes ROUTES_FILE        (method, path) of the document ==
//                                             `pin-host --list-routes` output
//   node check.mjs http HTTP_JSONL           every recorded response matches its
//                                             operation's documented response
//   node check.mjs kafka KAFKA_JSONL         every envelope read from the broker
//                                             matches its channel's message
//   node check.mjs selftest                  the checkers fail on broken input
//
// Exit 0 = no violation, 1 = violations (listed on stderr), 2 = usage/setup.
import { createRequire } from 'node:module';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const tools = resolve(process.env.PIN_CONTRACT_TOOLS || join(root, '.dev', 'contract-tools'));
const require = createRequire(join(tools, 'package.json'));
const yaml = require('js-yaml');
const Ajv2020 = require('ajv/dist/2020').default;
const AjvDraft7 = require('ajv').default;
const addFormats = require('ajv-formats').default;

const OPENAPI = process.env.PIN_OPENAPI || join(root, 'api', 'openapi.yaml');
const ASYNCAPI = process.env.PIN_ASYNCAPI || join(root, 'api', 'asyncapi.yaml');
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

const load = (f) => yaml.load(readFileSync(f, 'utf8'));
const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');

// JSON pointer of a local $ref ('#/a/b') -> the object, following $ref chains.
function deref(doc, node, ptr) {
	while (node && typeof node === 'object' && typeof node.$ref === 'string') {
		ptr = node.$ref;
		node = ptr.slice(2).split('/').reduce((o, k) =>
			o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
	}
	return { node, ptr };
}

// ------------------------------------------------------------------ OpenAPI
function openapiOps(doc) {
	const ops = [];
	for (const [path, item] of Object.entries(doc.paths || {}))
		for (const m of METHODS)
			if (item[m]) ops.push({ method: m.toUpperCase(), path, op: item[m],
				re: new RegExp('^' + path.replace(/[.*+?^$()|[\]\\]/g, '\\$&')
					.replace(/\\?\{[^}]+\\?\}/g, '[^/]+') + '$'),
				params: (path.match(/\{/g) || []).length });
	return ops;
}

function checkRoutes(file) {
	const doc = load(OPENAPI);
	const docSet = new Set(openapiOps(doc).map((o) => `${o.method} ${o.path}`));
	const hostSet = new Set(readFileSync(file, 'utf8').split('\n')
		.map((l) => l.trim()).filter((l) => /^[A-Z]+ \//.test(l)));
	const bad = [];
	for (const r of hostSet) if (!docSet.has(r)) bad.push(`registered but not in openapi.yaml: ${r}`);
	for (const r of docSet) if (!hostSet.has(r)) bad.push(`in openapi.yaml but not registered: ${r}`);
	if (hostSet.size === 0) bad.push('pin-host --list-routes printed no route');
	return { bad, info: `${docSet.size} operations documented, ${hostSet.size} routes registered` };
}

function httpValidator(doc) {
	const ajv = new Ajv2020({ strict: false, allErrors: true });
	addFormats(ajv);
	ajv.addSchema(doc, 'openapi');
	const ops = openapiOps(doc);
	const cache = new Map();
	return (rec) => {
		const path = rec.path.split('?')[0];
		const cands = ops.filter((o) => o.method === rec.method && o.re.test(path))
			.sort((a, b) => a.params - b.params);
		if (cands.length === 0)
			return { skip: `${rec.method} ${path}` };
		const o = cands[0];
		const where = `${o.method} ${o.path} -> ${rec.status}`;
		const base = `#/paths/${esc(o.path)}/${o.method.toLowerCase()}/responses`;
		let { node: resp, ptr } = deref(doc, o.op.responses?.[String(rec.status)],
			`${base}/${rec.status}`);
		if (!resp) {
			const range = `${String(rec.status)[0]}XX`;
			({ node: resp, ptr } = deref(doc, o.op.responses?.[range] ?? o.op.responses?.default,
				`${base}/${o.op.responses?.[range] ? range : 'default'}`));
		}
		if (!resp)
			return { error: `${where}: status not documented (body ${rec.body.slice(0, 200)})` };
		if (!resp.content)
			return rec.body.length === 0 ? { ok: where }
				: { error: `${where}: documented without a body, got ${rec.body.slice(0, 200)}` };
		const ct = (rec.contentType || '').split(';')[0].trim().toLowerCase();
		if (!resp.content[ct])
			return { error: `${where}: content type ${ct || '(none)'} not documented ` +
				`(${Object.keys(resp.content).join(', ')})` };
		let body;
		try {
			body = JSON.parse(rec.body);
		} catch (e) {
			return { error: `${where}: body is not JSON: ${rec.body.slice(0, 200)}` };
		}
		const sptr = `${ptr}/content/${esc(ct)}/schema`;
		let v = cache.get(sptr);
		if (!v) {
			v = ajv.compile({ $ref: `openapi${sptr}` });
			cache.set(sptr, v);
		}
		if (!v(body))
			return { error: `${where}: ${ajv.errorsText(v.errors, { separator: '; ' })}\n    body: ${rec.body.slice(0, 400)}` };
		return { ok: where };
	};
}

function readJsonl(file) {
	const out = [];
	let bad = 0;
	if (!existsSync(file)) return { recs: out, bad };
	for (const l of readFileSync(file, 'utf8').split('\n')) {
		if (!l) continue;
		try {
			out.push(JSON.parse(l));
		} catch (e) {
			bad++;
		}
	}
	return { recs: out, bad };
}

function checkHttp(recs) {
	const validate = httpValidator(load(OPENAPI));
	const bad = new Set(), skipped = new Map(), seenOps = new Set();
	let ok = 0;
	for (const rec of recs) {
		const r = validate(rec);
		if (r.error) bad.add(r.error);
		else if (r.skip) skipped.set(r.skip, (skipped.get(r.skip) || 0) + 1);
		else { ok++; seenOps.add(r.ok); }
	}
	return { bad: [...bad], info: `${recs.length} responses: ${ok} valid, ` +
		`${skipped.size} undocumented method/path pairs skipped (host routes, ` +
		`robustness probes), ${seenOps.size} (operation, status) pairs seen` };
}

// ----------------------------------------------------------------- AsyncAPI
function kafkaValidator(doc) {
	const ajv = new AjvDraft7({ strict: false, allErrors: true });
	addFormats(ajv);
	ajv.addSchema(doc, 'asyncapi');
	const byTopic = new Map();
	for (const [name, ch] of Object.entries(doc.channels || {})) {
		const vs = [];
		for (const [mname, m] of Object.entries(ch.messages || {})) {
			const { ptr } = deref(doc, m, `#/channels/${esc(name)}/messages/${esc(mname)}`);
			vs.push(ajv.compile({ $ref: `asyncapi${ptr}/payload` }));
		}
		byTopic.set(ch.address, vs);
	}
	return (rec) => {
		const vs = byTopic.get(rec.topic);
		if (!vs) return { skip: rec.topic };
		let env;
		// a Kafka null value (tombstone) is no event
		if (rec.value === null || rec.value === undefined)
			return { error: `${rec.topic}@${rec.partition}:${rec.offset}: null value` };
		try {
			env = JSON.parse(rec.value);
		} catch (e) {
			return { error: `${rec.topic}@${rec.partition}:${rec.offset}: value is not JSON` };
		}
		const errs = [];
		for (const v of vs) {
			if (v(env)) {
				if (env.aggregateId && rec.key !== undefined && rec.key !== null &&
				    rec.topic.startsWith('pin.calendar.') && rec.key !== env.aggregateId)
					return { error: `${rec.topic}@${rec.partition}:${rec.offset}: key ${rec.key} is not the aggregateId ${env.aggregateId}` };
				return { ok: rec.topic };
			}
			errs.push(ajv.errorsText(v.errors, { separator: '; ' }));
		}
		return { error: `${rec.topic}@${rec.partition}:${rec.offset}: ${errs.join(' | ')}\n    value: ${rec.value.slice(0, 400)}` };
	};
}

function checkKafka(recs) {
	const validate = kafkaValidator(load(ASYNCAPI));
	// messages the tests produced themselves (fixtures, some invalid on
	// purpose) are not the service's output: skip them when read back
	// (JSON.stringify: a null value is not the string "null")
	const fixtureId = (r) => `${r.topic}\u0000${JSON.stringify(r.value ?? null)}`;
	const fromTests = new Set(recs.filter((r) => r.source === 'test').map(fixtureId));
	const seen = new Set(), bad = [], skipped = new Map(), topics = new Map();
	let ok = 0, fixtures = 0;
	for (const rec of recs) {
		if (rec.source !== 'broker') continue;
		const id = `${rec.topic}/${rec.partition}/${rec.offset}`;
		if (seen.has(id)) continue;
		seen.add(id);
		if (fromTests.has(fixtureId(rec))) { fixtures++; continue; }
		const r = validate(rec);
		if (r.error) bad.push(r.error);
		else if (r.skip) {
			// our own namespaces must be documented; DLQs and test topics not
			if (/^pin\.(calendar|notifications)\./.test(rec.topic))
				bad.push(`${rec.topic}: topic not in asyncapi.yaml`);
			else skipped.set(r.skip, (skipped.get(r.skip) || 0) + 1);
		} else { ok++; topics.set(r.ok, (topics.get(r.ok) || 0) + 1); }
	}
	return { bad, info: `${seen.size} distinct messages read from the broker: ${ok} valid ` +
		`(${[...topics.keys()].length} topics), ${fixtures} test fixtures skipped, ` +
		`skipped topics: ${[...skipped.keys()].join(', ') || 'none'}` };
}

// ----------------------------------------------------------------- selftest
function selftest() {
	const fails = [];
	const expect = (name, res, wantBad) => {
		if ((res.bad.length > 0) !== wantBad)
			fails.push(`${name}: expected ${wantBad ? 'a violation' : 'no violation'}, got ` +
				JSON.stringify(res.bad));
	};
	const problem = (status, code) => JSON.stringify({ type: `https://pin.example/problems/${code}`,
		title: 'x', status, detail: 'x', code, traceId: 't' });
	const ev = load(OPENAPI).components.examples.EventCard.value;
	const good = { method: 'GET', path: '/api/v1/agent/calendar/events/' + ev.id,
		status: 200, contentType: 'application/json', body: JSON.stringify(ev) };
	expect('good event card', checkHttp([good]), false);
	expect('event card without version', checkHttp([{ ...good,
		body: JSON.stringify({ ...ev, version: undefined }) }]), true);
	expect('event card with a status outside the enum', checkHttp([{ ...good,
		body: JSON.stringify({ ...ev, status: 'Done' }) }]), true);
	expect('event card with an extra-typed field', checkHttp([{ ...good,
		body: JSON.stringify({ ...ev, startAt: 'tomorrow' }) }]), true);
	expect('event card with an undocumented field', checkHttp([{ ...good,
		body: JSON.stringify({ ...ev, colour: 'red' }) }]), true);
	expect('undocumented status', checkHttp([{ ...good, status: 418 }]), true);
	expect('problem with a code outside the 404 enum', checkHttp([{ ...good, status: 404,
		contentType: 'application/problem+json', body: problem(404, 'SLOT_NOT_FOUND_X') }]), true);
	expect('problem as application/json', checkHttp([{ ...good, status: 404,
		contentType: 'application/json', body: problem(404, 'EVENT_NOT_FOUND') }]), true);
	expect('documented problem', checkHttp([{ ...good, status: 404,
		contentType: 'application/problem+json', body: problem(404, 'EVENT_NOT_FOUND') }]), false);
	const all = openapiOps(load(OPENAPI)).map((o) => `${o.method} ${o.path}`);
	const tmp = join(process.env.TMPDIR || '/tmp', `pin-routes-${process.pid}`);
	writeFileSync(tmp, all.join('\n'));
	expect('same routes', checkRoutes(tmp), false);
	writeFileSync(tmp, all.slice(1).join('\n'));
	expect('a documented route not registered', checkRoutes(tmp), true);
	writeFileSync(tmp, [...all, 'GET /api/v1/secret'].join('\n'));
	expect('a registered route not documented', checkRoutes(tmp), true);
	unlinkSync(tmp);
	const env = { messageId: '0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b',
		eventType: 'pin.calendar.event-rescheduled', contractVersion: 1,
		createdAt: '2026-12-01T09:00:00.123Z', aggregateType: 'CalendarEvent',
		aggregateId: ev.id, correlationId: null,
		payload: { eventId: ev.id, tenantId: ev.tenantId, ownerUserId: ev.ownerUserId,
			kind: 'Meeting', origin: 'Manual', clientUserId: null,
			startAt: '2026-12-17T09:00:00Z', endAt: '2026-12-17T10:00:00Z',
			timeZone: 'Europe/Moscow' } };
	const krec = (e, extra = {}) => ({ source: 'broker', topic: 'pin.calendar.event-rescheduled.v1',
		partition: 0, offset: 1, key: ev.id, value: JSON.stringify(e), ...extra });
	expect('good envelope', checkKafka([krec(env)]), false);
	expect('payload with a new field', checkKafka([krec({ ...env,
		payload: { ...env.payload, title: 'PII' } })]), true);
	expect('payload without a field', checkKafka([krec({ ...env,
		payload: { ...env.payload, timeZone: undefined } })]), true);
	expect('envelope without messageId', checkKafka([krec({ ...env, messageId: undefined })]), true);
	expect('wrong eventType', checkKafka([krec({ ...env, eventType: 'pin.calendar.event-created' })]), true);
	expect('key is not the aggregate', checkKafka([krec(env, { key: ev.tenantId })]), true);
	expect('undocumented pin.calendar topic', checkKafka([krec(env,
		{ topic: 'pin.calendar.event-renamed.v1' })]), true);
	expect('test fixture skipped', checkKafka([{ ...krec({ ...env, messageId: 1 }), source: 'test' },
		krec({ ...env, messageId: 1 })]), false);
	expect('null value from the service', checkKafka([krec(env, { value: null })]), true);
	expect('null value fixture skipped', checkKafka([krec(env, { value: null, source: 'test' }),
		krec(env, { value: null })]), false);
	expect('null value is not the fixture "null"', checkKafka([krec(env,
		{ value: 'null', source: 'test' }), krec(env, { value: null })]), true);
	return { bad: fails, info: 'broken responses and envelopes are refused' };
}

// --------------------------------------------------------------------- main
const [cmd, arg] = process.argv.slice(2);
let res;
try {
	if (cmd === 'routes' && arg) res = checkRoutes(arg);
	else if (cmd === 'http' && arg) {
		const { recs, bad } = readJsonl(arg);
		res = checkHttp(recs);
		if (bad) res.info += `, ${bad} unreadable lines`;
		if (recs.length === 0 && process.env.PIN_CONTRACT_REQUIRE_RECORDS === '1')
			res.bad.push(`${arg}: no response recorded`);
	} else if (cmd === 'kafka' && arg) {
		const { recs } = readJsonl(arg);
		res = checkKafka(recs);
		if (!recs.some((r) => r.source === 'broker') &&
		    process.env.PIN_CONTRACT_REQUIRE_RECORDS === '1')
			res.bad.push(`${arg}: no message recorded`);
	} else if (cmd === 'selftest') res = selftest();
	else {
		console.error('usage: check.mjs routes FILE | http FILE | kafka FILE | selftest');
		process.exit(2);
	}
} catch (e) {
	console.error(`contract ${cmd}: ${e.stack || e}`);
	process.exit(2);
}
for (const b of res.bad) console.error(`contract ${cmd}: VIOLATION ${b}`);
console.error(`contract ${cmd}: ${res.info}; ${res.bad.length} violation(s)`);
process.exit(res.bad.length ? 1 : 0);
