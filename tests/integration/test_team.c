/* test_team.c -- issue 12 items 1 and 2 against the real stack:
 *  - departed agents: a pin.identity.users.v1 message with a status other
 *    than Active, produced to the dev broker, makes the agent unavailable at
 *    once (slots archived, Pending declined with AgentUnavailable and its
 *    cascade + messages, the investor notified, Confirmed kept; booking and
 *    publishing answer 409 AGENT_UNAVAILABLE; the showcase is empty); a
 *    later Active message allows publishing again and restores nothing;
 *  - deleted users (issue 30): the contract's Deleted shape (displayName
 *    null) departs the agent and erases the name from both schemas;
 *  - the PIN manager's appointment and slot views and the agency head's
 *    appointment view: access control, tenant isolation, filters, paging.
 * CK_RUN_SUITE=team runs only this suite. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "harness.h"

#define PUB "/api/public/calendar/appointments"
#define AG "/api/v1/agent/calendar/appointments"
#define BATCHES "/api/v1/agent/calendar/slots/batches"
#define SHOWCASE "/api/public/calendar/slots"
#define PM_APT "/api/v1/pin-manager/calendar/appointments"
#define PM_SLOTS "/api/v1/pin-manager/calendar/slots"
#define AGENCY "/api/v1/agency/calendar/appointments"
#define T_USERS "pin.identity.users.v1"
#define WAIT_MS 60000

/* Own loopback address for public bookings (nginx's per-IP limit of the
 * public area is not shared with other suites); default address otherwise. */
static const char *book_ip(void)
{
	return h_src_ip("127.0.0.51");
}

static struct h_agent mk_agent(const char *tenant)
{
	return h_agent_new(tenant, NULL);
}

static char *batch_body(int n, int days)
{
	char *d = h_date_in(days);

	return h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"%02d:00\"}],"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60}",
			8 + n, d, d);
}

/* Publishes n one-hour slots days ahead; slot ids into ids[0..n-1]. */
static void publish(const struct h_agent *a, int n, int days, char **ids)
{
	struct h_resp *r = h_post(BATCHES, a->token, batch_body(n, days));
	json_object *slots;
	int i;

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	slots = h_jget(r->json, "slots");
	ck_assert_int_eq((int)json_object_array_length(slots), n);
	for (i = 0; i < n; i++)
		ids[i] = h_strdup(h_jstr(json_object_array_get_idx(slots, (size_t)i), "id"));
}

static struct h_resp *book(const char *token, const char *slot)
{
	struct h_req_opts o = { h_sprintf("{\"slotId\":\"%s\"}", slot), 0, NULL, NULL,
		book_ip() };

	return h_request_opts("POST", PUB, token, &o);
}

/* A new investor books slot (201); returns the appointment id. */
static char *book_ok(const char *slot, char **investor_out)
{
	char *inv = h_uuid();
	struct h_resp *r = book(h_token("investor", inv, NULL), slot);

	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	if (investor_out)
		*investor_out = inv;
	return h_strdup(h_jstr(r->json, "id"));
}

static void confirm(const struct h_agent *a, const char *apt)
{
	struct h_resp *r = h_post(h_sprintf(AG "/%s/confirm", apt), a->token, NULL);

	ck_assert_msg(r->status == 200, "confirm: %ld %s", r->status, r->body);
}

static const char *col(const char *table, const char *column, const char *id)
{
	return h_sql_scalar(h_sprintf("SELECT %s::text FROM calendar.%s WHERE id = $1::uuid",
			column, table), id);
}

/* pin.identity.users.v1 for user with status, envelope createdAt at; waits
 * until the calendar consumer has processed it (its inbox row). */
static void identity(const char *user, const char *status, const char *at)
{
	char *mid = h_sql_scalar("SELECT gen_random_uuid()::text");

	ck_assert_int_eq(h_kafka_produce(T_USERS, user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\","
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\","
		"\"displayName\":\"Agent %.8s\",\"avatarUrl\":null,\"status\":\"%s\"}}",
		mid, at, user, user, user, status)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.inbox "
		"WHERE consumer_group = 'calendar-identity-users' AND message_id = $1::uuid",
		mid) == 1, WAIT_MS), "identity message %s not consumed", mid);
}

static long long outbox_cancelled(const char *apt, const char *reason)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox "
		"WHERE topic = 'pin.calendar.appointment-cancelled.v1' AND key = $1 "
		"  AND envelope->'payload'->>'reason' = $2", apt, reason);
}

static int items_n(const struct h_resp *r)
{
	return (int)json_object_array_length(h_jget(r->json, "items"));
}

/* ============================================================ departed */

START_TEST(departed_agent_cascade)
{
	struct h_agent a = mk_agent(NULL);
	char *s[4], *inv_pending, *inv_confirmed;
	char *apt_pending, *apt_confirmed, *ev_pending;
	struct h_resp *r;

	publish(&a, 4, 3, s);
	apt_pending = book_ok(s[0], &inv_pending);
	apt_confirmed = book_ok(s[1], &inv_confirmed);
	confirm(&a, apt_confirmed);
	ev_pending = h_strdup(col("appointments", "calendar_event_id", apt_pending));
	r = h_get(h_sprintf(SHOWCASE "?agentUserId=%s", a.id), NULL);
	ck_assert_int_eq(items_n(r), 2);

	/* the identity service reports the agent as gone (the replica stores
	 * every status it does not know as Deactivated) */
	identity(a.id, "Dismissed", h_iso_in(0));
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.user_replicas "
		"WHERE user_id = $1::uuid", a.id), "Deactivated");

	/* Available slots archived, in the same transaction as the replica */
	ck_assert_str_eq(col("availability_slots", "status", s[2]), "Archived");
	ck_assert_str_eq(col("availability_slots", "status", s[3]), "Archived");
	/* Pending declined by System with the full cascade */
	ck_assert_str_eq(col("appointments", "status", apt_pending), "Declined");
	ck_assert_str_eq(col("appointments", "cancelled_by", apt_pending), "System");
	ck_assert_str_eq(col("availability_slots", "status", s[0]), "Archived");
	ck_assert_str_eq(col("calendar_events", "status", ev_pending), "Cancelled");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
		"WHERE calendar_event_id = $1::uuid AND status = 'Pending'", ev_pending), 0);
	ck_assert_int_eq(outbox_cancelled(apt_pending, "AgentUnavailable"), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox "
		"WHERE topic = 'pin.calendar.event-status-changed.v1' AND key = $1 "
		"  AND envelope->'payload'->>'status' = 'Cancelled'", ev_pending), 1);
	/* Confirmed stays, with its slot and event */
	ck_assert_str_eq(col("appointments", "status", apt_confirmed), "Confirmed");
	ck_assert_str_eq(col("availability_slots", "status", s[1]), "Booked");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE key = $1 "
		"AND topic = 'pin.calendar.appointment-cancelled.v1'", apt_confirmed), 0);

	/* unavailable at once: showcase, booking, publishing, preview */
	r = h_get(h_sprintf(SHOWCASE "?agentUserId=%s", a.id), NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(items_n(r), 0);
	h_assert_problem(book(h_token("investor", h_uuid(), NULL), s[2]), 409,
			"AGENT_UNAVAILABLE");
	h_assert_problem(h_post(BATCHES, a.token, batch_body(2, 5)), 409, "AGENT_UNAVAILABLE");
	h_assert_problem(h_post(BATCHES "/preview", a.token, batch_body(2, 5)), 409,
			"AGENT_UNAVAILABLE");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1::uuid AND status = 'Available'", a.id), 0);

	/* the investor of the Pending appointment is told (notify.so, through the
	 * broker); the Confirmed one is not */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentCancelled' "
		"  AND channel = 'InApp' AND payload->>'reason' = 'AgentUnavailable'",
		inv_pending) == 1, WAIT_MS), "investor not notified");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentCancelled'",
		inv_confirmed), 0);

	/* the investor's cancel of the Confirmed one does not give the slot back */
	r = h_post(h_sprintf("/api/v1/investor/calendar/appointments/%s/cancel", apt_confirmed),
			h_token("investor", inv_confirmed, NULL), NULL);
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	ck_assert_str_eq(col("availability_slots", "status", s[1]), "Archived");
}
END_TEST

/* A later Active message: publishing works again, nothing is restored; an
 * older non-Active message arriving after it changes nothing. */
START_TEST(departed_agent_returns)
{
	struct h_agent a = mk_agent(NULL);
	char *s[2], *n[2], *apt;

	publish(&a, 2, 4, s);
	apt = book_ok(s[0], NULL);
	identity(a.id, "Deactivated", h_iso_in(-60));
	ck_assert_str_eq(col("appointments", "status", apt), "Declined");
	ck_assert_str_eq(col("availability_slots", "status", s[1]), "Archived");

	identity(a.id, "Active", h_iso_in(0));
	/* nothing restored */
	ck_assert_str_eq(col("appointments", "status", apt), "Declined");
	ck_assert_str_eq(col("availability_slots", "status", s[0]), "Archived");
	ck_assert_str_eq(col("availability_slots", "status", s[1]), "Archived");
	/* publishing and booking work again */
	publish(&a, 2, 6, n);
	book_ok(n[0], NULL);
	ck_assert_int_eq(items_n(h_get(h_sprintf(SHOWCASE "?agentUserId=%s", a.id), NULL)), 1);

	/* a stale Blocked message (older than the Active one) is not applied */
	identity(a.id, "Blocked", h_iso_in(-30));
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.user_replicas "
		"WHERE user_id = $1::uuid", a.id), "Active");
	ck_assert_str_eq(col("availability_slots", "status", n[1]), "Available");
}
END_TEST

/* A departure of an agent nobody booked, and a replay of the same status:
 * idempotent (a second run finds nothing). */
START_TEST(departed_agent_idempotent)
{
	struct h_agent a = mk_agent(NULL);
	char *s[3];

	publish(&a, 3, 5, s);
	identity(a.id, "Blocked", h_iso_in(-10));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1::uuid AND status = 'Archived'", a.id), 3);
	identity(a.id, "Deactivated", h_iso_in(0));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1::uuid AND status = 'Archived'", a.id), 3);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.appointments "
		"WHERE agent_user_id = $1::uuid", a.id), 0);
}
END_TEST

/* ============================================================= deleted */

/* A pin.identity.users.v1 envelope (message mid, createdAt at) with the
 * payload's fields after userId (payload_rest). */
static char *user_env(const char *mid, const char *user, const char *at,
		const char *event_type, const char *payload_rest)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"%s\","
		"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\","
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\",%s}}",
		mid, event_type, at, user, user, payload_rest);
}

/* Waits until both identity groups processed message mid. */
static void wait_both(const char *mid)
{
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.inbox "
		"WHERE consumer_group = 'calendar-identity-users' AND message_id = $1::uuid",
		mid) == 1, WAIT_MS), "calendar-identity-users did not process %s", mid);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = "
		"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1,
		WAIT_MS), "notifications-identity-users did not process %s", mid);
}

/* Rows of every text, varchar, json(b), array and enum column of every table
 * of schemas calendar and notifications (outbox envelopes included) that
 * contain needle; rows_in: of the schemas in the array literal schemas. */
static long long rows_in(const char *schemas, const char *needle);

static long long rows_with(const char *needle)
{
	return rows_in("{calendar,notifications}", needle);
}

static long long rows_in(const char *schemas, const char *needle)
{
	PGresult *cols = h_sql("SELECT c.table_schema, c.table_name, c.column_name "
		"FROM information_schema.columns c JOIN information_schema.tables t "
		"  USING (table_schema, table_name) "
		"WHERE c.table_schema = ANY ($1::text[]) "
		"  AND t.table_type = 'BASE TABLE' AND c.data_type IN ('text', "
		"  'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'USER-DEFINED') "
		"ORDER BY 1, 2, 3", schemas);
	long long n = 0;

	ck_assert_int_gt(PQntuples(cols), 20);
	for (int i = 0; i < PQntuples(cols); i++)
		n += h_sql_int(h_sprintf("SELECT count(*) FROM %s.%s WHERE strpos(%s::text, $1) > 0",
			PQgetvalue(cols, i, 0), PQgetvalue(cols, i, 1), PQgetvalue(cols, i, 2)),
			needle);
	return n;
}

/* Messages on a DLQ topic keyed by the user. */
static int dlq_count(const char *topic, const char *user)
{
	struct h_kmsgs *all = h_kafka_read_all(topic, 5000);
	int n = 0;

	for (size_t i = 0; i < all->n; i++)
		if (all->v[i].key && !strcmp(all->v[i].key, user))
			n++;
	return n;
}

/* issue 30 item 1: the contract's own shape of a deleted user (displayName
 * null) reaches both identity groups: no dead letter; the calendar replica
 * is a tombstone (name and avatar NULL, status Deleted) and the agent
 * departs (Available slot archived, Pending declined with AgentUnavailable);
 * the notifications contact is erased; the name, avatar, e-mail and phone
 * are in no column of either schema.  Deleted is final: an older or a newer
 * Active message after it, and a replay of everything from the start
 * (inbox rows gone), change nothing. */
START_TEST(deleted_agent_erased)
{
	struct h_agent a = mk_agent(NULL);
	const char *tag = h_uuid();
	const char *name = h_sprintf("Стираемый Агент %.8s", tag);
	const char *avatar = h_sprintf("https://cdn.example.com/avatar-%s.png", tag);
	const char *email = h_sprintf("erase-%s@example.com", tag);
	const char *phone = h_sprintf("+7998%07d", (int)(h_sql_int("SELECT (random() * 9999999)::int")));
	const char *needles[] = { name, avatar, email, phone, tag };
	const char *active_rest = h_sprintf("\"displayName\":\"%s\",\"avatarUrl\":\"%s\","
		"\"email\":\"%s\",\"phone\":\"%s\",\"locale\":\"ru\",\"timeZone\":\"Europe/Moscow\","
		"\"status\":\"Active\"", name, avatar, email, phone);
	const char *deleted_rest = "\"displayName\":null,\"avatarUrl\":null,\"email\":null,"
		"\"phone\":null,\"locale\":null,\"timeZone\":null,\"status\":\"Deleted\"";
	const char *rep = "SELECT coalesce(display_name, '-') || '/' || coalesce(avatar_url, '-') "
		"|| '/' || status || '/' || last_event_at || '/' || updated_at "
		"FROM calendar.user_replicas WHERE user_id = $1::uuid";
	const char *con = "SELECT concat_ws('/', coalesce(display_name, '-'), "
		"coalesce(email, '-'), coalesce(phone, '-'), status) "
		"FROM notifications.recipient_contacts WHERE user_id = $1::uuid";
	char *m_active = h_uuid(), *m_deleted = h_uuid(), *m_newer = h_uuid();
	char *v_active = user_env(m_active, a.id, h_iso_in(-120), "pin.identity.user-updated",
			active_rest);
	char *v_deleted = user_env(m_deleted, a.id, h_iso_in(-60), "pin.identity.user-deleted",
			deleted_rest);
	char *s[2], *inv, *apt, *before;
	const char *replay[3];

	/* the agent as identity knows it: a distinctive name, avatar, contacts */
	ck_assert_int_eq(h_kafka_produce(T_USERS, a.id, v_active), 0);
	wait_both(m_active);
	ck_assert_str_eq(h_sql_scalar("SELECT display_name FROM calendar.user_replicas "
		"WHERE user_id = $1::uuid", a.id), name);
	ck_assert_int_gt(rows_with(email), 0);
	publish(&a, 2, 3, s);
	apt = book_ok(s[0], &inv);
	ck_assert_str_eq(col("appointments", "status", apt), "Pending");

	/* deleted, in the contract's shape */
	ck_assert_int_eq(h_kafka_produce(T_USERS, a.id, v_deleted), 0);
	wait_both(m_deleted);
	ck_assert_str_eq(h_sql_scalar("SELECT coalesce(display_name, '-') || '/' || "
		"coalesce(avatar_url, '-') || '/' || status FROM calendar.user_replicas "
		"WHERE user_id = $1::uuid", a.id), "-/-/Deleted");
	ck_assert_str_eq(h_sql_scalar(con, a.id), "-/-/-/Deleted");
	/* the departure, as for a Deactivated agent */
	ck_assert_str_eq(col("availability_slots", "status", s[1]), "Archived");
	ck_assert_str_eq(col("appointments", "status", apt), "Declined");
	ck_assert_str_eq(col("appointments", "cancelled_by", apt), "System");
	ck_assert_int_eq(outbox_cancelled(apt, "AgentUnavailable"), 1);
	h_assert_problem(h_post(BATCHES, a.token, batch_body(1, 5)), 409, "AGENT_UNAVAILABLE");
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentCancelled' "
		"  AND payload->>'reason' = 'AgentUnavailable'", inv) > 0, WAIT_MS),
		"investor not notified");
	ck_assert_int_eq(dlq_count("calendar-identity-users.dlq", a.id), 0);
	ck_assert_int_eq(dlq_count("notifications-identity-users.dlq", a.id), 0);
	for (size_t i = 0; i < sizeof(needles) / sizeof(*needles); i++)
		ck_assert_msg(rows_with(needles[i]) == 0, "%s still stored", needles[i]);
	before = h_sql_scalar(rep, a.id);

	/* Deleted is final: a newer Active message does not bring the name back */
	ck_assert_int_eq(h_kafka_produce(T_USERS, a.id, user_env(m_newer, a.id, h_iso_in(0),
		"pin.identity.user-updated", active_rest)), 0);
	wait_both(m_newer);
	ck_assert_str_eq(h_sql_scalar(rep, a.id), before);
	ck_assert_str_eq(h_sql_scalar(con, a.id), "-/-/-/Deleted");

	/* a replay from offset 0 (inbox rows purged): the same messages in one
	 * batch, the older Active one first; nothing changes */
	h_sql("DELETE FROM calendar.inbox WHERE message_id IN ($1::uuid, $2::uuid, $3::uuid)",
		m_active, m_deleted, m_newer);
	h_sql("DELETE FROM notifications.processed_messages "
		"WHERE message_id IN ($1::uuid, $2::uuid, $3::uuid)", m_active, m_deleted, m_newer);
	replay[0] = v_active;
	replay[1] = v_deleted;
	replay[2] = user_env(m_newer, a.id, h_iso_in(0), "pin.identity.user-updated", active_rest);
	ck_assert_int_eq(h_kafka_produce_batch(T_USERS, a.id, replay, 3), 0);
	wait_both(m_active);
	wait_both(m_deleted);
	wait_both(m_newer);
	ck_assert_str_eq(h_sql_scalar(rep, a.id), before);
	ck_assert_str_eq(h_sql_scalar(con, a.id), "-/-/-/Deleted");
	ck_assert_int_eq(outbox_cancelled(apt, "AgentUnavailable"), 1);
	ck_assert_int_eq(dlq_count("calendar-identity-users.dlq", a.id), 0);
	ck_assert_int_eq(dlq_count("notifications-identity-users.dlq", a.id), 0);
	for (size_t i = 0; i < sizeof(needles) / sizeof(*needles); i++)
		ck_assert_msg(rows_with(needles[i]) == 0, "%s stored again", needles[i]);
}
END_TEST

/* An erasure that commits while notify's fan-out of a booking is between
 * its read of the contacts and its COMMIT.  The blocker does what the
 * erasure's transaction does first (contacts.c: the contact row FOR UPDATE,
 * then the tombstone) and commits only once the fan-out has had its chance:
 * the fan-out reads the contact rows FOR KEY SHARE (events.c ntf_users), so it
 * waits, then sees the tombstone and stores neither the agent's name (in
 * the investor's texts) nor the agent's e-mail (the agent's own address
 * snapshot).  Read without the lock, it stored both after the erasure had
 * looked (deleted_agent_erased failed so about one run in ten).
 * The relay marks for this case (a host with relay_cursor = false in place
 * of the stack's worker): by the cursor, the booking's row would wait for
 * the open erasure, which holds a transaction id, and the fan-out would
 * never meet it. */
static struct h_host er_mark;

static void er_teardown(void)
{
	h_relay_marking_stop(&er_mark);
}

START_TEST(erasure_during_fan_out)
{
	struct h_agent a = mk_agent(NULL);
	const char *tag = h_uuid();
	const char *name = h_sprintf("Уходящий Агент %.8s", tag);
	const char *email = h_sprintf("gone-%s@example.com", tag);
	char *m_active = h_uuid(), *s[1], *apt, *mid, pid[16];
	PGconn *er = PQconnectdb(h_env("PIN_PG_DSN"));
	const char *p1[1] = { a.id };
	PGresult *res;
	int64_t until;
	int waited = 0;

	h_relay_marking_start(&er_mark);
	ck_assert_int_eq(h_kafka_produce(T_USERS, a.id, user_env(m_active, a.id, h_iso_in(-120),
		"pin.identity.user-updated", h_sprintf("\"displayName\":\"%s\",\"avatarUrl\":null,"
		"\"email\":\"%s\",\"phone\":null,\"locale\":\"ru\",\"timeZone\":\"Europe/Moscow\","
		"\"status\":\"Active\"", name, email))), 0);
	wait_both(m_active);
	publish(&a, 1, 4, s);

	/* the erasure's first step, not yet committed */
	ck_assert_int_eq(PQstatus(er), CONNECTION_OK);
	snprintf(pid, sizeof(pid), "%d", PQbackendPID(er));
	PQclear(PQexec(er, "BEGIN"));
	res = PQexecParams(er, "SELECT 1 FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid FOR UPDATE", 1, NULL, p1, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
	ck_assert_int_eq(PQntuples(res), 1);
	PQclear(res);
	res = PQexecParams(er, "UPDATE notifications.recipient_contacts SET display_name = NULL, "
		"email = NULL, phone = NULL, locale = NULL, time_zone = NULL, status = 'Deleted', "
		"last_event_at = now(), updated_at = now() WHERE user_id = $1::uuid",
		1, NULL, p1, NULL, NULL, 0);
	ck_assert_int_eq(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);

	/* the booking's fan-out runs now: it waits for the erasure (or, read
	 * without the lock, writes its rows) */
	apt = book_ok(s[0], NULL);
	until = h_now_ms() + 20000;
	while (h_now_ms() < until && !(waited = h_sql_int("SELECT count(*) FROM "
			"pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))", pid) > 0) &&
			h_sql_int("SELECT count(*) FROM notifications.notifications "
			"WHERE payload->>'appointmentId' = $1", apt) == 0)
		h_sleep_ms(20);
	h_sleep_ms(300);
	res = PQexec(er, "COMMIT");
	ck_assert_int_eq(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(er);

	/* the booking's message processed by the fan-out */
	mid = h_sql_scalar("SELECT envelope->>'messageId' FROM calendar.outbox WHERE key = $1 "
		"AND topic = 'pin.calendar.appointment-created.v1'", apt);
	ck_assert_ptr_nonnull(mid);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE message_id = $1::uuid", mid) > 0, WAIT_MS),
		"the fan-out did not process the booking");
	/* (calendar.user_replicas keeps the name: its own consumer's erasure is
	 * not part of this drill) */
	ck_assert_msg(rows_in("{notifications}", email) == 0, "the agent's e-mail stored "
		"after the erasure (the fan-out %s)", waited ? "waited" : "did not wait");
	ck_assert_msg(rows_in("{notifications}", name) == 0, "the agent's name stored after the erasure "
		"(the fan-out %s)", waited ? "waited" : "did not wait");
	ck_assert_msg(waited, "the fan-out never waited for the erasure's lock");
}
END_TEST

/* =============================================================== views */

struct world {
	struct h_agent a1, a2, b;
	char *apt_a1_pending, *apt_a1_confirmed, *apt_a2, *apt_b;
	char *mgr, *head_a, *head_b;
};

static void mk_world(struct world *w)
{
	char *s[3];

	w->a1 = mk_agent(NULL);
	w->a2 = mk_agent(w->a1.tenant);
	w->b = mk_agent(NULL);
	publish(&w->a1, 3, 7, s);
	w->apt_a1_pending = book_ok(s[0], NULL);
	w->apt_a1_confirmed = book_ok(s[1], NULL);
	confirm(&w->a1, w->apt_a1_confirmed);
	publish(&w->a2, 1, 8, s);
	w->apt_a2 = book_ok(s[0], NULL);
	publish(&w->b, 2, 7, s);
	w->apt_b = book_ok(s[0], NULL);
	w->mgr = h_token("pin_manager", h_uuid(), NULL, "calendar.team.view");
	w->head_a = h_token("agency_head", h_uuid(), w->a1.tenant, "calendar.team.view");
	w->head_b = h_token("agency_head", h_uuid(), w->b.tenant, "calendar.team.view");
}

static bool page_has(const struct h_resp *r, const char *id)
{
	json_object *items = h_jget(r->json, "items");
	size_t i;

	for (i = 0; i < json_object_array_length(items); i++)
		if (!strcmp(h_jstr(json_object_array_get_idx(items, i), "id"), id))
			return true;
	return false;
}

/* Walks every page of path (which has a '?') with limit=1; asserts each page
 * has one item, no repeats, and returns the number of items. */
static int walk_pages(const char *path, const char *token)
{
	char *cursor = NULL, *seen = h_strdup("");
	int n = 0;

	for (;;) {
		struct h_resp *r = h_get(cursor ? h_sprintf("%s&limit=1&cursor=%s", path, cursor)
				: h_sprintf("%s&limit=1", path), token);
		const char *id;

		ck_assert_msg(r->status == 200, "%s: %ld %s", path, r->status, r->body);
		if (items_n(r) == 0)
			break;
		ck_assert_int_eq(items_n(r), 1);
		id = h_jstr(json_object_array_get_idx(h_jget(r->json, "items"), 0), "id");
		ck_assert_msg(!strstr(seen, id), "%s repeated on the next page", id);
		seen = h_sprintf("%s %s", seen, id);
		n++;
		if (!h_jstr(r->json, "nextCursor"))
			break;
		cursor = h_strdup(h_jstr(r->json, "nextCursor"));
		ck_assert_int_lt(n, 50);
	}
	return n;
}

START_TEST(pin_manager_appointments_view)
{
	struct world w;
	struct h_resp *r;
	const char *t;

	mk_world(&w);
	r = h_get(h_sprintf(PM_APT "?tenantId=%s", w.a1.tenant), w.mgr);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(items_n(r), 3);
	ck_assert(page_has(r, w.apt_a1_pending) && page_has(r, w.apt_a2));
	ck_assert(!page_has(r, w.apt_b));
	ck_assert_ptr_null(h_jstr(r->json, "nextCursor"));
	/* the representation is the agent's (slot and event included) */
	ck_assert_ptr_nonnull(h_jget(json_object_array_get_idx(h_jget(r->json, "items"), 0),
			"slot"));
	/* filters */
	r = h_get(h_sprintf(PM_APT "?tenantId=%s&agentUserId=%s", w.a1.tenant, w.a1.id), w.mgr);
	ck_assert_int_eq(items_n(r), 2);
	r = h_get(h_sprintf(PM_APT "?tenantId=%s&status=Confirmed", w.a1.tenant), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	ck_assert(page_has(r, w.apt_a1_confirmed));
	/* a1's slots are 7 days ahead, a2's 8: from/to on StartAt */
	r = h_get(h_sprintf(PM_APT "?tenantId=%s&from=%s", w.a1.tenant,
			h_sprintf("%sT00:00:00Z", h_date_in(8))), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	ck_assert(page_has(r, w.apt_a2));
	r = h_get(h_sprintf(PM_APT "?tenantId=%s&to=%s", w.a1.tenant,
			h_sprintf("%sT00:00:00Z", h_date_in(8))), w.mgr);
	ck_assert_int_eq(items_n(r), 2);
	/* an agent of another tenant under this tenant: nothing */
	r = h_get(h_sprintf(PM_APT "?tenantId=%s&agentUserId=%s", w.a1.tenant, w.b.id), w.mgr);
	ck_assert_int_eq(items_n(r), 0);
	r = h_get(h_sprintf(PM_APT "?tenantId=%s", w.b.tenant), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	ck_assert(page_has(r, w.apt_b));
	/* paging */
	ck_assert_int_eq(walk_pages(h_sprintf(PM_APT "?tenantId=%s", w.a1.tenant), w.mgr), 3);

	/* errors and access control */
	h_assert_problem(h_get(PM_APT, w.mgr), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(PM_APT "?tenantId=nope", w.mgr), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(PM_APT "?tenantId=%s&status=Bogus", w.a1.tenant),
			w.mgr), 400, "MALFORMED_REQUEST");
	t = h_sprintf(PM_APT "?tenantId=%s", w.a1.tenant);
	h_assert_problem(h_get(t, NULL), 401, "UNAUTHENTICATED");
	h_assert_problem(h_get(t, w.head_a), 403, "FORBIDDEN");
	h_assert_problem(h_get(t, w.a1.token), 403, "FORBIDDEN");
	h_assert_problem(h_get(t, h_token("pin_manager", h_uuid(), NULL,
			"calendar.events.view")), 403, "FORBIDDEN");
	h_assert_problem(h_post(t, w.mgr, NULL), 405, "METHOD_NOT_ALLOWED");
}
END_TEST

START_TEST(pin_manager_slots_view)
{
	struct world w;
	struct h_resp *r;
	const char *t;

	mk_world(&w);
	/* tenant A: a1 3 slots (2 Booked), a2 1 (Booked) */
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s", w.a1.tenant), w.mgr);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(items_n(r), 4);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(h_jget(r->json, "items"), 0),
			"tenantId"), w.a1.tenant);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s&agentUserId=%s", w.a1.tenant, w.a2.id), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s&status=Available", w.a1.tenant), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s&status=Booked&agentUserId=%s", w.a1.tenant,
			w.a1.id), w.mgr);
	ck_assert_int_eq(items_n(r), 2);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s&from=%s", w.a1.tenant,
			h_sprintf("%sT00:00:00Z", h_date_in(8))), w.mgr);
	ck_assert_int_eq(items_n(r), 1);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s", w.b.tenant), w.mgr);
	ck_assert_int_eq(items_n(r), 2);
	r = h_get(h_sprintf(PM_SLOTS "?tenantId=%s&agentUserId=%s", w.a1.tenant, w.b.id), w.mgr);
	ck_assert_int_eq(items_n(r), 0);
	ck_assert_int_eq(walk_pages(h_sprintf(PM_SLOTS "?tenantId=%s", w.a1.tenant), w.mgr), 4);

	h_assert_problem(h_get(PM_SLOTS, w.mgr), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(PM_SLOTS "?tenantId=%s&status=Gone", w.a1.tenant),
			w.mgr), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(PM_SLOTS "?tenantId=%s&from=%s&to=%s", w.a1.tenant,
			h_iso_in(86400), h_iso_in(0)), w.mgr), 422, "VALIDATION_FAILED");
	t = h_sprintf(PM_SLOTS "?tenantId=%s", w.a1.tenant);
	h_assert_problem(h_get(t, NULL), 401, "UNAUTHENTICATED");
	h_assert_problem(h_get(t, w.head_a), 403, "FORBIDDEN");
	h_assert_problem(h_get(t, w.a1.token), 403, "FORBIDDEN");
	h_assert_problem(h_get(t, h_token("pin_manager", h_uuid(), NULL)), 403, "FORBIDDEN");
}
END_TEST

START_TEST(agency_appointments_view)
{
	struct world w;
	struct h_resp *r;

	mk_world(&w);
	r = h_get(AGENCY, w.head_a);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(items_n(r), 3);
	ck_assert(!page_has(r, w.apt_b));
	r = h_get(AGENCY, w.head_b);
	ck_assert_int_eq(items_n(r), 1);
	ck_assert(page_has(r, w.apt_b));
	/* naming another tenant's agent never leaves the caller's tenant */
	r = h_get(h_sprintf(AGENCY "?agentUserIds=%s", w.b.id), w.head_a);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(items_n(r), 0);
	r = h_get(h_sprintf(AGENCY "?agentUserIds=%s,%s", w.b.id, w.a2.id), w.head_a);
	ck_assert_int_eq(items_n(r), 1);
	ck_assert(page_has(r, w.apt_a2));
	r = h_get(AGENCY "?status=Pending", w.head_a);
	ck_assert_int_eq(items_n(r), 2);
	r = h_get(h_sprintf(AGENCY "?to=%s", h_sprintf("%sT00:00:00Z", h_date_in(8))), w.head_a);
	ck_assert_int_eq(items_n(r), 2);
	ck_assert_int_eq(walk_pages(AGENCY "?status=Pending", w.head_a), 2);
	/* access: the permission is required; the tenant comes from the token */
	h_assert_problem(h_get(AGENCY, h_token("agency_head", h_uuid(), w.a1.tenant,
			"calendar.events.view")), 403, "FORBIDDEN");
	h_assert_problem(h_get(AGENCY, h_token("agency_head", h_uuid(), NULL,
			"calendar.team.view")), 403, "FORBIDDEN");
	h_assert_problem(h_get(AGENCY "?agentUserIds=nope", w.head_a), 400, "MALFORMED_REQUEST");
}
END_TEST

Suite *make_team_suite(void)
{
	Suite *s = suite_create("team");
	TCase *tc;

	tc = h_tcase("departed", 240);
	tcase_add_test(tc, departed_agent_cascade);
	tcase_add_test(tc, departed_agent_returns);
	tcase_add_test(tc, departed_agent_idempotent);
	tcase_add_test(tc, deleted_agent_erased);
	suite_add_tcase(s, tc);

	tc = h_tcase("erasure", 240);
	tcase_add_checked_fixture(tc, NULL, er_teardown);
	tcase_add_test(tc, erasure_during_fan_out);
	suite_add_tcase(s, tc);
	tc = h_tcase("views", 120);
	tcase_add_test(tc, pin_manager_appointments_view);
	tcase_add_test(tc, pin_manager_slots_view);
	tcase_add_test(tc, agency_appointments_view);
	suite_add_tcase(s, tc);
	return s;
}
