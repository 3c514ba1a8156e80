/*
 * test_notify.c -- notify.so (notifications.md, seed 001): the consumer
 * groups notifications-calendar-events and notifications-identity-users
 * through the dev broker, and the /api/v1/me notification routes.
 *
 * Messages are produced exactly like the calendar outbox relay writes them
 * (events.md envelope, key = EventId / AppointmentId); one end-to-end case
 * goes through the calendar API and the worker's relay.  Every wait polls
 * the database (the consumer's inbox row, then the notifications).  Each test
 * uses fresh user ids, so tests never see each other's rows.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* the envelope of a fixed createdAt */
#define ENV_FIXED(mid, et, at, aid, pl) h_envelope(mid, et, at, aid, "2026-12-01T09:00:00.123Z", pl)

#define GROUP "notifications-calendar-events"
#define WAIT_MS 60000
/* a fixed future instant: 12:00 in Moscow (UTC+3), rendered by PostgreSQL */
#define START "2030-06-01T09:00:00Z"
#define END "2030-06-01T10:00:00Z"
#define START_RU "01.06.2030 12:00"
#define START_EN "Jun 1, 2030 12:00 PM"

static bool processed(const char *mid)
{
	return h_sql_int("SELECT count(*) FROM notifications.processed_messages "
		"WHERE consumer_group = '" GROUP "' AND message_id = $1::uuid", mid) == 1;
}

/* Produces topic pin.calendar.<name>.v1 with key and waits for the inbox row. */
static char *send_as(const char *mid, const char *name, const char *key,
		const char *agg_type, const char *payload)
{
	char *topic = h_sprintf("pin.calendar.%s.v1", name);

	ck_assert_int_eq(h_kafka_produce(topic, key, ENV_FIXED(mid, h_sprintf(
		"pin.calendar.%s", name), agg_type, key, payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(processed(mid), WAIT_MS), "%s %s not consumed", name, mid);
	return (char *)mid;
}

static char *ntf_send(const char *name, const char *key, const char *agg_type,
		const char *payload)
{
	return send_as(h_new_mid(), name, key, agg_type, payload);
}

static long long count_for(const char *user)
{
	return h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid", user);
}

/* Channels of user's notifications, sorted, comma separated ("" when none). */
static const char *channels(const char *user, const char *kind)
{
	char *s = h_sql_scalar("SELECT coalesce(string_agg(channel, ',' ORDER BY channel), '') "
		"FROM notifications.notifications WHERE recipient_user_id = $1::uuid "
		"AND kind = $2", user, kind);

	return s ? s : "";
}

static const char *col(const char *user, const char *channel, const char *column)
{
	return h_sql_scalar(h_sprintf("SELECT %s::text FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = $2", column), user, channel);
}

/* ---- payloads (events.md, camelCase, optional fields present as null) ---- */

static char *apt_created(const char *apt, const char *tenant, const char *agent,
		const char *investor, const char *status, const char *from_apt)
{
	return h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"slotId\":\"%s\","
		"\"eventId\":\"%s\",\"agentUserId\":\"%s\",\"investorUserId\":\"%s\","
		"\"kind\":\"Showing\",\"status\":\"%s\",\"autoConfirmed\":%s,"
		"\"startAt\":\"" START "\",\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\","
		"\"confirmDeadlineAt\":\"2030-05-31T09:00:00Z\",\"projectId\":null,"
		"\"propertyObjectId\":null,\"consultationRequestId\":null,"
		"\"rescheduledFromAppointmentId\":%s,\"comment\":\"internal note\"}",
		apt, tenant, h_uuid(), h_uuid(), agent, investor, status,
		strcmp(status, "Pending") ? "true" : "false",
		from_apt ? h_sprintf("\"%s\"", from_apt) : "null");
}

static char *apt_confirmed(const char *apt, const char *tenant, const char *agent,
		const char *investor)
{
	return h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"investorUserId\":\"%s\",\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\","
		"\"autoConfirmed\":false}", apt, tenant, h_uuid(), agent, investor);
}

static char *apt_cancelled(const char *apt, const char *tenant, const char *agent,
		const char *investor, const char *reason, const char *to_apt)
{
	return h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"investorUserId\":\"%s\",\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\","
		"\"reason\":\"%s\",\"cancelledBy\":\"%s\",\"cancelReason\":null,"
		"\"rescheduledToAppointmentId\":%s}", apt, tenant, h_uuid(), agent, investor,
		reason, agent, to_apt ? h_sprintf("\"%s\"", to_apt) : "null");
}

static char *apt_completed(const char *apt, const char *tenant, const char *agent,
		const char *investor)
{
	return h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"investorUserId\":\"%s\",\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"outcome\":\"Completed\"}",
		apt, tenant, h_uuid(), agent, investor);
}

static char *ev_created(const char *ev, const char *tenant, const char *owner,
		const char *kind, const char *origin, const char *client)
{
	int crm = !strcmp(origin, "CrmBooking");

	return h_sprintf("{\"eventId\":\"%s\",\"tenantId\":\"%s\",\"ownerUserId\":\"%s\","
		"\"kind\":\"%s\",\"origin\":\"%s\",\"status\":\"Planned\",\"priority\":\"Normal\","
		"\"startAt\":\"" START "\",\"endAt\":null,\"timeZone\":\"Europe/Moscow\","
		"\"clientUserId\":%s,\"leadId\":null,\"dealId\":%s,\"bookingId\":%s,"
		"\"projectId\":null,\"propertyObjectId\":null,\"appointmentId\":null,"
		"\"createdByUserId\":null}", ev, tenant, owner, kind, origin,
		client ? h_sprintf("\"%s\"", client) : "null",
		crm ? h_sprintf("\"%s\"", h_uuid()) : "null",
		crm ? h_sprintf("\"%s\"", h_uuid()) : "null");
}

static char *ev_status(const char *ev, const char *tenant, const char *owner,
		const char *origin, const char *client, const char *status)
{
	return h_sprintf("{\"eventId\":\"%s\",\"tenantId\":\"%s\",\"ownerUserId\":\"%s\","
		"\"kind\":\"%s\",\"origin\":\"%s\",\"clientUserId\":%s,"
		"\"previousStatus\":\"Planned\",\"status\":\"%s\","
		"\"cancelReason\":\"Клиент заболел\",\"startAt\":\"" START "\","
		"\"endAt\":null,\"timeZone\":\"Europe/Moscow\",\"dealId\":null,"
		"\"bookingId\":null,\"appointmentId\":null}", ev, tenant, owner,
		strcmp(origin, "CrmBooking") ? "Meeting" : "BookingDeadline", origin,
		client ? h_sprintf("\"%s\"", client) : "null", status);
}

static char *reminder(const char *rem, const char *ev, const char *tenant,
		const char *owner, const char *client, const char *apt, const char *start)
{
	return h_sprintf("{\"reminderId\":\"%s\",\"eventId\":\"%s\",\"tenantId\":\"%s\","
		"\"ownerUserId\":\"%s\",\"clientUserId\":%s,\"kind\":\"Showing\","
		"\"startAt\":\"%s\",\"timeZone\":\"Europe/Moscow\",\"offsetMinutes\":60,"
		"\"appointmentId\":%s}", rem, ev, tenant, owner,
		client ? h_sprintf("\"%s\"", client) : "null", start,
		apt ? h_sprintf("\"%s\"", apt) : "null");
}

/* pin.identity.users.v1 for user; waits until the contact replica has it. */
static void contact(const char *user, const char *name, const char *locale)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"%s\",\"avatarUrl\":null,"
		"\"email\":\"u@example.com\",\"phone\":\"+70000000000\",\"locale\":%s,"
		"\"timeZone\":\"Europe/Moscow\",\"status\":\"Active\"}}", h_new_mid(), user, user,
		name, locale ? h_sprintf("\"%s\"", locale) : "null")), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid", user) == 1,
		WAIT_MS), "contact not replicated");
}

static char *tok_of(const char *actor, const char *sub, const char *tenant)
{
	return h_token(actor, sub, tenant, "calendar.events.view");
}

static void put_settings(const char *user, const char *body)
{
	struct h_resp *r = h_request("PUT", "/api/v1/me/notification-settings",
			tok_of("investor", user, NULL), body);

	ck_assert_msg(r->status == 200, "settings: %ld %s", r->status, r->body);
}

/* "HH:MM" in Moscow, now + minutes (database clock = the hosts' clock). */
static const char *moscow_hhmm(int minutes)
{
	return h_sql_scalar(h_sprintf("SELECT to_char((now() + interval '%d minutes') "
		"AT TIME ZONE 'Europe/Moscow', 'HH24:MI')", minutes));
}

/* ------------------------------------------------------------------ tests */

/* Seed 001 AC: appointment-created (Pending) -> agent "new appointment,
 * confirm", investor "request created", InApp + Email, role texts, local
 * times from StartAt + TimeZone, names from the contact replica; redelivery
 * and a replay (inbox row gone) create nothing more (INV-NTF-1). */
START_TEST(appointment_created_fanout_and_redelivery)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	char *payload = apt_created(apt, tenant, agent, inv, "Pending", NULL);
	char *mid = h_new_mid(), *value;

	contact(agent, "Анна Агентова", NULL);
	contact(inv, "Иван Инвесторов", NULL);
	send_as(mid, "appointment-created", apt, "Appointment", payload);
	ck_assert_str_eq(channels(agent, "AppointmentCreated"), "Email,InApp");
	ck_assert_str_eq(channels(inv, "AppointmentCreated"), "Email,InApp");
	ck_assert_int_eq(count_for(agent), 2);
	ck_assert_int_eq(count_for(inv), 2);
	ck_assert_str_eq(col(agent, "InApp", "role"), "Agent.Pending");
	ck_assert_str_eq(col(inv, "InApp", "role"), "Investor");
	ck_assert_str_eq(col(agent, "InApp", "tenant_id"), tenant);
	ck_assert_ptr_null(col(inv, "InApp", "tenant_id"));
	ck_assert_str_eq(col(agent, "InApp", "status"), "Pending");
	ck_assert_str_eq(col(agent, "Email", "urgency"), "Normal");
	ck_assert_str_eq(col(agent, "InApp", "title"), "Новая запись на " START_RU);
	ck_assert_msg(strstr(col(agent, "InApp", "body"), "Иван Инвесторов") &&
		strstr(col(agent, "InApp", "body"), "31.05.2030 12:00") &&
		strstr(col(agent, "InApp", "body"), "Europe/Moscow"), "%s",
		col(agent, "InApp", "body"));
	ck_assert_msg(strstr(col(inv, "Email", "body"), "Анна Агентова") &&
		strstr(col(inv, "Email", "body"), START_RU), "%s", col(inv, "Email", "body"));
	/* payload: ids and times, no Comment */
	ck_assert_str_eq(col(inv, "InApp", "payload->>'appointmentId'"), apt);
	ck_assert_ptr_null(col(inv, "InApp", "payload->>'comment'"));
	ck_assert_ptr_null(strstr(col(inv, "InApp", "payload"), "internal note"));
	ck_assert_str_eq(col(inv, "InApp", "source_message_id"), mid);

	/* redelivery of the same message, then a later message of the same
	 * aggregate (same key, same partition): once it is in, the duplicate was
	 * handled before it */
	value = ENV_FIXED(mid, "pin.calendar.appointment-created", "Appointment", apt, payload);
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-created.v1", apt, value), 0);
	ntf_send("appointment-completed", apt, "Appointment",
			apt_completed(apt, tenant, agent, inv));
	ck_assert_int_eq(count_for(agent), 2);
	ck_assert_int_eq(count_for(inv), 2);

	/* replay after the inbox row is gone: INV-NTF-1 keeps one row each */
	h_sql("DELETE FROM notifications.processed_messages WHERE consumer_group = '"
		GROUP "' AND message_id = $1::uuid", mid);
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-created.v1", apt, value), 0);
	ck_assert_msg(H_WAIT_UNTIL(processed(mid), WAIT_MS), "replay not consumed");
	ck_assert_int_eq(count_for(agent), 2);
	ck_assert_int_eq(count_for(inv), 2);
}
END_TEST

/* Seed 001 AC: auto-confirm -> agent once (Agent.Confirmed), investor gets
 * AppointmentCreated and AppointmentConfirmed; en locale from settings. */
START_TEST(auto_confirm_and_english_locale)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();

	put_settings(inv, "{\"locale\":\"en\"}");
	ntf_send("appointment-confirmed", apt, "Appointment",
			apt_confirmed(apt, tenant, agent, inv));
	ntf_send("appointment-created", apt, "Appointment",
			apt_created(apt, tenant, agent, inv, "Confirmed", NULL));
	ck_assert_int_eq(count_for(agent), 2);
	ck_assert_str_eq(col(agent, "InApp", "role"), "Agent.Confirmed");
	ck_assert_str_eq(channels(inv, "AppointmentConfirmed"), "Email,InApp");
	ck_assert_str_eq(channels(inv, "AppointmentCreated"), "Email,InApp");
	ck_assert_str_eq(h_sql_scalar("SELECT title FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentConfirmed' "
		"AND channel = 'InApp'", inv), "Meeting confirmed");
	ck_assert_str_eq(h_sql_scalar("SELECT locale FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentConfirmed' "
		"AND channel = 'InApp'", inv), "en");
	ck_assert_msg(strstr(h_sql_scalar("SELECT body FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = 'AppointmentConfirmed' "
		"AND channel = 'Email'", inv), START_EN), "en time format");
	/* a rescheduled appointment speaks of the move, not of a new request */
	{
		const char *apt2 = h_uuid(), *inv2 = h_uuid();

		ntf_send("appointment-created", apt2, "Appointment",
			apt_created(apt2, tenant, agent, inv2, "Pending", apt));
		ck_assert_str_eq(col(inv2, "InApp", "role"), "Investor.Rescheduled");
		ck_assert_str_eq(h_sql_scalar("SELECT role FROM notifications.notifications "
			"WHERE recipient_user_id = $1::uuid AND subject_id = $2::uuid "
			"AND channel = 'InApp'", agent, apt2), "Agent.RescheduledPending");
	}
}
END_TEST

/* Seed 001 AC: cancellation by reason; Expired -> both with their texts;
 * reschedule (RescheduledToAppointmentId) -> nothing; a confirmation after
 * the cancellation is skipped (after-final guard). */
START_TEST(appointment_cancelled_mapping)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid();
	const char *a1 = h_uuid(), *a2 = h_uuid(), *a3 = h_uuid(), *a4 = h_uuid();

	ntf_send("appointment-cancelled", a1, "Appointment",
		apt_cancelled(a1, tenant, agent, inv, "CancelledByInvestor", NULL));
	ck_assert_str_eq(channels(agent, "AppointmentCancelled"), "Email,InApp");
	ck_assert_int_eq(count_for(inv), 0);
	ck_assert_str_eq(col(agent, "InApp", "role"), "Agent.CancelledByInvestor");

	ntf_send("appointment-cancelled", a2, "Appointment",
		apt_cancelled(a2, tenant, agent, inv, "Expired", NULL));
	ck_assert_str_eq(h_sql_scalar("SELECT string_agg(role, ',' ORDER BY role) "
		"FROM notifications.notifications WHERE subject_id = $1::uuid "
		"AND channel = 'InApp'", a2), "Agent.Expired,Investor.Expired");
	ck_assert_str_eq(h_sql_scalar("SELECT title FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND recipient_user_id = $2::uuid "
		"AND channel = 'InApp'", a2, inv), "Агент не подтвердил запись");

	ntf_send("appointment-cancelled", a3, "Appointment",
		apt_cancelled(a3, tenant, agent, inv, "DeclinedByAgent", h_uuid()));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE subject_id = $1::uuid", a3), 0);

	ntf_send("appointment-cancelled", a4, "Appointment",
		apt_cancelled(a4, tenant, agent, inv, "DeclinedByAgent", NULL));
	ntf_send("appointment-confirmed", a4, "Appointment",
		apt_confirmed(a4, tenant, agent, inv));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND kind = 'AppointmentConfirmed'", a4), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND kind = 'AppointmentCancelled'", a4), 2);

	/* unknown reason: warning, nothing built, no DLQ (inbox row written) */
	ntf_send("appointment-cancelled", a4, "Appointment",
		apt_cancelled(h_uuid(), tenant, agent, inv, "EatenByDragon", NULL));
	ck_assert_int_eq(count_for(inv), 4);
}
END_TEST

/* Seed 001 AC: event-* filtered by Origin; CrmBooking deadline -> owner
 * CalendarReminder; Manual cancel with client -> client, with the reason;
 * owner change -> new and previous owner; unknown Origin -> nothing. */
START_TEST(event_family_mapping)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid(), *prev = h_uuid();
	const char *e1 = h_uuid(), *e2 = h_uuid(), *e3 = h_uuid(), *e4 = h_uuid(),
		*e5 = h_uuid(), *e6 = h_uuid();

	ntf_send("event-created", e1, "CalendarEvent",
		ev_created(e1, tenant, owner, "Meeting", "Manual", client));
	ntf_send("event-created", e2, "CalendarEvent",
		ev_created(e2, tenant, owner, "Showing", "Appointment", client));
	ntf_send("event-created", e3, "CalendarEvent",
		ev_created(e3, tenant, owner, "Meeting", "Martian", client));
	ck_assert_int_eq(count_for(owner), 0);
	ck_assert_int_eq(count_for(client), 0);

	ntf_send("event-created", e4, "CalendarEvent",
		ev_created(e4, tenant, owner, "BookingDeadline", "CrmBooking", NULL));
	ck_assert_str_eq(channels(owner, "CalendarReminder"), "Email,InApp");
	ck_assert_str_eq(col(owner, "InApp", "title"), "Дедлайн брони добавлен в календарь");
	ck_assert_msg(strstr(col(owner, "InApp", "body"), START_RU), "deadline in Moscow time");
	ck_assert_str_eq(col(owner, "InApp", "urgency"), "Normal");

	ntf_send("event-status-changed", e5, "CalendarEvent",
		ev_status(e5, tenant, owner, "Manual", client, "Cancelled"));
	ck_assert_str_eq(channels(client, "AppointmentCancelled"), "Email,InApp");
	ck_assert_msg(strstr(col(client, "InApp", "body"), "Клиент заболел") &&
		strstr(col(client, "InApp", "body"), START_RU), "%s", col(client, "InApp", "body"));
	ck_assert_ptr_null(strstr(col(client, "InApp", "payload"), "заболел"));
	/* Completed, and Cancelled without a client: no-op */
	ntf_send("event-status-changed", e5, "CalendarEvent",
		ev_status(e5, tenant, owner, "Manual", NULL, "Completed"));
	ntf_send("event-status-changed", e1, "CalendarEvent",
		ev_status(e1, tenant, owner, "Manual", NULL, "Cancelled"));
	ck_assert_int_eq(count_for(owner), 2);

	ck_assert_int_eq(h_kafka_produce("pin.calendar.event-owner-changed.v1", e6, ENV_FIXED(
		h_new_mid(), "pin.calendar.event-owner-changed", "CalendarEvent", e6, h_sprintf(
		"{\"eventId\":\"%s\",\"tenantId\":\"%s\",\"previousTenantId\":\"%s\","
		"\"ownerUserId\":\"%s\",\"previousOwnerUserId\":\"%s\",\"kind\":\"BookingDeadline\","
		"\"origin\":\"CrmBooking\",\"startAt\":\"" START "\",\"endAt\":null,"
		"\"timeZone\":\"Europe/Moscow\",\"dealId\":\"%s\",\"bookingId\":null,"
		"\"reason\":\"ExecutorChanged\"}", e6, tenant, tenant, owner, prev, h_uuid()))), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE subject_id = $1::uuid", e6) == 4, WAIT_MS), "owner change not notified");
	ck_assert_str_eq(h_sql_scalar("SELECT role FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND recipient_user_id = $2::uuid AND channel = 'InApp'",
		e6, prev), "PreviousOwner");
	ck_assert_str_eq(h_sql_scalar("SELECT kind FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND recipient_user_id = $2::uuid AND channel = 'InApp'",
		e6, owner), "CalendarEventOwnerChanged");
}
END_TEST

/* Seed 001 AC: reminder-due with AppointmentId -> AppointmentReminder to owner
 * and client, Critical, InApp + Email + Sms, no deferral in quiet hours; a
 * second reminder-due of the same reminder row adds nothing (ReminderId);
 * stale reminder -> nothing, acknowledged, no DLQ. */
START_TEST(reminders_critical_quiet_hours_and_stale)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *ev = h_uuid(), *apt = h_uuid(), *rem = h_uuid();

	put_settings(client, h_sprintf("{\"quietHours\":{\"from\":\"%s\",\"to\":\"%s\"}}",
		moscow_hhmm(-60), moscow_hhmm(60)));
	ntf_send("reminder-due", ev, "CalendarEvent",
		reminder(rem, ev, tenant, owner, client, apt, START));
	ck_assert_str_eq(channels(owner, "AppointmentReminder"), "Email,InApp,Sms");
	ck_assert_str_eq(channels(client, "AppointmentReminder"), "Email,InApp,Sms");
	ck_assert_str_eq(col(client, "Sms", "urgency"), "Critical");
	ck_assert_ptr_null(col(client, "Sms", "not_before"));
	ck_assert_str_eq(col(client, "Sms", "reminder_id"), rem);
	ck_assert_msg(strstr(col(owner, "Sms", "body"), "1 ч"), "%s", col(owner, "Sms", "body"));
	/* the same reminder row published again (another message id) */
	ntf_send("reminder-due", ev, "CalendarEvent",
		reminder(rem, ev, tenant, owner, client, apt, START));
	ck_assert_int_eq(count_for(owner), 3);
	ck_assert_int_eq(count_for(client), 3);

	/* calendar reminder (no appointment): CalendarReminder, no Sms by default */
	{
		const char *ev2 = h_uuid(), *owner2 = h_uuid();

		ntf_send("reminder-due", ev2, "CalendarEvent",
			reminder(h_uuid(), ev2, tenant, owner2, NULL, NULL, START));
		ck_assert_str_eq(channels(owner2, "CalendarReminder"), "Email,InApp");
		ck_assert_str_eq(col(owner2, "InApp", "urgency"), "Critical");
	}
	/* stale: StartAt in the past */
	{
		const char *ev3 = h_uuid(), *owner3 = h_uuid();

		ntf_send("reminder-due", ev3, "CalendarEvent", reminder(h_uuid(), ev3, tenant,
			owner3, NULL, NULL, "2020-01-01T09:00:00Z"));
		ck_assert_int_eq(count_for(owner3), 0);
	}
}
END_TEST


/* INV-NTF-4 quiet hours (Normal Sms deferred to the window's end, InApp and
 * Email not), INV-UNS-4 GlobalMute (Normal -> InApp only; Critical bypass),
 * INV-UNS-3 / INV-NTF-3 overrides (opt-in, and opt-out even for Critical). */
START_TEST(settings_quiet_mute_overrides)
{
	const char *tenant = h_uuid(), *agent = h_uuid();
	const char *quiet = h_uuid(), *muted = h_uuid(), *optout = h_uuid();
	const char *to = moscow_hhmm(60);
	const char *a1 = h_uuid(), *a2 = h_uuid(), *ev = h_uuid();

	put_settings(quiet, h_sprintf("{\"quietHours\":{\"from\":\"%s\",\"to\":\"%s\"},"
		"\"overrides\":{\"AppointmentCreated\":{\"Sms\":true}}}", moscow_hhmm(-60), to));
	ntf_send("appointment-created", a1, "Appointment",
		apt_created(a1, tenant, agent, quiet, "Pending", NULL));
	ck_assert_str_eq(channels(quiet, "AppointmentCreated"), "Email,InApp,Sms");
	ck_assert_ptr_null(col(quiet, "InApp", "not_before"));
	ck_assert_ptr_null(col(quiet, "Email", "not_before"));
	ck_assert_ptr_nonnull(col(quiet, "Sms", "not_before"));
	/* NotBefore = the window's end: "to" local, within the next hour or so */
	ck_assert_str_eq(h_sql_scalar("SELECT to_char(not_before AT TIME ZONE 'Europe/Moscow', "
		"'HH24:MI') FROM notifications.notifications WHERE recipient_user_id = $1::uuid "
		"AND channel = 'Sms'", quiet), to);
	ck_assert_str_eq(h_sql_scalar("SELECT (not_before > created_at AND "
		"not_before <= created_at + interval '62 minutes')::text "
		"FROM notifications.notifications WHERE recipient_user_id = $1::uuid "
		"AND channel = 'Sms'", quiet), "true");

	put_settings(muted, "{\"globalMute\":true}");
	ntf_send("appointment-created", a2, "Appointment",
		apt_created(a2, tenant, agent, muted, "Pending", NULL));
	ck_assert_str_eq(channels(muted, "AppointmentCreated"), "InApp");
	ntf_send("reminder-due", ev, "CalendarEvent",
		reminder(h_uuid(), ev, tenant, agent, muted, h_uuid(), START));
	ck_assert_str_eq(channels(muted, "AppointmentReminder"), "Email,InApp,Sms");

	put_settings(optout, "{\"overrides\":{\"AppointmentReminder\":"
		"{\"Sms\":false,\"Email\":false}}}");
	ntf_send("reminder-due", ev, "CalendarEvent",
		reminder(h_uuid(), ev, tenant, agent, optout, h_uuid(), START));
	ck_assert_str_eq(channels(optout, "AppointmentReminder"), "InApp");
}
END_TEST

static bool key_is(const struct h_kmsg *m, void *ud)
{
	return m->key && !strcmp(m->key, (const char *)ud);
}

/* The rows of source message mid without their ids: recipient role,
 * channel, kind, urgency, tenant, locale, not_before, title, body and the
 * payload without its own ids, ordered (compares a set batch with the
 * per-message path). */
/* (a manage link's token is its own per message and appointment, issue 32:
 * compared as /manage/<token>) */
static const char *rows_of(const char *mid)
{
	const char *s = h_sql_scalar("SELECT coalesce(string_agg(concat_ws('|', role, "
		"channel, kind, urgency, tenant_id IS NOT NULL, locale, coalesce(not_before::text, "
		"'-'), title, regexp_replace(body, '/manage/[A-Za-z0-9_-]+', '/manage/<token>', "
		"'g'), (payload - 'reminderId' - 'eventId' - 'appointmentId' "
		"- 'tenantId')::text, status), ';' ORDER BY role, channel), '') "
		"FROM notifications.notifications WHERE source_message_id = $1::uuid", mid);

	return s ? s : "";
}

/* [fanout] reminder-due messages of several keys in ONE record
 * batch take the set path (pin_consumer.batch_fn: runs of distinct keys,
 * a fixed number of statements per run): after-final guard, stale guard,
 * a FATAL payload (DLQ, no inbox row), the ReminderId key across runs (the
 * same reminder again, same key: a new run, nothing more), names, locale
 * and settings as the per-message path gives them for the same message
 * alone; one transaction; the same batch again adds nothing. */
START_TEST(reminder_batch_set_based)
{
	const char *tenant = h_uuid(), *topic = "pin.calendar.reminder-due.v1";
	const char *o_ref = h_uuid(), *c_ref = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *apt_done = h_uuid(), *o_fin = h_uuid(), *o_stale = h_uuid();
	const char *ev[6], *mid[6], *keys[7], *vals[7], *ref, *rem2 = h_uuid(), *got;
	const char *quiet = h_sprintf("{\"quietHours\":{\"from\":\"%s\",\"to\":\"%s\"}}",
		moscow_hhmm(-60), moscow_hhmm(60));
	double fb0;
	struct h_host w;

	h_host_stack_worker(&w);
	for (int i = 0; i < 6; i++) {
		ev[i] = h_uuid();
		mid[i] = h_new_mid();
	}
	contact(o_ref, "Анна Владелец", NULL);
	contact(owner, "Анна Владелец", NULL);
	contact(c_ref, "Bob Client", "en");
	contact(client, "Bob Client", "en");
	put_settings(c_ref, quiet);
	put_settings(client, quiet);
	/* the reference: the same reminder alone (per-message path) */
	ref = ntf_send("reminder-due", ev[0], "CalendarEvent",
		reminder(h_uuid(), ev[0], tenant, o_ref, c_ref, h_uuid(), START));
	ck_assert_int_eq(count_for(o_ref), 3);
	/* a final appointment: its reminder in the batch builds nothing */
	ntf_send("appointment-cancelled", apt_done, "Appointment", apt_cancelled(apt_done,
		tenant, o_fin, h_uuid(), "CancelledByAgent", NULL));

	fb0 = h_host_metric(&w, "pin_consumer_batch_fallbacks_total{group=\"" GROUP "\"}");
	keys[0] = ev[1];        /* after final */
	vals[0] = ENV_FIXED(mid[0], "pin.calendar.reminder-due", "CalendarEvent", ev[1],
		reminder(h_uuid(), ev[1], tenant, o_fin, NULL, apt_done, START));
	keys[1] = ev[2];        /* the reference's twin */
	vals[1] = ENV_FIXED(mid[1], "pin.calendar.reminder-due", "CalendarEvent", ev[2],
		reminder(rem2, ev[2], tenant, owner, client, h_uuid(), START));
	keys[2] = ev[3];        /* same users, another event: same run */
	vals[2] = ENV_FIXED(mid[2], "pin.calendar.reminder-due", "CalendarEvent", ev[3],
		reminder(h_uuid(), ev[3], tenant, owner, client, h_uuid(), START));
	keys[3] = ev[4];        /* invalid: offsetMinutes missing */
	vals[3] = ENV_FIXED(mid[3], "pin.calendar.reminder-due", "CalendarEvent", ev[4],
		h_sprintf("{\"reminderId\":\"%s\",\"eventId\":\"%s\",\"tenantId\":\"%s\","
		"\"ownerUserId\":\"%s\",\"clientUserId\":null,\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"timeZone\":\"Europe/Moscow\",\"appointmentId\":null}",
		h_uuid(), ev[4], tenant, owner));
	keys[4] = ev[5];        /* stale */
	vals[4] = ENV_FIXED(mid[4], "pin.calendar.reminder-due", "CalendarEvent", ev[5],
		reminder(h_uuid(), ev[5], tenant, o_stale, NULL, NULL, "2020-01-01T09:00:00Z"));
	keys[5] = ev[2];        /* the same reminder row again (another messageId) */
	vals[5] = ENV_FIXED(mid[5], "pin.calendar.reminder-due", "CalendarEvent", ev[2],
		reminder(rem2, ev[2], tenant, owner, client, h_uuid(), START));
	ck_assert_int_eq(h_kafka_produce_batch_keys(topic, keys, NULL, vals, 6), 0);
	ck_assert_msg(H_WAIT_UNTIL(processed(mid[5]), WAIT_MS), "batch not consumed");
	got = h_kafka_error_code(GROUP ".dlq", WAIT_MS, key_is, (void *)ev[4]);
	ck_assert_msg(got && !strcmp(got, "NTF_INVALID_PAYLOAD"), "DLQ code %s", got ? got : "(none)");
	ck_assert(!processed(mid[3]));
	/* one transaction for the batch */
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT processed_at) FROM "
		"notifications.processed_messages WHERE consumer_group = '" GROUP "' AND "
		"message_id IN ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::uuid)",
		mid[0], mid[1], mid[2], mid[4], mid[5]), 1);
	ck_assert_int_eq(count_for(o_fin), 0);
	ck_assert_int_eq(count_for(o_stale), 0);
	ck_assert_str_eq(rows_of(mid[1]), rows_of(ref));
	ck_assert_str_eq(rows_of(mid[2]), rows_of(ref));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE source_message_id = $1::uuid", mid[5]), 0);
	ck_assert_int_eq(count_for(owner), 6);
	ck_assert_int_eq(count_for(client), 6);
	/* the set path did it (no fall back to the per-message path) */
	{
		double fb = h_host_metric(&w, "pin_consumer_batch_fallbacks_total{group=\""
			GROUP "\"}");

		ck_assert_msg((isnan(fb0) && isnan(fb)) || fb == fb0, "fallbacks %g -> %g",
			fb0, fb);
	}
	/* the same batch again (+ a sentinel): nothing more */
	{
		const char *ev7 = h_uuid(), *o7 = h_uuid(), *m7 = h_new_mid();

		keys[6] = ev7;
		vals[6] = ENV_FIXED(m7, "pin.calendar.reminder-due", "CalendarEvent", ev7,
			reminder(h_uuid(), ev7, tenant, o7, NULL, NULL, START));
		ck_assert_int_eq(h_kafka_produce_batch_keys(topic, keys, NULL, vals, 7), 0);
		ck_assert_msg(H_WAIT_UNTIL(processed(m7), WAIT_MS), "sentinel not consumed");
		ck_assert_int_eq(count_for(o7), 2);
	}
	ck_assert_int_eq(count_for(owner), 6);
	ck_assert_int_eq(count_for(client), 6);
	ck_assert_int_eq(count_for(o_fin), 0);
	ck_assert_int_eq(count_for(o_stale), 0);
}
END_TEST

/* Seed 001 AC: a payload without a required id -> NTF_INVALID_PAYLOAD, DLQ
 * (header x-error-code); later messages keep flowing. */
START_TEST(invalid_payload_to_dlq)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const char *dlq = GROUP ".dlq";
	const char *code;

	/* investorUserId missing */
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-confirmed.v1", apt,
		ENV_FIXED(h_new_mid(), "pin.calendar.appointment-confirmed", "Appointment", apt,
		h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"kind\":\"Showing\",\"startAt\":\"" START "\","
		"\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\",\"autoConfirmed\":false}",
		apt, tenant, h_uuid(), agent))), 0);
	ck_assert_msg(h_kafka_wait(dlq, WAIT_MS, key_is, (void *)apt) != NULL, "no DLQ message");
	ck_assert_msg((code = h_kafka_error_code(dlq, 30000, key_is, (void *)apt)) != NULL,
		"no header");
	ck_assert_str_eq(code, "NTF_INVALID_PAYLOAD");
	/* the same key keeps flowing */
	ntf_send("appointment-confirmed", apt, "Appointment", apt_confirmed(apt, tenant, agent, inv));
	ck_assert_int_eq(count_for(inv), 2);
}
END_TEST

/* No Active template for the Kind x Role -> NTF_TEMPLATE_NOT_RESOLVED (DLQ),
 * nothing created; after the template is published again the replay works.
 * Runs last in its case: the AppointmentConfirmed templates are Draft for a
 * moment (no later test uses them) and restored before the end. */
START_TEST(template_not_resolved_to_dlq)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const char *dlq = GROUP ".dlq";
	const char *code;
	char *mid = h_new_mid(), *value = ENV_FIXED(mid,
		"pin.calendar.appointment-confirmed", "Appointment", apt,
		apt_confirmed(apt, tenant, agent, inv));

	h_sql("UPDATE notifications.notification_templates SET status = 'Draft' "
		"WHERE kind = 'AppointmentConfirmed' AND role = 'Investor'");
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-confirmed.v1", apt, value), 0);
	code = NULL;
	if (h_kafka_wait(dlq, WAIT_MS, key_is, (void *)apt))
		code = h_kafka_error_code(dlq, 30000, key_is, (void *)apt);
	h_sql("UPDATE notifications.notification_templates SET status = 'Active' "
		"WHERE kind = 'AppointmentConfirmed' AND role = 'Investor'");
	ck_assert_msg(code != NULL, "no DLQ message");
	ck_assert_str_eq(code, "NTF_TEMPLATE_NOT_RESOLVED");
	ck_assert_int_eq(count_for(inv), 0);
	ck_assert(!processed(mid));          /* rolled back: a replay is processed */
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-confirmed.v1", apt, value), 0);
	ck_assert_msg(H_WAIT_UNTIL(processed(mid), WAIT_MS), "replay not consumed");
	ck_assert_str_eq(channels(inv, "AppointmentConfirmed"), "Email,InApp");
}
END_TEST

#define CONTACT_FMT "{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\"," \
		"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\"," \
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\"," \
		"\"displayName\":\"%s\",\"avatarUrl\":null,\"email\":null,\"phone\":null," \
		"\"locale\":\"en\",\"timeZone\":\"Nowhere/Atlantis\",\"status\":\"Active\"}}"

/* The contact replica: newest wins, an older message does not overwrite. */
START_TEST(contact_replica_newest_wins)
{
	const char *user = h_uuid(), *t = "pin.identity.users.v1";
	const char *q = "SELECT display_name FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid";
	char *mid = h_new_mid();

	ck_assert_int_eq(h_kafka_produce(t, user, h_sprintf(CONTACT_FMT, h_new_mid(),
		"2026-11-30T10:00:00Z", user, user, "Newer")), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_scalar(q, user) != NULL, WAIT_MS), "not replicated");
	ck_assert_int_eq(h_kafka_produce(t, user, h_sprintf(CONTACT_FMT, mid,
		"2026-11-30T09:00:00Z", user, user, "Older")), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = "
		"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1, WAIT_MS),
		"older message not consumed");
	ck_assert_str_eq(h_sql_scalar(q, user), "Newer");
	/* an unknown zone is not kept (the default applies) */
	ck_assert_ptr_null(h_sql_scalar("SELECT time_zone FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid", user));
	/* the replica's locale is the default of the settings */
	{
		struct h_resp *r = h_get("/api/v1/me/notification-settings",
				tok_of("investor", user, NULL));

		ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
		ck_assert_str_eq(h_jstr(r->json, "locale"), "en");
		ck_assert_str_eq(h_jstr(r->json, "timeZone"), "Europe/Moscow");
	}
}
END_TEST

/* /me API: feed (own in-app only, newest first, cursor paging, unreadOnly),
 * read (idempotent, 404 for another user's id, 400 for a bad id). */
START_TEST(me_notifications_api)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *other = h_uuid();
	const char *a1 = h_uuid(), *a2 = h_uuid(), *a3 = h_uuid();
	char *tok = tok_of("investor", inv, NULL), *otok = tok_of("agent", other, tenant);
	struct h_resp *r;
	json_object *items;
	const char *first, *second, *third, *cursor;

	ntf_send("appointment-created", a1, "Appointment",
		apt_created(a1, tenant, agent, inv, "Pending", NULL));
	ntf_send("appointment-created", a2, "Appointment",
		apt_created(a2, tenant, agent, inv, "Pending", NULL));
	ntf_send("appointment-created", a3, "Appointment",
		apt_created(a3, tenant, agent, inv, "Pending", NULL));

	r = h_get("/api/v1/me/notifications", tok);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	items = h_jget(r->json, "items");
	ck_assert_int_eq(json_object_array_length(items), 3);   /* InApp only */
	first = h_jstr(json_object_array_get_idx(items, 0), "id");
	ck_assert_str_eq(h_jstr(h_jget(json_object_array_get_idx(items, 0), "payload"),
		"appointmentId"), a3);                           /* newest first */
	ck_assert_str_eq(h_jstr(h_jget(json_object_array_get_idx(items, 2), "payload"),
		"appointmentId"), a1);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(items, 0), "kind"),
		"AppointmentCreated");
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "unreadCount")), 3);
	ck_assert_ptr_null(h_jstr(r->json, "nextCursor"));

	/* paging: limit 2, then the cursor */
	r = h_get("/api/v1/me/notifications?limit=2", tok);
	ck_assert_int_eq(r->status, 200);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 2);
	second = h_jstr(json_object_array_get_idx(h_jget(r->json, "items"), 1), "id");
	cursor = h_jstr(r->json, "nextCursor");
	ck_assert_ptr_nonnull(cursor);
	r = h_get(h_sprintf("/api/v1/me/notifications?limit=2&cursor=%s", cursor), tok);
	ck_assert_int_eq(r->status, 200);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 1);
	third = h_jstr(json_object_array_get_idx(h_jget(r->json, "items"), 0), "id");
	ck_assert_str_ne(third, second);
	ck_assert_str_ne(third, first);
	ck_assert_ptr_null(h_jstr(r->json, "nextCursor"));

	/* read: another user's id -> 404; own -> 200, twice */
	r = h_post(h_sprintf("/api/v1/me/notifications/%s/read", first), otok, NULL);
	h_assert_problem(r, 404, "NOTIFICATION_NOT_FOUND");
	/* NoFields: a body other than none or {} is refused, nothing read */
	r = h_post(h_sprintf("/api/v1/me/notifications/%s/read", first), tok, "{\"all\":true}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications"
		" WHERE id = $1 AND read_at IS NOT NULL", first), 0);
	r = h_post(h_sprintf("/api/v1/me/notifications/%s/read", first), tok, NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Read");
	ck_assert_ptr_nonnull(h_jstr(r->json, "readAt"));
	r = h_post(h_sprintf("/api/v1/me/notifications/%s/read", first), tok, NULL);
	ck_assert_int_eq(r->status, 200);
	r = h_post("/api/v1/me/notifications/not-a-uuid/read", tok, NULL);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	/* an Email notification is not in the feed and cannot be read */
	r = h_post(h_sprintf("/api/v1/me/notifications/%s/read", h_sql_scalar(
		"SELECT id::text FROM notifications.notifications WHERE "
		"recipient_user_id = $1::uuid AND channel = 'Email' LIMIT 1", inv)), tok, NULL);
	h_assert_problem(r, 404, "NOTIFICATION_NOT_FOUND");

	r = h_get("/api/v1/me/notifications?unreadOnly=true", tok);
	ck_assert_int_eq(r->status, 200);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 2);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "unreadCount")), 2);

	/* isolation: the other user sees nothing */
	r = h_get("/api/v1/me/notifications", otok);
	ck_assert_int_eq(r->status, 200);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 0);

	r = h_get("/api/v1/me/notifications?limit=0", tok);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	r = h_get("/api/v1/me/notifications?cursor=zz", tok);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	r = h_get("/api/v1/me/notifications", NULL);
	h_assert_problem(r, 401, "UNAUTHENTICATED");
}
END_TEST

/* /me settings: defaults, PUT (partial: absent fields kept), validation. */
START_TEST(me_settings_api)
{
	const char *user = h_uuid();
	char *tok = tok_of("agent", user, h_uuid());
	const char *path = "/api/v1/me/notification-settings";
	const char *ntables = "SELECT count(*) FROM information_schema.tables "
		"WHERE table_schema = 'notifications'";
	long long tables = h_sql_int(ntables);
	struct h_resp *r;

	/* the schema's own tables (0001: 5; 0020: subject_final_states) */
	ck_assert_int_ge(tables, 6);
	r = h_get(path, tok);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "locale"), "ru");
	ck_assert_str_eq(h_jstr(r->json, "timeZone"), "Europe/Moscow");
	ck_assert_ptr_null(h_jget(r->json, "quietHours"));
	ck_assert(!json_object_get_boolean(h_jget(r->json, "globalMute")));

	r = h_request("PUT", path, tok, "{\"locale\":\"en\",\"timeZone\":\"asia/tokyo\","
		"\"quietHours\":{\"from\":\"22:00\",\"to\":\"07:30\"},\"globalMute\":true,"
		"\"overrides\":{\"AppointmentCreated\":{\"Email\":false}}}");
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "timeZone"), "Asia/Tokyo");
	ck_assert_str_eq(h_jstr(h_jget(r->json, "quietHours"), "from"), "22:00");
	ck_assert_str_eq(h_jstr(h_jget(r->json, "quietHours"), "to"), "07:30");
	ck_assert(json_object_get_boolean(h_jget(r->json, "globalMute")));
	ck_assert(!json_object_get_boolean(h_jget(h_jget(h_jget(r->json, "overrides"),
		"AppointmentCreated"), "Email")));

	/* partial update keeps the rest */
	r = h_request("PUT", path, tok, "{\"globalMute\":false,\"quietHours\":null}");
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "locale"), "en");
	ck_assert_ptr_null(h_jget(r->json, "quietHours"));
	ck_assert(!json_object_get_boolean(h_jget(r->json, "globalMute")));
	r = h_get(path, tok);
	ck_assert_str_eq(h_jstr(r->json, "timeZone"), "Asia/Tokyo");

	h_assert_problem(h_request("PUT", path, tok, "{\"globalmute\":true}"),
		422, "VALIDATION_FAILED");
	r = h_request("PUT", path, tok, "{\"timeZone\":\"Mars/Olympus\"}");
	h_assert_problem(r, 422, "UNKNOWN_TIME_ZONE");
	h_assert_error_fields(r, "timeZone");
	/* with another invalid field: VALIDATION_FAILED names both */
	r = h_request("PUT", path, tok, "{\"timeZone\":\"Mars/Olympus\",\"locale\":\"xx-yy\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "locale", "timeZone");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"quietHours\":{\"from\":\"25:00\",\"to\":\"07:00\"}}"), 422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"quietHours\":{\"from\":\"07:00\",\"to\":\"07:00\"}}"), 422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"quietHours\":{\"from\":\"22:00\"}}"), 422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"overrides\":{\"Nope\":{\"Sms\":true}}}"), 422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"overrides\":{\"AppointmentCreated\":{\"Pigeon\":true}}}"),
		422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok,
		"{\"overrides\":{\"AppointmentCreated\":{\"Sms\":\"yes\"}}}"),
		422, "VALIDATION_FAILED");
	h_assert_problem(h_request("PUT", path, tok, "{\"locale\":\"english\"}"),
		422, "VALIDATION_FAILED");
	/* nothing of the refused bodies was stored */
	r = h_get(path, tok);
	ck_assert_str_eq(h_jstr(r->json, "locale"), "en");
	ck_assert_int_eq(h_sql_int(ntables), tables);
}
END_TEST

/* End to end: a Manual event with a client, created and cancelled through the
 * calendar API; the worker's relay publishes event-status-changed and the
 * client gets AppointmentCancelled (and nothing for event-created). */
START_TEST(end_to_end_through_calendar_api)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *tok = h_token("agent", owner, tenant, "calendar.events.view",
			"calendar.events.manage");
	struct h_resp *r;
	const char *id;

	r = h_post("/api/v1/agent/calendar/events", tok, h_sprintf(
		"{\"kind\":\"Meeting\",\"title\":\"Встреча\",\"startAt\":\"%s\","
		"\"endAt\":\"%s\",\"timeZone\":\"Europe/Moscow\",\"clientUserId\":\"%s\"}",
		h_iso_in(5 * 86400), h_iso_in(5 * 86400 + 3600), client));
	ck_assert_msg(r->status == 201, "create: %ld %s", r->status, r->body);
	id = h_jstr(r->json, "id");
	r = h_post(h_sprintf("/api/v1/agent/calendar/events/%s/cancel", id), tok,
		"{\"reason\":\"Перенос по просьбе клиента\"}");
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	ck_assert_msg(H_WAIT_UNTIL(count_for(client) == 2, 90000), "client not notified");
	ck_assert_str_eq(channels(client, "AppointmentCancelled"), "Email,InApp");
	ck_assert_msg(strstr(col(client, "InApp", "body"), "Перенос по просьбе клиента"),
		"reason in the text");
	ck_assert_str_eq(col(client, "InApp", "subject_id"), id);
	ck_assert_int_eq(count_for(owner), 0);
}
END_TEST

/* ------------------------------------------- issue 12: late messages (item 3) */

static char *ev_rescheduled(const char *ev, const char *tenant, const char *owner,
		const char *origin, const char *client, const char *start)
{
	return h_sprintf("{\"eventId\":\"%s\",\"tenantId\":\"%s\",\"ownerUserId\":\"%s\","
		"\"kind\":\"%s\",\"origin\":\"%s\",\"clientUserId\":%s,\"startAt\":\"%s\","
		"\"endAt\":null,\"timeZone\":\"Europe/Moscow\"}", ev, tenant, owner,
		strcmp(origin, "CrmBooking") ? "Consultation" : "BookingDeadline", origin,
		client ? h_sprintf("\"%s\"", client) : "null", start);
}

static long long kind_count(const char *user, const char *kind)
{
	return h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND kind = $2", user, kind);
}

static const char *final_state(const char *subject)
{
	return h_sql_scalar("SELECT final_state FROM notifications.subject_final_states "
		"WHERE subject_id = $1::uuid", subject);
}

/* Seed 002 consumer acceptance criteria: owner reschedules (Manual) ->
 * client told, new time in the event's zone; deadline extension
 * (CrmBooking) -> owner told; two reschedules -> two notifications, the last
 * one with the last time; a duplicate delivery -> nothing more. */
START_TEST(seed002_rescheduled_acceptance)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *e1 = h_uuid(), *e2 = h_uuid();
	char *mid, *value;

	/* owner reschedules a Consultation with a client by a day */
	ntf_send("event-rescheduled", e1, "CalendarEvent",
		ev_rescheduled(e1, tenant, owner, "Manual", client, START));
	ck_assert_str_eq(channels(client, "CalendarEventRescheduled"), "Email,InApp");
	ck_assert_str_eq(col(client, "InApp", "role"), "Client");
	ck_assert_msg(strstr(col(client, "InApp", "body"), START_RU), "%s",
		col(client, "InApp", "body"));
	ck_assert_int_eq(count_for(owner), 0);      /* his own action */

	/* deadline extension: the owner is told */
	ntf_send("event-rescheduled", e2, "CalendarEvent",
		ev_rescheduled(e2, tenant, owner, "CrmBooking", NULL, START));
	ck_assert_str_eq(channels(owner, "CalendarEventRescheduled"), "Email,InApp");
	ck_assert_str_eq(col(owner, "InApp", "role"), "Owner.BookingDeadline");

	/* a second reschedule of e1: a second, self-contained notification */
	mid = h_new_mid();
	value = ev_rescheduled(e1, tenant, owner, "Manual", client, "2030-06-02T09:00:00Z");
	send_as(mid, "event-rescheduled", e1, "CalendarEvent", value);
	ck_assert_int_eq(kind_count(client, "CalendarEventRescheduled"), 4);
	ck_assert_msg(strstr(h_sql_scalar("SELECT body FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = 'InApp' "
		"ORDER BY created_at DESC, id DESC LIMIT 1", client), "02.06.2030 12:00"),
		"the last notification carries the last time");

	/* the same message again, then a later one of the same key: nothing new */
	ck_assert_int_eq(h_kafka_produce("pin.calendar.event-rescheduled.v1", e1, ENV_FIXED(
		mid, "pin.calendar.event-rescheduled", "CalendarEvent", e1, value)), 0);
	ntf_send("event-status-changed", e1, "CalendarEvent",
		ev_status(e1, tenant, owner, "Manual", NULL, "InProgress"));
	ck_assert_int_eq(kind_count(client, "CalendarEventRescheduled"), 4);
}
END_TEST

/* Seed 001 row "event-status-changed, CrmBooking, Cancelled -> owner", and
 * the after-final guard as a fact of its own: the final state is recorded
 * from every final message (also a filtered one), and a created /
 * rescheduled / owner-changed / confirmed / reminder message that arrives
 * after it builds nothing. */
START_TEST(late_messages_after_final)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *agent = h_uuid(), *inv = h_uuid(), *inv2 = h_uuid(), *inv3 = h_uuid();
	const char *dl = h_uuid(), *ev = h_uuid(), *a1 = h_uuid(), *a2 = h_uuid(),
		*a3 = h_uuid();

	/* booking deadline cancelled -> owner "deadline removed" */
	ntf_send("event-status-changed", dl, "CalendarEvent",
		ev_status(dl, tenant, owner, "CrmBooking", NULL, "Cancelled"));
	ck_assert_str_eq(channels(owner, "AppointmentCancelled"), "Email,InApp");
	ck_assert_str_eq(col(owner, "InApp", "role"), "Owner.BookingDeadline");
	ck_assert_str_eq(col(owner, "InApp", "title"), "Дедлайн брони снят");
	ck_assert_str_eq(final_state(dl), "Cancelled");
	/* late: its creation and an extension, from other topics */
	ntf_send("event-created", dl, "CalendarEvent",
		ev_created(dl, tenant, owner, "BookingDeadline", "CrmBooking", NULL));
	ntf_send("event-rescheduled", dl, "CalendarEvent",
		ev_rescheduled(dl, tenant, owner, "CrmBooking", NULL, START));
	ck_assert_int_eq(count_for(owner), 2);

	/* a Manual event completed (filtered: no notification) is final too */
	ntf_send("event-status-changed", ev, "CalendarEvent",
		ev_status(ev, tenant, owner, "Manual", client, "Completed"));
	ck_assert_str_eq(final_state(ev), "Completed");
	ntf_send("event-rescheduled", ev, "CalendarEvent",
		ev_rescheduled(ev, tenant, owner, "Manual", client, START));
	ntf_send("reminder-due", ev, "CalendarEvent",
		reminder(h_uuid(), ev, tenant, owner, client, NULL, START));
	ck_assert_int_eq(count_for(client), 0);

	/* appointment cancelled by the investor, then a late confirmation and a
	 * late creation: nothing for anybody */
	ntf_send("appointment-cancelled", a1, "Appointment",
		apt_cancelled(a1, tenant, agent, inv, "CancelledByInvestor", NULL));
	ck_assert_str_eq(final_state(a1), "Cancelled");
	ck_assert_int_eq(count_for(agent), 2);
	ntf_send("appointment-confirmed", a1, "Appointment",
		apt_confirmed(a1, tenant, agent, inv));
	ntf_send("appointment-created", a1, "Appointment",
		apt_created(a1, tenant, agent, inv, "Pending", NULL));
	ck_assert_int_eq(count_for(inv), 0);
	ck_assert_int_eq(count_for(agent), 2);

	/* Expired and NoShow are final states as well */
	ntf_send("appointment-cancelled", a2, "Appointment",
		apt_cancelled(a2, tenant, agent, inv2, "Expired", NULL));
	ck_assert_str_eq(final_state(a2), "Expired");
	ntf_send("appointment-confirmed", a2, "Appointment",
		apt_confirmed(a2, tenant, agent, inv2));
	ck_assert_int_eq(kind_count(inv2, "AppointmentConfirmed"), 0);
	ntf_send("appointment-completed", a3, "Appointment", h_sprintf(
		"{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"investorUserId\":\"%s\",\"kind\":\"Showing\","
		"\"startAt\":\"" START "\",\"outcome\":\"NoShow\"}", a3, tenant, h_uuid(),
		agent, inv3));
	ck_assert_str_eq(final_state(a3), "NoShow");
	ntf_send("appointment-confirmed", a3, "Appointment",
		apt_confirmed(a3, tenant, agent, inv3));
	ck_assert_int_eq(count_for(inv3), 0);

	/* the first final fact wins (a later one does not overwrite it) */
	ntf_send("appointment-cancelled", a3, "Appointment",
		apt_cancelled(a3, tenant, agent, inv3, "CancelledByAgent", NULL));
	ck_assert_str_eq(final_state(a3), "NoShow");
}
END_TEST

/* --------------------------------------- issue 12: contract versions (item 4) */

/* A version nobody used before in this worker's life (the warning is once
 * per version and process). */
static int fresh_version(void)
{
	return 2 + (int)h_sql_int("SELECT (random() * 1000000000)::int");
}

/* The host's contract-version warnings of a consumer group for version vs
 * ("contractVersion":"N"): the host checks every consumed envelope, once per
 * version and group (consumer_msg.c); the plugins no longer check. */
static int version_warnings(const char *group, const char *vs)
{
	/* only that warning carries "contractVersion" (a fresh version) */
	return h_worker_log_lines(h_sprintf("\"group\":\"%s\"", group), vs);
}

/* Seeds 001, 002: contractVersion != 1 -> warn-and-proceed.  A version N
 * message with an extra field is applied, for each consumer group of
 * notify.so; the warning is written once per version and group. */
START_TEST(contract_version_mismatch_applied)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *user = h_uuid();
	const char *a1 = h_uuid(), *a2 = h_uuid();
	int v = fresh_version();
	const char *vs = h_sprintf("\"contractVersion\":\"%d\"", v);
	int i;

	for (i = 0; i < 2; i++) {
		const char *apt = i ? a2 : a1, *mid = h_new_mid();
		char *pl = apt_created(apt, tenant, agent, inv, "Pending", NULL);

		pl[strlen(pl) - 1] = '\0';
		ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-created.v1", apt,
			h_sprintf("{\"messageId\":\"%s\",\"eventType\":"
			"\"pin.calendar.appointment-created\",\"contractVersion\":%d,"
			"\"createdAt\":\"2026-12-01T09:00:00Z\",\"aggregateType\":\"Appointment\","
			"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":%s,"
			"\"futureField\":{\"x\":1}}}", mid, v, apt, pl)), 0);
		ck_assert_msg(H_WAIT_UNTIL(processed(mid), WAIT_MS), "v%d not consumed", v);
	}
	ck_assert_int_eq(kind_count(agent, "AppointmentCreated"), 4);
	ck_assert_int_eq(kind_count(inv, "AppointmentCreated"), 4);
	ck_assert_msg(H_WAIT_UNTIL(version_warnings("notifications-calendar-events", vs) == 1,
		10000), "warning not written once");
	h_sleep_ms(500);
	ck_assert_int_eq(version_warnings("notifications-calendar-events", vs), 1);

	/* the contact replica (group notifications-identity-users) */
	for (i = 0; i < 2; i++) {
		const char *mid = h_new_mid();

		ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
			"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
			"\"contractVersion\":%d,\"createdAt\":\"2026-11-30T1%d:00:00Z\","
			"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
			"\"payload\":{\"userId\":\"%s\",\"displayName\":\"V%d\",\"avatarUrl\":null,"
			"\"email\":null,\"phone\":null,\"locale\":\"ru\",\"timeZone\":null,"
			"\"status\":\"Active\",\"middleName\":\"x\"}}", mid, v, i, user, user, i)), 0);
		ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
			"notifications.processed_messages WHERE consumer_group = "
			"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1,
			WAIT_MS), "contact v%d not consumed", v);
	}
	ck_assert_str_eq(h_sql_scalar("SELECT display_name FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid", user), "V1");
	ck_assert_msg(H_WAIT_UNTIL(version_warnings("notifications-identity-users", vs) == 1,
		10000), "contacts warning not written once");
}
END_TEST

/* ------------------------------------ issue 12: retention, erasure (item 6) */

/* The notifications-housekeeping job deletes old inbox rows, old Sent /
 * Failed notifications (180 days), Read ones (30 days), Pending ones --
 * unread in-app, e-mail never delivered -- (90 days), old final states and
 * old published rows of notifications.outbox; younger rows stay. */
START_TEST(retention_housekeeping)
{
	const char *user = h_uuid(), *m_old = h_uuid(), *m_new = h_uuid(), *s_old = h_uuid(),
		*s_new = h_uuid(), *o_old = h_uuid(), *o_new = h_uuid(), *o_parked = h_uuid();
	const char *ins = "INSERT INTO notifications.notifications (id, recipient_user_id, kind, "
		"channel, urgency, status, role, title, body, payload, locale, source_message_id, "
		"source_event_type, created_at, sent_at, read_at, published_at) "
		"VALUES (gen_random_uuid(), $1::uuid, 'AppointmentCreated', $2, 'Normal', $3, "
		"'Investor', 't', 'b', '{}', 'ru', gen_random_uuid(), 'x', "
		"now() - $4::interval, CASE WHEN $3 = 'Sent' THEN now() END, "
		"CASE WHEN $3 = 'Read' THEN now() END, now())";

	/* Sent and Failed: 180 days; Read (in-app): 30 days; Pending (unread
	 * in-app, e-mail never delivered): 90 days (issue 30 item 6) */
	h_sql(ins, user, "InApp", "Read", "400 days");
	h_sql(ins, user, "Email", "Sent", "400 days");
	h_sql(ins, user, "Sms", "Failed", "400 days");
	h_sql(ins, user, "Email", "Sent", "100 days");        /* kept */
	h_sql(ins, user, "InApp", "Pending", "100 days");     /* unread, too old */
	h_sql(ins, user, "Email", "Pending", "95 days");      /* never delivered */
	h_sql(ins, user, "InApp", "Pending", "80 days");      /* unread: kept */
	h_sql(ins, user, "InApp", "Read", "40 days");         /* read a month ago */
	h_sql(ins, user, "InApp", "Read", "10 days");         /* recent: kept */
	/* the e-mail claimed by another dispatcher (leased): this pass's
	 * dispatcher leaves it Pending for the housekeeping to judge */
	h_sql("UPDATE notifications.notifications SET lease_until = now() + interval '1 hour' "
		"WHERE recipient_user_id = $1::uuid AND status = 'Pending' AND channel = 'Email'",
		user);
	h_sql("INSERT INTO notifications.processed_messages VALUES ('retention-test', "
		"$1::uuid, now() - interval '40 days'), ('retention-test', $2::uuid, now())",
		m_old, m_new);
	h_sql("INSERT INTO notifications.subject_final_states VALUES ($1::uuid, "
		"'Appointment', 'Cancelled', gen_random_uuid(), now() - interval '200 days'), "
		"($2::uuid, 'Appointment', 'Cancelled', gen_random_uuid(), now())", s_old, s_new);
	/* the context's outbox: published 8 days ago (gone), published 1 day
	 * ago (kept); an unpublished row of 8 days stays too (parked: the relay
	 * leaves it alone) */
	h_sql("INSERT INTO notifications.outbox (message_id, topic, key, envelope, created_at, "
		"published_at, parked_at) VALUES ($1::uuid, 'pin.test.events.v1', $4, '{}', "
		"now() - interval '8 days', now() - interval '8 days', NULL), ($2::uuid, "
		"'pin.test.events.v1', $4, '{}', now() - interval '1 day', now() - interval '1 day', "
		"NULL), ($3::uuid, 'pin.test.events.v1', $4, '{}', now() - interval '8 days', NULL, "
		"now() - interval '8 days')", o_old, o_new, o_parked, user);
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_str_eq(h_sql_scalar("SELECT coalesce(string_agg(message_id::text, ',' "
		"ORDER BY created_at), '') FROM notifications.outbox WHERE key = $1", user),
		h_sprintf("%s,%s", o_parked, o_new));
	ck_assert_str_eq(h_sql_scalar("SELECT string_agg(channel || ':' || status, ',' "
		"ORDER BY created_at, channel) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid", user), "Email:Sent,InApp:Pending,InApp:Read");
	ck_assert_str_eq(h_sql_scalar("SELECT string_agg(message_id::text, ',') FROM "
		"notifications.processed_messages WHERE consumer_group = 'retention-test'"), m_new);
	ck_assert_ptr_null(final_state(s_old));
	ck_assert_str_eq(final_state(s_new), "Cancelled");
}
END_TEST

/* Rows of any table of schema notifications with a text column (text,
 * varchar, json, jsonb) holding needle. */
static long long schema_rows_with(const char *needle)
{
	PGresult *cols = h_sql("SELECT table_name, column_name FROM information_schema.columns "
		"WHERE table_schema = 'notifications' AND data_type IN ('text', "
		"'character varying', 'json', 'jsonb', 'ARRAY', 'USER-DEFINED') "
		"ORDER BY table_name, column_name");
	long long n = 0;

	ck_assert_int_gt(PQntuples(cols), 10);
	for (int i = 0; i < PQntuples(cols); i++)
		n += h_sql_int(h_sprintf("SELECT count(*) FROM notifications.%s "
			"WHERE strpos(%s::text, $1) > 0", PQgetvalue(cols, i, 0),
			PQgetvalue(cols, i, 1)), needle);
	return n;
}

#define ERASE_FMT "{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\"," \
	"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\"," \
	"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\"," \
	"\"displayName\":\"%s\",\"avatarUrl\":null,\"email\":\"%s\",\"phone\":\"%s\"," \
	"\"locale\":\"ru\",\"timeZone\":\"Europe/Moscow\",\"status\":\"%s\"}}"

/* Erasure: pin.identity.users.v1 with status Deleted removes the user's
 * e-mail, phone and name from every table of schema notifications: the
 * replica row is a tombstone, the user's own notifications and settings are
 * gone, other users' texts name "(имя не указано)"; later messages build
 * nothing for the user; an older message does not bring the data back. */
START_TEST(erasure_of_deleted_user)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const char *email = h_sprintf("erase-%s@example.com", inv);
	const char *phone = h_sprintf("+7999%lld", 1000000 + h_sql_int(
		"SELECT (random() * 8999999)::int"));
	const char *name = h_sprintf("Стираемый %s", h_uuid());
	const char *mid;

	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", inv, h_sprintf(ERASE_FMT, h_new_mid(),
		"2026-11-30T10:00:00Z", inv, inv, name, email, phone, "Active")), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid", inv) == 1,
		WAIT_MS), "contact not replicated");
	put_settings(inv, "{\"globalMute\":false}");
	ntf_send("appointment-created", apt, "Appointment",
		apt_created(apt, tenant, agent, inv, "Pending", NULL));
	ck_assert_int_eq(count_for(inv), 2);
	ck_assert_msg(strstr(col(agent, "InApp", "body"), name), "the name is in the text");
	ck_assert_int_gt(schema_rows_with(email), 0);
	ck_assert_int_gt(schema_rows_with(phone), 0);

	mid = h_new_mid();
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", inv, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-deleted\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T12:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":null,\"avatarUrl\":null,"
		"\"email\":null,\"phone\":null,\"locale\":null,\"timeZone\":null,"
		"\"status\":\"Deleted\"}}", mid, inv, inv)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = "
		"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1,
		WAIT_MS), "Deleted not consumed");
	ck_assert_int_eq(schema_rows_with(email), 0);
	ck_assert_int_eq(schema_rows_with(phone), 0);
	ck_assert_int_eq(schema_rows_with(name), 0);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid", inv), "Deleted");
	ck_assert_int_eq(count_for(inv), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.user_notification_settings "
		"WHERE user_id = $1::uuid", inv), 0);
	ck_assert_msg(strstr(col(agent, "InApp", "body"), "(имя не указано)"), "%s",
		col(agent, "InApp", "body"));

	/* an older Active message does not bring the data back; a later
	 * message builds nothing for the erased user */
	mid = h_new_mid();
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", inv, h_sprintf(ERASE_FMT, mid,
		"2026-11-30T11:00:00Z", inv, inv, name, email, phone, "Active")), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = "
		"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1,
		WAIT_MS), "older message not consumed");
	ntf_send("appointment-confirmed", apt, "Appointment",
		apt_confirmed(apt, tenant, agent, inv));
	ck_assert_int_eq(count_for(inv), 0);
	ck_assert_int_eq(schema_rows_with(email), 0);
	ck_assert_int_eq(schema_rows_with(phone), 0);
	ck_assert_int_eq(schema_rows_with(name), 0);
}
END_TEST

/* ------------------------------------- issue 30 item 5: seed 001's last steps */

#define DISPATCHED "pin.notifications.dispatched.v1"

/* The worker host's log lines (logs/worker.log) holding every needle (up to
 * three, NULL ends them): their count, and the last one. */
static int wlog(char **last, const char *n1, const char *n2, const char *n3)
{
	FILE *f = fopen(h_sprintf("%s/logs/worker.log", h_env("PIN_DEV_DIR")), "r");
	char line[16384];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, n1) && (!n2 || strstr(line, n2)) && (!n3 || strstr(line, n3))) {
			n++;
			if (last)
				*last = h_strdup(line);
		}
	fclose(f);
	return n;
}

/* the worker's series, 0 when it does not exist yet */
static double wmetric(struct h_host *w, const char *series)
{
	double v = h_host_metric(w, series);

	return isnan(v) ? 0 : v;
}

/* pin.identity.users.v1 for user with e-mail and phone, createdAt at;
 * waits until the replica holds email. */
static void contact_at(const char *user, const char *email, const char *phone,
		const char *at)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"%s\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"Снимок Адресов\","
		"\"avatarUrl\":null,\"email\":\"%s\",\"phone\":\"%s\",\"locale\":\"ru\","
		"\"timeZone\":\"Europe/Moscow\",\"status\":\"Active\"}}", h_new_mid(), at, user,
		user, email, phone)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid AND email = $2",
		user, email) == 1, WAIT_MS), "contact not replicated");
}

/* SMS sink requests (PIN_SMS_LOG) for notification id: count, last "to" */
static int sms_to(const char *id, char **to)
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
			if (to)
				*to = h_strdup(h_jstr(h_jget(o, "body"), "to"));
		}
		json_object_put(o);
	}
	return n;
}

/* Seed 001 step 3 / "Retry и DLQ": an enum value outside the contract
 * (Kind, Status, Outcome as well as Origin and Reason) is a warning (WARN
 * line + notifications_unknown_enum_total{field}) and the fail-safe reaction,
 * never the DLQ: an unknown status or outcome builds nothing, an unknown
 * kind (it chooses no branch) is mapped as usual. */
START_TEST(unknown_enum_values_warned)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *agent = h_uuid(), *inv = h_uuid(), *a1 = h_uuid(), *a2 = h_uuid();
	const char *ev = h_uuid(), *ev2 = h_uuid();
	double st0, oc0, k0;
	struct h_host w;
	char *mid, *line = NULL;

	h_host_stack_worker(&w);
	st0 = wmetric(&w, "notifications_unknown_enum_total{field=\"status\"}");
	oc0 = wmetric(&w, "notifications_unknown_enum_total{field=\"outcome\"}");
	k0 = wmetric(&w, "notifications_unknown_enum_total{field=\"kind\"}");

	/* event-status-changed, Status outside EventStatus: nothing, warned */
	mid = ntf_send("event-status-changed", ev, "CalendarEvent",
		ev_status(ev, tenant, owner, "Manual", client, "Archived"));
	ck_assert_int_eq(count_for(client) + count_for(owner), 0);
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "unknown enum value", NULL) == 1, 10000),
		"no warning for status Archived");
	ck_assert_msg(strstr(line, "\"level\":\"warn\"") && strstr(line, "\"field\":\"status\"") &&
		strstr(line, "\"value\":\"Archived\""), "%s", line);
	ck_assert_ptr_null(final_state(ev));

	/* appointment-created, Status neither Pending nor Confirmed */
	mid = ntf_send("appointment-created", a1, "Appointment",
		apt_created(a1, tenant, agent, inv, "Tentative", NULL));
	ck_assert_int_eq(count_for(agent) + count_for(inv), 0);
	ck_assert_msg(H_WAIT_UNTIL(wlog(NULL, mid, "unknown enum value", "\"field\":\"status\"")
		== 1, 10000), "no warning for status Tentative");

	/* appointment-completed, an Outcome outside {Completed, NoShow} */
	{
		char *pl = apt_completed(a2, tenant, agent, inv);
		char *at = strstr(pl, "\"Completed\"");

		pl = h_sprintf("%.*s\"Rescheduled\"}", (int)(at - pl), pl);
		mid = ntf_send("appointment-completed", a2, "Appointment", pl);
	}
	ck_assert_msg(H_WAIT_UNTIL(wlog(NULL, mid, "unknown enum value",
		"\"field\":\"outcome\"") == 1, 10000), "no warning for outcome Rescheduled");
	ck_assert_int_eq(count_for(agent) + count_for(inv), 0);

	/* event-created (CrmBooking) of an unknown Kind: built as usual, warned */
	mid = ntf_send("event-created", ev2, "CalendarEvent",
		ev_created(ev2, tenant, owner, "Webinar", "CrmBooking", NULL));
	ck_assert_str_eq(channels(owner, "CalendarReminder"), "Email,InApp");
	ck_assert_msg(H_WAIT_UNTIL(wlog(NULL, mid, "unknown enum value", "\"field\":\"kind\"")
		== 1, 10000), "no warning for kind Webinar");

	ck_assert_msg(H_WAIT_UNTIL(wmetric(&w,
		"notifications_unknown_enum_total{field=\"status\"}") >= st0 + 2 &&
		wmetric(&w, "notifications_unknown_enum_total{field=\"outcome\"}") >= oc0 + 1 &&
		wmetric(&w, "notifications_unknown_enum_total{field=\"kind\"}") >= k0 + 1, 15000),
		"unknown_enum counters not raised");
	/* none of them was dead-lettered: every message was acknowledged
	 * (processed above), the DLQ holds none of their keys */
	ck_assert_ptr_null(h_kafka_wait(GROUP ".dlq", 2000, key_is, (void *)ev));
	ck_assert_ptr_null(h_kafka_wait(GROUP ".dlq", 1000, key_is, (void *)a1));
}
END_TEST

/* Seed 001 step 5: the address is a snapshot taken at enqueue.  The agent's
 * e-mail and SMS rows carry the replica's address of that moment; the
 * contact changes before the SMS (held by quiet hours) goes out: it still
 * goes to the snapshot.  The investor had no contact at enqueue: no
 * snapshot, the address catches up from the replica at dispatch and
 * becomes the row's.  The erasure of the agent removes the addresses from
 * the delivered and the undelivered rows alike. */
START_TEST(address_snapshot_at_enqueue)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const char *mail_a = h_sprintf("snap-a-%s@example.com", agent);
	const char *mail_b = h_sprintf("snap-b-%s@example.com", agent);
	const char *mail_i = h_sprintf("late-%s@example.com", inv);
	const char *ph_a = h_sql_scalar("SELECT '+7911' || lpad((random() * 1e7)::int::text, 7, '0')");
	const char *ph_b = h_sql_scalar("SELECT '+7912' || lpad((random() * 1e7)::int::text, 7, '0')");
	const char *sms_id;
	char *to = NULL, *mid;

	contact_at(agent, mail_a, ph_a, "2026-11-30T10:00:00Z");
	put_settings(agent, h_sprintf("{\"quietHours\":{\"from\":\"%s\",\"to\":\"%s\"},"
		"\"overrides\":{\"AppointmentCreated\":{\"Sms\":true}}}",
		moscow_hhmm(-60), moscow_hhmm(60)));
	ntf_send("appointment-created", apt, "Appointment",
		apt_created(apt, tenant, agent, inv, "Pending", NULL));
	ck_assert_str_eq(channels(agent, "AppointmentCreated"), "Email,InApp,Sms");
	ck_assert_ptr_nonnull(col(agent, "Sms", "not_before"));
	ck_assert_str_eq(col(agent, "Email", "address"), mail_a);
	ck_assert_str_eq(col(agent, "Sms", "address"), ph_a);
	ck_assert_ptr_null(col(agent, "InApp", "address"));
	ck_assert_ptr_null(col(inv, "Email", "address"));       /* no contact yet */
	ck_assert_msg(H_WAIT_UNTIL(!strcmp(col(agent, "Email", "status"), "Sent"), WAIT_MS),
		"agent e-mail not Sent");

	/* the contact changes before the deferred SMS is due: the snapshot wins */
	contact_at(agent, mail_b, ph_b, "2026-11-30T11:00:00Z");
	sms_id = col(agent, "Sms", "id");
	h_sql("UPDATE notifications.notifications SET not_before = now() WHERE id = $1::uuid",
		sms_id);
	ck_assert_msg(H_WAIT_UNTIL(!strcmp(col(agent, "Sms", "status"), "Sent"), WAIT_MS),
		"agent SMS not Sent: %s", col(agent, "Sms", "status"));
	ck_assert_int_eq(sms_to(sms_id, &to), 1);
	ck_assert_str_eq(to, ph_a);
	ck_assert_str_eq(col(agent, "Sms", "address"), ph_a);

	/* the catch-up: the investor's contact arrives after the enqueue */
	ck_assert_msg(H_WAIT_UNTIL(col(inv, "Email", "last_error") != NULL, WAIT_MS),
		"dispatcher did not look at the investor's row");
	ck_assert_str_eq(col(inv, "Email", "status"), "Pending");
	contact_at(inv, mail_i, "+70000000001", "2026-11-30T10:00:00Z");
	ck_assert_msg(H_WAIT_UNTIL(!strcmp(col(inv, "Email", "status"), "Sent"), WAIT_MS),
		"investor e-mail not Sent");
	ck_assert_str_eq(col(inv, "Email", "address"), mail_i);

	/* a later row of the agent's, still undelivered (quiet hours), then
	 * the erasure: no address of theirs is left anywhere */
	ntf_send("appointment-created", h_uuid(), "Appointment",
		apt_created(h_uuid(), tenant, agent, h_uuid(), "Pending", NULL));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND address = $2 AND status = 'Pending'",
		agent, ph_b), 1);
	ck_assert_int_gt(schema_rows_with(ph_a), 0);
	mid = h_new_mid();
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", agent, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-deleted\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T12:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":null,\"avatarUrl\":null,"
		"\"email\":null,\"phone\":null,\"locale\":null,\"timeZone\":null,"
		"\"status\":\"Deleted\"}}", mid, agent, agent)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.processed_messages WHERE consumer_group = "
		"'notifications-identity-users' AND message_id = $1::uuid", mid) == 1,
		WAIT_MS), "Deleted not consumed");
	ck_assert_int_eq(schema_rows_with(mail_a), 0);
	ck_assert_int_eq(schema_rows_with(mail_b), 0);
	ck_assert_int_eq(schema_rows_with(ph_a), 0);
	ck_assert_int_eq(schema_rows_with(ph_b), 0);
	/* never on Kafka, never in the worker's log */
	ck_assert_int_eq(wlog(NULL, mail_a, NULL, NULL) + wlog(NULL, ph_a, NULL, NULL) +
		wlog(NULL, ph_b, NULL, NULL), 0);
	{
		struct h_kmsgs *l = h_kafka_read_all(DISPATCHED, 5000);

		for (size_t i = 0; i < l->n; i++)
			ck_assert_msg(!strstr(l->v[i].value, mail_a) && !strstr(l->v[i].value, ph_a),
				"an address on %s", DISPATCHED);
	}
}
END_TEST

/* Seed 001 step 7: the final outcome of an in-app notification -- published
 * to the user's real-time channel (nchan), or given up unpublished -- is
 * pin.notifications.dispatched.v1 as for e-mail and SMS: channel InApp,
 * status Sent / Failed NTF_INAPP_EXPIRED, no PII. */
START_TEST(inapp_outcome_dispatched)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const struct h_kmsg *m;
	json_object *p;
	const char *id;
	char *old, *mid;

	mid = ntf_send("appointment-created", apt, "Appointment",
		apt_created(apt, tenant, agent, inv, "Pending", NULL));
	id = col(inv, "InApp", "id");
	ck_assert_msg(H_WAIT_UNTIL(col(inv, "InApp", "published_at") != NULL, WAIT_MS),
		"in-app row not published");
	ck_assert_msg((m = h_kafka_wait_key(DISPATCHED, id, 30000)) != NULL,
		"no %s for the in-app row", DISPATCHED);
	ck_assert_str_eq(h_jstr(m->json, "eventType"), "pin.notifications.dispatched");
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(p, "notificationId"), id);
	ck_assert_str_eq(h_jstr(p, "recipientUserId"), inv);
	ck_assert_str_eq(h_jstr(p, "channel"), "InApp");
	ck_assert_str_eq(h_jstr(p, "kind"), "AppointmentCreated");
	ck_assert_str_eq(h_jstr(p, "status"), "Sent");
	ck_assert_ptr_nonnull(h_jstr(p, "sentAt"));
	ck_assert_str_eq(h_jstr(p, "sourceMessageId"), mid);
	ck_assert_int_ge(json_object_get_int(h_jget(p, "attempts")), 1);
	/* the row stays the feed's unread item */
	ck_assert_str_eq(col(inv, "InApp", "status"), "Pending");

	/* a row too old to be news is given up unpushed: Failed */
	old = h_uuid();
	h_sql("INSERT INTO notifications.notifications (id, recipient_user_id, tenant_id, "
		"kind, channel, urgency, status, role, title, body, deep_link, payload, locale, "
		"source_message_id, source_event_type, subject_id, created_at) "
		"SELECT $1::uuid, recipient_user_id, tenant_id, kind, channel, urgency, status, "
		"role, title, body, deep_link, payload, locale, gen_random_uuid(), "
		"source_event_type, subject_id, now() - interval '3 hours' "
		"FROM notifications.notifications WHERE id = $2::uuid", old, id);
	ck_assert_msg((m = h_kafka_wait_key(DISPATCHED, old, 30000)) != NULL,
		"no %s for the expired in-app row", DISPATCHED);
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(p, "channel"), "InApp");
	ck_assert_str_eq(h_jstr(p, "status"), "Failed");
	ck_assert_str_eq(h_jstr(p, "failureCode"), "NTF_INAPP_EXPIRED");
	ck_assert_ptr_nonnull(h_jstr(p, "failedAt"));
}
END_TEST

/* The seed's log lines (seed 001 "Logs"): consumed, skipped-duplicate,
 * filtered with its branch, skipped-stale, enqueued with its count per
 * channel, failed -- each with messageId, eventType, kind and the
 * recipients' ids, read from the worker host's log; no name, address,
 * Comment or CancelReason in any of them. */
START_TEST(seed_log_lines)
{
	const char *tenant = h_uuid(), *agent = h_uuid(), *inv = h_uuid(), *apt = h_uuid();
	const char *ev = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	const char *email = h_sprintf("log-%s@example.com", agent);
	char *mid, *line = NULL, *payload;

	contact_at(agent, email, "+70000000002", "2026-11-30T10:00:00Z");
	payload = apt_created(apt, tenant, agent, inv, "Pending", NULL);
	mid = ntf_send("appointment-created", apt, "Appointment", payload);
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "\"notifications: enqueued\"", NULL) == 1,
		10000), "no enqueued line");
	ck_assert_msg(strstr(line, "\"eventType\":\"pin.calendar.appointment-created\"") &&
		strstr(line, "\"kind\":\"AppointmentCreated\"") &&
		strstr(line, h_sprintf("\"recipientUserIds\":\"%s,%s\"", agent, inv)) &&
		strstr(line, "\"created\":\"4\"") && strstr(line, "\"inApp\":\"2\"") &&
		strstr(line, "\"email\":\"2\"") && strstr(line, "\"sms\":\"0\""), "%s", line);
	ck_assert_msg(wlog(&line, mid, "\"notifications: consumed\"", NULL) == 1, "no consumed");
	ck_assert_msg(strstr(line, "\"eventType\":\"pin.calendar.appointment-created\"") &&
		strstr(line, "\"kind\":\"AppointmentCreated\"") && strstr(line, agent), "%s", line);

	/* the same message again: skipped-duplicate (the host's inbox) */
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-created.v1", apt,
		ENV_FIXED(mid, "pin.calendar.appointment-created", "Appointment", apt, payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "\"consumer: skipped-duplicate\"", NULL)
		== 1, WAIT_MS), "no skipped-duplicate line");
	ck_assert_msg(strstr(line, "\"eventType\":\"pin.calendar.appointment-created\"") &&
		strstr(line, "\"group\":\"" GROUP "\""), "%s", line);

	/* filtered, with its branch */
	mid = ntf_send("event-status-changed", ev, "CalendarEvent",
		ev_status(ev, tenant, owner, "Manual", NULL, "Cancelled"));
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "\"notifications: filtered\"", NULL) == 1,
		10000), "no filtered line");
	ck_assert_msg(strstr(line, "\"reason\":\"no-client\"") &&
		strstr(line, "\"eventType\":\"pin.calendar.event-status-changed\"") &&
		strstr(line, "\"kind\":\"AppointmentCancelled\""), "%s", line);
	ck_assert_ptr_null(strstr(line, "Клиент заболел"));     /* CancelReason */

	/* skipped-stale: a reminder of an event that has started */
	mid = ntf_send("reminder-due", ev, "CalendarEvent", reminder(h_uuid(), h_uuid(), tenant,
		owner, client, NULL, "2020-01-01T09:00:00Z"));
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "\"notifications: skipped-stale\"", NULL)
		== 1, 10000), "no skipped-stale line");
	ck_assert_msg(strstr(line, "\"reason\":\"stale-reminder\"") &&
		strstr(line, "\"kind\":\"CalendarReminder\"") &&
		strstr(line, h_sprintf("\"recipientUserIds\":\"%s,%s\"", owner, client)), "%s", line);

	/* failed: an invalid payload (investorUserId missing) */
	mid = h_new_mid();
	ck_assert_int_eq(h_kafka_produce("pin.calendar.appointment-confirmed.v1", apt,
		ENV_FIXED(mid, "pin.calendar.appointment-confirmed", "Appointment", apt,
		h_sprintf("{\"appointmentId\":\"%s\",\"tenantId\":\"%s\",\"eventId\":\"%s\","
		"\"agentUserId\":\"%s\",\"kind\":\"Showing\",\"startAt\":\"" START "\","
		"\"endAt\":\"" END "\",\"timeZone\":\"Europe/Moscow\",\"autoConfirmed\":false}",
		apt, tenant, h_uuid(), agent))), 0);
	ck_assert_msg(H_WAIT_UNTIL(wlog(&line, mid, "\"notifications: failed\"", NULL) >= 1,
		WAIT_MS), "no failed line");
	ck_assert_msg(strstr(line, "\"code\":\"NTF_INVALID_PAYLOAD\"") &&
		strstr(line, "\"eventType\":\"pin.calendar.appointment-confirmed\"") &&
		strstr(line, "\"level\":\"error\""), "%s", line);

	/* PII: no name, address or Comment in the log */
	ck_assert_int_eq(wlog(NULL, email, NULL, NULL), 0);
	ck_assert_int_eq(wlog(NULL, "Снимок Адресов", NULL, NULL), 0);
	ck_assert_int_eq(wlog(NULL, "internal note", NULL, NULL), 0);
}
END_TEST

Suite *make_notify_suite(void)
{
	Suite *s = suite_create("notify");
	TCase *tc;

	tc = h_tcase("consumer", 180);
	tcase_add_test(tc, appointment_created_fanout_and_redelivery);
	tcase_add_test(tc, auto_confirm_and_english_locale);
	tcase_add_test(tc, appointment_cancelled_mapping);
	tcase_add_test(tc, event_family_mapping);
	tcase_add_test(tc, reminders_critical_quiet_hours_and_stale);
	tcase_add_test(tc, settings_quiet_mute_overrides);
	tcase_add_test(tc, reminder_batch_set_based);
	tcase_add_test(tc, invalid_payload_to_dlq);
	tcase_add_test(tc, contact_replica_newest_wins);
	tcase_add_test(tc, end_to_end_through_calendar_api);
	tcase_add_test(tc, template_not_resolved_to_dlq);
	suite_add_tcase(s, tc);

	tc = h_tcase("issue12", 240);
	tcase_add_test(tc, seed002_rescheduled_acceptance);
	tcase_add_test(tc, late_messages_after_final);
	tcase_add_test(tc, contract_version_mismatch_applied);
	tcase_add_test(tc, retention_housekeeping);
	tcase_add_test(tc, erasure_of_deleted_user);
	suite_add_tcase(s, tc);

	tc = h_tcase("seed001", 240);
	tcase_add_test(tc, unknown_enum_values_warned);
	tcase_add_test(tc, address_snapshot_at_enqueue);
	tcase_add_test(tc, inapp_outcome_dispatched);
	tcase_add_test(tc, seed_log_lines);
	suite_add_tcase(s, tc);

	tc = h_tcase("api", 120);
	tcase_add_test(tc, me_notifications_api);
	tcase_add_test(tc, me_settings_api);
	suite_add_tcase(s, tc);
	return s;
}
