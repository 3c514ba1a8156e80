// check.mjs -- checks the running service against api/openapi.yaml and
// api/asyncapi.yaml (issue 16).  Node 20; the npm tools live in the folder
// named by PIN_CONTRACT_TOOLS (installed by ./dev, pinned in its package.json).
//
//   node check.mjs routes ROUTES_FILE        (method, path) of the document ==
//                                             `pin-host --list-routes` output, and
//                                             per route its actors, permission and
//                                             tenant == x-actors, x-permission,
//                                             x-requires-tenant
//   node check.mjs http HTTP_JSONL           every recorded response matches its
//                                             operation's documented response:
//                                             status, body, and headers (every
//                                             header sent is declared and valid,
//                                             every required one is sent)
//   node check.mjs lint                      rules of the document itself: every
//                                             problem response names its codes and
//                                             has an example per code, replay and
//                                             challenge headers declared, no
//                                             `default` in schemas (generated types)
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

// Who may call an operation, as `pin-host --list-routes` prints it:
// actors (sorted, "public" for no token), permission ("-": none), tenant.
function docAccess(op) {
	const actors = [...(op['x-actors'] || [])].sort().join(',') || 'public';
	return `actors=${actors}\tpermission=${op['x-permission'] || '-'}\t` +
		`tenant=${op['x-requires-tenant'] ? 'yes' : 'no'}`;
}

function checkRoutes(file) {
	const doc = load(OPENAPI);
	const ops = new Map(openapiOps(doc).map((o) => [`${o.method} ${o.path}`, o.op]));
	const host = new Map();
	for (const l of readFileSync(file, 'utf8').split('\n')) {
		if (!/^[A-Z]+ \//.test(l.trim())) continue;
		const [route, ...attrs] = l.trim().split('\t');
		// "actors=a,b" sorted like docAccess; older hosts print no attributes
		host.set(route, attrs.map((a) => a.startsWith('actors=')
			? 'actors=' + a.slice(7).split(',').sort().join(',') : a).join('\t'));
	}
	const bad = [];
	for (const [r, access] of host) {
		if (!ops.has(r)) bad.push(`registered but not in openapi.yaml: ${r}`);
		else if (access && access !== docAccess(ops.get(r)))
			bad.push(`${r}: the host allows ${access.replace(/\t/g, ' ')}, openapi.yaml ` +
				`says ${docAccess(ops.get(r)).replace(/\t/g, ' ')}`);
	}
	for (const r of ops.keys()) if (!host.has(r)) bad.push(`in openapi.yaml but not registered: ${r}`);
	if (host.size === 0) bad.push('pin-host --list-routes printed no route');
	return { bad, info: `${ops.size} operations documented, ${host.size} routes registered` };
}

// Headers any response may carry without an operation declaring them:
// HTTP's own framing and metadata.  Every other header the service sends is
// declared, either on the response or, for those every response of the host
// may carry (X-Request-Id, traceparent), in the document's
// x-every-response-headers.
const TRANSPORT_HEADERS = new Set(['date', 'server', 'content-type', 'content-length',
	'connection', 'keep-alive', 'transfer-encoding']);

// (headers object of the response, its JSON pointer) -> violations of the
// recorded headers rec.headers ({lower-case name: value}).
function headerChecker(doc) {
	const ajv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true });
	addFormats(ajv);
	ajv.addSchema(doc, 'openapi');
	const cache = new Map();
	const every = Object.fromEntries(Object.entries(doc['x-every-response-headers'] || {})
		.map(([k, v]) => [k.toLowerCase(), { name: k, h: v,
			ptr: `#/x-every-response-headers/${esc(k)}` }]));
	const valid = (ptr, value) => {
		let v = cache.get(ptr);
		if (!v) {
			// the value is a string; coerceTypes reads "3600" as an integer
			v = ajv.compile({ type: 'object', properties: { v: { $ref: `openapi${ptr}` } } });
			cache.set(ptr, v);
		}
		return v({ v: value }) ? null : ajv.errorsText(v.errors, { separator: '; ' });
	};
	return (headers, hptr, got) => {
		const errs = [];
		const declared = new Map(Object.entries(headers || {}).map(([k, v]) =>
			[k.toLowerCase(), { name: k, ptr: `${hptr}/${esc(k)}`, h: v }]));
		for (const [name, value] of Object.entries(got)) {
			const d = declared.get(name) || every[name];
			if (!d) {
				if (!TRANSPORT_HEADERS.has(name))
					errs.push(`header ${name} sent but not declared`);
				continue;
			}
			const { node: h, ptr } = deref(doc, d.h, d.ptr);
			if (h?.schema) {
				const e = valid(`${ptr}/schema`, value);
				if (e) errs.push(`header ${d.name}: ${JSON.stringify(value)} ${e}`);
			}
		}
		for (const [name, d] of declared) {
			const { node: h } = deref(doc, d.h, d.ptr);
			if (h?.required && !(name in got))
				errs.push(`required header ${d.name} not sent`);
		}
		return errs;
	};
}

function httpValidator(doc) {
	const ajv = new Ajv2020({ strict: false, allErrors: true });
	addFormats(ajv);
	ajv.addSchema(doc, 'openapi');
	const ops = openapiOps(doc);
	const cache = new Map();
	const checkHeaders = headerChecker(doc);
	return (rec) => {
		const path = rec.path.split('?')[0];
		const cands = ops.filter((o) => o.method === rec.method && o.re.test(path))
			.sort((a, b) => a.params - b.params);
		// a method the documented path does not have: the host's 405
		// (x-method-not-allowed), Allow = the path's methods, HEAD with GET
		// (nginx refuses TRACE itself, before any route: no Allow there)
		const others = ops.filter((o) => o.re.test(path));
		if (cands.length === 0 && others.length && rec.status === 405 &&
		    rec.method !== 'TRACE' && doc['x-method-not-allowed']) {
			const where = `${rec.method} ${path} -> 405`;
			const have = new Set(others.map((o) => o.method));
			if (have.has('GET')) have.add('HEAD');
			const want = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']
				.filter((m) => have.has(m));
			const allow = rec.headers?.allow;
			if (rec.headers && allow !== undefined &&
			    [...new Set(allow.split(',').map((m) => m.trim()))].sort().join() !==
			    [...want].sort().join())
				return { error: `${where}: Allow ${JSON.stringify(allow)}, the path has ` +
					want.join(', ') };
			return checkResponse(doc['x-method-not-allowed'], '#/x-method-not-allowed',
				where, rec);
		}
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
		return checkResponse(resp, ptr, where, rec);
	};
	// the recorded response rec against the documented response resp at ptr
	function checkResponse(resp, ptr, where, rec) {
		// records of an older harness carry no headers
		if (rec.headers) {
			const errs = checkHeaders(resp.headers, `${ptr}/headers`, rec.headers);
			if (errs.length)
				return { error: `${where}: ${errs.join('; ')}` };
		}
		// HEAD answers the head alone
		if (rec.method === 'HEAD' && rec.body.length === 0)
			return { ok: where };
		if (!resp.content)
			return rec.body.length === 0 ? { ok: where }
				: { error: `${where}: documented without a body, got ${rec.body.slice(0, 200)}` };
		const ct = (rec.contentType || '').split(';')[0].trim().toLowerCase();
		if (!resp.content[ct])
			return { error: `${where}: content type ${ct || '(none)'} not documented ` +
				`(${Object.keys(resp.content).join(', ')})` };
		// a text body (the text/html manage page): its documented media type
		// is the contract
		if (!/[/+]json$/.test(ct))
			return { ok: where };
		let body;
		if (!/(^application\/|\+)json$/.test(ct)) {
			// a text media type (the calendar feed's text/calendar): the
			// body is the string its schema describes
			body = rec.body;
		} else {
			try {
				body = JSON.parse(rec.body);
			} catch (e) {
				return { error: `${where}: body is not JSON: ${rec.body.slice(0, 200)}` };
			}
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
	}
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

// ------------------------------------------------------------ OpenAPI lint
// The status and code constraints of a problem schema (through $ref and
// allOf): { status, codes } (codes: a Set, null when unconstrained).
function problemConstraints(doc, schema, ptr) {
	let status = null, codes = null;
	const walk = (node, p, depth) => {
		({ node, ptr: p } = deref(doc, node, p));
		if (!node || typeof node !== 'object' || depth > 20) return;
		const st = node.properties?.status, c = node.properties?.code;
		if (st?.const !== undefined) status = st.const;
		const set = c?.const !== undefined ? [c.const] : c?.enum;
		if (set) codes = codes ? new Set([...codes].filter((x) => set.includes(x))) : new Set(set);
		(node.allOf || []).forEach((s, i) => walk(s, `${p}/allOf/${i}`, depth + 1));
	};
	walk(schema, ptr, 0);
	return { status, codes };
}

// Every `default` keyword under node (examples are data, not schemas).
function defaultsUnder(node, path, out) {
	if (!node || typeof node !== 'object') return out;
	for (const [k, v] of Object.entries(node)) {
		if (k === 'example' || k === 'examples') continue;
		if (k === 'default' && typeof v !== 'object') out.push(path);
		else defaultsUnder(v, `${path}/${k}`, out);
	}
	return out;
}

// Rules of the document itself (run by ./dev's contract_lint).
function lint(doc = load(OPENAPI)) {
	const bad = [];
	const ajv = new Ajv2020({ strict: false, allErrors: true });
	addFormats(ajv);
	ajv.addSchema(doc, 'openapi');
	const isParam = (p, name) => deref(doc, p, '').ptr === `#/components/parameters/${name}`;
	let nops = 0, ncodes = 0;
	for (const o of openapiOps(doc)) {
		const at = `${o.method} ${o.path}`, op = o.op, resp = op.responses || {};
		const base = `#/paths/${esc(o.path)}/${o.method.toLowerCase()}/responses`;
		const get = (st) => deref(doc, resp[st], `${base}/${st}`);
		const codesOf = (st) => {
			const { node, ptr } = get(st);
			const m = node?.content?.['application/problem+json'];
			return m ? problemConstraints(doc, m.schema,
				`${ptr}/content/application~1problem+json/schema`).codes : null;
		};
		const header = (st, name) => {
			const h = Object.entries(get(st).node?.headers || {})
				.find(([k]) => k.toLowerCase() === name.toLowerCase());
			return h ? deref(doc, h[1], '').node : null;
		};
		nops++;
		if (!Array.isArray(op['x-actors']) || !op['x-actors'].length)
			bad.push(`${at}: no x-actors`);
		for (const st of Object.keys(resp)) {
			const { node: r, ptr } = get(st);
			if (!r) { bad.push(`${at} ${st}: dangling $ref`); continue; }
			for (const [ct, m] of Object.entries(r.content || {})) {
				const sptr = `${ptr}/content/${esc(ct)}/schema`;
				const v = ajv.compile({ $ref: `openapi${sptr}` });
				const exs = Object.entries(m.examples || {}).map(([k, e]) =>
					[k, deref(doc, e, '').node]);
				if (m.example !== undefined) exs.push(['example', { value: m.example }]);
				for (const [k, e] of exs)
					if (e && 'value' in e && !v(e.value))
						bad.push(`${at} ${st}: example ${k} does not match the schema: ` +
							ajv.errorsText(v.errors, { separator: '; ' }));
				if (ct !== 'application/problem+json') continue;
				// a problem response names its codes and, per code, when
				const { status, codes } = problemConstraints(doc, m.schema, sptr);
				if (String(status) !== st)
					bad.push(`${at} ${st}: the problem schema does not fix status ${st}`);
				if (!codes || !codes.size) {
					bad.push(`${at} ${st}: the problem schema does not list its codes`);
					continue;
				}
				ncodes += codes.size;
				for (const c of codes) {
					const ex = exs.find(([, e]) => e?.value?.code === c);
					if (!ex) bad.push(`${at} ${st}: no example of code ${c}`);
					else if (!ex[1].summary)
						bad.push(`${at} ${st}: example ${ex[0]} has no summary (when ${c} is answered)`);
				}
				for (const c of codes)
					if (!(r.description || '').includes(`\`${c}\``))
						bad.push(`${at} ${st}: the description does not say when \`${c}\` is answered`);
				for (const [k, e] of exs)
					if (e?.value?.code && !codes.has(e.value.code))
						bad.push(`${at} ${st}: example ${k} has code ${e.value.code}, not in the schema`);
			}
		}
		// openapi-typescript types a $ref'd response header as always sent
		for (const st of Object.keys(resp))
			for (const [k, h] of Object.entries(get(st).node?.headers || {}))
				if (h.$ref && !deref(doc, h, '').node?.required)
					bad.push(`${at} ${st}: header ${k} is optional but a $ref (generated ` +
						'types make it required): write it inline');
		if (op.security?.some((r) => Object.keys(r).length) &&
		    !header('401', 'WWW-Authenticate')?.required)
			bad.push(`${at}: 401 without a required WWW-Authenticate header`);
		for (const st of ['429', '503'])
			if (resp[st] && !header(st, 'Retry-After')?.required)
				bad.push(`${at}: ${st} without a required Retry-After header`);
		for (const st of ['400', '500', '503'])
			if (!resp[st]) bad.push(`${at}: ${st} not documented`);
		const params = [...(doc.paths[o.path].parameters || []), ...(op.parameters || [])];
		if (params.some((p) => isParam(p, 'IdempotencyKey'))) {
			for (const st of Object.keys(resp).filter((x) => /^2/.test(x)))
				if (!header(st, 'Idempotent-Replayed'))
					bad.push(`${at} ${st}: Idempotency-Key replays send Idempotent-Replayed, not declared`);
			if (!codesOf('422')?.has('VALIDATION_FAILED'))
				bad.push(`${at}: Idempotency-Key reused with another request is 422 VALIDATION_FAILED, not documented`);
		}
		if (params.some((p) => isParam(p, 'IfMatch')) && !codesOf('409')?.has('VERSION_CONFLICT'))
			bad.push(`${at}: If-Match without 409 VERSION_CONFLICT`);
		if (op.requestBody && !resp['413']) bad.push(`${at}: a request body but no 413`);
	}
	// the 405 no operation can declare: problem+json, its examples valid,
	// Allow required (RFC 9110 15.5.6)
	const na = doc['x-method-not-allowed'];
	if (!na) bad.push('no x-method-not-allowed (the 405 with Allow)');
	else {
		const m = na.content?.['application/problem+json'];
		const v = m && ajv.compile({ $ref: 'openapi#/x-method-not-allowed/content/' +
			'application~1problem+json/schema' });
		if (!v) bad.push('x-method-not-allowed: no application/problem+json schema');
		for (const [k, e] of Object.entries(m?.examples || {}))
			if (v && !v(e.value))
				bad.push(`x-method-not-allowed: example ${k} does not match the schema: ` +
					ajv.errorsText(v.errors, { separator: '; ' }));
		if (!Object.entries(na.headers || {}).some(([k, h]) =>
			k.toLowerCase() === 'allow' && h.required))
			bad.push('x-method-not-allowed: no required Allow header');
	}
	// openapi-typescript makes a property with a default required in the
	// generated type: defaults are said in descriptions instead
	for (const [name, node] of [['schemas', doc.components?.schemas],
		['requestBodies', doc.components?.requestBodies]])
		for (const p of defaultsUnder(node, `#/components/${name}`, []))
			bad.push(`${p}: a \`default\` makes the property required in generated ` +
				'types (openapi-typescript); say the default in the description');
	return { bad, info: `${nops} operations, ${ncodes} (operation, status, code) listed` };
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
	// headers: every one sent is declared (or transport / every-response),
	// valid, and every required one is sent
	const hdr = (h) => ({ ...good, headers: { date: 'Fri, 04 Dec 2026 10:00:00 GMT',
		'content-type': 'application/json', 'x-request-id': 'abc', etag: '"1"', ...h } });
	expect('declared headers', checkHttp([hdr({})]), false);
	expect('an undeclared header', checkHttp([hdr({ 'x-powered-by': 'pin' })]), true);
	expect('a required header missing', checkHttp([hdr({ etag: undefined })].map((r) =>
		({ ...r, headers: Object.fromEntries(Object.entries(r.headers)
			.filter(([, v]) => v !== undefined)) }))), true);
	expect('a header outside its schema', checkHttp([hdr({ etag: '1' })]), true);
	expect('a replay header on a read', checkHttp([hdr({ 'idempotent-replayed': 'true' })]), true);
	const created = { ...good, method: 'POST', path: '/api/v1/agent/calendar/events', status: 201,
		headers: { location: `/api/v1/agent/calendar/events/${ev.id}`, etag: '"1"' } };
	expect('a first 201', checkHttp([created]), false);
	expect('a replayed 201', checkHttp([{ ...created,
		headers: { ...created.headers, 'idempotent-replayed': 'true' } }]), false);
	expect('a replay answered 200', checkHttp([{ ...created, status: 200,
		headers: { ...created.headers, 'idempotent-replayed': 'true' } }]), true);
	const unauth = { ...good, status: 401, contentType: 'application/problem+json',
		body: problem(401, 'UNAUTHENTICATED') };
	expect('a 401 without WWW-Authenticate', checkHttp([{ ...unauth, headers: {} }]), true);
	expect('a 401 with WWW-Authenticate', checkHttp([{ ...unauth,
		headers: { 'www-authenticate': 'Bearer realm="pin-calendar"' } }]), false);
	expect('a validation problem without errors', checkHttp([{ ...created, status: 422,
		contentType: 'application/problem+json', body: problem(422, 'UNKNOWN_TIME_ZONE'),
		headers: {} }]), true);
	// a method the path does not have: 405 with Allow = the path's methods
	const na = { method: 'DELETE', path: '/api/v1/agent/calendar/events/' + ev.id, status: 405,
		contentType: 'application/problem+json', body: problem(405, 'METHOD_NOT_ALLOWED'),
		headers: { allow: 'GET, HEAD, PATCH' } };
	expect('a 405 with Allow', checkHttp([na]), false);
	expect('a 405 without Allow', checkHttp([{ ...na, headers: {} }]), true);
	expect('a 405 with a wrong Allow', checkHttp([{ ...na,
		headers: { allow: 'GET, HEAD' } }]), true);
	expect('a 405 with another code', checkHttp([{ ...na,
		body: problem(405, 'ROUTE_NOT_FOUND') }]), true);
	expect('nginx\'s 405 to TRACE', checkHttp([{ ...na, method: 'TRACE', headers: {} }]), false);
	// routes: the set, and who may call each
	const docOps = openapiOps(load(OPENAPI));
	const all = docOps.map((o) => `${o.method} ${o.path}`);
	const withAccess = docOps.map((o) => `${o.method} ${o.path}\t${docAccess(o.op)}`);
	const tmp = join(process.env.TMPDIR || '/tmp', `pin-routes-${process.pid}`);
	writeFileSync(tmp, all.join('\n'));
	expect('same routes', checkRoutes(tmp), false);
	writeFileSync(tmp, withAccess.join('\n'));
	expect('same routes and access', checkRoutes(tmp), false);
	writeFileSync(tmp, withAccess.map((l) => l.startsWith('GET /api/v1/agency/calendar/events\t')
		? l.replace('actors=', 'actors=investor,') : l).join('\n'));
	expect('a route open to another actor', checkRoutes(tmp), true);
	writeFileSync(tmp, all.slice(1).join('\n'));
	expect('a documented route not registered', checkRoutes(tmp), true);
	writeFileSync(tmp, [...all, 'GET /api/v1/secret'].join('\n'));
	expect('a registered route not documented', checkRoutes(tmp), true);
	unlinkSync(tmp);
	// lint of the document
	const doc = () => load(OPENAPI);
	expect('the document', lint(doc()), false);
	let d = doc();
	delete d.components.examples.PDuplicate;
	delete d.components.responses.BookingConflict.content['application/problem+json']
		.examples.Duplicate;
	expect('a code without an example', lint(d), true);
	d = doc();
	d.components.responses.BookingConflict.content['application/problem+json'].schema
		.allOf[1].properties.code.enum.pop();
	expect('an example of a code not listed', lint(d), true);
	d = doc();
	d.components.schemas.BatchInput.properties.gapMinutes.default = 0;
	expect('a default in a request schema', lint(d), true);
	d = doc();
	delete d.paths['/api/v1/agent/calendar/slots/batches'].post.responses['201'].headers;
	expect('a replayable 201 without Idempotent-Replayed', lint(d), true);
	d = doc();
	d.components.headers.Replayed = { schema: { type: 'string' } };
	d.components.responses.EventCard.headers['Idempotent-Replayed'] =
		{ $ref: '#/components/headers/Replayed' };
	expect('an optional header by $ref', lint(d), true);
	d = doc();
	delete d.components.responses.Unauthenticated.headers;
	expect('a 401 without WWW-Authenticate', lint(d), true);
	d = doc();
	delete d['x-method-not-allowed'].headers;
	expect('a 405 without Allow', lint(d), true);
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
	} else if (cmd === 'lint') res = lint();
	else if (cmd === 'selftest') res = selftest();
	else {
		console.error('usage: check.mjs routes FILE | http FILE | kafka FILE | lint | selftest');
		process.exit(2);
	}
} catch (e) {
	console.error(`contract ${cmd}: ${e.stack || e}`);
	process.exit(2);
}
for (const b of res.bad) console.error(`contract ${cmd}: VIOLATION ${b}`);
console.error(`contract ${cmd}: ${res.info}; ${res.bad.length} violation(s)`);
process.exit(res.bad.length ? 1 : 0);
