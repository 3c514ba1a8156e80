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
 * user's own notifications (delivered or not, with their address snapshots,
 * seed 001 step 5) and settings are deleted, and the user's display
 * name is replaced by the neutral "(имя не указано)" / "(name unknown)" in
 * the texts of everyone else's notifications, whose invitations naming the
 * user (column calendar, issue 32) are dropped.  Later messages build nothing
 * for a Deleted recipient (events.c), and no later identity message changes
 * the tombstone (pc_replica final_status: the identity service never reuses
 * a deleted id, and an erasure is not undone). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"

static enum pin_consume_status fatal(struct pin_consume_result *res, const char *detail)
{
	/* notifications_dlq_total: the host counts every DLQ route (dlq_metric) */
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

/* The invitations (column calendar, issue 32) of other users' notifications
 * that name the user -- as ORGANIZER or ATTENDEE, by address or by name --
 * are dropped: such an e-mail not sent yet goes as plain text.  Compared on
 * the unfolded text (RFC 5545 3.1: a CRLF and one blank continue a line),
 * as libical folds long lines anywhere.  A NULL or empty value matches
 * nothing. */
static PGresult *drop_invitations(const char *email, const char *name, const char *name2)
{
	const char *p[3] = { email && *email ? email : NULL, name && *name ? name : NULL,
		name2 && *name2 ? name2 : NULL };

	return pc_api->db_exec_prepared("ntf_erase_invitations",
		"UPDATE notifications.notifications SET calendar = NULL "
		"WHERE calendar IS NOT NULL AND ("
		"  strpos(lower(replace(replace(calendar, E'\\r\\n ', ''), E'\\r\\n\\t', '')), "
		"    lower('mailto:' || $1)) > 0 "
		"  OR strpos(replace(replace(calendar, E'\\r\\n ', ''), E'\\r\\n\\t', ''), $2) > 0 "
		"  OR strpos(replace(replace(calendar, E'\\r\\n ', ''), E'\\r\\n\\t', ''), $3) > 0)",
		3, p);
}

/* Status Deleted: the erasure (see the head of this file).  name: the
 * message's displayName or NULL. */
static enum pin_consume_status erase(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user, const char *name)
{
	const char *p[3], *stored = NULL, *email = NULL;
	char created[40], now[40];
	PGresult *r;

	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = user;
	r = pc_api->db_exec_prepared("ntf_erase_lock",
		"SELECT display_name, last_event_at >= $2::timestamptz, email "
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
		email = pc_col(r, 0, 2);
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
	if (!pc_res_ok(r = drop_invitations(email, stored, name), PGRES_COMMAND_OK))
		return db_retry(res, "invitation erase", r);
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

/* The message's row (pc_replica parse): user_id, display_name, email, phone,
 * locale, time_zone, status.  OK with row filled; OK with row->alone for a
 * Deleted message (row->user_id and v[0], the name, only); FATAL; RETRY
 * (the time zone list is unavailable). */
static enum pin_consume_status parse_contact(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_replica_row *row)
{
	const char *canon, *why, *name, *email, *phone, *locale, *tz, *status;
	int bad = 0;

	status = msg->payload ? pc_jstr(msg->payload, "status") : NULL;
	if (status && !strcmp(status, "Deleted")) {
		/* the erasure needs the id only: a deleted profile may come
		 * without a name */
		row->user_id = pc_jstr(msg->payload, "userId");
		if (!row->user_id || !pc_api->is_uuid(row->user_id) ||
		    !strcmp(row->user_id, "00000000-0000-0000-0000-000000000000"))
			return fatal(res, "userId is missing or not a uuid");
		if (msg->created_at_us <= 0)
			return fatal(res, "envelope createdAt is missing");
		row->v[0] = pc_jstr(msg->payload, "displayName");
		row->alone = 1;
		return PIN_CONSUME_OK;
	}
	if ((why = pc_identity_user(msg->payload, &row->user_id, &name)))
		return fatal(res, why);
	email = pc_jstr_opt(msg->payload, "email", &bad);
	phone = pc_jstr_opt(msg->payload, "phone", &bad);
	locale = pc_jstr_opt(msg->payload, "locale", &bad);
	tz = pc_jstr_opt(msg->payload, "timeZone", &bad);
	status = pc_jstr_opt(msg->payload, "status", &bad);
	if (bad)
		return fatal(res, "a contact field is not a string");
	if (!status)
		return fatal(res, "status is missing");
	if ((email && strlen(email) > 320) || (phone && strlen(phone) > 64) ||
	    (locale && strlen(locale) > 35))
		return fatal(res, "a contact field is too long");
	if (locale && !*locale)
		locale = NULL;
	if (tz) {
		int rc = pc_tz_lookup(tz, &canon);

		if (rc < 0 && rc != PC_E_TZ)
			return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "NTF_DB_ERROR",
					"time zone list unavailable", NULL);
		tz = rc == 0 ? canon : NULL;   /* an unknown zone is dropped */
	}
	if (msg->created_at_us <= 0)
		return fatal(res, "envelope createdAt is missing");
	row->v[0] = name;
	row->v[1] = email;
	row->v[2] = phone;
	row->v[3] = locale;
	row->v[4] = tz;
	row->v[5] = status;
	return PIN_CONSUME_OK;
}

/* A Deleted message (parse's alone): the erasure. */
static enum pin_consume_status erase_row(const struct pin_msg *msg,
		struct pin_consume_result *res, const struct pc_replica_row *row)
{
	return erase(msg, res, row->user_id, row->v[0]);
}

/* The replica (sdk/replica.h): per message one upsert, per batch one upsert
 * of each run of distinct users (a Deleted message's erasure runs on its own
 * in its place), newest message wins.  Contacts are PII: never logged. */
static struct pc_replica replica = {
	.plugin = "notify",
	.group = PC_GROUP_NTF_IDENTITY,
	.inbox_table = NTF_INBOX,
	.table = "notifications.recipient_contacts",
	.cols = { "display_name", "email", "phone", "locale", "time_zone", "status", NULL },
	.stmt = "ntf_contact_upsert",
	.code_db = "NTF_DB_ERROR",
	.what = "contact upsert",
	.stale_metric = "notifications_contacts_stale_total",
	.final_status = "Deleted",
	.dlq_metric = "notifications_dlq_total",   /* the service's dead letters */
	.parse = parse_contact,
	.alone = erase_row,
};

int ntf_contacts_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	return pc_replica_register(reg, &replica, err, errlen);
}
