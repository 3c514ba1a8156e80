/* request.c -- API mode: the request pipeline (route, auth, body, handler
 * with its database slot, response), fed by either server: fcgi_loop.c
 * (api_server = loop) or libfcgi's (fcgi.c, api_server = threads); fcgi.c
 * sizes and opens the database gate kept here. */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "api.h"

#define MAX_HEADERS 8
#define DRAIN_MAX (1024 * 1024)
#define TX_ATTEMPTS 3

struct kvp {
	char *k, *v;
};

struct pin_req {
	const struct pin_fcgi_io *io;
	const char *method;
	const char *path;
	const char *trace;
	struct pin_match match;
	json_object *body;
	struct pin_principal principal;
	bool has_principal;
	/* query, parsed lazily (arena) */
	bool query_parsed;
	bool query_bad;             /* a pair that does not decode (bad %, %00, not UTF-8) */
	struct kvp *query;
	size_t nquery;
	/* response */
	bool responded;
	int status;
	const char *content_type;
	const char *resp_body;    /* arena (or a json object the arena keeps) */
	size_t resp_len;
	struct kvp headers[MAX_HEADERS];
	int nheaders;
};
/* The cap on requests doing database work at once (config `db_concurrency`,
 * default 2 x cores).  Measured (doc/performance.md "Where the time goes"):
 * with 64 threads each
 * driving its own PostgreSQL backend on 2 cores, throughput fell and p99 grew
 * as more requests reached the database together; past the cap, requests
 * wait here, in the host, instead of in the kernel's run queue.
 *
 * The wait is first come, first served: a released slot is handed to the
 * oldest waiter (each waits on its own semaphore).  A counting
 * semaphore lets a thread that arrives just then take the slot before the
 * woken waiter runs, and that waiter queues again: on a loaded machine that
 * is a request waiting several rounds, a p99 many times the median.
 *
 * The waiter sleeps on its own semaphore, posted after the gate's mutex is
 * released.  A condition variable had to be signalled under the mutex (the
 * waiter lives on its own stack), and the woken waiter then blocked again
 * on that mutex: one more sleep and wake-up per queued request (doc/performance.md
 * "A cap on concurrent database work").  glibc's sem_post may still be returning when
 * the waiter has seen the post and left (its frame gone): glibc supports
 * that (sem_destroy right after sem_wait returns). */
struct gate_waiter {
	sem_t handed;            /* posted once slot is set */
	int slot;
	struct gate_waiter *next;
};

/* Each slot has its own PostgreSQL connection (pin_db_slot_use): a request
 * uses the connection of the slot it holds.  Free slots are a stack, the
 * slot released last (its backend's caches warmest) is taken first. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static int *gate_free;                       /* stack of free slots */
static int gate_nfree;
static struct gate_waiter *gate_head, *gate_tail;
static bool db_capped;

static void db_slot_take(void)
{
	struct gate_waiter w;

	if (!db_capped)
		return;
	pthread_mutex_lock(&gate_mu);
	if (gate_nfree > 0 && !gate_head) {
		w.slot = gate_free[--gate_nfree];
		pthread_mutex_unlock(&gate_mu);
		pin_db_slot_use(w.slot);
		return;
	}
	sem_init(&w.handed, 0, 0);
	w.slot = -1;
	w.next = NULL;
	if (gate_tail)
		gate_tail->next = &w;
	else
		gate_head = &w;
	gate_tail = &w;
	pthread_mutex_unlock(&gate_mu);
	while (sem_wait(&w.handed) != 0)
		;                        /* EINTR (SIGUSR1 of the drain) */
	sem_destroy(&w.handed);
	pin_db_slot_use(w.slot);
}

static void db_slot_give(void)
{
	struct gate_waiter *w;
	int slot = pin_db_slot_current();

	if (!db_capped)
		return;
	pin_db_slot_use(-1);
	pthread_mutex_lock(&gate_mu);
	w = gate_head;
	if (w) {
		/* hand the slot over: it never becomes free in between */
		gate_head = w->next;
		if (!gate_head)
			gate_tail = NULL;
		w->slot = slot;
	} else {
		gate_free[gate_nfree++] = slot;
	}
	pthread_mutex_unlock(&gate_mu);
	if (w)
		sem_post(&w->handed);   /* w may be gone once this returns */
}

/* Caps the requests doing database work at cap slots when the threads
 * could otherwise bring more to the database at once (each slot with its
 * own connection).  true: the gate is on. */
bool pin_api_gate_open(long long cap, int threads)
{
	if (cap < threads && (gate_free = calloc((size_t)cap, sizeof *gate_free)) &&
	    pin_db_pool_init((int)cap) == 0) {
		for (int k = (int)cap - 1; k >= 0; k--)
			gate_free[gate_nfree++] = k;
		db_capped = true;
		pin_db_pool_connect();
	}
	return db_capped;
}

/* no thread holds a slot */
void pin_api_gate_close(void)
{
	if (db_capped)
		pin_db_pool_close();
	db_capped = false;
	free(gate_free);
	gate_free = NULL;
	gate_nfree = 0;
}

/* ---- accessors --------------------------------------------------------- */

static const char *r_param(struct pin_req *r, const char *name)
{
	return r->io->param(r->io->h, name);
}

const char *pin_req_method(struct pin_req *r) { return r->method; }
const char *pin_req_path(struct pin_req *r) { return r->path; }
json_object *pin_req_body(struct pin_req *r) { return r->body; }
const char *pin_req_trace_id(struct pin_req *r) { return r->trace; }

const struct pin_principal *pin_req_principal(struct pin_req *r)
{
	return r->has_principal ? &r->principal : NULL;
}

const char *pin_req_param(struct pin_req *r, const char *name)
{
	for (int i = 0; i < r->match.nparams; i++) {
		const char *n = r->match.names[i];   /* "{id}" */
		size_t l = strlen(name);
		if (strlen(n) == l + 2 && strncmp(n + 1, name, l) == 0)
			return r->match.values[i];
	}
	return NULL;
}

static void parse_query(struct pin_req *r)
{
	const char *qs = r->io ? r_param(r, "QUERY_STRING") : NULL;
	size_t cap = 0;

	r->query_parsed = true;
	if (!qs || !*qs)
		return;
	for (const char *p = qs; *p; p++)
		if (*p == '&')
			cap++;
	cap++;
	r->query = pin_arena_alloc(cap * sizeof *r->query);
	if (!r->query)
		return;
	const char *p = qs;
	while (*p && r->nquery < cap) {
		const char *amp = strchr(p, '&');
		size_t len = amp ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t kl = eq ? (size_t)(eq - p) : len;
		char *k = pin_url_decode(p, kl);
		char *v = eq ? pin_url_decode(eq + 1, len - kl - 1) : strdup("");
		if (!k || !v || !pin_utf8_valid(k, strlen(k)) || !pin_utf8_valid(v, strlen(v)))
			r->query_bad = true;
		else if (*k) {
			r->query[r->nquery].k = pin_arena_strdup(k);
			r->query[r->nquery].v = pin_arena_strdup(v);
			r->nquery++;
		}
		free(k);
		free(v);
		if (!amp)
			break;
		p = amp + 1;
	}
}

const char *pin_req_query(struct pin_req *r, const char *name)
{
	if (!r->query_parsed)
		parse_query(r);
	for (size_t i = 0; i < r->nquery; i++)
		if (strcmp(r->query[i].k, name) == 0)
			return r->query[i].v;
	return NULL;
}

const char *pin_req_header(struct pin_req *r, const char *name)
{
	char env[128] = "HTTP_";
	size_t i;

	if (!r->io)
		return NULL;
	if (!strcasecmp(name, "Content-Type"))
		return r_param(r, "CONTENT_TYPE");
	if (!strcasecmp(name, "Content-Length"))
		return r_param(r, "CONTENT_LENGTH");
	for (i = 0; name[i] && i + 6 < sizeof env; i++)
		env[5 + i] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
	env[5 + i] = '\0';
	return r_param(r, env);
}

/* ---- responses ------------------------------------------------------------ */

int pin_set_header(struct pin_req *r, const char *name, const char *value)
{
	if (r->nheaders == MAX_HEADERS || !name || !value ||
	    strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return PIN_ERR;
	r->headers[r->nheaders].k = pin_arena_strdup(name);
	r->headers[r->nheaders].v = pin_arena_strdup(value);
	r->nheaders++;
	return 0;
}

int pin_respond_json(struct pin_req *r, int status, json_object *body)
{
	size_t len = 0;
	const char *s;

	if (r->responded) {
		json_object_put(body);
		return PIN_ERR;
	}
	/* the text lives in body's print buffer: the arena keeps body (and so
	 * the text) until the response is written, no copy */
	s = body ? json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE, &len) : "";
	if (!s) {
		s = "";
		len = 0;
	}
	r->resp_body = s;
	r->resp_len = len;
	pin_arena_track_json(body);
	r->status = status;
	r->content_type = "application/json";
	r->responded = true;
	return 0;
}

int pin_respond_json_text(struct pin_req *r, int status, char *text, size_t len)
{
	if (!text)
		return PIN_ERR;
	/* the arena frees the text after the response is written */
	if (r->responded || pin_arena_track_free(text) < 0) {
		free(text);
		return PIN_ERR;
	}
	r->resp_body = text;
	r->resp_len = len;
	r->status = status;
	r->content_type = "application/json";
	r->responded = true;
	return 0;
}

int pin_respond_body(struct pin_req *r, int status, const char *content_type,
		char *body, size_t len)
{
	if (!body)
		return PIN_ERR;
	/* the arena frees the body after the response is written */
	if (r->responded || !content_type || strpbrk(content_type, "\r\n") ||
	    pin_arena_track_free(body) < 0) {
		free(body);
		return PIN_ERR;
	}
	r->resp_body = body;
	r->resp_len = len;
	r->status = status;
	r->content_type = pin_arena_strdup(content_type);
	r->responded = true;
	return 0;
}

int pin_respond_problem(struct pin_req *r, int status, const char *code,
		const char *detail, json_object *errors)
{
	char *s;

	if (r->responded) {
		json_object_put(errors);
		return PIN_ERR;
	}
	s = pin_problem_body(status, code, detail, r->trace, errors);
	json_object_put(errors);
	if (!s)
		return PIN_ERR;
	r->resp_body = pin_arena_strdup(s);
	r->resp_len = strlen(s);
	free(s);
	r->status = status;
	r->content_type = "application/problem+json";
	r->responded = true;
	if (status >= 500)
		pin_log(PIN_LOG_WARN, "request failed", "code", code, "path", r->path,
			NULL);
	return 0;
}

static void respond_text(struct pin_req *r, int status, const char *ctype,
		const char *body)
{
	r->status = status;
	r->content_type = ctype;
	r->resp_body = pin_arena_strdup(body);
	r->resp_len = strlen(body);
	r->responded = true;
}

static void write_response(struct pin_req *r)
{
	char head[4096];
	int n;

	n = snprintf(head, sizeof head, "Status: %d %s\r\nContent-Type: %s\r\n"
		"Content-Length: %zu\r\nX-Request-Id: %s\r\n%s%s%s%s",
		r->status, pin_status_title(r->status), r->content_type,
		r->resp_len, r->trace, r->status == 503 ? "Retry-After: 1\r\n" : "",
		pin_traceparent_get() ? "traceparent: " : "",
		pin_traceparent_get() ? pin_traceparent_get() : "",
		pin_traceparent_get() ? "\r\n" : "");
	for (int i = 0; i < r->nheaders && n > 0 && (size_t)n < sizeof head; i++)
		n += snprintf(head + n, sizeof head - (size_t)n, "%s: %s\r\n",
			r->headers[i].k, r->headers[i].v);
	if (n < 0 || (size_t)n >= sizeof head - 2) {
		/* headers too big: a complete, empty 500 instead */
		pin_log(PIN_LOG_ERROR, "response headers too large", "path", r->path, NULL);
		n = snprintf(head, sizeof head, "Status: 500 Internal Server Error\r\n"
			"Content-Length: 0\r\nX-Request-Id: %s\r\n\r\n", r->trace);
		r->status = 500;
		r->resp_len = 0;
	} else {
		n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
	}
	r->io->write(r->io->h, head, (size_t)n, r->resp_body,
		strcmp(r->method, "HEAD") != 0 ? r->resp_len : 0);
}

/* ---- pipeline --------------------------------------------------------------- */

static void drain(struct pin_req *r)
{
	char buf[8192];
	size_t total = 0;
	int n;

	while (total < DRAIN_MAX && (n = r->io->read(r->io->h, buf, sizeof buf)) > 0)
		total += (size_t)n;
}

static bool json_content_type(const char *ct)
{
	size_t l = strlen("application/json");

	if (!ct)
		return false;
	while (*ct == ' ')
		ct++;
	return strncasecmp(ct, "application/json", l) == 0 &&
		(ct[l] == '\0' || ct[l] == ';' || ct[l] == ' ');
}

/* Reads the body into an arena buffer: 1 read (*out, *len), 0 no body,
 * -1 an error response was set. */
static int read_raw(struct pin_req *r, char **out, size_t *len)
{
	const char *cl = r_param(r, "CONTENT_LENGTH");
	char *end, *buf;
	long long n;
	int got = 0;

	if (r->io->body_over) {
		/* more STDIN than a body may hold, with or without (or
		 * against) Content-Length: never handed to the route */
		pin_respond_problem(r, 413, "PAYLOAD_TOO_LARGE",
			"request body is larger than 64 KiB", NULL);
		return -1;
	}
	if (!cl || !*cl)
		return 0;
	errno = 0;
	n = strtoll(cl, &end, 10);
	if (errno || *end || n < 0) {
		pin_respond_problem(r, 400, "MALFORMED_REQUEST", "bad Content-Length", NULL);
		return -1;
	}
	if (n == 0)
		return 0;
	if (n > PIN_MAX_BODY) {
		drain(r);
		pin_respond_problem(r, 413, "PAYLOAD_TOO_LARGE",
			"request body is larger than 64 KiB", NULL);
		return -1;
	}
	if (!json_content_type(r_param(r, "CONTENT_TYPE"))) {
		drain(r);
		pin_respond_problem(r, 400, "MALFORMED_REQUEST",
			"request body must be application/json", NULL);
		return -1;
	}
	buf = pin_arena_alloc((size_t)n + 1);
	if (!buf)
		return -1;
	while (got < n) {
		int k = r->io->read(r->io->h, buf + got, (int)(n - got));
		if (k <= 0)
			break;
		got += k;
	}
	if (got != n) {
		pin_respond_problem(r, 400, "MALFORMED_REQUEST", "truncated body", NULL);
		return -1;
	}
	buf[got] = '\0';
	*out = buf;
	*len = (size_t)got;
	return 1;
}

/* 0: body parsed (or none); -1: an error response was set.
 *   bytes that are not strict UTF-8 (utf8.c)   -> 400 MALFORMED_REQUEST
 *   invalid JSON                               -> 400 MALFORMED_REQUEST
 *   U+0000 ("\u0000") in any string            -> 422 VALIDATION_FAILED,
 *                                                 errors[].field = its path */
static int read_body(struct pin_req *r)
{
	char err[160], where[128];
	char *buf = NULL;
	size_t len = 0, i;
	int rc = read_raw(r, &buf, &len);

	if (rc <= 0)
		return rc;
	for (i = 0; i < len && isspace((unsigned char)buf[i]); i++)
		;
	if (i == len)
		return 0;           /* an all-whitespace body is "no body" */
	if (!pin_utf8_valid(buf, len)) {
		pin_respond_problem(r, 400, "MALFORMED_REQUEST",
			"request body is not valid UTF-8", NULL);
		return -1;
	}
	r->body = pin_json_parse(buf, len, err, sizeof err);
	if (!r->body) {
		pin_respond_problem(r, 400, "MALFORMED_REQUEST", err, NULL);
		return -1;
	}
	pin_arena_track_json(r->body);
	rc = pin_utf8_check_json(r->body, where, sizeof where);
	if (rc == PIN_UTF8_INVALID) {
		pin_respond_problem(r, 400, "MALFORMED_REQUEST",
			"request body is not valid UTF-8", NULL);
		return -1;
	}
	if (rc == PIN_UTF8_NUL) {
		json_object *errs = json_object_new_array(), *e = json_object_new_object();

		json_object_object_add(e, "field", json_object_new_string(where));
		json_object_object_add(e, "message",
			json_object_new_string("must not contain U+0000"));
		json_object_array_add(errs, e);
		pin_respond_problem(r, 422, "VALIDATION_FAILED",
			"a string holds U+0000", errs);
		return -1;
	}
	return 0;
}

static int authorize(struct pin_req *r, const struct pin_route *rt,
		struct pin_auth_principal *ap)
{
	const char *h = r_param(r, "HTTP_AUTHORIZATION");
	char err[160];
	bool ok = false;

	if (rt->actors == PIN_ACTOR_PUBLIC)
		return 0;
	if (!h || pin_auth_verify(h, ap, err, sizeof err) < 0) {
		char challenge[256];

		pin_auth_challenge(h, h ? err : NULL, challenge, sizeof challenge);
		pin_set_header(r, "WWW-Authenticate", challenge);
		pin_respond_problem(r, 401, "UNAUTHENTICATED",
			h ? err : "missing bearer token", NULL);
		return -1;
	}
	r->principal.sub = ap->sub;
	r->principal.tenant_id = ap->tenant_id[0] ? ap->tenant_id : NULL;
	r->principal.actor = ap->actor;
	r->principal.actor_bit = ap->actor_bit;
	r->principal.permissions = (const char *const *)ap->permissions;
	r->principal.n_permissions = ap->n_permissions;
	r->has_principal = true;
	if (!(rt->actors & ap->actor_bit)) {
		pin_respond_problem(r, 403, "FORBIDDEN",
			"this area is not open to your actor", NULL);
		return -1;
	}
	if (rt->permission) {
		for (size_t i = 0; i < ap->n_permissions; i++)
			if (!strcmp(ap->permissions[i], rt->permission))
				ok = true;
		if (!ok) {
			pin_respond_problem(r, 403, "FORBIDDEN",
				pin_arena_sprintf("permission %s required", rt->permission),
				NULL);
			return -1;
		}
	}
	if (rt->require_tenant && !r->principal.tenant_id) {
		pin_respond_problem(r, 403, "FORBIDDEN", "token has no tenant_id", NULL);
		return -1;
	}
	return 0;
}

static void builtin(struct pin_req *r, const char *what)
{
	if (!strcmp(what, "healthz")) {
		respond_text(r, 200, "application/json", "{\"status\":\"ok\"}");
	} else if (!strcmp(what, "readyz")) {
		PGresult *res;

		db_slot_take();
		res = pin_db_exec("SELECT 1", 0, NULL);
		db_slot_give();
		if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
			respond_text(r, 200, "application/json",
				"{\"status\":\"ready\",\"database\":\"up\"}");
		else
			pin_respond_problem(r, 503, "UNAVAILABLE", "database unreachable",
				NULL);
	} else {
		char *m = pin_metrics_render();
		respond_text(r, 200, "text/plain; version=0.0.4", m ? m : "");
		free(m);
	}
}

/* method, trace (a valid W3C traceparent is continued, else a sane
 * X-Request-Id is the trace id, else a new W3C trace id; a new span id for
 * this request either way) and path */
static void begin(struct pin_req *r, const struct pin_fcgi_io *io)
{
	const char *uri, *xid, *tp;
	char *path;

	r->io = io;
	r->method = r_param(r, "REQUEST_METHOD");
	if (!r->method)
		r->method = "GET";
	xid = r_param(r, "HTTP_X_REQUEST_ID");
	tp = r_param(r, "HTTP_TRACEPARENT");
	r->trace = pin_arena_strdup(pin_trace_start(tp));
	if (!pin_traceparent_valid(tp) && xid && strlen(xid) <= 64 && strspn(xid,
	    "0123456789abcdefABCDEF-_.:") == strlen(xid) && *xid) {
		r->trace = pin_arena_strdup(xid);
		pin_trace_set(r->trace);
	}
	/* route on the path as the client sent it (REQUEST_URI, still
	 * percent-encoded): the router decodes each parameter exactly once.
	 * DOCUMENT_URI is already decoded by nginx; decoding it again turned
	 * "%2525" into "%" (and made "%2F" split a segment). */
	uri = r_param(r, "REQUEST_URI");
	if (uri && *uri != '/' && strstr(uri, "://"))
		uri = strchr(strstr(uri, "://") + 3, '/');   /* absolute form */
	if (!uri || *uri != '/')
		uri = r_param(r, "DOCUMENT_URI");
	if (!uri)
		uri = "/";
	path = pin_arena_strdup(uri);
	if (strchr(path, '?'))
		*strchr(path, '?') = '\0';
	r->path = path;
}

/* builtins, then the route table.  0: r->match set; -1: answered. */
static int route(struct pin_req *r, const char **label)
{
	if ((!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD")) &&
	    (!strcmp(r->path, "/healthz") || !strcmp(r->path, "/readyz") ||
	     !strcmp(r->path, "/metrics"))) {
		*label = r->path;
		builtin(r, r->path + 1);
		return -1;
	}
	/* HEAD is GET without the body (RFC 9110 9.3.2): the GET route answers,
	 * nginx sends only the head */
	if (pin_router_match(pin_reg.routes, pin_reg.nroutes,
			strcmp(r->method, "HEAD") ? r->method : "GET", r->path, &r->match) < 0) {
		drain(r);
		if (r->match.method_mismatch) {
			/* RFC 9110 15.5.6: a 405 lists the methods the path has */
			char allow[128];

			if (pin_router_allow(pin_reg.routes, pin_reg.nroutes, r->path,
					allow, sizeof allow) > 0)
				pin_set_header(r, "Allow", allow);
			pin_respond_problem(r, 405, "METHOD_NOT_ALLOWED",
				"method not allowed on this path", NULL);
		} else
			pin_respond_problem(r, 404, "ROUTE_NOT_FOUND", "no such route", NULL);
		return -1;
	}
	*label = r->match.e->r.pattern;
	/* a query pair the handler could not see must not widen its answer
	 * (a filter dropped): refuse the request instead */
	if (!r->query_parsed)
		parse_query(r);
	if (r->query_bad) {
		drain(r);
		pin_respond_problem(r, 400, "MALFORMED_REQUEST",
			"malformed query string (a bad %-escape, %00 or not UTF-8)", NULL);
		return -1;
	}
	return 0;
}

/* Before run attempt + 1 after a conflict: a random 20-60 ms, then 40-120 ms.
 * The other party of a deadlock was woken by our abort, but it has to run to
 * take the row lock it waited for; a run started at once takes the lock
 * first and forms the same cycle again -- one deadlock_timeout (1 s) later,
 * three times, and 409 (seen on a loaded 2-core machine: the cancel of
 * test_appointments' deadlock_retried_not_500 failed three times with
 * 40P01 one second apart, while the other transaction never ran). */
static void conflict_backoff(int attempt)
{
	unsigned char b[2];
	int base = 20 << (attempt - 1);

	pin_rand_bytes(b, sizeof b);
	pin_sleep_ms(base + (int)(((unsigned)b[0] << 8 | b[1]) % (unsigned)(2 * base + 1)));
}

/* Runs the handler.  A deadlock or serialization failure aborted the
 * handler's transaction before it answered: everything it wrote is rolled
 * back, so the request runs again on a fresh transaction (at most
 * TX_ATTEMPTS runs, after a short random pause: conflict_backoff).
 * Returns the handler's last rc. */
static int run_with_retry(struct pin_req *r)
{
	int rc;

	pin_db_take_conflict();
	for (int attempt = 1;; attempt++) {
		pin_db_error_reset();
		rc = r->match.e->r.fn(r, r->match.e->r.ud);
		if (pin_db_in_tx())
			pin_db_rollback();
		if (r->responded || rc != PIN_ERR_DB || !pin_db_take_conflict())
			break;
		/* on a standby: a conflict with recovery; handle() goes to
		 * the primary instead of running again here */
		if (pin_db_read_bound())
			break;
		pin_metric_add("pin_http_tx_conflicts_total", NULL, 1);
		if (attempt == TX_ATTEMPTS) {
			pin_respond_problem(r, 409, "VERSION_CONFLICT",
				"concurrent update of the same data; retry", NULL);
			break;
		}
		r->nheaders = 0;
		conflict_backoff(attempt);
	}
	return rc;
}

/* The handler failed without answering: the SQLSTATE of the statement that
 * failed decides (README "Error classes").  503 only for an outage. */
static void answer_failure(struct pin_req *r, int rc)
{
	const char *state = pin_db_last_error();
	char detail[80];

	switch (pin_db_classify(state)) {
	case PIN_DBC_DATA:
		snprintf(detail, sizeof detail,
			"a value cannot be stored (SQLSTATE %s)", state);
		pin_respond_problem(r, 422, "DATA_EXCEPTION", detail, NULL);
		return;
	case PIN_DBC_INTEGRITY:
	case PIN_DBC_EXPECTED:
		snprintf(detail, sizeof detail,
			"the change conflicts with stored data (SQLSTATE %s)", state);
		pin_respond_problem(r, 409, "INTEGRITY_VIOLATION", detail, NULL);
		return;
	case PIN_DBC_PERMANENT:
		pin_log(PIN_LOG_ERROR, "handler failed on a non-transient SQLSTATE",
			"sqlstate", state, "path", r->path, NULL);
		pin_respond_problem(r, 500, "INTERNAL", "internal error", NULL);
		return;
	default:
		break;
	}
	if (rc == PIN_ERR_DB || !pin_db_conn())
		pin_respond_problem(r, 503, "UNAVAILABLE",
			"database unavailable, retry later", NULL);
	else
		pin_respond_problem(r, 500, "INTERNAL", "internal error", NULL);
}

static void count(const struct pin_req *r, const char *label, double t0)
{
	char lbl[512];
	const char *m = r->match.e || label[0] == '/' ? r->method : "other";

	snprintf(lbl, sizeof lbl, "route=\"%s\",method=\"%s\",status=\"%d\"",
		label, m, r->status);
	pin_metric_add("pin_http_requests_total", lbl, 1);
	snprintf(lbl, sizeof lbl, "route=\"%s\",method=\"%s\"", label, m);
	pin_metric_observe("pin_http_request_duration_seconds", lbl,
			pin_metrics_mono_s() - t0);
}

/* route -> auth -> body -> run-with-retry -> answer (+ metrics) */
void pin_fcgi_handle(const struct pin_fcgi_io *io)
{
	struct pin_req r = { 0 };
	struct pin_auth_principal ap = { 0 };
	const char *label = "none";
	double t0 = io->t_ready > 0 ? io->t_ready : pin_metrics_mono_s();
	int rc;

	begin(&r, io);
	if (route(&r, &label) < 0)
		goto send;
	if (authorize(&r, &r.match.e->r, &ap) < 0) {
		drain(&r);
		goto send;
	}
	if (read_body(&r) < 0)
		goto send;
	/* the slot first: its connection is the request's */
	db_slot_take();
	/* a read that tolerates staleness: on the standby when it is fit */
	if (r.match.e->replica_ok)
		pin_db_read_bind();
	if (!pin_db_conn()) {
		pin_respond_problem(&r, 503, "UNAVAILABLE", "database unreachable", NULL);
		db_slot_give();
		goto send;
	}
	rc = run_with_retry(&r);
	/* the standby failed under the request (stopped, conflict with
	 * recovery): the handler only reads, so it runs again on the primary */
	if (!r.responded && rc == PIN_ERR_DB && pin_db_read_bound() &&
	    pin_db_classify(pin_db_last_error()) == PIN_DBC_TRANSIENT) {
		pin_db_read_fallback("error");
		r.nheaders = 0;
		if (pin_db_conn())
			rc = run_with_retry(&r);
	}
	/* answer_failure reads the slot's connection (its last SQLSTATE) */
	if (!r.responded)
		answer_failure(&r, rc);
	db_slot_give();
send:
	if (!r.responded)
		pin_respond_problem(&r, 500, "INTERNAL", "internal error", NULL);
	pin_db_read_unbind();
	write_response(&r);
	count(&r, label, t0);
	pin_match_clear(&r.match);
	pin_auth_principal_clear(&ap);
	pin_trace_set(NULL);
}
