/* api.c -- the caller's notifications (api.md "Notifications area"):
 *   GET  /api/v1/me/notifications?unreadOnly=&limit=&cursor=
 *   POST /api/v1/me/notifications/{id}/read
 *   GET  /api/v1/me/notification-settings
 *   PUT  /api/v1/me/notification-settings
 * Any authenticated actor; the caller is the token's sub.  Another user's
 * notification answers 404 NOTIFICATION_NOT_FOUND (ids do not leak). */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"

#define DEFAULT_LIMIT 20
#define MAX_LIMIT 100

#define ITEM_COLS \
	"id, kind, urgency, status, title, body, deep_link, payload::text AS payload, " \
	"(extract(epoch FROM created_at) * 1000000)::bigint AS created_us, " \
	"(extract(epoch FROM read_at) * 1000000)::bigint AS read_us"

/* A notification of the caller (api.md) from an ITEM_COLS row. */
static const struct pc_jfield item_f[] = {
	{ "id", "id", PC_J_STR },
	{ "kind", "kind", PC_J_STR },
	{ "urgency", "urgency", PC_J_STR },
	{ "status", "status", PC_J_STR },
	{ "title", "title", PC_J_STR },
	{ "body", "body", PC_J_STR },
	{ "deepLink", "deep_link", PC_J_STR },
	{ "payload", "payload", PC_J_JSON },
	{ "createdAt", "created_us", PC_J_TIME },
	{ "readAt", "read_us", PC_J_TIME },
	{ "read", "read_us", PC_J_SET },
};

static const char *const bools[] = { "true", "false", NULL };

int ntf_h_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct pc_errs e;
	const char *unread = "false", *p[5];
	long long limit = DEFAULT_LIMIT;
	int64_t cur_us = 0;
	char cur_id[37], lim[24];
	json_object *body;
	PGresult *res, *cnt;

	(void)ud;
	pc_errs_init(&e);
	pc_q_enum(r, "unreadOnly", 0, bools, &unread, &e);
	pc_q_int(r, "limit", 0, 1, MAX_LIMIT, &limit, &e);
	pc_q_cursor(r, &cur_us, cur_id, &e);
	if (e.n)
		return pc_errs_respond(r, 400, "MALFORMED_REQUEST", "invalid query parameters", &e);
	snprintf(lim, sizeof(lim), "%lld", limit + 1);
	p[0] = me->sub;
	p[1] = unread;
	p[2] = cur_id[0] ? pc_time_param(cur_us) : NULL;
	p[3] = cur_id[0] ? cur_id : NULL;
	p[4] = lim;
	res = pc_api->db_exec_prepared("ntf_list",
		"SELECT " ITEM_COLS " FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = 'InApp' "
		"  AND (NOT $2::boolean OR read_at IS NULL) "
		"  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid)) "
		"ORDER BY created_at DESC, id DESC LIMIT $5::int", 5, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	cnt = pc_api->db_exec_prepared("ntf_unread_count",
		"SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = 'InApp' AND read_at IS NULL", 1, p);
	if (!pc_res_ok(cnt, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	body = pc_page_json_map(res, limit, "created_us", "id", item_f, PC_NFIELDS(item_f));
	if (!body)
		return PIN_ERR;
	pc_json_col_int(body, "unreadCount", cnt, 0, 0);
	return pc_api->respond_json(r, 200, body);
}

int ntf_h_read(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	const char *id = pc_path_uuid(r, "id"), *p[3];
	char now[40];
	json_object *body;
	PGresult *res;

	(void)ud;
	if (!id || pc_body_none(r) < 0)
		return PIN_OK;
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = id;
	p[1] = me->sub;
	p[2] = now;
	res = pc_api->db_exec_prepared("ntf_read",
		"UPDATE notifications.notifications "
		"SET status = 'Read', read_at = coalesce(read_at, $3::timestamptz) "
		"WHERE id = $1::uuid AND recipient_user_id = $2::uuid AND channel = 'InApp' "
		"RETURNING " ITEM_COLS, 3, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) == 0)
		return pc_problem(r, 404, "NOTIFICATION_NOT_FOUND", "notification not found");
	if (!(body = pc_row_json(item_f, PC_NFIELDS(item_f), res, 0)))
		return PIN_ERR;
	return pc_api->respond_json(r, 200, body);
}

/* ---------------------------------------------------------------- settings */

static int settings_respond(struct pin_req *r, const char *user)
{
	static const struct pc_jfield f[] = {
		{ "locale", "locale", PC_J_STR },
		{ "timeZone", "time_zone", PC_J_STR },
		{ "quietHours", "quiet_hours", PC_J_JSON },
		{ "globalMute", "global_mute", PC_J_BOOL },
		{ "overrides", "overrides", PC_J_JSON },
	};
	const char *p[1] = { user };
	PGresult *res = pc_api->db_exec_prepared("ntf_settings_get",
		"SELECT coalesce(s.locale, c.locale, 'ru') AS locale, "
		"  coalesce(s.time_zone, c.time_zone, 'Europe/Moscow') AS time_zone, "
		"  CASE WHEN s.quiet_from IS NOT NULL THEN json_build_object("
		"    'from', to_char(s.quiet_from, 'HH24:MI'), "
		"    'to', to_char(s.quiet_to, 'HH24:MI'))::text END AS quiet_hours, "
		"  coalesce(s.global_mute, false) AS global_mute, "
		"  coalesce(s.overrides, '{}'::jsonb)::text AS overrides "
		"FROM (SELECT $1::uuid AS u) q "
		"LEFT JOIN notifications.user_notification_settings s ON s.user_id = q.u "
		"LEFT JOIN notifications.recipient_contacts c ON c.user_id = q.u", 1, p);
	json_object *o;

	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	if (!(o = pc_row_json(f, PC_NFIELDS(f), res, 0)))
		return PIN_ERR;
	return pc_api->respond_json(r, 200, o);
}

int ntf_h_settings_get(struct pin_req *r, void *ud)
{
	(void)ud;
	return settings_respond(r, pc_api->req_principal(r)->sub);
}

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

/* "HH:MM" 00:00..23:59 */
static int hhmm_ok(const char *s)
{
	return strlen(s) == 5 && isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) &&
		s[2] == ':' && isdigit((unsigned char)s[3]) && isdigit((unsigned char)s[4]) &&
		(s[0] - '0') * 10 + (s[1] - '0') < 24 && s[3] < '6';
}

/* "ru", "en", "en-US" */
static int locale_ok(const char *s)
{
	size_t n = strlen(s);

	return (n == 2 || (n == 5 && s[2] == '-' && isupper((unsigned char)s[3]) &&
			isupper((unsigned char)s[4]))) &&
		islower((unsigned char)s[0]) && islower((unsigned char)s[1]);
}

/* overrides: {Kind: {Channel: bool}}; a new compact text (arena) or NULL. */
static const char *overrides_text(json_object *v, struct pc_errs *e)
{
	int errs = e->n;

	if (!json_object_is_type(v, json_type_object)) {
		pc_errs_add(e, "overrides", "must be an object {Kind: {Channel: boolean}}");
		return NULL;
	}
	json_object_object_foreach(v, kind, chans) {
		if (!in_list(kind, ntf_kinds)) {
			pc_errs_add(e, pc_api->sprintf("overrides.%s", kind), "unknown kind");
			continue;
		}
		if (!chans || !json_object_is_type(chans, json_type_object)) {
			pc_errs_add(e, pc_api->sprintf("overrides.%s", kind),
					"must be an object {Channel: boolean}");
			continue;
		}
		json_object_object_foreach(chans, ch, flag) {
			if (!in_list(ch, ntf_channels))
				pc_errs_add(e, pc_api->sprintf("overrides.%s.%s", kind, ch),
						"unknown channel");
			else if (!flag || !json_object_is_type(flag, json_type_boolean))
				pc_errs_add(e, pc_api->sprintf("overrides.%s.%s", kind, ch),
						"must be a boolean");
		}
	}
	if (e->n > errs)
		return NULL;
	return pc_api->strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
}

static const char *const settings_fields[] = {
	"locale", "timeZone", "quietHours", "globalMute", "overrides", NULL
};
static const char *const quiet_fields[] = { "from", "to", NULL };

/* A settings PUT body: each field with its state (absent keeps the stored
 * value). */
struct settings_in {
	const char *locale, *tz, *qf, *qt, *ovr;
	enum pc_field fl, ft, fm;
	int mute, has_q, has_o;
};

/* quietHours: {from, to} HH:MM, different, or null. */
static void parse_quiet(json_object *v, struct settings_in *in, struct pc_errs *e)
{
	struct pc_errs qe;

	if (!v)
		return;
	if (!json_object_is_type(v, json_type_object)) {
		pc_errs_add(e, "quietHours", "must be {from: HH:MM, to: HH:MM} or null");
		return;
	}
	pc_errs_init(&qe);
	pc_check_fields(v, quiet_fields, e);
	pc_get_string(v, "from", 1, 5, 5, &in->qf, &qe);
	pc_get_string(v, "to", 1, 5, 5, &in->qt, &qe);
	pc_errs_free(&qe);
	if (!in->qf || !hhmm_ok(in->qf))
		pc_errs_add(e, "quietHours.from", "must be HH:MM (00:00-23:59)");
	if (!in->qt || !hhmm_ok(in->qt))
		pc_errs_add(e, "quietHours.to", "must be HH:MM (00:00-23:59)");
	if (in->qf && in->qt && !strcmp(in->qf, in->qt))
		pc_errs_add(e, "quietHours", "from and to must differ");
}

static void parse_settings(json_object *b, struct settings_in *in, struct pc_errs *e)
{
	json_object *v;

	memset(in, 0, sizeof(*in));
	pc_check_fields(b, settings_fields, e);
	in->fl = pc_get_string(b, "locale", 0, 2, 5, &in->locale, e);
	if (in->fl == PC_SET && !locale_ok(in->locale)) {
		pc_errs_add(e, "locale", "must look like ru, en or en-US");
		in->fl = PC_INVALID;
	}
	in->ft = pc_get_string(b, "timeZone", 0, 1, 64, &in->tz, e);
	in->fm = pc_get_bool(b, "globalMute", 0, &in->mute, e);
	if (in->fm == PC_NULL)
		pc_errs_add(e, "globalMute", "must be a boolean");
	if (json_object_object_get_ex(b, "quietHours", &v)) {
		in->has_q = 1;
		parse_quiet(v, in, e);
	}
	if (json_object_object_get_ex(b, "overrides", &v)) {
		in->has_o = 1;
		in->ovr = v ? overrides_text(v, e) : "{}";
	}
}

/* Upsert of the caller's settings (fields present only).  0 / PIN_ERR_DB. */
static int store_settings(const char *user, const struct settings_in *in)
{
	const char *p[13];
	char now[40];
	PGresult *res;

	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = user;
	p[1] = in->fl == PC_SET ? in->locale : NULL;
	p[2] = in->ft == PC_SET ? in->tz : NULL;
	p[3] = in->qf;
	p[4] = in->qt;
	p[5] = in->fm == PC_SET ? (in->mute ? "true" : "false") : NULL;
	p[6] = in->has_o ? in->ovr : NULL;
	p[7] = now;
	p[8] = in->fl != PC_ABSENT ? "true" : "false";
	p[9] = in->ft != PC_ABSENT ? "true" : "false";
	p[10] = in->has_q ? "true" : "false";
	p[11] = in->fm != PC_ABSENT ? "true" : "false";
	p[12] = in->has_o ? "true" : "false";
	res = pc_api->db_exec_prepared("ntf_settings_put",
		"INSERT INTO notifications.user_notification_settings AS s (user_id, locale, "
		"  time_zone, quiet_from, quiet_to, global_mute, overrides, created_at, updated_at) "
		"VALUES ($1::uuid, $2, $3, $4::time, $5::time, coalesce($6::boolean, false), "
		"  coalesce($7::jsonb, '{}'::jsonb), $8::timestamptz, $8::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET "
		"  locale = CASE WHEN $9::boolean THEN EXCLUDED.locale ELSE s.locale END, "
		"  time_zone = CASE WHEN $10::boolean THEN EXCLUDED.time_zone ELSE s.time_zone END, "
		"  quiet_from = CASE WHEN $11::boolean THEN EXCLUDED.quiet_from ELSE s.quiet_from END, "
		"  quiet_to = CASE WHEN $11::boolean THEN EXCLUDED.quiet_to ELSE s.quiet_to END, "
		"  global_mute = CASE WHEN $12::boolean THEN EXCLUDED.global_mute "
		"    ELSE s.global_mute END, "
		"  overrides = CASE WHEN $13::boolean THEN EXCLUDED.overrides ELSE s.overrides END, "
		"  version = s.version + 1, updated_at = EXCLUDED.updated_at", 13, p);
	return pc_res_ok(res, PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

/*
 * PUT: fields present replace the stored value, absent fields keep it
 * (a first PUT starts from the defaults); locale / timeZone null go back to
 * the contact replica's value (else ru / Europe/Moscow); quietHours null =
 * no quiet window; overrides null = {}.
 */
int ntf_h_settings_put(struct pin_req *r, void *ud)
{
	const char *user = pc_api->req_principal(r)->sub;
	struct settings_in in;
	struct pc_errs e;
	json_object *b;
	int rc, tz_unknown = 0;

	(void)ud;
	pc_errs_init(&e);
	if (!(b = pc_body(r, &e)))
		return pc_errs_respond(r, 422, "VALIDATION_FAILED", "invalid body", &e);
	parse_settings(b, &in, &e);
	/* the zone is checked whatever else is wrong, so a 422 names every
	 * invalid field; alone it is UNKNOWN_TIME_ZONE (sdk/problem.h) */
	if (in.ft == PC_SET && (rc = pc_tz_lookup(in.tz, &in.tz)) < 0) {
		if (rc != PC_E_TZ)
			return rc;
		tz_unknown = 1;
		pc_errs_add(&e, "timeZone", PC_TZ_UNKNOWN_MSG);
	}
	if (e.n)
		return pc_errs_respond_422(r, "invalid settings", &e, tz_unknown);
	if ((rc = store_settings(user, &in)) < 0)
		return rc;
	return settings_respond(r, user);
}
