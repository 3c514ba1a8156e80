/*
 * test_stream.c -- real-time in-app notifications through nchan (issue 10
 * item 4): stream tickets, nginx's nchan_authorize_request -> pin-host,
 * the loopback-only publisher, and a real browser (headless Chromium driven
 * over the DevTools protocol by tests/integration/cdp.mjs) that opens an
 * EventSource, while the test books an appointment through the public API:
 * the notification goes relay -> Kafka -> notify consumer -> InApp row ->
 * inapp-publish job -> nchan -> the page, and must arrive within 2 s of the
 * row's creation.
 *
 * Needs PIN_SOURCE_DIR (for cdp.mjs), node (20+) and chromium on PATH.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "harness.h"

#define TICKET "/api/v1/me/notifications/stream-ticket"
#define STREAM "/api/v1/me/notifications/stream"
#define WAIT_MS 90000

/* ---- HTTP with a deadline (a stream that admits never ends) -------------- */

struct sresp {
	long status;
	char *ctype;
	char *body;
};

/* GET/POST url (absolute) for at most ms; an admitted stream ends by the
 * timeout, which is fine: the status and headers arrived. */
static struct sresp sget(const char *method, const char *url, int ms, const char *body)
{
	struct sresp r = { 0, NULL, NULL };
	struct h_buf b = { NULL, 0 };
	struct curl_slist *hl = curl_slist_append(NULL, strstr(url, "/_pin/ntf-pub/") ?
		"Accept: text/plain" : "Accept: text/event-stream");
	CURL *c = curl_easy_init();
	char *ct = NULL;
	CURLcode rc;

	ck_assert(c && hl);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (body) {
		hl = curl_slist_append(hl, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	rc = curl_easy_perform(c);
	ck_assert_msg(rc == CURLE_OK || rc == CURLE_OPERATION_TIMEDOUT, "%s %s: %s",
		method, url, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
	r.ctype = h_strdup(ct ? ct : "");
	r.body = h_strdup(b.p ? b.p : "");
	free(b.p);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return r;
}

static struct sresp stream_get(const char *query)
{
	return sget("GET", h_sprintf("%s" STREAM "%s", h_env("PIN_BASE_URL"), query), 1500,
		NULL);
}

/* ---- tickets ----------------------------------------------------------------- */

/* The hosts' ticket key: derived from jwt_hs256_secret (the dev config sets
 * no ntf_stream_secret), as stream.c documents. */
static void ticket_key(unsigned char key[32])
{
	FILE *f = fopen(h_env("PIN_JWT_SECRET_FILE"), "r");
	char secret[256] = "";
	unsigned int n = 0;
	size_t l;

	ck_assert(f != NULL);
	l = fread(secret, 1, sizeof(secret) - 1, f);
	fclose(f);
	while (l && (secret[l - 1] == '\n' || secret[l - 1] == ' '))
		l--;
	secret[l] = '\0';
	ck_assert(HMAC(EVP_sha256(), secret, (int)l,
		(const unsigned char *)"pin-ntf-stream-ticket-v1", 24, key, &n) && n == 32);
}

/* A ticket signed like the hosts sign them (for expired / far-future cases). */
static char *sign_ticket(const char *user, const char *tenant, long long exp)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char key[32], mac[32];
	unsigned int n = 0;
	char *msg = h_sprintf("pin-ntf-stream.v1|%s|%s|%lld", user, tenant, exp);
	char sig[44];
	size_t o = 0, i;

	ticket_key(key);
	ck_assert(HMAC(EVP_sha256(), key, 32, (const unsigned char *)msg, strlen(msg),
		mac, &n) && n == 32);
	for (i = 0; i + 2 < 32; i += 3) {
		unsigned v = (unsigned)mac[i] << 16 | (unsigned)mac[i + 1] << 8 | mac[i + 2];
		sig[o++] = tab[v >> 18 & 63];
		sig[o++] = tab[v >> 12 & 63];
		sig[o++] = tab[v >> 6 & 63];
		sig[o++] = tab[v & 63];
	}
	{
		unsigned v = (unsigned)mac[30] << 16 | (unsigned)mac[31] << 8;
		sig[o++] = tab[v >> 18 & 63];
		sig[o++] = tab[v >> 12 & 63];
		sig[o++] = tab[v >> 6 & 63];
	}
	sig[o] = '\0';
	return h_sprintf("%s.%s.%lld.%s", user, tenant, exp, sig);
}

static const char *get_ticket(const char *token)
{
	struct h_resp *r = h_post(TICKET, token, NULL);

	ck_assert_msg(r->status == 200, "ticket: %ld %s", r->status, r->body);
	ck_assert_ptr_nonnull(h_jstr(r->json, "ticket"));
	return h_jstr(r->json, "ticket");
}

/* ---- cases --------------------------------------------------------------------- */

START_TEST(ticket_and_auth)
{
	const char *user = h_uuid(), *tenant = h_uuid(), *other = h_uuid();
	char *tok = h_token("agent", user, tenant);
	char *tok_inv = h_token("investor", other, NULL);
	struct h_resp *r;
	struct sresp s;
	const char *t, *t_other, *sig;
	long long now = (long long)time(NULL);

	/* the ticket route wants the JWT */
	r = h_post(TICKET, NULL, NULL);
	h_assert_problem(r, 401, "UNAUTHENTICATED");
	r = h_post(TICKET, tok, "{\"ttl\":999999}");     /* NoFields */
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(TICKET, tok, NULL);
	ck_assert_int_eq(r->status, 200);
	t = h_jstr(r->json, "ticket");
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(!strncmp(t, h_sprintf("%s.%s.", user, tenant), 74), "ticket %s", t);
	ck_assert_str_eq(h_jstr(r->json, "channel"), h_sprintf("ntf.%s", user));
	ck_assert_str_eq(h_jstr(r->json, "streamUrl"), h_sprintf(STREAM "?ticket=%s", t));
	ck_assert_ptr_nonnull(h_jstr(r->json, "expiresAt"));
	t_other = get_ticket(tok_inv);      /* no tenant: "-" */
	ck_assert_msg(!strncmp(t_other, h_sprintf("%s.-.", other), 39), "%s", t_other);

	/* a valid ticket opens the stream (SSE; nchan answers 200 and holds) */
	s = stream_get(h_sprintf("?ticket=%s", t));
	ck_assert_msg(s.status == 200, "stream: %ld %s", s.status, s.body);
	ck_assert_msg(strstr(s.ctype, "text/event-stream"), "content type %s", s.ctype);
	s = stream_get(h_sprintf("?ticket=%s", t_other));
	ck_assert_int_eq(s.status, 200);

	/* refused: 403 problem+json, nothing streamed */
	s = stream_get("");
	ck_assert_int_eq(s.status, 403);
	ck_assert_msg(strstr(s.body, "NTF_STREAM_FORBIDDEN"), "%s", s.body);
	s = stream_get("?ticket=garbage");
	ck_assert_int_eq(s.status, 403);
	/* forged: one signature character changed */
	{
		char *f = h_strdup(t);
		size_t l = strlen(f);

		f[l - 2] = f[l - 2] == 'A' ? 'B' : 'A';
		s = stream_get(h_sprintf("?ticket=%s", f));
		ck_assert_int_eq(s.status, 403);
	}
	/* another user's channel: the other user's id with this ticket's rest */
	sig = strchr(t, '.');
	s = stream_get(h_sprintf("?ticket=%s%s", other, sig));
	ck_assert_int_eq(s.status, 403);
	/* a forged ticket for the other user first, a valid one second: nginx
	 * and the host both take the first ticket -> refused */
	s = stream_get(h_sprintf("?ticket=%s%s&ticket=%s", other, sig, t));
	ck_assert_int_eq(s.status, 403);
	/* expired, and valid-signed but beyond the configured lifetime */
	s = stream_get(h_sprintf("?ticket=%s", sign_ticket(user, tenant, now - 5)));
	ck_assert_int_eq(s.status, 403);
	s = stream_get(h_sprintf("?ticket=%s", sign_ticket(user, tenant, now + 86400)));
	ck_assert_int_eq(s.status, 403);
	/* ... while the same signer with a current expiry is admitted (the test
	 * signs like the hosts do, so the two refusals above are real) */
	s = stream_get(h_sprintf("?ticket=%s", sign_ticket(user, tenant, now + 30)));
	ck_assert_int_eq(s.status, 200);
	/* upper-case id (another spelling nginx would map elsewhere): refused */
	{
		char *u = h_strdup(t);

		for (char *p = u; *p && *p != '.'; p++)
			if (*p >= 'a' && *p <= 'f')
				*p = (char)(*p - 'a' + 'A');
		s = stream_get(h_sprintf("?ticket=%s", u));
		ck_assert_int_eq(s.status, 403);
	}
}
END_TEST

START_TEST(publisher_is_local_only)
{
	const char *user = h_uuid(), *base = h_env("PIN_BASE_URL");
	const char *pub = h_env("PIN_NCHAN_PUBLISH_URL");
	const char *t = get_ticket(h_token("agent", user, h_uuid()));
	struct sresp s;

	/* the public port has no publisher and no auth route */
	s = sget("POST", h_sprintf("%s/_pin/ntf-pub/ntf.%s", base, user), 3000, "{\"x\":1}");
	ck_assert_msg(s.status == 404 || s.status == 403, "public publish: %ld", s.status);
	s = sget("GET", h_sprintf("%s/_pin/ntf-pub/ntf.%s", base, user), 3000, NULL);
	ck_assert_msg(s.status == 404 || s.status == 403, "public channel info: %ld", s.status);
	s = sget("GET", h_sprintf("%s/_pin/notifications/stream-auth?ticket=%s", base, t),
		3000, NULL);
	ck_assert_int_eq(s.status, 404);
	/* the subscriber location does not accept a publish either */
	s = sget("POST", h_sprintf("%s" STREAM "?ticket=%s", base, t), 3000, "{\"x\":1}");
	ck_assert_msg(s.status >= 400, "publish through the stream url: %ld", s.status);
	/* the loopback publisher works (202: no subscriber yet) */
	s = sget("POST", h_sprintf("%sntf.%s", pub, user), 3000, "{\"probe\":true}");
	ck_assert_msg(s.status == 201 || s.status == 202, "local publish: %ld %s",
		s.status, s.body);
	/* ... and only for notification channels */
	s = sget("POST", h_sprintf("%sother", pub), 3000, "{\"probe\":true}");
	ck_assert_int_eq(s.status, 404);
}
END_TEST

/* An InApp row written straight into the table (created now - age_s),
 * parked for the long-running worker until now + park_s. */
static char *park_row(const char *user, int age_s, int park_s)
{
	char *id = h_uuid();

	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, kind, channel, "
		"urgency, role, title, body, payload, locale, source_message_id, "
		"source_event_type, created_at, publish_next_at) VALUES ($1::uuid, $2::uuid, "
		"'CalendarReminder', 'InApp', 'Normal', 'Owner', 't', 'b', '{}', 'ru', "
		"gen_random_uuid(), 'test', now() - make_interval(secs => $3::int), "
		"CASE WHEN $4::int > 0 THEN now() + make_interval(secs => $4::int) END)",
		id, user, h_sprintf("%d", age_s), h_sprintf("%d", park_s));
	return id;
}

static const char *pub_col(const char *id, const char *col)
{
	return h_sql_scalar(h_sprintf("SELECT coalesce(%s::text, 'null') FROM "
		"notifications.notifications WHERE id = $1::uuid", col), id);
}

/* nginx's publisher refuses (nothing listens): the row backs off and is
 * counted; once the publisher is back it is published once.  Runs the
 * worker once with the clock 2 h ahead, where the long-running worker (real
 * time) does not see the parked row. */
START_TEST(publish_failure_backs_off_then_publishes)
{
	const char *user = h_uuid(), *id = park_row(user, 0, 7200);
	const char *good = h_env("PIN_NCHAN_PUBLISH_URL");
	long long due;

	ck_assert_int_eq(setenv("PIN_NCHAN_PUBLISH_MAX_AGE_S", "86400", 1), 0);
	ck_assert_int_eq(setenv("PIN_NCHAN_PUBLISH_URL", "http://127.0.0.1:1/_pin/ntf-pub/", 1), 0);
	ck_assert_int_eq(h_run_worker_once(7300), 0);
	ck_assert_str_eq(pub_col(id, "published_at"), "null");
	ck_assert_str_eq(pub_col(id, "publish_attempts"), "1");
	/* next attempt 1 s after the (shifted) failure */
	due = h_sql_int("SELECT extract(epoch FROM publish_next_at - now())::bigint "
		"FROM notifications.notifications WHERE id = $1::uuid", id);
	ck_assert_msg(due >= 7290 && due <= 7310, "publish_next_at in %lld s", due);
	/* a second failure doubles the wait */
	ck_assert_int_eq(h_run_worker_once(7400), 0);
	ck_assert_str_eq(pub_col(id, "publish_attempts"), "2");
	due = h_sql_int("SELECT extract(epoch FROM publish_next_at - now())::bigint "
		"FROM notifications.notifications WHERE id = $1::uuid", id);
	ck_assert_msg(due >= 7390 && due <= 7410, "publish_next_at in %lld s", due);
	/* not due yet at +7401: nothing happens */
	ck_assert_int_eq(setenv("PIN_NCHAN_PUBLISH_URL", good, 1), 0);
	ck_assert_int_eq(h_run_worker_once(7395), 0);
	ck_assert_str_eq(pub_col(id, "published_at"), "null");
	/* the publisher is back: published, the attempts stay as they were */
	ck_assert_int_eq(h_run_worker_once(7500), 0);
	ck_assert_str_ne(pub_col(id, "published_at"), "null");
	ck_assert_str_eq(pub_col(id, "publish_attempts"), "2");
	ck_assert_str_eq(pub_col(id, "publish_next_at"), "null");
}
END_TEST

/* A burst drains without waiting for the job's interval (issue 31 item 2):
 * 150 rows of one user, due only for a worker 2 h ahead, are all pushed by
 * ONE pass of the --once worker (a full take of 100 is followed by the next
 * at once).  Before, a pass took 100 rows and the rest waited for the next
 * interval: at most ~270 rows/s, and a burst queued for seconds. */
START_TEST(burst_drains_in_one_pass)
{
	const char *user = h_uuid();
	struct sresp s;
	const char *q;

	ck_assert_int_eq(setenv("PIN_NCHAN_PUBLISH_MAX_AGE_S", "86400", 1), 0);
	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, kind, channel, "
		"urgency, role, title, body, payload, locale, source_message_id, "
		"source_event_type, created_at, publish_next_at) SELECT gen_random_uuid(), "
		"$1::uuid, 'CalendarReminder', 'InApp', 'Normal', 'Owner', 't' || i, 'b', '{}', "
		"'ru', gen_random_uuid(), 'test', now() + i * interval '1 ms', "
		"now() + interval '2 hours' FROM generate_series(1, 150) AS i", user);
	ck_assert_int_eq(h_run_worker_once(7300), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND published_at IS NOT NULL", user), 150);
	/* ... and nchan got them (its buffer keeps the last 50) */
	s = sget("GET", h_sprintf("%sntf.%s", h_env("PIN_NCHAN_PUBLISH_URL"), user), 3000, NULL);
	q = strstr(s.body, "queued messages: ");
	ck_assert_msg(s.status == 200 && q && atoi(q + 17) == 50, "channel info: %ld %s",
		s.status, s.body);
}
END_TEST

/* A row older than nchan_publish_max_age_s (3600) is given up without a
 * push; a fresh one is pushed (both by the long-running worker). */
START_TEST(old_rows_are_not_pushed)
{
	const char *user = h_uuid();
	const char *old = park_row(user, 7200, 0), *fresh = park_row(user, 0, 0);

	ck_assert_msg(H_WAIT_UNTIL(strcmp(pub_col(old, "published_at"), "null") &&
		strcmp(pub_col(fresh, "published_at"), "null"), 10000), "rows not taken");
	ck_assert_str_eq(pub_col(old, "publish_attempts"), "0");
	ck_assert_str_eq(pub_col(fresh, "publish_attempts"), "0");
	/* nchan's channel info (GET on the publisher): one message, the fresh one */
	{
		struct sresp s = sget("GET", h_sprintf("%sntf.%s", h_env("PIN_NCHAN_PUBLISH_URL"),
			user), 3000, NULL);

		const char *q = strstr(s.body, "queued messages: ");

		ck_assert_msg(s.status == 200 && q && atoi(q + 17) == 1,
			"channel info: %ld %s", s.status, s.body);
	}
}
END_TEST

/* ---- the browser ------------------------------------------------------------------ */

static char *js(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *js(const char *fmt, ...)
{
	va_list ap;
	char *expr = NULL;

	va_start(ap, fmt);
	ck_assert(vasprintf(&expr, fmt, ap) >= 0);
	va_end(ap);
	{
		char *v = h_cdp_op("eval", "expr", expr);

		free(expr);
		return v;
	}
}

/* The page's side, exactly what an application would do (the snippet of doc/api.md):
 * ticket with the JWT, then an EventSource on the ticket's streamUrl. */
static const char PAGE_JS[] =
	"window.S = {};"
	"window.listen = (name, url) => new Promise((resolve) => {"
	"  const s = { events: [], state: 'connecting' }; S[name] = s;"
	"  const es = new EventSource(url); s.es = es;"
	"  es.onopen = () => { s.state = 'open'; resolve('open'); };"
	"  es.onmessage = (e) => s.events.push({ lastEventId: e.lastEventId,"
	"    data: JSON.parse(e.data), at: Date.now() });"
	"  es.onerror = () => { if (es.readyState === EventSource.CLOSED) {"
	"    s.state = 'closed'; resolve('closed'); } };"
	"  setTimeout(() => resolve(s.state), 8000);"
	"});"
	"window.ws_listen = (name, url) => new Promise((resolve) => {"
	"  const s = { events: [], state: 'connecting' }; S[name] = s;"
	"  const w = new WebSocket(url); s.ws = w;"
	"  w.onopen = () => { s.state = 'open'; resolve('open'); };"
	"  w.onmessage = (e) => s.events.push({ data: JSON.parse(e.data), at: Date.now() });"
	"  w.onclose = () => { if (s.state !== 'open') resolve('closed'); s.state = 'closed'; };"
	"  setTimeout(() => resolve(s.state), 8000);"
	"});"
	"window.open_ws = async (name, jwt) => {"
	"  const r = await fetch('" TICKET "', { method: 'POST',"
	"    headers: { Authorization: 'Bearer ' + jwt } });"
	"  const t = await r.json();"
	"  return ws_listen(name, 'ws://' + location.host + t.streamUrl);"
	"};"
	"window.open_stream = async (name, jwt, extra) => {"
	"  const r = await fetch('" TICKET "', { method: 'POST',"
	"    headers: { Authorization: 'Bearer ' + jwt } });"
	"  if (r.status !== 200) return 'ticket ' + r.status;"
	"  const t = await r.json();"
	"  return listen(name, t.streamUrl + (extra || ''));"
	"};"
	"'ok'";

/* Publishes n one-hour slots for the agent, days ahead; returns slot ids. */
static const char *slot_of(const char *agent_tok, int days, int n, int idx)
{
	char *d = h_date_in(days);
	struct h_resp *r = h_post("/api/v1/agent/calendar/slots/batches", agent_tok,
		h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"%02d:00\"}],"
		"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
		"\"autoConfirm\":false,\"cancellationCutoffMinutes\":0}", 8 + n, d, d));

	ck_assert_msg(r->status == 201, "slots: %ld %s", r->status, r->body);
	return h_jstr(json_object_array_get_idx(h_jget(r->json, "slots"), (size_t)idx), "id");
}

static const char *book(const char *inv_tok, const char *slot)
{
	struct h_req_opts o = { h_sprintf("{\"slotId\":\"%s\"}", slot), 0, NULL, NULL,
		h_src_ip("127.0.0.43") };
	struct h_resp *r = h_request_opts("POST", "/api/public/calendar/appointments",
		inv_tok, &o);

	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	return h_jstr(r->json, "id");
}

/* The agent's InApp AppointmentCreated row of apt: id, title, body, deep
 * link, created_at (ms) -- NULL until the consumer wrote it. */
static PGresult *inapp_row(const char *agent, const char *apt)
{
	PGresult *res = h_sql("SELECT id::text, title, body, coalesce(deep_link, ''), "
		"(extract(epoch FROM created_at) * 1000)::bigint, published_at IS NOT NULL "
		"FROM notifications.notifications WHERE recipient_user_id = $1::uuid "
		"AND channel = 'InApp' AND kind = 'AppointmentCreated' AND subject_id = $2::uuid",
		agent, apt);

	return PQntuples(res) == 1 ? res : NULL;
}

START_TEST(browser_eventsource)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *other = h_uuid(), *inv = h_uuid();
	char *tok_agent = h_token("agent", agent, tenant, "calendar.slots.manage",
		"calendar.appointments.view");
	char *tok_other = h_token("agent", other, tenant);
	char *tok_inv = h_token("investor", inv, NULL);
	const char *slot1 = slot_of(tok_agent, 9, 2, 0), *slot2 = slot_of(tok_agent, 10, 2, 1);
	const char *apt1, *apt2, *forged;
	PGresult *row;
	json_object *ev, *evs;
	char *v, *last_id;
	long long lat;
	int i;

	h_cdp_start();
	h_cdp_op("nav", "url", h_sprintf("%s/healthz", h_env("PIN_BASE_URL")));
	ck_assert_str_eq(js("%s", PAGE_JS), "\"ok\"");
	ck_assert_str_eq(js("open_stream('agent', '%s')", tok_agent), "\"open\"");
	ck_assert_str_eq(js("open_stream('other', '%s')", tok_other), "\"open\"");
	/* nchan also speaks WebSocket on the same URL and ticket */
	ck_assert_str_eq(js("open_ws('ws', '%s')", tok_agent), "\"open\"");
	ck_assert_str_eq(js("ws_listen('wsforged', 'ws://' + location.host + '" STREAM
		"?ticket=' + '%s')", h_sprintf("%s%s", agent, strchr(get_ticket(tok_other), '.'))),
		"\"closed\"");
	/* the other agent's signature on this agent's id: the browser gets 403 */
	forged = get_ticket(tok_other);
	forged = h_sprintf("%s%s", agent, strchr(forged, '.'));
	ck_assert_str_eq(js("listen('forged', '" STREAM "?ticket=%s')", forged), "\"closed\"");

	/* book: relay -> Kafka -> notify consumer -> InApp row -> nchan -> page */
	apt1 = book(tok_inv, slot1);
	ck_assert_msg(H_WAIT_UNTIL((row = inapp_row(agent, apt1)) != NULL, WAIT_MS),
		"no InApp row for the agent");
	for (i = 0; i < 100; i++) {
		v = js("S.agent.events.length");
		if (strcmp(v, "0"))
			break;
		h_sleep_ms(50);
	}
	v = js("JSON.stringify(S.agent.events)");
	ev = json_tokener_parse(v);
	evs = json_tokener_parse(json_object_get_string(ev));
	json_object_put(ev);
	ck_assert_msg(evs && json_object_array_length(evs) == 1, "agent events: %s", v);
	ev = json_object_array_get_idx(evs, 0);
	{
		json_object *d = h_jget(ev, "data");

		ck_assert_str_eq(h_jstr(d, "id"), PQgetvalue(row, 0, 0));
		ck_assert_str_eq(h_jstr(d, "kind"), "AppointmentCreated");
		ck_assert_str_eq(h_jstr(d, "title"), PQgetvalue(row, 0, 1));
		ck_assert_str_eq(h_jstr(d, "body"), PQgetvalue(row, 0, 2));
		ck_assert_ptr_nonnull(h_jstr(d, "createdAt"));
		ck_assert_ptr_nonnull(h_jget(d, "deepLink"));
		ck_assert_int_eq((int)json_object_object_length(d), 6);
	}
	lat = json_object_get_int64(h_jget(ev, "at")) - atoll(PQgetvalue(row, 0, 4));
	fprintf(stderr, "stream: row created -> browser event: %lld ms\n", lat);
	ck_assert_msg(lat <= 2000, "event arrived %lld ms after the row", lat);
	last_id = h_strdup(h_jstr(ev, "lastEventId"));
	ck_assert_msg(last_id && *last_id, "SSE id missing");
	json_object_put(evs);

	/* the WebSocket got the same message */
	ck_assert_msg(H_WAIT_UNTIL(strcmp(js("S.ws.events.length"), "0") != 0, 2000),
		"no WebSocket message");
	ck_assert_str_eq(js("S.ws.events[0].data.id"), h_sprintf("\"%s\"",
		PQgetvalue(row, 0, 0)));

	/* the other user's stream saw nothing */
	h_sleep_ms(1000);
	ck_assert_str_eq(js("S.other.events.length"), "0");
	ck_assert_str_eq(js("S.agent.events.length"), "1");

	/* resume: the page is gone while a second booking happens; a new
	 * ticket + last_event_id gets only what it missed, from nchan's buffer */
	js("S.agent.es.close(); 'closed'");
	/* another investor: one active appointment per investor, agent and kind */
	apt2 = book(h_token("investor", h_uuid(), NULL), slot2);
	ck_assert_msg(H_WAIT_UNTIL((row = inapp_row(agent, apt2)) != NULL &&
		PQgetvalue(row, 0, 5)[0] == 't', WAIT_MS), "second row not published");
	ck_assert_str_eq(js("open_stream('again', '%s', '&last_event_id=' + "
		"encodeURIComponent('%s'))", tok_agent, last_id), "\"open\"");
	for (i = 0; i < 60; i++) {
		v = js("S.again.events.length");
		if (strcmp(v, "0"))
			break;
		h_sleep_ms(50);
	}
	h_sleep_ms(300);
	v = js("JSON.stringify(S.again.events.map(e => e.data.id))");
	ck_assert_str_eq(v, h_sprintf("\"[\\\"%s\\\"]\"", PQgetvalue(row, 0, 0)));
	ck_assert_str_eq(js("S.other.events.length"), "0");
	h_cdp_stop();
}
END_TEST

/* The API host unreachable (its socket moved away: nginx cannot connect, the
 * host itself keeps running): the stream answers the problem+json 503 of every
 * other /api path, not nginx's HTML 502 -- nchan hands the subscriber the
 * auth subrequest's answer, so the internal auth location maps it. */
static char *away_sock(void)
{
	return h_sprintf("%s.away", h_env("PIN_API_SOCK"));
}

static void sock_back(void)
{
	rename(away_sock(), h_env("PIN_API_SOCK"));   /* no-op unless moved */
}

START_TEST(stream_host_unreachable_is_problem_503)
{
	const char *user = h_uuid();
	const char *t = get_ticket(h_token("agent", user, h_uuid()));
	struct sresp s;

	long ngx = h_host_pid("nginx");

	ck_assert_msg(ngx > 1, "nginx of the test stack not found");
	ck_assert_int_eq(rename(h_env("PIN_API_SOCK"), away_sock()), 0);
	/* new nginx workers: no kept-alive upstream connection to the moved
	 * socket (an old worker may still answer for a moment: ask until the
	 * new ones do, at most 10 s) */
	kill((pid_t)ngx, SIGHUP);
	for (int64_t end = h_now_ms() + 10000;;) {
		s = stream_get(h_sprintf("?ticket=%s", t));
		if (s.status != 200 || h_now_ms() > end)
			break;
		h_sleep_ms(200);
	}
	sock_back();
	ck_assert_msg(s.status == 503, "stream with the API host unreachable: %ld %s %s",
			s.status, s.ctype, s.body);
	ck_assert_msg(strstr(s.ctype, "application/problem+json"), "content type %s", s.ctype);
	ck_assert_msg(strstr(s.body, "\"code\":\"UNAVAILABLE\""), "%s", s.body);
	/* back: the same ticket opens the stream */
	s = stream_get(h_sprintf("?ticket=%s", t));
	ck_assert_msg(s.status == 200, "stream after the socket came back: %ld %s", s.status, s.body);
}
END_TEST

Suite *make_stream_suite(void)
{
	Suite *s = suite_create("stream");
	TCase *tc = h_tcase("stream", 180);

	/* the moved API socket comes back whatever happens to the test that
	 * moved it: before every test of the case (a failed child skips its own
	 * teardown) and once after the case, in this process */
	tcase_add_checked_fixture(tc, sock_back, sock_back);
	tcase_add_unchecked_fixture(tc, NULL, sock_back);

	tcase_add_test(tc, ticket_and_auth);
	tcase_add_test(tc, stream_host_unreachable_is_problem_503);
	tcase_add_test(tc, publisher_is_local_only);
	tcase_add_test(tc, publish_failure_backs_off_then_publishes);
	tcase_add_test(tc, old_rows_are_not_pushed);
	tcase_add_test(tc, burst_drains_in_one_pass);
	tcase_add_test(tc, browser_eventsource);
	suite_add_tcase(s, tc);
	return s;
}
