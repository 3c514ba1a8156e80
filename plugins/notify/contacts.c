/* contacts.c -- consumer group notifications-identity-users:
 * pin.identity.users.v1 -> notifications.recipient_contacts (display name,
 * e-mail, phone, locale, time zone: the delivery snapshot of seed 001 step 5).
 *
 * Contacts are PII: stored for delivery, never logged.  Idempotent: a
 * redelivery hits the inbox; an older message (envelope createdAt <= the
 * row's last_event_at) does not overwrite a newer one.  A time zone unknown
 * to PostgreSQL is stored as NULL (the recipient falls back to the default),
 * so a bad value can never break the rendering of a notification.
 *
 * Erasure (issue 12 item 6): status Deleted removes the user's personal data
 * from schema notifications in the message's transaction -- the replica row
 * becomes a tombstone (ids, status, instants; newest-wins still holds), the
 * user's own notifications and settings are deleted, and the user's display
 * name is replaced by the neutral "(имя не указано)" / "(name unknown)" in
 * the texts of everyone else's notifications.  Later messages build nothing
 * for a Deleted recipient (events.c). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"


static const char *const topics[] = { PC_TOPIC_IDENTITY_USERS, NULL };


static enum pin_consume_status fatal(struct pin_consume_result *res, const char *detail)
{
	pc_api->metric_add("notifications_dlq_total", NULL, 1);
	return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, NTF_CODE_INVALID, detail, NULL);
}

static enum pin_consume_status db_retry(struct pin_consume_result *res, const char *what,
		const PGresult *r)
{
	return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "NTF_DB_ERROR",
			pc_api->sprintf("%s failed (%s)", what,
				r ? pc_api->db_sqlstate(r) : "no connection"), NULL);
}

/* Replaces name in the titles and bodies of other users' notifications. */
static PGresult *redact_name(const char *name)
{
	const char *p[1] = { name };

	return pc_api->db_exec_prepared("ntf_erase_redact",
		"UPDATE notifications.notifications SET "
		"  title = replace(title, $1, CASE WHEN locale LIKE 'ru%' "
		"    THEN '(имя не указано)' ELSE '(name unknown)' END), "
		"  body = replace(body, $1, CASE WHEN locale LIKE 'ru%' "
		"    THEN '(имя не указано)' ELSE '(name unknown)' END) "
		"WHERE strpos(title, $1) > 0 OR strpos(body, $1) > 0", 1, p);
}

/* Status Deleted: the erasure (see the head of this file).  name: the
 * message's displayName or NULL. */
static enum pin_consume_status erase(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user, const char *name)
{
	const char *p[3], *stored = NULL;
	char created[40], now[40];
	PGresult *r;

	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = user;
	r = pc_api->db_exec_prepared("ntf_erase_lock",
		"SELECT display_name, last_event_at >= $2::timestamptz "
		"FROM notifications.recipient_contacts WHERE user_id = $1::uuid FOR UPDATE",
		2, (const char *[]){ user, created });
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return db_retry(res, "contact lock", r);
	if (PQntuples(r) == 1) {
		if (!strcmp(PQgetvalue(r, 0, 1), "t")) {
			/* a newer message of the user is applied already */
			pc_api->metric_add("notifications_contacts_stale_total", NULL, 1);
			return PIN_CONSUME_OK;
		}
		stored = pc_col(r, 0, 0);
	}
	p[1] = created;
	p[2] = now;
	r = pc_api->db_exec_prepared("ntf_erase_tombstone",
		"INSERT INTO notifications.recipient_contacts AS c (user_id, display_name, "
		"  email, phone, locale, time_zone, status, last_event_at, updated_at) "
		"VALUES ($1::uuid, NULL, NULL, NULL, NULL, NULL, 'Deleted', $2::timestamptz, "
		"  $3::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = NULL, email = NULL, "
		"  phone = NULL, locale = NULL, time_zone = NULL, status = 'Deleted', "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at",
		3, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return db_retry(res, "contact tombstone", r);
	r = pc_api->db_exec_prepared("ntf_erase_own",
		"DELETE FROM notifications.notifications WHERE recipient_user_id = $1::uuid",
		1, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return db_retry(res, "notifications erase", r);
	r = pc_api->db_exec_prepared("ntf_erase_settings",
		"DELETE FROM notifications.user_notification_settings WHERE user_id = $1::uuid",
		1, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return db_retry(res, "settings erase", r);
	if (stored && *stored && !pc_res_ok(r = redact_name(stored), PGRES_COMMAND_OK))
		return db_retry(res, "name redaction", r);
	if (name && *name && (!stored || strcmp(name, stored) != 0) &&
	    !pc_res_ok(r = redact_name(name), PGRES_COMMAND_OK))
		return db_retry(res, "name redaction", r);
	pc_api->log(PIN_LOG_INFO, "notifications: contact erased", "messageId",
			msg->message_id, "userId", user, NULL);
	pc_api->metric_add("notifications_contacts_erased_total", NULL, 1);
	return PIN_CONSUME_OK;
}

/* the fields of a valid non-Deleted message */
struct contact {
	const char *user, *name, *email, *phone, *locale, *tz, *status;
};

/* Validation shared by both paths.  OK with k filled; OK with *deleted set
 * for a Deleted message (k->user, k->name only); FATAL; RETRY (the time
 * zone list is unavailable). */
static enum pin_consume_status parse_contact(const struct pin_msg *msg,
		struct pin_consume_result *res, struct contact *k, int *deleted)
{
	const char *canon, *why;
	int bad = 0;

	*deleted = 0;
	pc_contract_check(msg, "notifications: contract version mismatch",
			"notifications_contacts_contract_mismatch_total");
	k->status = msg->payload ? pc_jstr(msg->payload, "status") : NULL;
	if (k->status && !strcmp(k->status, "Deleted")) {
		/* the erasure needs the id only: a deleted profile may come
		 * without a name */
		k->user = pc_jstr(msg->payload, "userId");
		if (!k->user || !pc_api->is_uuid(k->user) ||
		    !strcmp(k->user, "00000000-0000-0000-0000-000000000000"))
			return fatal(res, "userId is missing or not a uuid");
		if (msg->created_at_us <= 0)
			return fatal(res, "envelope createdAt is missing");
		k->name = pc_jstr(msg->payload, "displayName");
		*deleted = 1;
		return PIN_CONSUME_OK;
	}
	if ((why = pc_identity_user(msg->payload, &k->user, &k->name)))
		return fatal(res, why);
	k->email = pc_jstr_opt(msg->payload, "email", &bad);
	k->phone = pc_jstr_opt(msg->payload, "phone", &bad);
	k->locale = pc_jstr_opt(msg->payload, "locale", &bad);
	k->tz = pc_jstr_opt(msg->payload, "timeZone", &bad);
	k->status = pc_jstr_opt(msg->payload, "status", &bad);
	if (bad)
		return fatal(res, "a contact field is not a string");
	if (!k->status)
		return fatal(res, "status is missing");
	if ((k->email && strlen(k->email) > 320) || (k->phone && strlen(k->phone) > 64) ||
	    (k->locale && strlen(k->locale) > 35))
		return fatal(res, "a contact field is too long");
	if (k->locale && !*k->locale)
		k->locale = NULL;
	if (k->tz) {
		int rc = pc_tz_lookup(k->tz, &canon);

		if (rc < 0 && rc != PC_E_TZ)
			return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "NTF_DB_ERROR",
					"time zone list unavailable", NULL);
		k->tz = rc == 0 ? canon : NULL;   /* an unknown zone is dropped */
	}
	if (msg->created_at_us <= 0)
		return fatal(res, "envelope createdAt is missing");
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_user(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	const char *p[9];
	struct contact k;
	enum pin_consume_status st;
	char created[40], now[40];
	int deleted;
	PGresult *r;

	(void)ud;
	if ((st = parse_contact(msg, res, &k, &deleted)) != PIN_CONSUME_OK)
		return st;
	if (deleted)
		return erase(msg, res, k.user, k.name);
	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = k.user;
	p[1] = k.name;
	p[2] = k.email;
	p[3] = k.phone;
	p[4] = k.locale;
	p[5] = k.tz;
	p[6] = k.status;
	p[7] = created;
	p[8] = now;
	r = pc_api->db_exec_prepared("ntf_contact_upsert",
		"INSERT INTO notifications.recipient_contacts AS c (user_id, display_name, "
		"  email, phone, locale, time_zone, status, last_event_at, updated_at) "
		"VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8::timestamptz, $9::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"  email = EXCLUDED.email, phone = EXCLUDED.phone, locale = EXCLUDED.locale, "
		"  time_zone = EXCLUDED.time_zone, status = EXCLUDED.status, "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE c.last_event_at < EXCLUDED.last_event_at", 9, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "NTF_DB_ERROR",
				pc_api->sprintf("contact upsert failed (%s)",
					r ? pc_api->db_sqlstate(r) : "no connection"), NULL);
	if (strcmp(PQcmdTuples(r), "0") == 0)
		pc_api->metric_add("notifications_contacts_stale_total", NULL, 1);
	return PIN_CONSUME_OK;
}

/*
 * [consume] The set-based batch handler (ABI 1.4 batch_fn): runs of
 * distinct users (pc_batch_runs: a run ends where a user repeats; a Deleted
 * message's erasure runs on its own in its place), each run ONE upsert
 * (json_to_recordset) with on_user's newest-wins condition.  An invalid
 * message is FATAL (no effect); anything that fails gives the batch back to
 * the host (per-message path).  Contacts are PII: never logged.
 */
static enum pin_consume_status run_flush(struct pc_batch_run *u,
		struct pin_consume_result *res, void *ud)
{
	const char *p[2];
	PGresult *r;

	(void)ud;
	if (u->alone)       /* a Deleted message */
		return erase(u->msg[0], res, u->key[0],
				pc_jstr(u->msg[0]->payload, "displayName"));
	if (!(p[0] = pc_batch_run_json(u)))
		return PIN_CONSUME_RETRY;
	p[1] = u->now;
	r = pc_api->db_exec_prepared("ntf_contact_upsert_set",
		"INSERT INTO notifications.recipient_contacts AS c (user_id, display_name, "
		"  email, phone, locale, time_zone, status, last_event_at, updated_at) "
		"SELECT x.user_id, x.display_name, x.email, x.phone, x.locale, x.time_zone, "
		"  x.status, x.last_event_at, $2::timestamptz "
		"FROM json_to_recordset($1::json) AS x(user_id uuid, display_name text, "
		"  email text, phone text, locale text, time_zone text, status text, "
		"  last_event_at timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"  email = EXCLUDED.email, phone = EXCLUDED.phone, locale = EXCLUDED.locale, "
		"  time_zone = EXCLUDED.time_zone, status = EXCLUDED.status, "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE c.last_event_at < EXCLUDED.last_event_at", 2, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return PIN_CONSUME_RETRY;
	if ((size_t)atol(PQcmdTuples(r)) < u->n)
		pc_api->metric_add("notifications_contacts_stale_total", NULL,
				(double)(u->n - (size_t)atol(PQcmdTuples(r))));
	return PIN_CONSUME_OK;
}

/* pc_batch_runs' parse: a row of the run keyed by the user, or a Deleted
 * message alone */
static enum pin_consume_status run_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *it, void *ud)
{
	struct contact k;
	enum pin_consume_status st;
	struct pc_jt *o;

	(void)ud;
	if ((st = parse_contact(msg, res, &k, &it->alone)) != PIN_CONSUME_OK)
		return st;
	it->key = k.user;
	if (it->alone)
		return PIN_CONSUME_OK;
	o = pc_batch_item_row(it);
	pc_batch_row_str(o, "user_id", k.user);
	pc_batch_row_str(o, "display_name", k.name);
	pc_batch_row_str(o, "email", k.email);
	pc_batch_row_str(o, "phone", k.phone);
	pc_batch_row_str(o, "locale", k.locale);
	pc_batch_row_str(o, "time_zone", k.tz);
	pc_batch_row_str(o, "status", k.status);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_users(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	return pc_batch_runs(msgs, n, st, res, run_parse, run_flush, ud);
}

int ntf_contacts_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = PC_GROUP_NTF_IDENTITY, .topics = topics,
		.inbox_table = NTF_INBOX, .fn = on_user, .batch_fn = on_users };

	return pc_register_consumer(reg, &c, "notify", err, errlen);
}
