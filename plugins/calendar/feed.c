/* feed.c -- the agent's iCalendar subscription feed (issue 32 item 1;
 * doc/api.md "Calendar feed").
 *
 *   POST   /api/v1/agent/calendar/feed-token   a new secret token (201, the
 *          feed URL shown once); an existing one is replaced (rotation: the
 *          old URL answers 404 from the commit on)
 *   GET    /api/v1/agent/calendar/feed-token   whether one exists, since when
 *   DELETE /api/v1/agent/calendar/feed-token   revocation (204)
 *   GET    /calendar/feeds/<token>.ics          no login: the agent's events
 *          (appointments included: each has its calendar event) from 60 days
 *          back to 365 days ahead as text/calendar, built by sdk/ical.h
 *
 * The token is 32 bytes of RAND_bytes in base64url (43 characters); the
 * table keeps only its SHA-256 (migration 0730).  The per-token rate limit
 * is nginx's (limit_req keyed on the URI, doc/operating.md), in front of
 * every API host.
 *
 * ETag: a digest of what the feed is made of -- the window's first day and,
 * over the events of the window, their count, the greatest updated_at of
 * event and appointment, the sum of their versions -- so an If-None-Match
 * poll is answered 304 after one aggregate query, without building the
 * text.  The text is a function of the same rows (DTSTAMP is each event's
 * last change, never "now"), so equal tags mean equal bodies.
 */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "calendar.h"
#include "sdk/ical.h"

#define TOKEN_BYTES 32
#define TOKEN_LEN 43                    /* base64url of 32 bytes, no padding */
#define DAY_US (86400LL * 1000000)
#define FEED_BACK_DAYS 60
#define FEED_AHEAD_DAYS 365
#define FEED_MAX_EVENTS 20000           /* a feed never holds more (api.md) */
#define FEED_TYPE "text/calendar; charset=utf-8"
#define TOKEN_NOT_FOUND "FEED_TOKEN_NOT_FOUND"

static void b64url(const unsigned char *in, size_t n, char *out)
{
	static const char a[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
		out[o++] = a[v & 63];
	}
	if (n - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		out[o++] = a[v >> 6 & 63];
	} else if (n - i == 1) {
		unsigned v = (unsigned)in[i] << 16;

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
	}
	out[o] = '\0';
}

/* SHA-256 of s as 64 hex digits into hex[65]; 0, PIN_ERR. */
static int sha256_hex(const char *s, size_t n, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0, i;

	if (EVP_Digest(s, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return PIN_ERR;
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* The public base of feed URLs: calendar.feed_base_url, else
 * http://<Host of this request>. */
static const char *base_url(struct pin_req *r)
{
	const char *b = pc_api->config_str("calendar.feed_base_url");
	const char *host = pc_api->req_header(r, "Host");
	size_t n;

	if (b && *b) {
		n = strlen(b);
		return n && b[n - 1] == '/' ? pc_api->sprintf("%.*s", (int)n - 1, b) : b;
	}
	return pc_api->sprintf("http://%s", host && *host ? host : "localhost");
}

/* ---------------------------------------------------------- token routes */

/* POST /api/v1/agent/calendar/feed-token: 201 {feedUrl, token, createdAt,
 * rotated}.  Not replayed by Idempotency-Key: the answer carries a secret
 * that is stored nowhere, and a retry simply rotates again (the token of a
 * lost answer was never seen, so nothing breaks). */
int cal_feed_token_create(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	unsigned char raw[TOKEN_BYTES];
	char token[TOKEN_LEN + 1], hex[65];
	const char *params[4];
	int64_t now = pc_api->now_us();
	json_object *o;
	PGresult *res;

	(void)ud;
	if (RAND_bytes(raw, sizeof raw) != 1)
		return PIN_ERR;
	b64url(raw, sizeof raw, token);
	if (sha256_hex(token, TOKEN_LEN, hex) < 0)
		return PIN_ERR;
	params[0] = p->sub;
	params[1] = p->tenant_id;
	params[2] = hex;
	params[3] = pc_time_param(now);
	res = pc_api->db_exec_prepared("cal_feed_token_put",
		"INSERT INTO calendar.feed_tokens AS t (user_id, tenant_id, token_sha256, created_at) "
		"VALUES ($1::uuid, $2::uuid, decode($3, 'hex'), $4::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, "
		"  token_sha256 = EXCLUDED.token_sha256, created_at = EXCLUDED.created_at "
		"RETURNING (xmax <> 0)", 4, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	o = json_object_new_object();
	json_object_object_add(o, "feedUrl", json_object_new_string(pc_api->sprintf(
			"%s/calendar/feeds/%s.ics", base_url(r), token)));
	json_object_object_add(o, "token", json_object_new_string(token));
	json_object_object_add(o, "createdAt", json_object_new_string(pc_time_str(now)));
	json_object_object_add(o, "rotated",
			json_object_new_boolean(strcmp(PQgetvalue(res, 0, 0), "t") == 0));
	explicit_bzero(raw, sizeof raw);
	explicit_bzero(token, sizeof token);
	pc_api->set_header(r, "Cache-Control", "no-store");
	pc_api->set_header(r, "Location", "/api/v1/agent/calendar/feed-token");
	pc_api->metric_add("pin_calendar_feed_tokens_issued_total", NULL, 1);
	return pc_api->respond_json(r, 201, o);
}

/* GET /api/v1/agent/calendar/feed-token: 200 {createdAt} or 404. */
int cal_feed_token_get(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	const char *params[1] = { p->sub };
	json_object *o;
	PGresult *res;

	(void)ud;
	res = pc_api->db_exec_prepared("cal_feed_token_get",
		"SELECT calendar.us(t.created_at) FROM calendar.feed_tokens t "
		"WHERE t.user_id = $1::uuid", 1, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return pc_problem(r, 404, TOKEN_NOT_FOUND, "no feed token (create one with POST)");
	o = json_object_new_object();
	pc_json_col_time(o, "createdAt", res, 0, 0);
	return pc_api->respond_json(r, 200, o);
}

/* DELETE /api/v1/agent/calendar/feed-token: 204, or 404 when none. */
int cal_feed_token_delete(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	const char *params[1] = { p->sub };
	PGresult *res;

	(void)ud;
	res = pc_api->db_exec_prepared("cal_feed_token_delete",
		"DELETE FROM calendar.feed_tokens t WHERE t.user_id = $1::uuid", 1, params);
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	if (strcmp(PQcmdTuples(res), "1") != 0)
		return pc_problem(r, 404, TOKEN_NOT_FOUND, "no feed token");
	return pc_api->respond_json(r, 204, NULL);
}

/* ------------------------------------------------------------------ feed */

/* The window: UTC midnight of today - 60 days .. + 366 days (so it moves
 * once a day, and the ETag with it). */
static void window(int64_t now, int64_t *from, int64_t *to)
{
	int64_t day = now / DAY_US - (now % DAY_US < 0);

	*from = (day - FEED_BACK_DAYS) * DAY_US;
	*to = (day + FEED_AHEAD_DAYS + 1) * DAY_US;
}

/* The ETag (quoted, arena) of the feed of user over [from, ..) with these
 * aggregates. */
static char *feed_etag(const char *user, int64_t from, long long count,
		long long max_upd, long long sum_ver)
{
	char *s = pc_api->sprintf("feed-v1|%s|%lld|%lld|%lld|%lld", user,
			(long long)from, count, max_upd, sum_ver);
	char hex[65];

	if (!s || sha256_hex(s, strlen(s), hex) < 0)
		return NULL;
	return pc_api->sprintf("\"f1-%.32s\"", hex);
}

/* 1 when the If-None-Match header names tag (or is "*"); weak
 * comparison (RFC 9110 13.1.2): a W/ prefix is ignored. */
static int none_match(const char *inm, const char *tag)
{
	const char *q;
	size_t n = strlen(tag);

	if (!inm)
		return 0;
	while (*inm == ' ' || *inm == '\t')
		inm++;
	if (strcmp(inm, "*") == 0)
		return 1;
	for (q = strstr(inm, tag); q; q = strstr(q + 1, tag))
		if (q[n] == '\0' || q[n] == ',' || q[n] == ' ' || q[n] == '\t')
			return 1;
	return 0;
}

static int feed_404(struct pin_req *r, const char *why)
{
	pc_api->metric_add("pin_calendar_feed_requests_total", "result=\"not_found\"", 1);
	return pc_problem(r, 404, "FEED_NOT_FOUND", why);
}

/* The owner of a token's hash: 0 with user / tenant (arena), 1 when there
 * is none (or the agent is no longer Active), PIN_ERR_DB. */
static int token_owner(const char *hex, const char **user, const char **tenant)
{
	const char *params[1] = { hex };
	PGresult *res = pc_api->db_exec_prepared("cal_feed_owner",
		"SELECT t.user_id, t.tenant_id FROM calendar.feed_tokens t "
		"WHERE t.token_sha256 = decode($1, 'hex') "
		"  AND NOT EXISTS (SELECT 1 FROM calendar.user_replicas u "
		"    WHERE u.user_id = t.user_id AND u.status <> 'Active')", 1, params);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return 1;
	*user = pc_api->strdup(PQgetvalue(res, 0, 0));
	*tenant = pc_api->strdup(PQgetvalue(res, 0, 1));
	return 0;
}

/* the events of the window; a.* NULL for events that are no appointment */
#define FEED_FROM \
	"FROM calendar.calendar_events e " \
	"LEFT JOIN calendar.appointments a ON a.id = e.appointment_id "
#define FEED_WHERE \
	"WHERE e.owner_user_id = $1::uuid AND e.tenant_id = $2::uuid " \
	"  AND e.start_at >= $3::timestamptz AND e.start_at < $4::timestamptz "
/* count, greatest change (us), sum of versions: the ETag's inputs, over
 * the same rows as the feed (its order and cap) */
#define FEED_AGG_SQL \
	"SELECT count(*), coalesce(calendar.us(max(greatest(x.eu, x.au))), 0), " \
	"  coalesce(sum(x.ev + coalesce(x.av, 0)), 0) " \
	"FROM (SELECT e.updated_at AS eu, a.updated_at AS au, e.version AS ev, " \
	"  a.version AS av " FEED_FROM FEED_WHERE \
	"  ORDER BY e.start_at, e.id LIMIT $5::int) x"

enum { F_ID, F_STATUS, F_TITLE, F_DESC, F_LOC, F_START, F_END, F_UPD, F_VER,
	F_APT, F_APT_STATUS, F_APT_UPD, F_APT_VER, F_SUPERSEDED, F_ROOT, F_DEPTH };
#define FEED_ROWS_SQL \
	"SELECT e.id, e.status, e.title, e.description, e.location, " \
	"  calendar.us(e.start_at), calendar.us(coalesce(e.end_at, e.start_at)), " \
	"  calendar.us(e.updated_at), e.version, a.id, a.status, " \
	"  calendar.us(a.updated_at), a.version, " \
	"  a.rescheduled_to_appointment_id IS NOT NULL, " \
	"  coalesce(a.original_appointment_id, a.id), a.reschedule_count " FEED_FROM FEED_WHERE \
	"ORDER BY e.start_at, e.id LIMIT $5::int"

/* One row as a VEVENT: UID event-<id>, SEQUENCE version - 1 (every change
 * of the event counts, a reschedule too); an appointment's event:
 * appointment-<first of its reschedule chain> (original_appointment_id,
 * migration 0740) and pc_ical_appointment_sequence() -- the UID and
 * SEQUENCE of the e-mail invitations, so the entry either one made is the
 * one the other updates.  Pending appointments are TENTATIVE, cancelled
 * events CANCELLED, the rest CONFIRMED. */
static void feed_vevent(const PGresult *res, int i, struct pc_ical_event *v)
{
	const char *st = PQgetvalue(res, i, F_STATUS);
	int apt = !PQgetisnull(res, i, F_APT);
	int64_t upd = pc_col_us(res, i, F_UPD);

	memset(v, 0, sizeof(*v));
	v->kind = apt ? PC_ICAL_APPOINTMENT : PC_ICAL_EVENT;
	if (apt && !PQgetisnull(res, i, F_ROOT)) {
		v->id = PQgetvalue(res, i, F_ROOT);
		v->sequence = pc_ical_appointment_sequence(atoi(PQgetvalue(res, i, F_DEPTH)),
				PQgetvalue(res, i, F_APT_STATUS));
	} else {
		v->id = PQgetvalue(res, i, F_ID);
		v->sequence = atoi(PQgetvalue(res, i, F_VER)) - 1;
	}
	v->start_us = pc_col_us(res, i, F_START);
	v->end_us = pc_col_us(res, i, F_END);
	if (apt && pc_col_us(res, i, F_APT_UPD) > upd)
		upd = pc_col_us(res, i, F_APT_UPD);
	v->stamp_us = upd;          /* no METHOD: the last revision (RFC 5545 3.8.7.2) */
	v->modified_us = upd;
	if (strcmp(st, "Cancelled") == 0)
		v->status = PC_ICAL_CANCELLED;
	else if (apt && strcmp(PQgetvalue(res, i, F_APT_STATUS), "Pending") == 0)
		v->status = PC_ICAL_TENTATIVE;
	else
		v->status = PC_ICAL_CONFIRMED;
	v->summary = pc_col(res, i, F_TITLE);
	v->description = pc_col(res, i, F_DESC);
	v->location = pc_col(res, i, F_LOC);
}

/* GET /calendar/feeds/{file}: file is "<token>.ics". */
int cal_feed_get(struct pin_req *r, void *ud)
{
	const char *file = pc_api->req_param(r, "file");
	const char *user, *tenant, *params[5];
	char hex[65], *etag, *text;
	int64_t now = pc_api->now_us(), from, to, max_upd = 0;
	long long sum_ver = 0;
	struct pc_ical_event *ev;
	PGresult *res;
	size_t n = 0, i, k;
	int rc, rows;

	(void)ud;
	if (!file || strlen(file) != TOKEN_LEN + 4 || strcmp(file + TOKEN_LEN, ".ics") != 0 ||
			strspn(file, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				"0123456789-_") != TOKEN_LEN)
		return feed_404(r, "no such feed");
	if (sha256_hex(file, TOKEN_LEN, hex) < 0)
		return PIN_ERR;
	if ((rc = token_owner(hex, &user, &tenant)) != 0)
		return rc < 0 ? rc : feed_404(r, "no such feed (revoked or rotated?)");
	window(now, &from, &to);
	params[0] = user;
	params[1] = tenant;
	params[2] = pc_time_param(from);
	params[3] = pc_time_param(to);
	params[4] = pc_api->sprintf("%d", FEED_MAX_EVENTS);

	if (pc_api->req_header(r, "If-None-Match")) {
		res = pc_api->db_exec_prepared("cal_feed_agg", FEED_AGG_SQL, 5, params);
		if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
			return PIN_ERR_DB;
		etag = feed_etag(user, from, atoll(PQgetvalue(res, 0, 0)),
				atoll(PQgetvalue(res, 0, 1)), atoll(PQgetvalue(res, 0, 2)));
		if (!etag)
			return PIN_ERR;
		if (none_match(pc_api->req_header(r, "If-None-Match"), etag)) {
			pc_api->set_header(r, "ETag", etag);
			pc_api->set_header(r, "Cache-Control", "private, no-cache");
			pc_api->metric_add("pin_calendar_feed_requests_total",
					"result=\"not_modified\"", 1);
			text = strdup("");      /* respond_body takes a body, also an empty one */
			return text ? pc_api->respond_body(r, 304, FEED_TYPE, text, 0) : PIN_ERR;
		}
	}

	res = pc_api->db_exec_prepared("cal_feed_rows", FEED_ROWS_SQL, 5, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	rows = PQntuples(res);
	ev = pc_api->alloc(sizeof(*ev) * (size_t)(rows ? rows : 1));
	if (!ev)
		return PIN_ERR;
	for (k = 0; k < (size_t)rows; k++) {
		int64_t u = pc_col_us(res, (int)k, F_UPD);

		if (!PQgetisnull(res, (int)k, F_APT) && pc_col_us(res, (int)k, F_APT_UPD) > u)
			u = pc_col_us(res, (int)k, F_APT_UPD);
		if (u > max_upd)
			max_upd = u;
		sum_ver += atoll(PQgetvalue(res, (int)k, F_VER));
		if (!PQgetisnull(res, (int)k, F_APT))
			sum_ver += atoll(PQgetvalue(res, (int)k, F_APT_VER));
		/* an appointment replaced by a reschedule: its successor carries
		 * the UID (one VEVENT per UID) */
		if (strcmp(PQgetvalue(res, (int)k, F_SUPERSEDED), "t") == 0)
			continue;
		feed_vevent(res, (int)k, &ev[n++]);
	}
	etag = feed_etag(user, from, rows, max_upd, sum_ver);
	text = pc_ical_calendar(NULL, "PIN calendar", ev, n);
	if (!etag || !text) {
		free(text);
		return PIN_ERR;
	}
	i = strlen(text);
	pc_api->set_header(r, "ETag", etag);
	pc_api->set_header(r, "Cache-Control", "private, no-cache");
	pc_api->set_header(r, "Content-Disposition", "inline; filename=\"calendar.ics\"");
	pc_api->metric_add("pin_calendar_feed_requests_total", "result=\"ok\"", 1);
	return pc_api->respond_body(r, 200, FEED_TYPE, text, i);
}
