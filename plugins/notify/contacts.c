/* contacts.c -- consumer group notifications-identity-users:
 * pin.identity.users.v1 -> notifications.recipient_contacts (display name,
 * e-mail, phone, locale, time zone: the delivery snapshot of seed 001 step 5).
 *
 * Contacts are PII: stored for delivery, never logged.  Idempotent: a
 * redelivery hits the inbox; an older message (envelope createdAt <= the
 * row's last_event_at) does not overwrite a newer one.  A time zone unknown
 * to PostgreSQL is stored as NULL (the recipient falls back to the default),
 * so a bad value can never break the rendering of a notification. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"

#define GROUP "notifications-identity-users"

static const char *const topics[] = { "pin.identity.users.v1", NULL };


static enum pin_consume_status fatal(struct pin_consume_result *res, const char *detail)
{
	pc_api->metric_add("notifications_dlq_total", NULL, 1);
	return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, NTF_CODE_INVALID, detail, NULL);
}

static enum pin_consume_status on_user(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	const char *user, *name, *email, *phone, *locale, *tz, *status, *canon, *p[9], *why;
	char created[40], now[40];
	int bad = 0;
	PGresult *r;

	(void)ud;
	if ((why = pc_identity_user(msg->payload, &user, &name)))
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

	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = user;
	p[1] = name;
	p[2] = email;
	p[3] = phone;
	p[4] = locale;
	p[5] = tz;
	p[6] = status;
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

int ntf_contacts_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { GROUP, topics, NTF_INBOX, on_user, NULL, NULL };

	return pc_register_consumer(reg, &c, "notify", err, errlen);
}
