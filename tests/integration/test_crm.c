/*
 * test_crm.c -- the CRM consumers of workers.so against the test stack:
 * booking sync (seed 004_09754351dec30ab5, AC-1..AC-9) and deal sync
 * (events.md "Deal sync"): messages are produced to the dev broker, the
 * long-lived worker host consumes them, the effects are polled in
 * PostgreSQL (calendar.* tables and calendar.outbox), DLQ messages are read
 * from the broker with their headers.
 *
 * Every wait is a poll.  "Handled" means the message's inbox row exists
 * (written in the consumer's transaction); a message that must not be
 * applied is observed through the worker's log line of the refused attempt.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define BGROUP "calendar-crm-booking-events"
#define DGROUP "calendar-crm-deal-events"
#define T_CREATED "pin.crm.booking-created.v1"
#define T_CONFIRMED "pin.crm.booking-confirmed.v1"
#define T_PAID "pin.crm.booking-paid.v1"
#define T_EXPIRED "pin.crm.booking-expired.v1"
#define T_CANCELLED "pin.crm.booking-cancelled.v1"
#define T_DEAL_CREATED "pin.crm.deal-created.v1"
#define T_DEAL_MEMBERS "pin.crm.deal-members-changed.v1"
#define T_DEAL_CLOSED "pin.crm.deal-closed.v1"
#define WAIT_MS 60000

struct deal {
	char *id, *agency, *executor;
};

/* "pin.crm.booking-created.v1" -> "pin.crm.booking-created" */
static char *event_type_of(const char *topic)
{
	char *s = h_strdup(topic);

	s[strlen(s) - 3] = '\0';
	return s;
}

static long long inbox_count(const char *group, const char *mid)
{
	return h_sql_int("SELECT count(*) FROM calendar.inbox WHERE consumer_group = $1 "
		"AND message_id = $2::uuid", group, mid);
}

/* Produces a message (key = aggregate id) with message id mid and waits
 * until the consumer group handled it. */
static void send_mid(const char *group, const char *topic, const char *key,
		const char *agg_type, const char *mid, const char *created_at,
		const char *payload)
{
	ck_assert_int_eq(h_kafka_produce(topic, key, h_envelope(mid, event_type_of(topic),
		agg_type, key, created_at, payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(group, mid) == 1, WAIT_MS),
			"%s %s not handled", topic, mid);
}

/* A booking message with a fresh id, waited for; returns the id. */
static char *booking_send(const char *topic, const char *booking, const char *payload)
{
	char *mid = h_new_mid();

	send_mid(BGROUP, topic, booking, "Booking", mid, h_iso_in(0), payload);
	return mid;
}

static char *deal_send(const char *topic, const char *deal, const char *created_at,
		const char *payload)
{
	char *mid = h_new_mid();

	send_mid(DGROUP, topic, deal, "Deal", mid, created_at, payload);
	return mid;
}

static struct deal new_deal(void)
{
	struct deal d = { h_uuid(), h_uuid(), h_uuid() };

	deal_send(T_DEAL_CREATED, d.id, "2026-11-01T10:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		d.id, d.agency, d.executor));
	return d;
}

static char *created_payload(const char *booking, const char *deal, const char *at)
{
	return h_sprintf("{\"bookingId\":\"%s\",\"dealId\":\"%s\",\"propertyObjectId\":\"%s\","
		"\"reserveExpiresAt\":\"%s\",\"programTerms\":{\"x\":1},\"paymentAmount\":100}",
		booking, deal, h_uuid(), at);
}

static char *confirmed_payload(const char *booking, const char *deal, const char *at)
{
	return h_sprintf("{\"bookingId\":\"%s\",\"dealId\":\"%s\",\"propertyObjectId\":null,"
		"\"bookingExpiresAt\":\"%s\"}", booking, deal, at);
}

static char *only_booking(const char *booking)
{
	return h_sprintf("{\"bookingId\":\"%s\"}", booking);
}

/* link status / event of (booking, phase) */
static char *link_status(const char *booking, const char *phase)
{
	return h_sql_scalar("SELECT status FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1 AND phase = $2", booking, phase);
}

static char *link_event(const char *booking, const char *phase)
{
	return h_sql_scalar("SELECT calendar_event_id::text FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1 AND phase = $2", booking, phase);
}

static char *event_col(const char *event, const char *expr)
{
	return h_sql_scalar(h_sprintf("SELECT (%s)::text FROM calendar.calendar_events "
		"WHERE id = $1", expr), event);
}

static long long outbox_count(const char *topic, const char *event)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = $1 AND key = $2",
		topic, event);
}

/* payload field of the newest outbox message of topic for event */
static char *outbox_field(const char *topic, const char *event, const char *field)
{
	return h_sql_scalar("SELECT envelope->'payload'->>$3 FROM calendar.outbox "
		"WHERE topic = $1 AND key = $2 ORDER BY id DESC LIMIT 1", topic, event, field);
}

static long long reminders(const char *event, const char *status)
{
	return h_sql_int("SELECT count(*) FROM calendar.event_reminders "
		"WHERE calendar_event_id = $1::uuid AND status = $2", event, status);
}

/* a Reserve deadline one hour ahead: returns the event id */
static char *reserve_open(const struct deal *d, const char *booking)
{
	booking_send(T_CREATED, booking, created_payload(booking, d->id, h_iso_in(3600)));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Open");
	return link_event(booking, "Reserve");
}

/* ------------------------------------------------------------------ AC-1 */

START_TEST(ac1_reserve_deadline_created)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *at = h_iso_in(3600), *ev;

	booking_send(T_CREATED, booking, created_payload(booking, d.id, at));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Open");
	ck_assert_ptr_null(link_status(booking, "Booking"));
	ev = link_event(booking, "Reserve");
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(event_col(ev, "kind"), "BookingDeadline");
	ck_assert_str_eq(event_col(ev, "origin"), "CrmBooking");
	ck_assert_str_eq(event_col(ev, "status"), "Planned");
	ck_assert_str_eq(event_col(ev, "priority"), "Critical");
	ck_assert_str_eq(event_col(ev, "owner_user_id"), d.executor);
	ck_assert_str_eq(event_col(ev, "tenant_id"), d.agency);
	ck_assert_str_eq(event_col(ev, "time_zone"), "Europe/Moscow");
	ck_assert_str_eq(event_col(ev, h_sprintf("start_at = '%s'::timestamptz", at)), "true");
	ck_assert_ptr_null(event_col(ev, "end_at"));
	ck_assert_str_eq(event_col(ev, "deal_id"), d.id);
	ck_assert_str_eq(event_col(ev, "booking_id"), booking);
	ck_assert_ptr_nonnull(event_col(ev, "property_object_id"));
	ck_assert_ptr_null(event_col(ev, "client_user_id"));
	ck_assert_ptr_null(event_col(ev, "created_by_user_id"));
	ck_assert_str_eq(event_col(ev, "reminder_offsets_minutes"), "{30}");
	ck_assert_str_eq(event_col(ev, "title LIKE 'Оплата резерва до %'"), "true");
	ck_assert_int_eq(reminders(ev, "Pending"), 1);
	ck_assert_int_eq(h_sql_int("SELECT offset_minutes FROM calendar.event_reminders "
		"WHERE calendar_event_id = $1::uuid", ev), 30);
	ck_assert_str_eq(h_sql_scalar("SELECT tenant_id::text FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1", booking), d.agency);
	/* event-created in the outbox, same transaction */
	ck_assert_int_eq(outbox_count("pin.calendar.event-created.v1", ev), 1);
	ck_assert_str_eq(outbox_field("pin.calendar.event-created.v1", ev, "origin"), "CrmBooking");
	ck_assert_str_eq(outbox_field("pin.calendar.event-created.v1", ev, "bookingId"), booking);
	ck_assert_ptr_null(outbox_field("pin.calendar.event-created.v1", ev, "title"));
}
END_TEST

/* AC-9 and replay: the same messageId twice is one effect; a fresh
 * messageId with the same content is a business duplicate (no event). */
START_TEST(ac9_redelivery_and_replay)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *mid = h_new_mid(), *created = h_iso_in(0);
	char *payload = created_payload(booking, d.id, h_iso_in(7200));
	const char *q = "SELECT count(*) FROM calendar.calendar_events WHERE booking_id = $1";

	send_mid(BGROUP, T_CREATED, booking, "Booking", mid, created, payload);
	send_mid(BGROUP, T_CREATED, booking, "Booking", mid, created, payload);  /* redelivery */
	/* replay with a fresh id, same partition (same key): handled after the
	 * redelivery */
	booking_send(T_CREATED, booking, payload);
	ck_assert_int_eq(h_sql_int(q, booking), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1", booking), 1);
	ck_assert_int_eq(outbox_count("pin.calendar.event-created.v1",
		link_event(booking, "Reserve")), 1);
	ck_assert_int_eq(reminders(link_event(booking, "Reserve"), "Pending"), 1);
}
END_TEST

/* ------------------------------------------------------------ AC-2, AC-4 */

START_TEST(ac2_ac4_confirmed_then_extended)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *reserve, *bev, *t1 = h_iso_in(10 * 86400),
		*t2 = h_iso_in(20 * 86400);
	long long version;

	reserve = reserve_open(&d, booking);
	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id, t1));
	/* reserve part completed */
	ck_assert_str_eq(link_status(booking, "Reserve"), "Completed");
	ck_assert_str_eq(event_col(reserve, "status"), "Completed");
	ck_assert_int_eq(reminders(reserve, "Pending"), 0);
	ck_assert_int_eq(reminders(reserve, "Skipped"), 1);
	ck_assert_int_eq(outbox_count("pin.calendar.event-status-changed.v1", reserve), 1);
	ck_assert_str_eq(outbox_field("pin.calendar.event-status-changed.v1", reserve,
		"previousStatus"), "Planned");
	ck_assert_str_eq(outbox_field("pin.calendar.event-status-changed.v1", reserve,
		"status"), "Completed");
	/* booking phase created */
	ck_assert_str_eq(link_status(booking, "Booking"), "Open");
	bev = link_event(booking, "Booking");
	ck_assert_str_eq(event_col(bev, "kind"), "BookingDeadline");
	ck_assert_str_eq(event_col(bev, "priority"), "Critical");
	ck_assert_str_eq(event_col(bev, "owner_user_id"), d.executor);
	ck_assert_str_eq(event_col(bev, h_sprintf("start_at = '%s'::timestamptz", t1)), "true");
	ck_assert_str_eq(event_col(bev, "reminder_offsets_minutes"), "{1440,60}");
	ck_assert_str_eq(event_col(bev, "title LIKE 'Дедлайн брони: подтвердить/продлить до %'"),
		"true");
	ck_assert_int_eq(reminders(bev, "Pending"), 2);
	ck_assert_int_eq(outbox_count("pin.calendar.event-created.v1", bev), 1);

	/* AC-4: a repeated booking-confirmed with a later moment moves it */
	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id, t2));
	ck_assert_str_eq(event_col(bev, h_sprintf("start_at = '%s'::timestamptz", t2)), "true");
	ck_assert_int_eq(outbox_count("pin.calendar.event-rescheduled.v1", bev), 1);
	ck_assert_str_eq(outbox_field("pin.calendar.event-rescheduled.v1", bev, "eventId"), bev);
	ck_assert_int_eq(reminders(bev, "Pending"), 2);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
		"WHERE calendar_event_id = $1::uuid AND status = 'Pending' "
		"AND due_at = $2::timestamptz - interval '1440 minutes'", bev, t2), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1", booking), 2);
	/* the same moment again: no move */
	version = atoll(event_col(bev, "version"));
	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id, t2));
	ck_assert_int_eq(atoll(event_col(bev, "version")), version);
	ck_assert_int_eq(outbox_count("pin.calendar.event-rescheduled.v1", bev), 1);
	/* a replay of the first booking-confirmed (a fresh inbox, envelope
	 * createdAt older than the extension's): the extension stays */
	send_mid(BGROUP, T_CONFIRMED, booking, "Booking", h_new_mid(), h_iso_in(-3600),
		confirmed_payload(booking, d.id, t1));
	ck_assert_str_eq(event_col(bev, h_sprintf("start_at = '%s'::timestamptz", t2)), "true");
	ck_assert_int_eq(atoll(event_col(bev, "version")), version);
	ck_assert_int_eq(outbox_count("pin.calendar.event-rescheduled.v1", bev), 1);
	ck_assert_int_eq(outbox_count("pin.calendar.event-status-changed.v1", reserve), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 2);
}
END_TEST

/* ------------------------------------------------------------------ AC-3 */

START_TEST(ac3_paid_completes_reserve)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *reserve;

	reserve = reserve_open(&d, booking);
	booking_send(T_PAID, booking, h_sprintf("{\"bookingId\":\"%s\",\"paymentAmount\":5}",
		booking));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Completed");
	ck_assert_str_eq(event_col(reserve, "status"), "Completed");
	ck_assert_ptr_nonnull(event_col(reserve, "completed_at"));
	ck_assert_int_eq(reminders(reserve, "Skipped"), 1);
	ck_assert_ptr_null(link_status(booking, "Booking"));
	/* paid again (fresh id): no-op */
	booking_send(T_PAID, booking, only_booking(booking));
	/* confirmed afterwards: reserve part no-op, booking phase created */
	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id, h_iso_in(5 * 86400)));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Completed");
	ck_assert_str_eq(link_status(booking, "Booking"), "Open");
	ck_assert_int_eq(outbox_count("pin.calendar.event-status-changed.v1", reserve), 1);
}
END_TEST

/* ------------------------------------------------------------------ AC-5 */

START_TEST(ac5_expired_reserve_cancels_and_tombstones)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *reserve;

	reserve = reserve_open(&d, booking);
	booking_send(T_EXPIRED, booking, h_sprintf("{\"bookingId\":\"%s\",\"phase\":\"Reserve\"}",
		booking));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Cancelled");
	ck_assert_str_eq(event_col(reserve, "status"), "Cancelled");
	ck_assert_str_eq(event_col(reserve, "cancel_reason"), "Резерв истёк");
	ck_assert_int_eq(reminders(reserve, "Pending"), 0);
	ck_assert_int_eq(reminders(reserve, "Skipped"), 1);
	ck_assert_str_eq(outbox_field("pin.calendar.event-status-changed.v1", reserve,
		"status"), "Cancelled");
	ck_assert_str_eq(outbox_field("pin.calendar.event-status-changed.v1", reserve,
		"cancelReason"), "Резерв истёк");
	/* tombstone of the absent phase: a late booking-confirmed is a no-op */
	ck_assert_str_eq(link_status(booking, "Booking"), "Cancelled");
	ck_assert_ptr_null(link_event(booking, "Booking"));
	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id, h_iso_in(86400 * 3)));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 1);
	ck_assert_int_eq(outbox_count("pin.calendar.event-status-changed.v1", reserve), 1);
}
END_TEST

START_TEST(ac5_cancelled_and_expired_booking_phase)
{
	struct deal d = new_deal();
	char *b1 = h_uuid(), *b2 = h_uuid(), *e1, *e2;

	/* booking cancelled with the booking phase open */
	reserve_open(&d, b1);
	booking_send(T_CONFIRMED, b1, confirmed_payload(b1, d.id, h_iso_in(86400 * 4)));
	e1 = link_event(b1, "Booking");
	booking_send(T_CANCELLED, b1, h_sprintf("{\"bookingId\":\"%s\",\"cancelReason\":"
		"\"free text\",\"cancelledByUserId\":\"%s\"}", b1, h_uuid()));
	ck_assert_str_eq(link_status(b1, "Booking"), "Cancelled");
	ck_assert_str_eq(link_status(b1, "Reserve"), "Completed");
	ck_assert_str_eq(event_col(e1, "status"), "Cancelled");
	ck_assert_str_eq(event_col(e1, "cancel_reason"), "Бронь отменена");
	ck_assert_int_eq(reminders(e1, "Skipped"), 2);
	ck_assert_str_eq(outbox_field("pin.calendar.event-status-changed.v1", e1,
		"previousStatus"), "Planned");

	/* reserve open, booking-expired with Phase = Booking: the reason
	 * follows the payload's phase */
	e2 = reserve_open(&d, b2);
	booking_send(T_EXPIRED, b2, h_sprintf("{\"bookingId\":\"%s\",\"phase\":\"Booking\"}", b2));
	ck_assert_str_eq(event_col(e2, "cancel_reason"), "Бронь истекла");
	ck_assert_str_eq(link_status(b2, "Booking"), "Cancelled");
	/* cancelled again: no-op */
	booking_send(T_CANCELLED, b2, only_booking(b2));
	ck_assert_str_eq(event_col(e2, "cancel_reason"), "Бронь истекла");
	ck_assert_int_eq(outbox_count("pin.calendar.event-status-changed.v1", e2), 1);
}
END_TEST

/* ------------------------------------------------------------------ AC-6 */

START_TEST(ac6_cancelled_before_created)
{
	struct deal d = new_deal();
	char *booking = h_uuid();

	booking_send(T_CANCELLED, booking, only_booking(booking));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Cancelled");
	ck_assert_str_eq(link_status(booking, "Booking"), "Cancelled");
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	booking_send(T_CREATED, booking, created_payload(booking, d.id, h_iso_in(3600)));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 0);
	ck_assert_str_eq(link_status(booking, "Reserve"), "Cancelled");
	ck_assert_ptr_null(link_event(booking, "Reserve"));
}
END_TEST

/* deadline already in the past: tombstone, no event */
START_TEST(created_deadline_in_past)
{
	struct deal d = new_deal();
	char *booking = h_uuid();

	booking_send(T_CREATED, booking, created_payload(booking, d.id, h_iso_in(-60)));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Cancelled");
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 0);
}
END_TEST

/* paid before created (the known out-of-order bug): paid leaves a terminal
 * Reserve tombstone, so the late created opens no Reserve deadline */
START_TEST(paid_then_created_no_reserve_deadline)
{
	struct deal d = new_deal();
	char *booking = h_uuid();

	booking_send(T_PAID, booking, only_booking(booking));
	ck_assert_ptr_nonnull(link_status(booking, "Reserve"));
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	booking_send(T_CREATED, booking, created_payload(booking, d.id, h_iso_in(3600)));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 0);
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	ck_assert_str_ne(link_status(booking, "Reserve"), "Open");
}
END_TEST

/* confirmed before created: only the Booking deadline exists afterwards */
START_TEST(confirmed_then_created_only_booking_deadline)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *bev;

	booking_send(T_CONFIRMED, booking, confirmed_payload(booking, d.id,
		h_iso_in(5 * 86400)));
	ck_assert_str_eq(link_status(booking, "Booking"), "Open");
	bev = link_event(booking, "Booking");
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	booking_send(T_CREATED, booking, created_payload(booking, d.id, h_iso_in(3600)));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 1);
	ck_assert_str_eq(h_sql_scalar("SELECT id::text FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), bev);
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	ck_assert_str_eq(link_status(booking, "Booking"), "Open");
}
END_TEST

/* ------------------------------------------------------------------ AC-7 */

/* the worker logged a refused attempt of message mid with code */
static bool worker_logged(const char *mid, const char *code)
{
	FILE *f = fopen(h_sprintf("%s/logs/worker.log", h_env("PIN_DEV_DIR")), "r");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, mid) && strstr(line, code);
	fclose(f);
	return found;
}

START_TEST(ac7_booking_before_deal_created)
{
	struct deal d = { h_uuid(), h_uuid(), h_uuid() };
	char *booking = h_uuid(), *mid = h_new_mid();

	ck_assert_int_eq(h_kafka_produce(T_CREATED, booking, h_envelope(mid,
		"pin.crm.booking-created", "Booking", booking, h_iso_in(0),
		created_payload(booking, d.id, h_iso_in(7200)))), 0);
	ck_assert_msg(H_WAIT_UNTIL(worker_logged(mid, "CAL_BOOKING_SYNC_DEAL_REPLICA_NOT_FOUND"),
		WAIT_MS), "no retriable failure logged");
	/* refused: rolled back, nothing applied */
	ck_assert_int_eq(inbox_count(BGROUP, mid), 0);
	ck_assert_ptr_null(link_status(booking, "Reserve"));
	/* deal-created arrives: the held message succeeds on a retry */
	deal_send(T_DEAL_CREATED, d.id, "2026-11-01T10:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		d.id, d.agency, d.executor));
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(BGROUP, mid) == 1, 120000), "not retried");
	ck_assert_str_eq(link_status(booking, "Reserve"), "Open");
	ck_assert_str_eq(event_col(link_event(booking, "Reserve"), "owner_user_id"), d.executor);
}
END_TEST

/* ------------------------------------------------------------------ AC-8 */

START_TEST(ac8_terminal_deal)
{
	struct deal d = new_deal();
	char *booking = h_uuid();

	deal_send(T_DEAL_CLOSED, d.id, "2026-11-02T10:00:00Z",
		h_sprintf("{\"dealId\":\"%s\",\"outcome\":\"Won\"}", d.id));
	ck_assert_str_eq(h_sql_scalar("SELECT is_terminal::text FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1", d.id), "true");
	booking_send(T_CREATED, booking, created_payload(booking, d.id, h_iso_in(3600)));
	ck_assert_str_eq(link_status(booking, "Reserve"), "Cancelled");
	ck_assert_ptr_null(link_event(booking, "Reserve"));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", booking), 0);
}
END_TEST

/* ------------------------------------------------------------- deal sync */

/* A Manual or Appointment event of the deal written directly (fixture). */
static char *insert_event(const char *origin, const struct deal *d)
{
	char *id = h_uuid();
	bool apt = !strcmp(origin, "Appointment");

	/* (h_sql's parameter list ends at the first NULL: no NULL values) */
	if (apt)
		h_sql("INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, "
			"origin, title, start_at, end_at, time_zone, client_user_id, deal_id, "
			"appointment_id, created_at, updated_at) VALUES ($1, $2, $3, 'Showing', "
			"'Appointment', 'x', now() + interval '2 days', "
			"now() + interval '2 days 1 hour', 'Europe/Moscow', $4, $5, $6, now(), now())",
			id, d->agency, d->executor, h_uuid(), d->id, h_uuid());
	else
		h_sql("INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, "
			"origin, title, start_at, end_at, time_zone, deal_id, created_at, updated_at) "
			"VALUES ($1, $2, $3, 'Meeting', 'Manual', 'x', now() + interval '2 days', "
			"now() + interval '2 days 1 hour', 'Europe/Moscow', $4, now(), now())",
			id, d->agency, d->executor, d->id);
	return id;
}

START_TEST(deal_executor_changed_moves_open_events)
{
	struct deal d = new_deal();
	char *booking = h_uuid(), *b2 = h_uuid(), *dl, *manual, *apt, *done;
	char *nexec = h_uuid(), *nagency = h_uuid();
	const char *oc = "pin.calendar.event-owner-changed.v1";

	dl = reserve_open(&d, booking);
	manual = insert_event("Manual", &d);
	apt = insert_event("Appointment", &d);
	/* a terminal deadline stays where it is */
	done = reserve_open(&d, b2);
	booking_send(T_PAID, b2, only_booking(b2));

	deal_send(T_DEAL_MEMBERS, d.id, "2026-11-01T11:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"changeType\":\"ExecutorChanged\",\"agencyCompanyId\":\"%s\","
		"\"executorAgentUserId\":\"%s\",\"previousExecutorAgentUserId\":\"%s\"}",
		d.id, nagency, nexec, d.executor));
	ck_assert_str_eq(h_sql_scalar("SELECT executor_agent_user_id::text FROM "
		"calendar.crm_deal_replicas WHERE deal_id = $1", d.id), nexec);
	ck_assert_str_eq(event_col(dl, "owner_user_id"), nexec);
	ck_assert_str_eq(event_col(dl, "tenant_id"), nagency);
	ck_assert_str_eq(event_col(manual, "owner_user_id"), nexec);
	ck_assert_str_eq(event_col(manual, "tenant_id"), nagency);
	ck_assert_str_eq(event_col(apt, "owner_user_id"), d.executor);     /* INV-CAL-8 */
	ck_assert_str_eq(event_col(apt, "tenant_id"), d.agency);
	ck_assert_str_eq(event_col(done, "owner_user_id"), d.executor);
	ck_assert_int_eq(reminders(dl, "Pending"), 1);     /* reminders follow the event */
	ck_assert_str_eq(h_sql_scalar("SELECT tenant_id::text FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1", booking), nagency);
	/* event-owner-changed per moved event, payload per events.md */
	ck_assert_int_eq(outbox_count(oc, dl), 1);
	ck_assert_int_eq(outbox_count(oc, manual), 1);
	ck_assert_int_eq(outbox_count(oc, apt), 0);
	ck_assert_int_eq(outbox_count(oc, done), 0);
	ck_assert_str_eq(outbox_field(oc, dl, "ownerUserId"), nexec);
	ck_assert_str_eq(outbox_field(oc, dl, "previousOwnerUserId"), d.executor);
	ck_assert_str_eq(outbox_field(oc, dl, "tenantId"), nagency);
	ck_assert_str_eq(outbox_field(oc, dl, "previousTenantId"), d.agency);
	ck_assert_str_eq(outbox_field(oc, dl, "reason"), "ExecutorChanged");
	ck_assert_str_eq(outbox_field(oc, dl, "dealId"), d.id);
	ck_assert_str_eq(outbox_field(oc, dl, "bookingId"), booking);
	ck_assert_str_eq(outbox_field(oc, dl, "kind"), "BookingDeadline");
	ck_assert_str_eq(h_sql_scalar("SELECT string_agg(k, ',' ORDER BY k) FROM calendar.outbox, "
		"jsonb_object_keys(envelope->'payload') k WHERE topic = $1 AND key = $2", oc, dl),
		"bookingId,dealId,endAt,eventId,kind,origin,ownerUserId,previousOwnerUserId,"
		"previousTenantId,reason,startAt,tenantId,timeZone");

	/* an older message does not overwrite the newer one, nothing moves */
	deal_send(T_DEAL_MEMBERS, d.id, "2026-11-01T10:30:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"changeType\":\"ExecutorChanged\",\"agencyCompanyId\":\"%s\","
		"\"executorAgentUserId\":\"%s\",\"previousExecutorAgentUserId\":null}",
		d.id, d.agency, h_uuid()));
	ck_assert_str_eq(h_sql_scalar("SELECT executor_agent_user_id::text FROM "
		"calendar.crm_deal_replicas WHERE deal_id = $1", d.id), nexec);
	ck_assert_str_eq(event_col(dl, "owner_user_id"), nexec);
	ck_assert_int_eq(outbox_count(oc, dl), 1);
	/* other change types are ignored */
	deal_send(T_DEAL_MEMBERS, d.id, "2026-11-01T12:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"changeType\":\"MemberAdded\",\"agencyCompanyId\":\"%s\","
		"\"executorAgentUserId\":\"%s\"}", d.id, d.agency, h_uuid()));
	ck_assert_str_eq(h_sql_scalar("SELECT executor_agent_user_id::text FROM "
		"calendar.crm_deal_replicas WHERE deal_id = $1", d.id), nexec);
	/* new deadlines go to the new executor */
	booking = h_uuid();
	dl = reserve_open(&d, booking);
	ck_assert_str_eq(event_col(dl, "owner_user_id"), nexec);
	ck_assert_str_eq(event_col(dl, "tenant_id"), nagency);
}
END_TEST

START_TEST(deal_closed_cancels_open_deadlines)
{
	struct deal d = new_deal();
	char *b1 = h_uuid(), *b2 = h_uuid(), *e1, *e2, *e2b, *manual;
	const char *sc = "pin.calendar.event-status-changed.v1";

	e1 = reserve_open(&d, b1);
	e2 = reserve_open(&d, b2);
	booking_send(T_CONFIRMED, b2, confirmed_payload(b2, d.id, h_iso_in(86400 * 7)));
	e2b = link_event(b2, "Booking");
	manual = insert_event("Manual", &d);
	deal_send(T_DEAL_CLOSED, d.id, "2026-11-03T10:00:00Z",
		h_sprintf("{\"dealId\":\"%s\",\"outcome\":\"Lost\"}", d.id));
	ck_assert_str_eq(h_sql_scalar("SELECT is_terminal::text FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1", d.id), "true");
	ck_assert_str_eq(link_status(b1, "Reserve"), "Cancelled");
	ck_assert_str_eq(link_status(b2, "Reserve"), "Completed");
	ck_assert_str_eq(link_status(b2, "Booking"), "Cancelled");
	ck_assert_str_eq(event_col(e1, "status"), "Cancelled");
	ck_assert_str_eq(event_col(e1, "cancel_reason"), "Сделка закрыта");
	ck_assert_str_eq(event_col(e2, "status"), "Completed");
	ck_assert_str_eq(event_col(e2b, "status"), "Cancelled");
	ck_assert_int_eq(reminders(e1, "Pending"), 0);
	ck_assert_int_eq(reminders(e2b, "Pending"), 0);
	ck_assert_str_eq(event_col(manual, "status"), "Planned");
	ck_assert_int_eq(outbox_count(sc, e1), 1);
	ck_assert_str_eq(outbox_field(sc, e1, "cancelReason"), "Сделка закрыта");
	ck_assert_int_eq(outbox_count(sc, e2b), 1);
	/* the booking consumer's cancel afterwards is a no-op */
	booking_send(T_CANCELLED, b1, only_booking(b1));
	ck_assert_str_eq(event_col(e1, "cancel_reason"), "Сделка закрыта");
	ck_assert_int_eq(outbox_count(sc, e1), 1);
	/* a newer deal-created cannot reopen the deal */
	deal_send(T_DEAL_CREATED, d.id, "2026-11-04T10:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		d.id, d.agency, d.executor));
	ck_assert_str_eq(h_sql_scalar("SELECT is_terminal::text FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1", d.id), "true");
	/* closed twice: no-op */
	deal_send(T_DEAL_CLOSED, d.id, "2026-11-05T10:00:00Z",
		h_sprintf("{\"dealId\":\"%s\",\"outcome\":\"Lost\"}", d.id));
	ck_assert_int_eq(outbox_count(sc, e1), 1);
}
END_TEST

/* ------------------------------------------------------------------- DLQ */

static bool value_has(const struct h_kmsg *m, void *needle)
{
	return strstr(m->value, needle) != NULL;
}

START_TEST(invalid_payloads_to_dlq)
{
	char *booking = h_uuid(), *deal = h_uuid(), *m1 = h_new_mid(), *m2 = h_new_mid(),
		*m3 = h_new_mid();
	const char *code;

	/* booking-created without reserveExpiresAt */
	ck_assert_int_eq(h_kafka_produce(T_CREATED, booking, h_envelope(m1,
		"pin.crm.booking-created", "Booking", booking, h_iso_in(0), h_sprintf(
		"{\"bookingId\":\"%s\",\"dealId\":\"%s\",\"propertyObjectId\":\"%s\"}",
		booking, deal, h_uuid()))), 0);
	/* booking-paid with a bookingId that is no uuid */
	ck_assert_int_eq(h_kafka_produce(T_PAID, booking, h_envelope(m2,
		"pin.crm.booking-paid", "Booking", booking, h_iso_in(0),
		"{\"bookingId\":\"nope\"}")), 0);
	/* deal-created with an executor that is no uuid */
	ck_assert_int_eq(h_kafka_produce(T_DEAL_CREATED, deal, h_envelope(m3,
		"pin.crm.deal-created", "Deal", deal, h_iso_in(0), h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":42}",
		deal, h_uuid()))), 0);
	ck_assert_msg((code = h_kafka_error_code(BGROUP ".dlq", WAIT_MS, value_has, m1)) != NULL,
		"booking-created not in the DLQ");
	ck_assert_str_eq(code, "CAL_BOOKING_SYNC_INVALID_PAYLOAD");
	ck_assert_msg((code = h_kafka_error_code(BGROUP ".dlq", WAIT_MS, value_has, m2)) != NULL,
		"booking-paid not in the DLQ");
	ck_assert_str_eq(code, "CAL_BOOKING_SYNC_INVALID_PAYLOAD");
	ck_assert_msg((code = h_kafka_error_code(DGROUP ".dlq", WAIT_MS, value_has, m3)) != NULL,
		"deal-created not in the DLQ");
	ck_assert_str_eq(code, "CAL_DEAL_SYNC_INVALID_PAYLOAD");
	ck_assert_int_eq(inbox_count(BGROUP, m1), 0);
	ck_assert_ptr_null(link_status(booking, "Reserve"));
	ck_assert_ptr_null(h_sql_scalar("SELECT deal_id::text FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1", deal));
}
END_TEST

/* nil uuids (booking, deal ids) and instants outside the supported range
 * are invalid payloads: DLQ, nothing applied */
START_TEST(nil_ids_and_out_of_range_to_dlq)
{
	static const char *nil = "00000000-0000-0000-0000-000000000000";
	char *deal = h_uuid(), *booking = h_uuid(), *m[5];
	const char *code;
	int i;

	for (i = 0; i < 5; i++)
		m[i] = h_new_mid();
	ck_assert_int_eq(h_kafka_produce(T_PAID, nil, h_envelope(m[0],
		"pin.crm.booking-paid", "Booking", nil, h_iso_in(0),
		h_sprintf("{\"bookingId\":\"%s\"}", nil))), 0);
	ck_assert_int_eq(h_kafka_produce(T_CREATED, booking, h_envelope(m[1],
		"pin.crm.booking-created", "Booking", booking, h_iso_in(0),
		created_payload(booking, nil, h_iso_in(3600)))), 0);
	ck_assert_int_eq(h_kafka_produce(T_DEAL_CREATED, nil, h_envelope(m[2],
		"pin.crm.deal-created", "Deal", nil, h_iso_in(0), h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		nil, h_uuid(), h_uuid()))), 0);
	ck_assert_int_eq(h_kafka_produce(T_DEAL_CREATED, deal, h_envelope(m[3],
		"pin.crm.deal-created", "Deal", deal, h_iso_in(0), h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		deal, h_uuid(), nil))), 0);
	ck_assert_int_eq(h_kafka_produce(T_CONFIRMED, booking, h_envelope(m[4],
		"pin.crm.booking-confirmed", "Booking", booking, h_iso_in(0),
		confirmed_payload(booking, h_uuid(), "10000-01-01T00:30:00Z"))), 0);
	for (i = 0; i < 5; i++) {
		const char *g = i == 2 || i == 3 ? DGROUP ".dlq" : BGROUP ".dlq";

		ck_assert_msg((code = h_kafka_error_code(g, WAIT_MS, value_has, m[i])) != NULL,
			"message %d not in the DLQ", i);
		ck_assert_str_eq(code, i == 2 || i == 3 ? "CAL_DEAL_SYNC_INVALID_PAYLOAD" :
			"CAL_BOOKING_SYNC_INVALID_PAYLOAD");
	}
	ck_assert_ptr_null(link_status(booking, "Reserve"));
	ck_assert_ptr_null(link_status(booking, "Booking"));
	ck_assert_ptr_null(link_status(nil, "Reserve"));
	ck_assert_ptr_null(h_sql_scalar("SELECT deal_id::text FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1 OR deal_id = $2", deal, nil));
}
END_TEST

/* ------------------------------------------------- issue 12: items 4 and 5 */

/* An envelope of contract version v with a field this version does not know. */
static char *envelope_v(int v, const char *mid, const char *event_type,
		const char *agg_type, const char *agg_id, const char *created_at,
		const char *payload)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"%s\",\"contractVersion\":%d,"
		"\"createdAt\":\"%s\",\"aggregateType\":\"%s\",\"aggregateId\":\"%s\","
		"\"correlationId\":null,\"schemaHint\":\"v%d\",\"payload\":%s}", mid, event_type,
		v, created_at, agg_type, agg_id, v, payload);
}

static void send_v(int v, const char *group, const char *topic, const char *key,
		const char *agg_type, const char *created_at, const char *payload)
{
	char *mid = h_new_mid();

	ck_assert_int_eq(h_kafka_produce(topic, key, envelope_v(v, mid, event_type_of(topic),
		agg_type, key, created_at, payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(group, mid) == 1, WAIT_MS),
			"%s v%d %s not handled", topic, v, mid);
}

/* The host's contract-version warnings of a consumer group for version vs
 * ("contractVersion":"N"; consumer_msg.c checks every consumed envelope). */
static int version_warnings(const char *group, const char *vs)
{
	/* only that warning carries "contractVersion" (a fresh version) */
	return h_worker_log_lines(h_sprintf("\"group\":\"%s\"", group), vs);
}

/* Seed 004 (and events.md for the deal and identity groups): ContractVersion
 * != 1 -> warn-and-proceed.  Version-N messages with extra fields are applied
 * by every calendar consumer group; the host writes each group's warning once
 * per version (pin_consumer_contract_version_mismatch_total{group} counts
 * every message). */
START_TEST(contract_version_mismatch_applied)
{
	int v = 2 + (int)h_sql_int("SELECT (random() * 1000000000)::int");
	const char *vs = h_sprintf("\"contractVersion\":\"%d\"", v);
	struct deal d = { h_uuid(), h_uuid(), h_uuid() };
	char *b1 = h_uuid(), *b2 = h_uuid(), *user = h_uuid(), *exec2 = h_uuid();

	/* calendar-crm-deal-events */
	send_v(v, DGROUP, T_DEAL_CREATED, d.id, "Deal", "2026-11-01T10:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\","
		"\"stage\":\"New\"}", d.id, d.agency, d.executor));
	send_v(v, DGROUP, T_DEAL_MEMBERS, d.id, "Deal", "2026-11-01T11:00:00Z", h_sprintf(
		"{\"dealId\":\"%s\",\"changeType\":\"ExecutorChanged\",\"agencyCompanyId\":\"%s\","
		"\"executorAgentUserId\":\"%s\",\"previousExecutorAgentUserId\":\"%s\","
		"\"extra\":[1,2]}", d.id, d.agency, exec2, d.executor));
	ck_assert_str_eq(h_sql_scalar("SELECT executor_agent_user_id::text FROM "
		"calendar.crm_deal_replicas WHERE deal_id = $1", d.id), exec2);
	ck_assert_int_eq(version_warnings(DGROUP, vs), 1);

	/* calendar-crm-booking-events */
	send_v(v, BGROUP, T_CREATED, b1, "Booking", h_iso_in(0),
		created_payload(b1, d.id, h_iso_in(7200)));
	send_v(v, BGROUP, T_CREATED, b2, "Booking", h_iso_in(0),
		created_payload(b2, d.id, h_iso_in(7200)));
	ck_assert_str_eq(link_status(b1, "Reserve"), "Open");
	ck_assert_str_eq(link_status(b2, "Reserve"), "Open");
	ck_assert_int_eq(version_warnings(BGROUP, vs), 1);

	/* calendar-identity-users */
	send_v(v, "calendar-identity-users", "pin.identity.users.v1", user, "User",
		"2026-11-30T10:00:00Z", h_sprintf("{\"userId\":\"%s\",\"displayName\":\"V\","
		"\"avatarUrl\":null,\"email\":null,\"phone\":null,\"locale\":null,"
		"\"timeZone\":null,\"status\":\"Active\",\"nickname\":\"n\"}", user));
	send_v(v, "calendar-identity-users", "pin.identity.users.v1", user, "User",
		"2026-11-30T11:00:00Z", h_sprintf("{\"userId\":\"%s\",\"displayName\":\"V2\","
		"\"avatarUrl\":null,\"email\":null,\"phone\":null,\"locale\":null,"
		"\"timeZone\":null,\"status\":\"Active\",\"nickname\":\"n\"}", user));
	ck_assert_str_eq(h_sql_scalar("SELECT display_name FROM calendar.user_replicas "
		"WHERE user_id = $1", user), "V2");
	ck_assert_int_eq(version_warnings("calendar-identity-users", vs), 1);
}
END_TEST

/* A trigger that fails the link insert of booking with SQLSTATE sqlstate for
 * the first `times` attempts (counted by a sequence: not transactional, so
 * rolled-back attempts count too).  Returns the sequence name. */
static char *conflict_trigger(const char *booking, const char *sqlstate, int times)
{
	char *tag = h_sprintf("t%s", h_uuid());
	char *seq;

	for (char *p = tag; *p; p++)
		if (*p == '-')
			*p = '_';
	seq = h_sprintf("public.%s_seq", tag);
	h_sql(h_sprintf("CREATE SEQUENCE %s", seq));
	h_sql(h_sprintf("CREATE FUNCTION public.%s_fn() RETURNS trigger LANGUAGE plpgsql AS $f$ "
		"BEGIN IF NEW.booking_id::text = '%s' THEN IF nextval('%s') <= %d THEN "
		"RAISE EXCEPTION 'test: concurrent modification' USING ERRCODE = '%s'; "
		"END IF; END IF; RETURN NEW; END $f$", tag, booking, seq, times, sqlstate));
	h_sql(h_sprintf("CREATE TRIGGER %s BEFORE INSERT ON calendar.booking_deadline_links "
		"FOR EACH ROW EXECUTE FUNCTION public.%s_fn()", tag, tag));
	return tag;
}

static void conflict_trigger_drop(const char *tag)
{
	h_sql(h_sprintf("DROP TRIGGER %s ON calendar.booking_deadline_links", tag));
	h_sql(h_sprintf("DROP FUNCTION public.%s_fn()", tag));
	h_sql(h_sprintf("DROP SEQUENCE public.%s_seq", tag));
}

/* Seed 004 "Retry и DLQ": a concurrent modification is retried at once on
 * fresh state (a deadlock twice, then the work succeeds; no backoff, no
 * DLQ); a persisting one (serialization failure) is retried 3 times, then
 * the message goes to the DLQ with CAL_BOOKING_SYNC_CONCURRENT_MODIFICATION. */
START_TEST(concurrent_modification_retried_then_dlq)
{
	struct deal d = new_deal();
	char *b1 = h_uuid(), *b2 = h_uuid(), *tag, *mid;
	const char *code;
	int64_t t0;

	tag = conflict_trigger(b1, "40P01", 2);
	t0 = h_now_ms();
	mid = booking_send(T_CREATED, b1, created_payload(b1, d.id, h_iso_in(7200)));
	ck_assert_str_eq(link_status(b1, "Reserve"), "Open");
	ck_assert_int_eq(h_sql_int(h_sprintf("SELECT last_value FROM public.%s_seq", tag)), 3);
	ck_assert_int_eq(h_worker_log_lines(mid, "crm booking sync: concurrent modification"), 2);
	/* immediate: the host's backoff (1 s, 2 s, ...) was not involved */
	ck_assert_int_eq(h_worker_log_lines(mid, "\"code\":\"CAL_BOOKING_SYNC_DB_ERROR\""), 0);
	ck_assert_msg(h_now_ms() - t0 < 30000, "too slow for immediate retries");
	conflict_trigger_drop(tag);

	tag = conflict_trigger(b2, "40001", 1000);
	mid = h_new_mid();
	ck_assert_int_eq(h_kafka_produce(T_CREATED, b2, h_envelope(mid, "pin.crm.booking-created",
		"Booking", b2, h_iso_in(0), created_payload(b2, d.id, h_iso_in(7200)))), 0);
	ck_assert_msg((code = h_kafka_error_code(BGROUP ".dlq", WAIT_MS, value_has, mid)) != NULL,
		"not in the DLQ");
	ck_assert_str_eq(code, "CAL_BOOKING_SYNC_CONCURRENT_MODIFICATION");
	ck_assert_int_eq(h_sql_int(h_sprintf("SELECT last_value FROM public.%s_seq", tag)), 4);
	ck_assert_int_eq(h_worker_log_lines(mid, "crm booking sync: concurrent modification, to DLQ"), 1);
	ck_assert_ptr_null(link_status(b2, "Reserve"));
	conflict_trigger_drop(tag);
}
END_TEST

/* Seed 004: a missing deal replica keeps its deadline (the dev stack sets
 * crm_booking.replica_retry_deadline_s = 30), then the message goes to the
 * DLQ with CAL_BOOKING_SYNC_DEAL_REPLICA_NOT_FOUND -- through the consumer's
 * own counted route (its log line), not only the host's safety net. */
START_TEST(replica_deadline_to_dlq_counted)
{
	char *booking = h_uuid(), *deal = h_uuid(), *mid = h_new_mid();
	const char *code;
	int64_t t0 = h_now_ms();

	ck_assert_int_eq(h_kafka_produce(T_CREATED, booking, h_envelope(mid,
		"pin.crm.booking-created", "Booking", booking, h_iso_in(0),
		created_payload(booking, deal, h_iso_in(7200)))), 0);
	ck_assert_msg((code = h_kafka_error_code(BGROUP ".dlq", 150000, value_has, mid)) != NULL,
		"not in the DLQ");
	ck_assert_str_eq(code, "CAL_BOOKING_SYNC_DEAL_REPLICA_NOT_FOUND");
	ck_assert_msg(h_now_ms() - t0 >= 29000, "DLQ before the deadline");
	ck_assert_int_eq(h_worker_log_lines(mid, "crm booking sync: replica deadline passed, to DLQ"), 1);
	ck_assert_int_eq(inbox_count(BGROUP, mid), 0);
}
END_TEST

/* ------------------------------------------------------- [crm] set batches */

/* the columns of a booking's Reserve event that do not name the booking:
 * equal for two bookings of one deal with the same deadline */
static char *event_shape(const char *booking)
{
	return h_sql_scalar("SELECT row(e.tenant_id, e.owner_user_id, e.kind, e.origin, "
		"e.status, e.priority, e.title, e.description, e.location, e.start_at, e.end_at, "
		"e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.project_id, "
		"e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason, e.version, "
		"e.created_by_user_id, e.created_at = e.updated_at, "
		"(SELECT string_agg(r.offset_minutes || ':' || r.status || ':' || "
		"  (e.start_at - r.due_at) || ':' || (r.created_at = e.created_at), ',') "
		"  FROM calendar.event_reminders r WHERE r.calendar_event_id = e.id), "
		"(SELECT row(l.status, l.tenant_id, l.deal_id, l.last_event_at IS NOT NULL) "
		"  FROM calendar.booking_deadline_links l WHERE l.calendar_event_id = e.id))::text "
		"FROM calendar.calendar_events e WHERE e.booking_id = $1", booking);
}

/* the event-created envelope of a booking's event without its own ids and
 * instants (and the count of such rows, which must be 1) */
static char *created_envelope_shape(const char *booking)
{
	return h_sql_scalar("SELECT count(*) OVER () || ' ' || o.topic || ' ' || "
		"(o.key = e.id::text) || ' ' || (o.envelope ?& ARRAY['messageId', 'createdAt', "
		"'aggregateId', 'correlationId']) || ' ' || "
		"jsonb_set(o.envelope - 'messageId' - 'createdAt' - 'aggregateId' - 'correlationId', "
		"  '{payload}', (o.envelope->'payload') - 'eventId' - 'bookingId' - "
		"  'propertyObjectId')::text "
		"FROM calendar.outbox o JOIN calendar.calendar_events e ON o.key = e.id::text "
		"WHERE e.booking_id = $1 AND o.topic = 'pin.calendar.event-created.v1'", booking);
}

static char *created_env(const char *mid, const char *booking, const char *payload)
{
	return h_envelope(mid, "pin.crm.booking-created", "Booking", booking, h_iso_in(0),
			payload);
}

/* The set-based batch handler: one record batch of booking-created with two
 * new bookings, a booking twice, a bad payload, a deadline already past and
 * a booking whose Reserve phase was closed by booking-paid (two paid
 * messages: one batch, handled in place); the effects equal the per-message
 * path's (a single message takes it); the same envelopes again change
 * nothing. */
START_TEST(created_batch_set_based)
{
	struct deal d = new_deal();
	char *at = h_iso_in(7200), *ref = h_uuid(), *b1 = h_uuid(), *b2 = h_uuid(),
		*b3 = h_uuid(), *b4 = h_uuid(), *b5 = h_uuid(), *b6 = h_uuid();
	char *m[7], *p[2];
	const char *batch[7], *pb[2], *code;
	char *ref_shape, *ref_env;

	for (int i = 0; i < 7; i++)
		m[i] = h_new_mid();
	/* the per-message path's effects (a lone message) */
	booking_send(T_CREATED, ref, created_payload(ref, d.id, at));
	ref_shape = event_shape(ref);
	ref_env = created_envelope_shape(ref);
	ck_assert_ptr_nonnull(ref_shape);
	ck_assert_ptr_nonnull(ref_env);

	/* two booking-paid before created, one record batch: Reserve tombstones */
	p[0] = h_new_mid();
	p[1] = h_new_mid();
	pb[0] = h_envelope(p[0], "pin.crm.booking-paid", "Booking", b4, h_iso_in(0),
		only_booking(b4));
	pb[1] = h_envelope(p[1], "pin.crm.booking-paid", "Booking", b5, h_iso_in(0),
		only_booking(b5));
	ck_assert_int_eq(h_kafka_produce_batch(T_PAID, b4, pb, 2), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(BGROUP, p[1]) == 1, WAIT_MS), "paid not handled");
	ck_assert_int_eq(inbox_count(BGROUP, p[0]), 1);
	ck_assert_str_eq(link_status(b4, "Reserve"), "Cancelled");
	ck_assert_str_eq(link_status(b5, "Reserve"), "Cancelled");
	/* in place, not given back (the per-message path logs "consumed" again) */
	ck_assert_int_eq(h_worker_log_lines("\"msg\":\"crm booking sync: consumed\"", p[0]), 1);

	batch[0] = created_env(m[0], b1, created_payload(b1, d.id, at));
	batch[1] = created_env(m[1], b2, created_payload(b2, d.id, at));
	batch[2] = created_env(m[2], b1, created_payload(b1, d.id, at));  /* b1 again */
	batch[3] = created_env(m[3], b1, "{\"bookingId\":\"nope\"}");
	batch[4] = created_env(m[4], b3, created_payload(b3, d.id, h_iso_in(-60)));
	batch[5] = created_env(m[5], b4, created_payload(b4, d.id, at));
	ck_assert_int_eq(h_kafka_produce_batch(T_CREATED, b1, batch, 6), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(BGROUP, m[5]) == 1, WAIT_MS),
		"the batch was not applied");
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(inbox_count(BGROUP, m[i]), i == 3 ? 0 : 1);
	ck_assert_msg((code = h_kafka_error_code(BGROUP ".dlq", WAIT_MS, value_has, m[3])) != NULL,
		"the bad payload is not in the DLQ");
	ck_assert_str_eq(code, "CAL_BOOKING_SYNC_INVALID_PAYLOAD");
	/* one transaction, and the set path: one `now` for both events (the
	 * per-message path takes the clock per message) */
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT processed_at) FROM calendar.inbox "
		"WHERE consumer_group = $1 AND message_id IN ($2::uuid, $3::uuid, $4::uuid, "
		"$5::uuid, $6::uuid)", BGROUP, m[0], m[1], m[2], m[4], m[5]), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT created_at) FROM "
		"calendar.calendar_events WHERE booking_id IN ($1::uuid, $2::uuid)", b1, b2), 1);
	ck_assert_int_eq(h_worker_log_lines("crm booking sync: deadlines created (batch)",
		h_sprintf("\"firstMessageId\":\"%s\"", m[0])), 1);
	ck_assert_int_eq(h_worker_log_lines("\"msg\":\"crm booking sync: consumed\"", m[0]), 0);
	/* the same effects as the per-message path */
	ck_assert_str_eq(event_shape(b1), ref_shape);
	ck_assert_str_eq(event_shape(b2), ref_shape);
	ck_assert_str_eq(created_envelope_shape(b1), ref_env);
	ck_assert_str_eq(created_envelope_shape(b2), ref_env);
	ck_assert_str_eq(link_status(b1, "Reserve"), "Open");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id = $1", b1), 1);
	/* a deadline already past: tombstone with the tenant, no event */
	ck_assert_str_eq(link_status(b3, "Reserve"), "Cancelled");
	ck_assert_ptr_null(link_event(b3, "Reserve"));
	ck_assert_str_eq(h_sql_scalar("SELECT tenant_id::text FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1 AND phase = 'Reserve'", b3), d.agency);
	/* paid before created: no Reserve deadline */
	ck_assert_str_eq(link_status(b4, "Reserve"), "Cancelled");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id IN ($1::uuid, $2::uuid, $3::uuid)", b3, b4, b5), 0);

	/* the same envelopes again, a new booking behind them: no new effect */
	batch[6] = created_env(m[6], b6, created_payload(b6, d.id, at));
	ck_assert_int_eq(h_kafka_produce_batch(T_CREATED, b1, batch, 7), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox_count(BGROUP, m[6]) == 1, WAIT_MS),
		"the message behind the redelivered batch was not applied");
	ck_assert_str_eq(event_shape(b6), ref_shape);
	ck_assert_str_eq(created_envelope_shape(b1), ref_env);     /* still one row */
	ck_assert_str_eq(created_envelope_shape(b2), ref_env);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
		"WHERE booking_id IN ($1::uuid, $2::uuid, $3::uuid, $4::uuid)", b1, b2, b3, b4), 2);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.booking_deadline_links "
		"WHERE booking_id IN ($1::uuid, $2::uuid, $3::uuid, $4::uuid)", b1, b2, b3, b4), 4);
	ck_assert_int_eq(inbox_count(BGROUP, m[0]), 1);
	ck_assert_int_eq(inbox_count(BGROUP, m[3]), 0);
}
END_TEST

Suite *make_crm_suite(void)
{
	Suite *s = suite_create("crm");
	TCase *tc;

	tc = h_tcase("booking", 300);
	tcase_add_test(tc, ac1_reserve_deadline_created);
	tcase_add_test(tc, ac9_redelivery_and_replay);
	tcase_add_test(tc, ac2_ac4_confirmed_then_extended);
	tcase_add_test(tc, ac3_paid_completes_reserve);
	tcase_add_test(tc, ac5_expired_reserve_cancels_and_tombstones);
	tcase_add_test(tc, ac5_cancelled_and_expired_booking_phase);
	tcase_add_test(tc, ac6_cancelled_before_created);
	tcase_add_test(tc, created_deadline_in_past);
	tcase_add_test(tc, paid_then_created_no_reserve_deadline);
	tcase_add_test(tc, confirmed_then_created_only_booking_deadline);
	tcase_add_test(tc, ac7_booking_before_deal_created);
	tcase_add_test(tc, ac8_terminal_deal);
	suite_add_tcase(s, tc);

	tc = h_tcase("deal", 300);
	tcase_add_test(tc, deal_executor_changed_moves_open_events);
	tcase_add_test(tc, deal_closed_cancels_open_deadlines);
	suite_add_tcase(s, tc);

	tc = h_tcase("dlq", 300);
	tcase_add_test(tc, invalid_payloads_to_dlq);
	tcase_add_test(tc, nil_ids_and_out_of_range_to_dlq);
	suite_add_tcase(s, tc);

	tc = h_tcase("issue12", 300);
	tcase_add_test(tc, contract_version_mismatch_applied);
	tcase_add_test(tc, concurrent_modification_retried_then_dlq);
	tcase_add_test(tc, replica_deadline_to_dlq_counted);
	suite_add_tcase(s, tc);

	tc = h_tcase("batch", 300);
	tcase_add_test(tc, created_batch_set_based);
	suite_add_tcase(s, tc);
	return s;
}
