/*
 * test_delivery.c -- issue 10: the notify.so dispatcher against the real
 * parts of the test stack (aiosmtpd in PIN_MAIL_DIR, the SMS sink writing
 * PIN_SMS_LOG, the dev broker), and the relay's per-row error path.
 *
 * Notifications are created the way production creates them: calendar and
 * identity envelopes produced to the dev broker, consumed by notify.so.
 * Each test uses fresh users, addresses and phones.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "harness.h"

/* the envelope of a fixed createdAt */
#define ENV_FIXED(mid, et, at, aid, pl) h_envelope(mid, et, at, aid, "2026-12-01T09:00:00.123Z", pl)

#define WAIT_MS 60000
#define GROUP "notifications-calendar-events"
#define START "2030-06-01T09:00:00Z"
#define END "2030-06-01T10:00:00Z"
#define DISPATCHED "pin.notifications.dispatched.v1"

static void send_cal(const char *name, const char *key, const char *agg, const char *payload)
{
	char *mid = h_new_mid();

	ck_assert_int_eq(h_kafka_produce(h_sprintf("pin.calendar.%s.v1", name), key,
		ENV_FIXED(mid, h_sprintf("pin.calendar.%s", name), agg, key, payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = '" GROUP "' "
		"AND message_id = $1::uuid", mid) == 1, WAIT_MS), "%s not consumed", name);
}

/* pin.identity.users.v1 with e-mail and phone; waits for the replica */
static void contact(const char *user, const char *email, const char *phone,
		const char *locale)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"Тест Тестов\",\"avatarUrl\":null,"
		"\"email\":\"%s\",\"phone\":\"%s\",\"locale\":\"%s\","
		"\"timeZone\":\"Europe/Moscow\",\"status\":\"Active\"}}", h_new_mid(), user, user,
		email, phone, locale)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid", user) == 1,
		WAIT_MS), "contact not replicated");
}

static char *apt_created(const char *apt, const char *tenant, const char *agent,
		const char *investor)
{
	return h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"slotId\":\"%s\","
		"\"eventId\":\"%s\",\"agentUserId\":\"%s\",\"investorUserId\":\"%s\","
		"\"kind\":\"Showing\",\"status\":\"Pending\",\"autoConfirmed\":false,"
		"\"startAt\":\"" START "\",\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\","
		"\"confirmDeadlineAt\":\"2030-05-31T09:00:00Z\",\"projectId\":null,"
		"\"propertyObjectId\":null,\"consultationRequestId\":null,"
		"\"rescheduledFromAppointmentId\":null,\"comment\":null}",
		apt, tenant, h_uuid(), h_uuid(), agent, investor);
}

static char *reminder_due(const char *tenant, const char *owner, const char *client)
{
	return h_sprintf("{\"reminderId\":\"%s\",\"eventId\":\"%s\",\"tenantId\":\"%s\","
		"\"ownerUserId\":\"%s\",\"clientUserId\":\"%s\",\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"timeZone\":\"Europe/Moscow\",\"offsetMinutes\":60,"
		"\"appointmentId\":\"%s\"}", h_uuid(), h_uuid(), tenant, owner, client, h_uuid());
}

static char *row_of(const char *user, const char *channel, const char *column)
{
	return h_sql_scalar(h_sprintf("SELECT %s::text FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = $2", column), user, channel);
}

static bool status_is(const char *user, const char *channel, const char *st)
{
	char *s = row_of(user, channel, "status");

	return s && !strcmp(s, st);
}

static char *unique_phone(void)
{
	return h_sql_scalar("SELECT '+7999' || lpad((random() * 1e7)::int::text, 7, '0')");
}

/* ---- mail: the Maildir aiosmtpd writes ------------------------------------ */

/* Messages in PIN_MAIL_DIR containing needle: count, and the last one. */
static int mails_with(const char *needle, char **last)
{
	const char *dir = h_env("PIN_MAIL_DIR");
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char *m;

		if (e->d_name[0] == '.')
			continue;
		m = h_slurp(h_sprintf("%s/%s", dir, e->d_name));
		if (m && strstr(m, needle)) {
			n++;
			if (last)
				*last = m;
		}
	}
	closedir(d);
	return n;
}

static char *b64_decode(const char *s, size_t len)
{
	char *clean = calloc(1, len + 1), *out;
	size_t n = 0, pad = 0;
	int r;

	for (size_t i = 0; i < len; i++)
		if (s[i] != '\r' && s[i] != '\n' && s[i] != ' ' && s[i] != '\t')
			clean[n++] = s[i];
	if (n && clean[n - 1] == '=')
		pad++;
	if (n > 1 && clean[n - 2] == '=')
		pad++;
	out = calloc(1, n + 4);
	r = EVP_DecodeBlock((unsigned char *)out, (unsigned char *)clean, (int)n);
	ck_assert_msg(r >= 0, "bad base64");
	out[r - (int)pad] = '\0';
	free(clean);
	{
		char *h = h_strdup(out);

		free(out);
		return h;
	}
}

/* Value of header name (unfolded, RFC 2047 B words decoded). */
static char *mail_header(const char *mail, const char *name)
{
	const char *all = h_sprintf("\n%s", mail);     /* the first header too */
	const char *p = strstr(all, h_sprintf("\n%s:", name)), *end;
	char *raw, *out;
	size_t o = 0;

	ck_assert_msg(p, "no %s header in %s", name, mail);
	p += strlen(name) + 2;
	end = p;
	while (*end && !(end[0] == '\n' && end[1] != ' ' && end[1] != '\t'))
		end++;
	raw = h_strdup(p);
	raw[end - p] = '\0';
	out = calloc(1, strlen(raw) * 2 + 1);
	for (const char *q = raw; *q;) {
		const char *w = strstr(q, "=?UTF-8?B?"), *we;

		if (w == q || (w && strspn(q, " \t\r\n") == (size_t)(w - q))) {
			w += 10;
			we = strstr(w, "?=");
			ck_assert_ptr_nonnull(we);
			strcpy(out + o, b64_decode(w, (size_t)(we - w)));
			o = strlen(out);
			q = we + 2;
		} else if (!w) {
			while (*q == ' ')
				q++;
			strcpy(out + o, q);
			o = strlen(out);
			break;
		} else {
			out[o++] = *q++;
		}
	}
	while (o && (out[o - 1] == '\r' || out[o - 1] == '\n' || out[o - 1] == ' '))
		out[--o] = '\0';
	{
		char *h = h_strdup(out);

		free(out);
		return h;
	}
}

static char *mail_body(const char *mail)
{
	const char *p = strstr(mail, "\r\n\r\n");
	size_t skip = 4;

	if (!p || (strstr(mail, "\n\n") && strstr(mail, "\n\n") < p)) {
		p = strstr(mail, "\n\n");
		skip = 2;
	}
	ck_assert_ptr_nonnull(p);
	return b64_decode(p + skip, strlen(p + skip));
}

/* ---- Kafka: dispatched messages of one notification ---------------------- */

static int dispatched_count(const char *id, const char **status)
{
	struct h_kmsgs *l = h_kafka_read_all(DISPATCHED, 5000);
	int n = 0;

	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key && !strcmp(l->v[i].key, id)) {
			n++;
			if (status)
				*status = h_jstr(h_jget(l->v[i].json, "payload"), "status");
		}
	return n;
}

static const struct h_kmsg *dispatched_of(const char *id)
{
	return h_kafka_wait_key(DISPATCHED, id, 30000);
}

/* ---- SMS sink log ----------------------------------------------------------- */

/* Lines of PIN_SMS_LOG whose body.idempotencyKey is id; the last as JSON. */
static int sms_requests(const char *id, json_object **last)
{
	char *log = h_slurp(h_env("PIN_SMS_LOG")), *save = NULL;
	int n = 0;

	if (!log)
		return 0;
	for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_object *o = json_tokener_parse(line);
		const char *k = h_jstr(h_jget(o, "body"), "idempotencyKey");

		if (k && !strcmp(k, id)) {
			n++;
			if (last) {
				json_object_put(*last);
				*last = json_object_get(o);
			}
		}
		json_object_put(o);
	}
	return n;
}

static void sms_file(const char *suffix, const char *value)
{
	const char *f = h_sprintf("%s.%s", h_env("PIN_SMS_LOG"), suffix);
	FILE *fp;

	if (!value) {
		unlink(f);
		return;
	}
	fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "%s\n", value);
	fclose(fp);
}

static void sms_status(const char *code)
{
	const char *f = h_sprintf("%s.status", h_env("PIN_SMS_LOG"));

	if (!code) {
		unlink(f);
		return;
	}
	FILE *fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "%s\n", code);
	fclose(fp);
}

/* ------------------------------------------------------------------ tests */

/* A booking -> the agent's e-mail arrives at the SMTP server: Subject
 * (RFC 2047) and body (base64 UTF-8) decode to the rendered Russian texts,
 * Message-ID carries the notification id; the row is Sent with sent_at and
 * the provider id; one pin.notifications.dispatched.v1 without PII. */
START_TEST(booking_email_arrives)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	char *email = h_sprintf("agent-%s@example.com", agent), *mail = NULL, *id;
	const struct h_kmsg *m;
	json_object *p;

	contact(agent, email, unique_phone(), "ru");
	send_cal("appointment-created", apt, "Appointment", apt_created(apt, tenant, agent, inv));
	ck_assert_msg(H_WAIT_UNTIL(status_is(agent, "Email", "Sent"), WAIT_MS),
		"agent e-mail not Sent: %s / %s", row_of(agent, "Email", "status"),
		row_of(agent, "Email", "last_error"));
	id = row_of(agent, "Email", "id");
	ck_assert_ptr_nonnull(row_of(agent, "Email", "sent_at"));
	ck_assert_str_eq(row_of(agent, "Email", "provider_message_id"),
		h_sprintf("<%s@dev.pin.example>", id));
	ck_assert_str_eq(row_of(agent, "Email", "attempts"), "1");

	ck_assert_int_eq(mails_with(h_sprintf("<%s@dev.pin.example>", id), &mail), 1);
	ck_assert_str_eq(mail_header(mail, "Subject"), row_of(agent, "Email", "title"));
	ck_assert_msg(strstr(mail_header(mail, "Subject"), "Новая запись"), "%s",
		mail_header(mail, "Subject"));
	ck_assert_str_eq(mail_body(mail), row_of(agent, "Email", "body"));
	ck_assert_str_eq(mail_header(mail, "To"), email);
	ck_assert_msg(strstr(mail, "Content-Type: text/plain; charset=utf-8"), "%s", mail);
	ck_assert_msg(strstr(mail_header(mail, "Date"), " +0000"), "Date: %s",
		mail_header(mail, "Date"));

	m = dispatched_of(id);
	ck_assert_msg(m, "no dispatched message for %s", id);
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(m->json, "eventType"), "pin.notifications.dispatched");
	ck_assert_str_eq(h_jstr(p, "notificationId"), id);
	ck_assert_str_eq(h_jstr(p, "recipientUserId"), agent);
	ck_assert_str_eq(h_jstr(p, "channel"), "Email");
	ck_assert_str_eq(h_jstr(p, "kind"), "AppointmentCreated");
	ck_assert_str_eq(h_jstr(p, "status"), "Sent");
	ck_assert_ptr_nonnull(h_jstr(p, "sentAt"));
	ck_assert_int_eq(json_object_get_int(h_jget(p, "attempts")), 1);
	ck_assert_ptr_null(strstr(m->value, email));
	ck_assert_ptr_null(strstr(m->value, "Тест"));
	ck_assert_int_eq(dispatched_count(id, NULL), 1);
}
END_TEST

/* An English template arrives readable too (en contact locale). */
START_TEST(english_email_arrives)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	char *mail = NULL, *id;

	contact(agent, h_sprintf("en-%s@example.com", agent), unique_phone(), "en");
	send_cal("appointment-created", apt, "Appointment", apt_created(apt, tenant, agent, inv));
	ck_assert_msg(H_WAIT_UNTIL(status_is(agent, "Email", "Sent"), WAIT_MS), "not Sent");
	id = row_of(agent, "Email", "id");
	ck_assert_int_eq(mails_with(id, &mail), 1);
	ck_assert_str_eq(mail_header(mail, "Subject"), row_of(agent, "Email", "title"));
	ck_assert_str_eq(mail_body(mail), row_of(agent, "Email", "body"));
}
END_TEST

/* An appointment reminder (Critical, Sms by default) reaches the SMS sink:
 * one POST {to, text, idempotencyKey = id} with the bearer token; the
 * provider's id is kept. */
START_TEST(sms_reminder_arrives)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *phone = unique_phone(), *id;
	json_object *req = NULL;

	contact(owner, h_sprintf("o-%s@example.com", owner), phone, "ru");
	send_cal("reminder-due", h_uuid(), "CalendarEvent", reminder_due(tenant, owner, client));
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Sms", "Sent"), WAIT_MS),
		"sms not Sent: %s / %s", row_of(owner, "Sms", "status"),
		row_of(owner, "Sms", "last_error"));
	id = row_of(owner, "Sms", "id");
	ck_assert_int_eq(sms_requests(id, &req), 1);
	ck_assert_str_eq(h_jstr(h_jget(req, "body"), "to"), phone);
	ck_assert_str_eq(h_jstr(h_jget(req, "body"), "text"), row_of(owner, "Sms", "body"));
	ck_assert_str_eq(h_jstr(req, "authorization"), "Bearer dev-sms-token");
	ck_assert_str_eq(row_of(owner, "Sms", "provider_message_id"), h_jstr(req, "id"));
	json_object_put(req);
	ck_assert_msg(dispatched_of(id), "no dispatched message");
}
END_TEST

/* Provider 4xx -> Failed at once with the status in last_error (no PII), and
 * exactly one dispatched message (status Failed). */
START_TEST(sms_provider_4xx_fails_once)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *phone = unique_phone(), *id;
	const char *st = NULL;
	bool failed;

	contact(owner, h_sprintf("o-%s@example.com", owner), phone, "ru");
	sms_status("400");
	send_cal("reminder-due", h_uuid(), "CalendarEvent", reminder_due(tenant, owner, client));
	failed = H_WAIT_UNTIL(status_is(owner, "Sms", "Failed"), WAIT_MS);
	sms_status(NULL);
	ck_assert_msg(failed, "sms not Failed: %s", row_of(owner, "Sms", "status"));
	id = row_of(owner, "Sms", "id");
	ck_assert_str_eq(row_of(owner, "Sms", "last_error"), "NTF_SMS_REJECTED: http 400");
	ck_assert_str_eq(row_of(owner, "Sms", "attempts"), "1");
	ck_assert_ptr_nonnull(row_of(owner, "Sms", "failed_at"));
	ck_assert_int_eq(sms_requests(id, NULL), 1);
	ck_assert_msg(dispatched_of(id), "no dispatched message");
	h_sleep_ms(2000);
	ck_assert_int_eq(dispatched_count(id, &st), 1);
	ck_assert_str_eq(st, "Failed");
}
END_TEST

/* Provider 5xx -> retried with backoff, then Sent once the provider is back;
 * every try carried the same idempotencyKey. */
START_TEST(sms_provider_5xx_retries)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *id;
	bool retried;

	contact(owner, h_sprintf("o-%s@example.com", owner), unique_phone(), "ru");
	sms_status("503");
	send_cal("reminder-due", h_uuid(), "CalendarEvent", reminder_due(tenant, owner, client));
	retried = H_WAIT_UNTIL(h_sql_int("SELECT attempts FROM notifications.notifications"
		" WHERE recipient_user_id = $1::uuid AND channel = 'Sms'", owner) >= 2, WAIT_MS);
	sms_status(NULL);
	ck_assert_msg(retried, "no retries");
	ck_assert_str_eq(row_of(owner, "Sms", "status"), "Pending");
	ck_assert_msg(strstr(row_of(owner, "Sms", "last_error"), "http 503"), "%s",
		row_of(owner, "Sms", "last_error"));
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Sms", "Sent"), WAIT_MS), "not Sent");
	id = row_of(owner, "Sms", "id");
	ck_assert_int_ge(sms_requests(id, NULL), 3);
	ck_assert_msg(dispatched_of(id), "no dispatched message");
	ck_assert_int_eq(dispatched_count(id, NULL), 1);
}
END_TEST

static void smtp_kill(void)
{
	char *pf = h_sprintf("%s/pids/smtp.pid", h_env("PIN_DEV_DIR"));
	char *pid = h_slurp(pf);

	ck_assert_ptr_nonnull(pid);
	ck_assert_int_eq(kill(atoi(pid), SIGKILL), 0);
	h_sleep_ms(300);
}

static void smtp_start(void)
{
	char *cmd = h_sprintf("setsid /usr/bin/aiosmtpd -n -l 127.0.0.1:%s "
		"-c aiosmtpd.handlers.Mailbox '%s/..' >>'%s' 2>&1 </dev/null & echo $! >'%s/pids/smtp.pid'",
		h_env("PIN_SMTP_PORT"), h_env("PIN_MAIL_DIR"), h_env("PIN_SMTP_LOG"),
		h_env("PIN_DEV_DIR"));

	ck_assert_int_eq(system(cmd), 0);
}

/* SMTP server down: the row stays Pending, attempts grow, last_error names
 * the failure (no address); server up again: Sent, exactly one e-mail. */
START_TEST(smtp_down_then_up)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	char *id;
	bool retried;

	contact(agent, h_sprintf("down-%s@example.com", agent), unique_phone(), "ru");
	smtp_kill();
	send_cal("appointment-created", apt, "Appointment", apt_created(apt, tenant, agent, inv));
	retried = H_WAIT_UNTIL(h_sql_int("SELECT attempts FROM notifications.notifications"
		" WHERE recipient_user_id = $1::uuid AND channel = 'Email'", agent) >= 2, WAIT_MS);
	smtp_start();
	ck_assert_msg(retried, "no retries while the SMTP server is down");
	ck_assert_msg(strstr(row_of(agent, "Email", "last_error"), "NTF_SMTP_UNAVAILABLE"),
		"%s", row_of(agent, "Email", "last_error"));
	ck_assert_ptr_null(strstr(row_of(agent, "Email", "last_error"), "example.com"));
	ck_assert_msg(H_WAIT_UNTIL(status_is(agent, "Email", "Sent"), WAIT_MS), "not Sent: %s",
		row_of(agent, "Email", "last_error"));
	id = row_of(agent, "Email", "id");
	ck_assert_msg(dispatched_of(id), "no dispatched message");
	h_sleep_ms(1500);
	ck_assert_int_eq(mails_with(h_sprintf("<%s@", id), NULL), 1);
	ck_assert_int_eq(dispatched_count(id, NULL), 1);
}
END_TEST

/* Seed 001: a contact that is not known yet is no failure: the e-mail stays
 * Pending (no attempt counted) and goes out once the address arrives. */
START_TEST(unknown_contact_catches_up)
{
	static const char series[] =
		"notifications_dispatch_total{channel=\"Email\",status=\"contact_unknown\"}";
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	struct h_host w;
	double before;
	char *id;

	h_host_stack_worker(&w);
	before = h_host_metric(&w, series);
	ck_assert_msg(!isnan(before), "no %s on the worker host", series);
	send_cal("appointment-created", apt, "Appointment", apt_created(apt, tenant, agent, inv));
	ck_assert_msg(H_WAIT_UNTIL(row_of(agent, "Email", "last_error") != NULL, WAIT_MS),
		"dispatcher did not look at the row");
	ck_assert_str_eq(row_of(agent, "Email", "status"), "Pending");
	ck_assert_str_eq(row_of(agent, "Email", "last_error"), "NTF_CONTACT_UNKNOWN");
	ck_assert_str_eq(row_of(agent, "Email", "attempts"), "0");
	/* put back by the claim itself: not leased, looked at again after
	 * notify.dispatch_contact_retry_s, and counted */
	ck_assert_ptr_null(row_of(agent, "Email", "lease_owner"));
	ck_assert_ptr_nonnull(row_of(agent, "Email", "next_attempt_at"));
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, series) >= before + 1, 10000),
		"%s not counted (%g before)", series, before);
	id = row_of(agent, "Email", "id");
	contact(agent, h_sprintf("late-%s@example.com", agent), unique_phone(), "ru");
	ck_assert_msg(H_WAIT_UNTIL(status_is(agent, "Email", "Sent"), WAIT_MS), "not Sent");
	ck_assert_int_eq(mails_with(h_sprintf("<%s@", id), NULL), 1);
}
END_TEST

/* Seed 001's limit: a row whose contact stays unknown longer than
 * notify.dispatch_contact_wait_max_s (86400) is Failed NTF_CONTACT_UNKNOWN,
 * with its dispatched event, no attempt counted; a younger row of the same
 * claim keeps waiting (the claim's waiting rows go back in one statement)
 * and is sent once the address arrives. */
START_TEST(unknown_contact_fails_after_wait_max)
{
	const char *tenant = h_uuid(), *owner = h_uuid();
	const char *st = NULL;
	char *email, *sms;

	send_cal("reminder-due", h_uuid(), "CalendarEvent", reminder_due(tenant, owner, h_uuid()));
	ck_assert_msg(H_WAIT_UNTIL(row_of(owner, "Email", "last_error") != NULL &&
		row_of(owner, "Sms", "last_error") != NULL, WAIT_MS),
		"dispatcher did not look at the rows");
	email = row_of(owner, "Email", "id");
	sms = row_of(owner, "Sms", "id");
	h_sql("UPDATE notifications.notifications SET next_attempt_at = NULL,"
		" created_at = CASE WHEN id = $1::uuid THEN now() - interval '2 days'"
		" ELSE created_at END WHERE id IN ($1::uuid, $2::uuid)", email, sms);
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Email", "Failed"), WAIT_MS),
		"not Failed: %s", row_of(owner, "Email", "status"));
	ck_assert_str_eq(row_of(owner, "Email", "last_error"), "NTF_CONTACT_UNKNOWN");
	ck_assert_str_eq(row_of(owner, "Email", "attempts"), "0");
	ck_assert_ptr_nonnull(row_of(owner, "Email", "failed_at"));
	ck_assert_msg(dispatched_of(email), "no dispatched message");
	ck_assert_int_eq(dispatched_count(email, &st), 1);
	ck_assert_str_eq(st, "Failed");
	ck_assert_str_eq(row_of(owner, "Sms", "status"), "Pending");
	ck_assert_str_eq(row_of(owner, "Sms", "last_error"), "NTF_CONTACT_UNKNOWN");
	ck_assert_str_eq(row_of(owner, "Sms", "attempts"), "0");
	contact(owner, h_sprintf("late-%s@example.com", owner), unique_phone(), "ru");
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Sms", "Sent"), WAIT_MS), "Sms not Sent");
	ck_assert_str_eq(row_of(owner, "Email", "status"), "Failed");
}
END_TEST

/* Quiet hours: a row with not_before in the future is not dispatched. */
START_TEST(not_before_is_honoured)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *id;

	contact(owner, h_sprintf("q-%s@example.com", owner), unique_phone(), "ru");
	sms_status("503");      /* keep the Sms row Pending while we defer it */
	send_cal("reminder-due", h_uuid(), "CalendarEvent", reminder_due(tenant, owner, client));
	ck_assert(H_WAIT_UNTIL(h_sql_int("SELECT attempts FROM notifications.notifications"
		" WHERE recipient_user_id = $1::uuid AND channel = 'Sms'", owner) >= 1, WAIT_MS));
	h_sql("UPDATE notifications.notifications SET not_before = now() + interval '1 hour'"
		" WHERE recipient_user_id = $1::uuid AND channel = 'Sms'", owner);
	h_sleep_ms(1000);
	sms_status(NULL);
	id = row_of(owner, "Sms", "id");
	h_sleep_ms(3000);
	ck_assert_str_eq(row_of(owner, "Sms", "status"), "Pending");
	h_sql("UPDATE notifications.notifications SET not_before = now() - interval '1 second',"
		" next_attempt_at = NULL WHERE id = $1::uuid", id);
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Sms", "Sent"), WAIT_MS), "not Sent");
}
END_TEST

/* Relay: a row too large for the broker is parked with its error and
 * counted; the rows behind it (same key) are published. */
START_TEST(relay_parks_oversize_row)
{
	const char *key = h_uuid(), *big = h_new_mid();
	char *bad_id, *ids[3], *metrics = NULL;

	bad_id = h_sql_scalar("INSERT INTO calendar.outbox (message_id, topic, key, envelope,"
		" created_at) VALUES ($1::uuid, 'pin.test.events.v1', $2,"
		" jsonb_build_object('messageId', $1::text, 'payload',"
		"   jsonb_build_object('blob', repeat('x', 1500000))), now()) RETURNING id::text",
		big, key);
	for (int i = 0; i < 3; i++) {
		char *mid = h_new_mid();

		ids[i] = h_sql_scalar("INSERT INTO calendar.outbox (message_id, topic, key,"
			" envelope, created_at) VALUES ($1::uuid, 'pin.test.events.v1', $2,"
			" $3::jsonb, now()) RETURNING id::text", mid, key,
			ENV_FIXED(mid, "pin.test.noop", "Test", key, "{}"));
	}
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE"
		" id = ANY (string_to_array($1, ',')::bigint[]) AND calendar.outbox_sent(o)",
		h_sprintf("%s,%s,%s", ids[0], ids[1], ids[2])) == 3, WAIT_MS),
		"rows behind the oversize row not published");
	ck_assert_ptr_nonnull(h_sql_scalar("SELECT parked_at FROM calendar.outbox WHERE id = $1::bigint",
		bad_id));
	ck_assert_ptr_null(h_sql_scalar("SELECT published_at FROM calendar.outbox WHERE id = $1::bigint",
		bad_id));
	ck_assert_msg(strstr(h_sql_scalar("SELECT last_error FROM calendar.outbox WHERE"
		" id = $1::bigint", bad_id), "too large"), "last_error: %s",
		h_sql_scalar("SELECT last_error FROM calendar.outbox WHERE id = $1::bigint", bad_id));
	ck_assert_ptr_nonnull(h_kafka_wait_key("pin.test.events.v1", key, 20000));
	ck_assert_msg(H_WAIT_UNTIL((metrics = h_slurp(h_env("PIN_WORKER_METRICS_FILE"))) &&
		strstr(metrics, "pin_outbox_failed_total{outbox=\"calendar.outbox\","
			"reason=\"too_large\"}"), 10000), "metric missing: %s",
		metrics ? metrics : "(no file)");
	/* logged without the payload */
	{
		char *log = h_slurp(h_sprintf("%s/logs/worker.log", h_env("PIN_DEV_DIR")));

		ck_assert_ptr_nonnull(log);
		ck_assert_msg(strstr(log, "row cannot be published, parked"), "no log line");
		ck_assert_ptr_null(strstr(log, "xxxxxxxxxxxxxxxx"));
	}
}
END_TEST

/* kill -9 of a worker host in the middle of a send: the provider already has
 * the message, the outcome was never recorded.  After the lease the row is
 * sent again: exactly one duplicate (same idempotencyKey), Sent, one
 * dispatched message.  The row is due only for the shifted clocks of the
 * --once hosts (not_before in an hour), so the stack's worker stays out. */
START_TEST(worker_killed_mid_send_one_duplicate)
{
	static const char *const once[] = { "--once", NULL };
	const char *owner = h_uuid();
	char *id = h_new_mid(), *phone = unique_phone();
	pid_t pid;
	int st;
	bool seen;

	contact(owner, h_sprintf("k-%s@example.com", owner), phone, "ru");
	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, kind, channel,"
		" urgency, role, title, body, payload, locale, not_before, source_message_id,"
		" source_event_type, created_at) VALUES ($1::uuid, $2::uuid, 'AppointmentReminder',"
		" 'Sms', 'Critical', 'Owner', 'Напоминание', 'Напоминание: встреча скоро', '{}',"
		" 'ru', now() + interval '1 hour', gen_random_uuid(), 'pin.calendar.reminder-due',"
		" now())", id, owner);
	sms_file("delay", "20");
	/* in the background, output to logs/worker-once.log (killed below) */
	pid = h_spawn_host("worker", h_env("PIN_WORKER_PLUGINS"), 3700, once);
	seen = H_WAIT_UNTIL(sms_requests(id, NULL) == 1, WAIT_MS);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	sms_file("delay", NULL);
	ck_assert_msg(seen, "the --once host did not send");
	ck_assert_str_eq(row_of(owner, "Sms", "status"), "Pending");
	ck_assert_ptr_nonnull(row_of(owner, "Sms", "lease_until"));
	/* after the lease (300 s) another host takes the row */
	ck_assert_int_eq(h_run_host("worker", NULL, 3700 + 400,
		(const char *const[]){ "--once", NULL }), 0);
	ck_assert_str_eq(row_of(owner, "Sms", "status"), "Sent");
	ck_assert_int_eq(sms_requests(id, NULL), 2);
	ck_assert_msg(dispatched_of(id), "no dispatched message");
	ck_assert_int_eq(dispatched_count(id, NULL), 1);
}
END_TEST

/* notifications_dispatch_lag_seconds is the age of the oldest due row.  A
 * fresh row (no not_before, no retry, no lease: its due time is its
 * creation) that the dispatcher cannot claim -- another transaction holds a
 * KEY SHARE lock on it, which FOR UPDATE SKIP LOCKED skips -- shows its
 * age; released, it is sent and the gauge falls back to 0.  (The gauge's
 * query used to subtract -infinity for such a row: SQL error 22008 on every
 * pass, the gauge stuck at its last value.) */
START_TEST(dispatch_lag_is_the_oldest_due_row)
{
	const char *owner = h_uuid();
	char *id = h_new_mid();
	const char *p[1] = { id };
	PGconn *lk = PQconnectdb(h_env("PIN_PG_DSN"));
	struct h_host w;
	PGresult *r;
	double lag = NAN;
	bool seen;

	ck_assert_msg(PQstatus(lk) == CONNECTION_OK, "%s", PQerrorMessage(lk));
	h_host_stack_worker(&w);
	contact(owner, h_sprintf("lag-%s@example.com", owner), unique_phone(), "ru");
	/* not due (not_before in an hour) until the lock is held */
	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, kind, channel,"
		" urgency, role, title, body, payload, locale, not_before, source_message_id,"
		" source_event_type, created_at) VALUES ($1::uuid, $2::uuid, 'AppointmentReminder',"
		" 'Sms', 'Critical', 'Owner', 'Напоминание', 'Напоминание: встреча скоро', '{}',"
		" 'ru', now() + interval '1 hour', gen_random_uuid(), 'pin.calendar.reminder-due',"
		" now() - interval '1 hour')", id, owner);
	PQclear(PQexec(lk, "BEGIN"));
	r = PQexecParams(lk, "SELECT 1 FROM notifications.notifications WHERE id = $1::uuid"
		" FOR KEY SHARE", 1, NULL, p, NULL, NULL, 0);
	ck_assert_int_eq(PQntuples(r), 1);
	PQclear(r);
	/* due now: an UPDATE of a column outside the unique keys (FOR NO KEY
	 * UPDATE) does not wait for KEY SHARE */
	h_sql("SET lock_timeout = '10s'");      /* a wait here would be on ourselves */
	h_sql("UPDATE notifications.notifications SET not_before = NULL WHERE id = $1::uuid", id);
	h_sql("RESET lock_timeout");
	seen = H_WAIT_UNTIL((lag = h_host_metric(&w, "notifications_dispatch_lag_seconds"))
		>= 3600, WAIT_MS);
	PQclear(PQexec(lk, "ROLLBACK"));
	PQfinish(lk);
	ck_assert_msg(seen, "dispatch lag %.1f s with a due row an hour old", lag);
	ck_assert_msg(lag < 3600 + 300, "dispatch lag %.1f s", lag);
	ck_assert_msg(H_WAIT_UNTIL(status_is(owner, "Sms", "Sent"), WAIT_MS), "not sent");
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, "notifications_dispatch_lag_seconds") < 60,
		WAIT_MS), "dispatch lag stays %.1f s after the send",
		h_host_metric(&w, "notifications_dispatch_lag_seconds"));
}
END_TEST

/* ---- the dispatcher's batches (issue 31): rows due only for --once hosts -- */

#define ONCE_OFFSET 3700

/* A notification row due only for the --once hosts of clock offset
 * ONCE_OFFSET (not_before in an hour): channel, address snapshot ("" none),
 * attempts so far, created age ago. */
static char *once_row(const char *user, const char *channel, const char *address,
		const char *attempts, const char *age)
{
	char *id = h_new_mid();

	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, kind, channel,"
		" urgency, role, title, body, payload, locale, not_before, source_message_id,"
		" source_event_type, created_at, address, attempts) VALUES ($1::uuid, $2::uuid,"
		" 'AppointmentReminder', $3, 'Critical', 'Owner', 'Напоминание',"
		" 'Напоминание: встреча скоро', '{}', 'ru', now() + interval '1 hour',"
		" gen_random_uuid(), 'pin.calendar.reminder-due', now() - $6::interval,"
		" nullif($4, ''), $5::int)", id, user, channel, address, attempts, age);
	return id;
}

static char *col_of(const char *id, const char *column)
{
	return h_sql_scalar(h_sprintf("SELECT %s::text FROM notifications.notifications"
		" WHERE id = $1::uuid", column), id);
}

/* dispatched messages of id in l, and the status of the last */
static int dispatched_in(const struct h_kmsgs *l, const char *id, const char **status)
{
	int n = 0;

	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key && !strcmp(l->v[i].key, id)) {
			n++;
			if (status)
				*status = h_jstr(h_jget(l->v[i].json, "payload"), "status");
		}
	return n;
}

/* One batch of rows that end differently, sent at once: every row gets its
 * own outcome (a send's answer is not given to another row of the batch),
 * all written by ONE transaction (one xmin), with a dispatched event for
 * each final one and none for the retry. */
START_TEST(batch_outcomes_per_row_in_one_transaction)
{
	const char *user = h_uuid(), *lost = h_uuid();
	char *mail_ok[3], *mail_addr[3], *sms_ok[3], *bad_mail, *rej, *retry, *last, *unknown;
	char *p400 = unique_phone(), *p503 = unique_phone(), *p503b = unique_phone(), *all;
	const struct h_kmsgs *l;
	const char *st = NULL;
	int rc;

	for (int i = 0; i < 3; i++) {
		mail_addr[i] = h_sprintf("batch-%d-%s@example.com", i, user);
		mail_ok[i] = once_row(user, "Email", mail_addr[i], "0", "0");
		sms_ok[i] = once_row(user, "Sms", unique_phone(), "0", "0");
	}
	bad_mail = once_row(user, "Email", "no-at-sign", "0", "0");
	rej = once_row(user, "Sms", p400, "0", "0");
	retry = once_row(user, "Sms", p503, "0", "0");
	/* its last attempt: notify.dispatch_max_attempts is 30 in the test stack */
	last = once_row(user, "Sms", p503b, "29", "0");
	unknown = once_row(lost, "Email", "", "0", "2 days");   /* past the contact wait */
	sms_file("status_to", h_sprintf("{\"%s\": 400, \"%s\": 503, \"%s\": 503}",
		p400, p503, p503b));
	rc = h_run_host("worker", NULL, ONCE_OFFSET, (const char *const[]){ "--once", NULL });
	sms_file("status_to", NULL);
	ck_assert_int_eq(rc, 0);

	for (int i = 0; i < 3; i++) {
		json_object *req = NULL;
		char *mail = NULL;

		ck_assert_str_eq(col_of(mail_ok[i], "status"), "Sent");
		ck_assert_str_eq(col_of(mail_ok[i], "attempts"), "1");
		ck_assert_int_eq(mails_with(h_sprintf("<%s@", mail_ok[i]), &mail), 1);
		ck_assert_str_eq(mail_header(mail, "To"), mail_addr[i]);
		ck_assert_str_eq(col_of(sms_ok[i], "status"), "Sent");
		ck_assert_int_eq(sms_requests(sms_ok[i], &req), 1);
		ck_assert_str_eq(h_jstr(h_jget(req, "body"), "to"), col_of(sms_ok[i], "address"));
		/* the sink's id of this row's own request */
		ck_assert_str_eq(col_of(sms_ok[i], "provider_message_id"), h_jstr(req, "id"));
		json_object_put(req);
	}
	ck_assert_str_eq(col_of(bad_mail, "status"), "Failed");
	ck_assert_str_eq(col_of(bad_mail, "last_error"), "NTF_BAD_ADDRESS");
	ck_assert_str_eq(col_of(bad_mail, "attempts"), "1");
	ck_assert_str_eq(col_of(rej, "status"), "Failed");
	ck_assert_str_eq(col_of(rej, "last_error"), "NTF_SMS_REJECTED: http 400");
	ck_assert_ptr_nonnull(col_of(rej, "failed_at"));
	ck_assert_str_eq(col_of(retry, "status"), "Pending");
	ck_assert_str_eq(col_of(retry, "attempts"), "1");
	ck_assert_msg(strstr(col_of(retry, "last_error"), "http 503"), "%s",
		col_of(retry, "last_error"));
	ck_assert_ptr_nonnull(col_of(retry, "next_attempt_at"));
	ck_assert_ptr_null(col_of(retry, "lease_owner"));
	ck_assert_str_eq(col_of(last, "status"), "Failed");
	ck_assert_str_eq(col_of(last, "attempts"), "30");
	ck_assert_str_eq(col_of(unknown, "status"), "Failed");
	ck_assert_str_eq(col_of(unknown, "last_error"), "NTF_CONTACT_UNKNOWN");
	ck_assert_str_eq(col_of(unknown, "attempts"), "0");

	/* one transaction wrote every outcome (the batch's one commit) */
	all = h_sprintf("%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s", mail_ok[0], mail_ok[1], mail_ok[2],
		sms_ok[0], sms_ok[1], sms_ok[2], bad_mail, rej, retry, last, unknown);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT xmin::text) FROM"
		" notifications.notifications WHERE id = ANY (string_to_array($1, ',')::uuid[])",
		all), 1);

	/* a dispatched event for each final outcome, none for the retry */
	ck_assert_msg(dispatched_of(unknown), "no dispatched message");
	l = h_kafka_read_all(DISPATCHED, 5000);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(dispatched_in(l, mail_ok[i], &st), 1);
		ck_assert_str_eq(st, "Sent");
		ck_assert_int_eq(dispatched_in(l, sms_ok[i], &st), 1);
		ck_assert_str_eq(st, "Sent");
	}
	ck_assert_int_eq(dispatched_in(l, bad_mail, &st), 1);
	ck_assert_str_eq(st, "Failed");
	ck_assert_int_eq(dispatched_in(l, rej, &st), 1);
	ck_assert_str_eq(st, "Failed");
	ck_assert_int_eq(dispatched_in(l, last, &st), 1);
	ck_assert_str_eq(st, "Failed");
	ck_assert_int_eq(dispatched_in(l, unknown, &st), 1);
	ck_assert_int_eq(dispatched_in(l, retry, NULL), 0);
}
END_TEST

/* A row of a batch in flight whose lease another pass took meanwhile (the
 * lease ran out and another host claimed it): the batch records the other
 * rows and nothing for that one -- no outcome, no attempt, no dispatched
 * event, the other owner's lease untouched -- and says so in the log. */
START_TEST(lease_lost_mid_batch_writes_nothing)
{
	static const char *const once[] = { "--once", NULL };
	const char *user = h_uuid();
	char *ids[4], *other, *log;
	const struct h_kmsgs *l;
	pid_t pid;
	int st;
	bool seen;

	for (int i = 0; i < 4; i++)
		ids[i] = once_row(user, "Sms", unique_phone(), "0", "0");
	sms_file("delay", "3");         /* the answers held back: the batch in flight */
	pid = h_spawn_host("worker", h_env("PIN_WORKER_PLUGINS"), ONCE_OFFSET, once);
	seen = H_WAIT_UNTIL(sms_requests(ids[1], NULL) == 1, WAIT_MS);
	other = h_sql_scalar("UPDATE notifications.notifications SET lease_owner ="
		" gen_random_uuid() WHERE id = $1::uuid AND lease_owner IS NOT NULL"
		" RETURNING lease_owner::text", ids[1]);
	waitpid(pid, &st, 0);
	sms_file("delay", NULL);
	ck_assert_msg(seen, "the --once host did not send");
	ck_assert_ptr_nonnull(other);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "host status %d", st);

	ck_assert_str_eq(col_of(ids[1], "status"), "Pending");
	ck_assert_str_eq(col_of(ids[1], "attempts"), "0");
	ck_assert_str_eq(col_of(ids[1], "lease_owner"), other);
	ck_assert_ptr_null(col_of(ids[1], "sent_at"));
	ck_assert_ptr_null(col_of(ids[1], "provider_message_id"));
	for (int i = 0; i < 4; i++)
		if (i != 1) {
			ck_assert_str_eq(col_of(ids[i], "status"), "Sent");
			ck_assert_msg(dispatched_of(ids[i]), "no dispatched message");
		}
	l = h_kafka_read_all(DISPATCHED, 5000);
	ck_assert_int_eq(dispatched_in(l, ids[1], NULL), 0);
	log = h_slurp(h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR")));
	ck_assert_ptr_nonnull(log);
	{
		char *save = NULL;
		bool line = false;

		for (char *ln = strtok_r(log, "\n", &save); ln && !line;
				ln = strtok_r(NULL, "\n", &save))
			line = strstr(ln, "lease lost before recording") && strstr(ln, ids[1]);
		ck_assert_msg(line, "no log line for the lost lease");
	}
}
END_TEST

/* notify.dispatch_senders = 3: a batch of 9 e-mails and 9 SMS goes over
 * exactly 3 connections to the SMTP server and 3 to the SMS provider (the
 * client ports aiosmtpd writes as X-Peer and the sink records), each
 * reused, none per message. */
START_TEST(senders_are_the_connections)
{
	const char *user = h_uuid();
	char *mails[9], *sms[9], *peers_m = h_strdup(""), *peers_s = h_strdup("");
	int rc;

	for (int i = 0; i < 9; i++) {
		mails[i] = once_row(user, "Email", h_sprintf("c-%d-%s@example.com", i, user),
			"0", "0");
		sms[i] = once_row(user, "Sms", unique_phone(), "0", "0");
	}
	sms_file("delay", "0.2");
	setenv("PIN_NOTIFY_DISPATCH_SENDERS", "3", 1);
	rc = h_run_host("worker", NULL, ONCE_OFFSET, (const char *const[]){ "--once", NULL });
	unsetenv("PIN_NOTIFY_DISPATCH_SENDERS");
	sms_file("delay", NULL);
	ck_assert_int_eq(rc, 0);
	for (int i = 0; i < 9; i++) {
		char *mail = NULL;
		json_object *req = NULL;

		ck_assert_str_eq(col_of(mails[i], "status"), "Sent");
		ck_assert_str_eq(col_of(sms[i], "status"), "Sent");
		ck_assert_int_eq(mails_with(h_sprintf("<%s@", mails[i]), &mail), 1);
		peers_m = h_sprintf("%s%s%s", peers_m, i ? "|" : "", mail_header(mail, "X-Peer"));
		ck_assert_int_eq(sms_requests(sms[i], &req), 1);
		peers_s = h_sprintf("%s%s%d", peers_s, i ? "|" : "",
			json_object_get_int(h_jget(req, "peer")));
		json_object_put(req);
	}
	ck_assert_msg(h_sql_int("SELECT count(DISTINCT p) FROM unnest(string_to_array($1, '|'))"
		" AS p", peers_m) == 3, "SMTP connections: %s", peers_m);
	ck_assert_msg(h_sql_int("SELECT count(DISTINCT p) FROM unnest(string_to_array($1, '|'))"
		" AS p", peers_s) == 3, "SMS connections: %s", peers_s);
}
END_TEST

/* A backlog of both channels: each channel claims its next batch when its
 * own is sent, so slow SMS do not hold the e-mails back (and the other way
 * round).  20 + 20 rows, batches of 5, one sender per channel, the SMS
 * provider answering in 0.2 s: every e-mail is sent before the 10th SMS.
 * When a pass claimed both channels together and claimed again only once
 * both were sent, the e-mails' 4th batch waited for the SMS' 3rd: the last
 * e-mail went after the 15th SMS. */
START_TEST(channels_keep_their_own_pace)
{
	const char *user = h_uuid();
	char *mails[20], *sms[20];
	const char *ids_m = "", *ids_s = "";
	int rc;

	for (int i = 0; i < 20; i++) {
		mails[i] = once_row(user, "Email", h_sprintf("p-%d-%s@example.com", i, user),
			"0", "0");
		sms[i] = once_row(user, "Sms", unique_phone(), "0", "0");
		ids_m = h_sprintf("%s%s%s", ids_m, i ? "," : "", mails[i]);
		ids_s = h_sprintf("%s%s%s", ids_s, i ? "," : "", sms[i]);
	}
	sms_file("delay", "0.2");
	setenv("PIN_NOTIFY_DISPATCH_SENDERS", "1", 1);
	setenv("PIN_NOTIFY_DISPATCH_BATCH", "5", 1);
	rc = h_run_host("worker", NULL, ONCE_OFFSET, (const char *const[]){ "--once", NULL });
	unsetenv("PIN_NOTIFY_DISPATCH_SENDERS");
	unsetenv("PIN_NOTIFY_DISPATCH_BATCH");
	sms_file("delay", NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications WHERE"
		" id = ANY (string_to_array($1, ',')::uuid[]) AND status = 'Sent'", ids_m), 20);
	/* the SMS still sending when the pass's time was up are the next pass's */
	ck_assert_int_ge(h_sql_int("SELECT count(*) FROM notifications.notifications WHERE"
		" id = ANY (string_to_array($1, ',')::uuid[]) AND status = 'Sent'", ids_s), 10);
	ck_assert_msg(h_sql_int("SELECT ((SELECT max(sent_at) FROM notifications.notifications"
		"   WHERE id = ANY (string_to_array($1, ',')::uuid[]))"
		" < (SELECT sent_at FROM notifications.notifications"
		"   WHERE id = ANY (string_to_array($2, ',')::uuid[]) AND sent_at IS NOT NULL"
		"   ORDER BY sent_at OFFSET 9 LIMIT 1))::int", ids_m, ids_s) == 1,
		"the e-mails waited for the SMS: the last e-mail at %s, the SMS at %s",
		h_sql_scalar("SELECT max(sent_at)::text FROM notifications.notifications"
			" WHERE id = ANY (string_to_array($1, ',')::uuid[])", ids_m),
		h_sql_scalar("SELECT string_agg(to_char(sent_at, 'MI:SS.MS'), ' ' ORDER BY sent_at)"
			" FROM notifications.notifications"
			" WHERE id = ANY (string_to_array($1, ',')::uuid[])", ids_s));
}
END_TEST

Suite *make_delivery_suite(void)
{
	Suite *s = suite_create("delivery");
	TCase *tc = h_tcase("delivery", 180);

	tcase_add_test(tc, booking_email_arrives);
	tcase_add_test(tc, english_email_arrives);
	tcase_add_test(tc, sms_reminder_arrives);
	tcase_add_test(tc, sms_provider_4xx_fails_once);
	tcase_add_test(tc, sms_provider_5xx_retries);
	tcase_add_test(tc, unknown_contact_catches_up);
	tcase_add_test(tc, unknown_contact_fails_after_wait_max);
	tcase_add_test(tc, not_before_is_honoured);
	tcase_add_test(tc, smtp_down_then_up);
	tcase_add_test(tc, relay_parks_oversize_row);
	tcase_add_test(tc, worker_killed_mid_send_one_duplicate);
	tcase_add_test(tc, dispatch_lag_is_the_oldest_due_row);
	tcase_add_test(tc, batch_outcomes_per_row_in_one_transaction);
	tcase_add_test(tc, lease_lost_mid_batch_writes_nothing);
	tcase_add_test(tc, senders_are_the_connections);
	tcase_add_test(tc, channels_keep_their_own_pace);
	suite_add_tcase(s, tc);
	return s;
}
