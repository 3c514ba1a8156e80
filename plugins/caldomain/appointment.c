/* appointment.c -- the Appointment aggregate on the database: booking (the one
 * contention point: the conditional Available -> Booked update), the
 * transitions and their cascades to slot, CalendarEvent and reminders, the
 * appointment-* outbox messages, and the expiry batch of workers.so.
 * Everything runs in the caller's transaction and uses pc_api only. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "caldomain/appointment.h"

#define AGG "Appointment"

/* ------------------------------------------------------------ load / view */

/* One appointment ($1) within a scope: $2 tenant, $3 agent, $4 investor
 * (NULL: any). */
#define SCOPE_WHERE \
	"WHERE a.id = $1::uuid AND ($2::uuid IS NULL OR a.tenant_id = $2::uuid) " \
	"  AND ($3::uuid IS NULL OR a.agent_user_id = $3::uuid) " \
	"  AND ($4::uuid IS NULL OR a.investor_user_id = $4::uuid) "

/* The row of sql (SCOPE_WHERE) for id in sc: 0 with *row, PC_E_NOT_FOUND,
 * PIN_ERR_DB. */
static int one_in_scope(const char *stmt, const char *sql, const char *id,
		const struct cd_apt_scope *sc, PGresult **row)
{
	const char *p[4] = { id, sc->tenant_id, sc->agent_user_id, sc->investor_user_id };
	PGresult *res = pc_api->db_exec_prepared(stmt, sql, 4, p);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return PC_E_NOT_FOUND;
	*row = res;
	return 0;
}

int cd_apt_lock(const char *id, const struct cd_apt_scope *sc, PGresult **row)
{
	return one_in_scope("apt_lock",
		"SELECT " CD_APT_COLS ", NULL::text, NULL::text, s.cancellation_cutoff_minutes "
		"FROM calendar.appointments a "
		"JOIN calendar.availability_slots s ON s.id = a.slot_id "
		SCOPE_WHERE "FOR UPDATE OF a", id, sc, row);
}

int cd_apt_fetch(const char *id, const struct cd_apt_scope *sc, PGresult **row)
{
	return one_in_scope("apt_fetch", CD_APT_VIEW_SQL SCOPE_WHERE, id, sc, row);
}

json_object *cd_apt_json(const PGresult *res, int row)
{
	json_object *o = json_object_new_object(), *sub;

	pc_json_col(o, "id", res, row, CD_APT_C_ID);
	pc_json_col(o, "tenantId", res, row, CD_APT_C_TENANT);
	pc_json_col(o, "slotId", res, row, CD_APT_C_SLOT);
	pc_json_col(o, "calendarEventId", res, row, CD_APT_C_EVENT);
	pc_json_col(o, "agentUserId", res, row, CD_APT_C_AGENT);
	pc_json_col(o, "investorUserId", res, row, CD_APT_C_INVESTOR);
	pc_json_col(o, "kind", res, row, CD_APT_C_KIND);
	pc_json_col_time(o, "startAt", res, row, CD_APT_C_START);
	pc_json_col_time(o, "endAt", res, row, CD_APT_C_END);
	pc_json_col(o, "timeZone", res, row, CD_APT_C_TZ);
	pc_json_col(o, "status", res, row, CD_APT_C_STATUS);
	pc_json_col_bool(o, "autoConfirmed", res, row, CD_APT_C_AUTO);
	pc_json_col(o, "comment", res, row, CD_APT_C_COMMENT);
	pc_json_col(o, "projectId", res, row, CD_APT_C_PROJECT);
	pc_json_col(o, "propertyObjectId", res, row, CD_APT_C_PROPERTY);
	pc_json_col(o, "consultationRequestId", res, row, CD_APT_C_CONSULTATION);
	pc_json_col_time(o, "confirmDeadlineAt", res, row, CD_APT_C_DEADLINE);
	pc_json_col(o, "cancelledBy", res, row, CD_APT_C_CANCELLED_BY);
	pc_json_col(o, "cancelReason", res, row, CD_APT_C_CANCEL_REASON);
	pc_json_col(o, "outcome", res, row, CD_APT_C_OUTCOME);
	pc_json_col(o, "outcomeNote", res, row, CD_APT_C_OUTCOME_NOTE);
	pc_json_col(o, "rescheduledFromAppointmentId", res, row, CD_APT_C_FROM);
	pc_json_col(o, "rescheduledToAppointmentId", res, row, CD_APT_C_TO);
	pc_json_col_time(o, "decidedAt", res, row, CD_APT_C_DECIDED);
	pc_json_col_time(o, "cancelledAt", res, row, CD_APT_C_CANCELLED);
	pc_json_col_time(o, "completedAt", res, row, CD_APT_C_COMPLETED);
	pc_json_col_time(o, "createdAt", res, row, CD_APT_C_CREATED);
	pc_json_col_time(o, "updatedAt", res, row, CD_APT_C_UPDATED);
	pc_json_col_int(o, "version", res, row, CD_APT_C_VERSION);
	sub = json_object_new_object();
	pc_json_col(sub, "id", res, row, CD_APT_C_SLOT);
	pc_json_col(sub, "status", res, row, CD_APT_C_SLOT_STATUS);
	json_object_object_add(o, "slot", sub);
	sub = json_object_new_object();
	pc_json_col(sub, "id", res, row, CD_APT_C_EVENT);
	pc_json_col(sub, "status", res, row, CD_APT_C_EVENT_STATUS);
	json_object_object_add(o, "event", sub);
	return o;
}

/* -------------------------------------------------------------- payloads */

/* The fields every appointment-* contract starts with (events.md):
 * AppointmentId, TenantId, EventId, AgentUserId, InvestorUserId, Kind,
 * StartAt, and with_span: EndAt, TimeZone; then OriginalAppointmentId and
 * RescheduleCount (the reschedule chain, issue 32). */
static json_object *payload_head(const PGresult *res, int row, int with_span)
{
	json_object *o = json_object_new_object();

	pc_json_col(o, "appointmentId", res, row, CD_APT_C_ID);
	pc_json_col(o, "tenantId", res, row, CD_APT_C_TENANT);
	pc_json_col(o, "eventId", res, row, CD_APT_C_EVENT);
	pc_json_col(o, "agentUserId", res, row, CD_APT_C_AGENT);
	pc_json_col(o, "investorUserId", res, row, CD_APT_C_INVESTOR);
	pc_json_col(o, "kind", res, row, CD_APT_C_KIND);
	pc_json_col_time(o, "startAt", res, row, CD_APT_C_START);
	if (with_span) {
		pc_json_col_time(o, "endAt", res, row, CD_APT_C_END);
		pc_json_col(o, "timeZone", res, row, CD_APT_C_TZ);
	}
	/* the reschedule chain (issue 32: the invitation's UID and SEQUENCE) */
	pc_json_col(o, "originalAppointmentId", res, row, CD_APT_C_ORIGINAL);
	pc_json_col_int(o, "rescheduleCount", res, row, CD_APT_C_RESCHEDULES);
	return o;
}

static json_object *payload_created(const PGresult *res, int row)
{
	json_object *o = payload_head(res, row, 1);

	pc_json_col(o, "slotId", res, row, CD_APT_C_SLOT);
	pc_json_col(o, "status", res, row, CD_APT_C_STATUS);
	pc_json_col_bool(o, "autoConfirmed", res, row, CD_APT_C_AUTO);
	pc_json_col_time(o, "confirmDeadlineAt", res, row, CD_APT_C_DEADLINE);
	pc_json_col(o, "projectId", res, row, CD_APT_C_PROJECT);
	pc_json_col(o, "propertyObjectId", res, row, CD_APT_C_PROPERTY);
	pc_json_col(o, "consultationRequestId", res, row, CD_APT_C_CONSULTATION);
	pc_json_col(o, "rescheduledFromAppointmentId", res, row, CD_APT_C_FROM);
	/* Comment is class Internal: carried in this contract, never logged */
	pc_json_col(o, "comment", res, row, CD_APT_C_COMMENT);
	return o;
}

static json_object *payload_confirmed(const PGresult *res, int row)
{
	json_object *o = payload_head(res, row, 1);

	pc_json_col_bool(o, "autoConfirmed", res, row, CD_APT_C_AUTO);
	return o;
}

static json_object *payload_cancelled(const PGresult *res, int row, const char *reason)
{
	json_object *o = payload_head(res, row, 1);

	pc_json_str(o, "reason", reason);
	pc_json_col(o, "cancelledBy", res, row, CD_APT_C_CANCELLED_BY);
	/* CancelReason is class Internal: carried, never logged */
	pc_json_col(o, "cancelReason", res, row, CD_APT_C_CANCEL_REASON);
	pc_json_col(o, "rescheduledToAppointmentId", res, row, CD_APT_C_TO);
	return o;
}

static json_object *payload_completed(const PGresult *res, int row)
{
	json_object *o = payload_head(res, row, 0);

	pc_json_col(o, "outcome", res, row, CD_APT_C_OUTCOME);
	return o;
}

static int emit(const char *topic, const char *type, const PGresult *res, int row,
		json_object *payload)
{
	const char *id = PQgetvalue(res, row, CD_APT_C_ID);

	return pc_outbox(topic, id, type, AGG, id, payload);
}

/* ---------------------------------------------------------------- booking */

/* Why a slot row (status, start) cannot be booked now; 0 when it can. */
static int slot_refusal(const char *status, int64_t start_us, int64_t now_us)
{
	if (strcmp(status, "Booked") == 0)
		return CD_APT_E_SLOT_BOOKED;
	if (strcmp(status, "Available") != 0)
		return CD_APT_E_SLOT_UNAVAILABLE;
	if (start_us < now_us + CD_APT_LEAD_MIN * 60LL * 1000000)
		return CD_APT_E_LEAD_TIME;
	return 0;
}

/* status, owner, kind, start, whether the owner may be booked (no
 * identity replica, or one with status Active: cd_agent_active), and whether
 * the slot lies in an absence of its owner (issue 32, calendar.time_off). */
static PGresult *slot_get(const char *slot_id)
{
	const char *p[1] = { slot_id };

	return pc_api->db_exec_prepared("apt_slot_get",
		"SELECT s.status, s.owner_user_id, s.kind, calendar.us(s.start_at), "
		"  NOT EXISTS (SELECT 1 FROM calendar.user_replicas u "
		"    WHERE u.user_id = s.owner_user_id AND u.status <> 'Active') AS owner_active, "
		"  EXISTS (SELECT 1 FROM calendar.time_off t "
		"    WHERE t.owner_user_id = s.owner_user_id "
		"      AND tstzrange(t.start_at, t.end_at) && tstzrange(s.start_at, s.end_at)) "
		"    AS in_time_off "
		"FROM calendar.availability_slots s WHERE s.id = $1::uuid", 1, p);
}

/* Why a slot_get row cannot be booked now; 0 when it can.  A departed agent
 * (issue 12) is named before the slot's own state: the departure archived
 * the slot, and "the agent is unavailable" is the truth the investor needs.
 * So is an absence (issue 32): it archived the slot too. */
static int slot_row_refusal(const PGresult *slot, int64_t now_us)
{
	if (strcmp(PQgetvalue(slot, 0, 4), "t") != 0)
		return CD_APT_E_AGENT_UNAVAILABLE;
	if (strcmp(PQgetvalue(slot, 0, 5), "t") == 0)
		return CD_APT_E_TIME_OFF;
	return slot_refusal(PQgetvalue(slot, 0, 0), pc_col_us(slot, 0, 3), now_us);
}

/* Serialises the bookings of one investor (so the counts of the guards
 * cannot be raced by the same investor's parallel requests), then the
 * per-investor rate limit: bookings created in the rolling hour (refused
 * attempts leave no row, so they do not count).  Anti-spam counts a
 * reschedule pair as one: the new side of a pair is not counted, and a
 * reschedule is not refused by the limit.  0 / CD_APT_E_RATE / PIN_ERR_DB. */
static int investor_gate(const struct cd_apt_book_req *b, const char *now)
{
	long long rate = pc_api->config_num("appointments.rate_limit_per_hour");
	const char *p[2] = { b->investor_user_id, now };
	PGresult *res;

	res = pc_api->db_exec_prepared("apt_investor_lock",
		"SELECT pg_advisory_xact_lock(hashtext('calendar.appointments.investor:' || $1))",
		1, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (rate <= 0 || b->rescheduled_from)
		return 0;
	res = pc_api->db_exec_prepared("apt_rate",
		"SELECT count(*) FROM calendar.appointments "
		"WHERE investor_user_id = $1::uuid "
		"  AND created_at >= $2::timestamptz - interval '1 hour' "
		"  AND rescheduled_from_appointment_id IS NULL", 2, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	return atoll(PQgetvalue(res, 0, 0)) >= rate ? CD_APT_E_RATE : 0;
}

/* The slot as it stands: found, bookable, and (reschedule) of the same agent
 * and kind.  0 with *slot_out (the slot_get row), CD_APT_E_*, PIN_ERR_DB. */
static int slot_check(const struct cd_apt_book_req *b, int64_t now_us, PGresult **slot_out)
{
	PGresult *slot = slot_get(b->slot_id);
	int rc;

	if (!pc_res_ok(slot, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(slot) != 1)
		return CD_APT_E_SLOT_NOT_FOUND;
	rc = slot_row_refusal(slot, now_us);
	if (rc < 0)
		return rc;
	if ((b->same_agent && strcmp(b->same_agent, PQgetvalue(slot, 0, 1)) != 0) ||
			(b->same_kind && strcmp(b->same_kind, PQgetvalue(slot, 0, 2)) != 0))
		return CD_APT_E_OTHER_SLOT;
	*slot_out = slot;
	return 0;
}

/* Anti-spam (domain.md): active = Pending | Confirmed with StartAt > now;
 * the appointment being rescheduled does not count (the pair is one).
 * 0 / CD_APT_E_DUPLICATE / CD_APT_E_LIMIT / PIN_ERR_DB. */
static int anti_spam(const struct cd_apt_book_req *b, const PGresult *slot, const char *now)
{
	const char *p[5] = { b->investor_user_id, PQgetvalue(slot, 0, 1),
		PQgetvalue(slot, 0, 2), now, b->rescheduled_from };
	PGresult *res = pc_api->db_exec_prepared("apt_antispam",
		"SELECT count(*) FILTER (WHERE agent_user_id = $2::uuid AND kind = $3), count(*) "
		"FROM calendar.appointments "
		"WHERE investor_user_id = $1::uuid AND status IN ('Pending', 'Confirmed') "
		"  AND start_at > $4::timestamptz AND ($5::uuid IS NULL OR id <> $5::uuid)",
		5, p);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (atoll(PQgetvalue(res, 0, 0)) > 0)
		return CD_APT_E_DUPLICATE;
	if (atoll(PQgetvalue(res, 0, 1)) >= CD_APT_MAX_ACTIVE)
		return CD_APT_E_LIMIT;
	return 0;
}

/* Investor-scoped checks before the slot update: rate limit, slot guards,
 * anti-spam.  *slot_out: the slot_get row. */
static int book_guards(const struct cd_apt_book_req *b, const char *now, int64_t now_us,
		PGresult **slot_out)
{
	int rc;

	if ((rc = investor_gate(b, now)) < 0)
		return rc;
	/* A reschedule touches two slots: lock both in id order (after the
	 * appointment and the investor lock), so reschedules crossing the same
	 * slots queue instead of deadlocking. */
	if (b->old_slot_id) {
		const char *q[2] = { b->slot_id, b->old_slot_id };
		PGresult *res = pc_api->db_exec_prepared("apt_slots_lock",
			"SELECT s.id FROM calendar.availability_slots s "
			"WHERE s.id IN ($1::uuid, $2::uuid) ORDER BY s.id FOR UPDATE", 2, q);

		if (!pc_res_ok(res, PGRES_TUPLES_OK))
			return PIN_ERR_DB;
	}
	if ((rc = slot_check(b, now_us, slot_out)) < 0)
		return rc;
	return anti_spam(b, *slot_out, now);
}

/* The race: Available -> Booked, conditional.  Losers wait here for the
 * winner's row lock, then see status = 'Booked' and update nothing.
 * 0 with *slot (tenant, owner, kind, start, end, tz, auto_confirm, project,
 * property, location), CD_APT_E_*, PIN_ERR_DB. */
static int slot_take(const char *slot_id, const char *now, int64_t now_us, PGresult **slot)
{
	const char *p[2] = { slot_id, now };
	PGresult *res, *cur;
	int rc;

	res = pc_api->db_exec_prepared("apt_slot_book",
		"UPDATE calendar.availability_slots s SET status = 'Booked', "
		"  version = s.version + 1, updated_at = $2::timestamptz "
		"WHERE s.id = $1::uuid AND s.status = 'Available' "
		"  AND s.start_at >= $2::timestamptz + interval '60 minutes' "
		"RETURNING s.tenant_id, s.owner_user_id, s.kind, calendar.us(s.start_at), "
		"  calendar.us(s.end_at), s.time_zone, s.auto_confirm, s.project_id, "
		"  s.property_object_id, s.location", 2, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) == 1) {
		*slot = res;
		return 0;
	}
	/* a fresh snapshot (READ COMMITTED) tells why */
	cur = slot_get(slot_id);
	if (!pc_res_ok(cur, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(cur) != 1)
		return CD_APT_E_SLOT_NOT_FOUND;
	rc = slot_row_refusal(cur, now_us);
	return rc < 0 ? rc : CD_APT_E_SLOT_BOOKED;
}

/* The CalendarEvent of a booking (slot_take row): shared lifecycle code
 * (reminders, event-created).  0 / PIN_ERR*. */
static int booking_event(const struct cd_apt_book_req *b, const PGresult *slot,
		const char *apt_id, const char *ev_id, int64_t now_us)
{
	struct cd_event_new ev;
	PGresult *evrow;

	memset(&ev, 0, sizeof(ev));
	ev.id = ev_id;
	ev.tenant_id = PQgetvalue(slot, 0, 0);
	ev.owner_user_id = PQgetvalue(slot, 0, 1);
	ev.kind = PQgetvalue(slot, 0, 2);
	ev.origin = "Appointment";
	ev.title = strcmp(ev.kind, "Showing") == 0 ? "Showing (booked by an investor)"
		: "Consultation (booked by an investor)";
	ev.location = pc_col(slot, 0, 9);
	ev.start_us = pc_col_us(slot, 0, 3);
	ev.has_end = 1;
	ev.end_us = pc_col_us(slot, 0, 4);
	ev.time_zone = PQgetvalue(slot, 0, 5);
	ev.client_user_id = b->investor_user_id;
	ev.project_id = pc_col(slot, 0, 7);
	ev.property_object_id = pc_col(slot, 0, 8);
	ev.appointment_id = apt_id;
	ev.created_by_user_id = b->investor_user_id;
	return cd_event_create(&ev, now_us, &evrow);
}

/* The appointment row (CD_APT_COLS) of a booking.  0 with *row,
 * CD_APT_E_SLOT_BOOKED (the unique index of active appointments of a slot: the
 * structural guarantee), PIN_ERR_DB. */
static int insert_appointment(const struct cd_apt_book_req *b, const PGresult *slot,
		const char *apt_id, const char *ev_id, int autoc, const char *now,
		int64_t now_us, PGresult **row)
{
	int64_t start_us = pc_col_us(slot, 0, 3);
	int64_t deadline_us = now_us + CD_APT_DEADLINE_MAX_US;
	const char *p[20];

	if (start_us - CD_APT_DEADLINE_BEFORE_US < deadline_us)
		deadline_us = start_us - CD_APT_DEADLINE_BEFORE_US;
	/* every instant the row stores stays in the supported range */
	if (!pc_instant_ok(start_us) || !pc_instant_ok(pc_col_us(slot, 0, 4)) ||
			!pc_instant_ok(deadline_us))
		return PC_E_RANGE;
	p[0] = apt_id;
	p[1] = PQgetvalue(slot, 0, 0);
	p[2] = b->slot_id;
	p[3] = ev_id;
	p[4] = PQgetvalue(slot, 0, 1);
	p[5] = b->investor_user_id;
	p[6] = PQgetvalue(slot, 0, 2);
	p[7] = pc_time_param(start_us);
	p[8] = pc_time_param(pc_col_us(slot, 0, 4));
	p[9] = PQgetvalue(slot, 0, 5);
	p[10] = autoc ? "Confirmed" : "Pending";
	p[11] = autoc ? "true" : "false";
	p[12] = b->comment;
	p[13] = pc_col(slot, 0, 7);
	p[14] = pc_col(slot, 0, 8);
	p[15] = b->consultation_request_id;
	p[16] = pc_time_param(deadline_us);
	p[17] = b->rescheduled_from;
	p[18] = autoc ? now : NULL;
	p[19] = now;
	*row = pc_api->db_exec_prepared("apt_insert",
		"INSERT INTO calendar.appointments AS a (id, tenant_id, slot_id, calendar_event_id, "
		"  agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status, "
		"  auto_confirmed, comment, project_id, property_object_id, consultation_request_id, "
		"  confirm_deadline_at, rescheduled_from_appointment_id, decided_at, created_at, "
		"  updated_at, version, original_appointment_id, reschedule_count) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::boolean, $13, $14, $15, "
		"  $16, $17, $18, $19::timestamptz, $20::timestamptz, $20::timestamptz, 1, "
		/* a reschedule continues the old one's chain (0740) */
		"  coalesce((SELECT coalesce(o.original_appointment_id, o.id) "
		"    FROM calendar.appointments o WHERE o.id = $18::uuid), $1::uuid), "
		"  coalesce((SELECT o.reschedule_count + 1 "
		"    FROM calendar.appointments o WHERE o.id = $18::uuid), 0)) "
		"RETURNING " CD_APT_COLS, 20, p);
	if (*row && PQresultStatus(*row) == PGRES_FATAL_ERROR &&
			strcmp(pc_api->db_sqlstate(*row), "23505") == 0 &&
			strcmp(pc_api->db_constraint(*row), "ux_appointments_slot_active") == 0)
		return CD_APT_E_SLOT_BOOKED;
	if (!pc_res_ok(*row, PGRES_TUPLES_OK) || PQntuples(*row) != 1)
		return PIN_ERR_DB;
	return 0;
}

int cd_apt_book(const struct cd_apt_book_req *b, int64_t now_us, const char **id_out)
{
	const char *now = pc_time_param(now_us);
	PGresult *slot, *row;
	char apt_id[37], ev_id[37];
	int rc, autoc;

	if ((rc = book_guards(b, now, now_us, &slot)) < 0)
		return rc;
	if ((rc = slot_take(b->slot_id, now, now_us, &slot)) < 0)
		return rc;
	autoc = strcmp(PQgetvalue(slot, 0, 6), "t") == 0;
	pc_api->uuid_v7(apt_id);
	pc_api->uuid_v7(ev_id);
	if ((rc = booking_event(b, slot, apt_id, ev_id, now_us)) < 0)
		return rc;
	if ((rc = insert_appointment(b, slot, apt_id, ev_id, autoc, now, now_us, &row)) < 0)
		return rc;
	if ((rc = emit(PC_TOPIC_APPOINTMENT_CREATED, "pin.calendar.appointment-created", row, 0,
			payload_created(row, 0))) < 0)
		return rc;
	if (autoc && (rc = emit(PC_TOPIC_APPOINTMENT_CONFIRMED,
			"pin.calendar.appointment-confirmed", row, 0,
			payload_confirmed(row, 0))) < 0)
		return rc;
	pc_api->metric_add("pin_calendar_appointments_created_total",
			autoc ? "auto_confirmed=\"true\"" : "auto_confirmed=\"false\"", 1);
	*id_out = pc_api->strdup(apt_id);
	return 0;
}

/* ------------------------------------------------------------ transitions */

/* The event of an appointment -> action ("cancel" | "complete").  An event
 * already terminal (or purged) is left alone. */
static int event_cascade(const char *event_id, const char *action, const char *reason,
		int64_t now_us)
{
	PGresult *ev, *out;
	int rc;

	rc = cd_event_lock(event_id, NULL, NULL, &ev);
	if (rc == PC_E_NOT_FOUND)
		return 0;
	if (rc < 0)
		return rc;
	rc = cd_event_transition(ev, action, reason, now_us, &out);
	return rc == PC_E_TRANSITION ? 0 : rc;
}

static int end_row(const PGresult *locked, int row, const struct cd_apt_end *x, int64_t now_us)
{
	const char *now = pc_time_param(now_us);
	const char *p[6];
	PGresult *res, *upd;
	int rc;

	p[0] = PQgetvalue(locked, row, CD_APT_C_ID);
	p[1] = x->status;
	p[2] = x->cancelled_by;
	p[3] = x->cancel_reason;
	p[4] = now;
	p[5] = x->rescheduled_to;
	/* Declined and Expired only from Pending; Cancelled from Pending | Confirmed */
	upd = pc_api->db_exec_prepared("apt_end",
		"UPDATE calendar.appointments a SET status = $2, cancelled_by = $3, "
		"  cancel_reason = $4, cancelled_at = $5::timestamptz, "
		"  decided_at = CASE WHEN $2 = 'Declined' THEN $5::timestamptz ELSE a.decided_at END, "
		"  rescheduled_to_appointment_id = coalesce($6::uuid, a.rescheduled_to_appointment_id), "
		"  updated_at = $5::timestamptz, version = a.version + 1 "
		"WHERE a.id = $1::uuid AND (a.status = 'Pending' "
		"  OR ($2 = 'Cancelled' AND a.status = 'Confirmed')) "
		"RETURNING " CD_APT_COLS, 6, p);
	if (!pc_res_ok(upd, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(upd) != 1)
		return PC_E_TRANSITION;

	/* slot: released while the lead time still allows a booking and its
	 * agent is active (a departed agent gets nothing back), else archived */
	p[0] = PQgetvalue(locked, row, CD_APT_C_SLOT);
	p[1] = x->release_slot ? "true" : "false";
	p[2] = now;
	p[3] = x->slot_archive_reason;
#define RELEASED \
	"$2::boolean AND s.start_at >= $3::timestamptz + interval '60 minutes' " \
	"  AND NOT EXISTS (SELECT 1 FROM calendar.user_replicas u " \
	"    WHERE u.user_id = s.owner_user_id AND u.status <> 'Active') "
	res = pc_api->db_exec_prepared("apt_slot_release",
		"UPDATE calendar.availability_slots s SET "
		"  status = CASE WHEN " RELEASED " THEN 'Available' ELSE 'Archived' END, "
		"  archive_reason = CASE WHEN " RELEASED " THEN NULL ELSE $4 END, "
		"  version = s.version + 1, updated_at = $3::timestamptz "
		"WHERE s.id = $1::uuid AND s.status = 'Booked'", 4, p);
#undef RELEASED
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;

	rc = event_cascade(PQgetvalue(locked, row, CD_APT_C_EVENT), "cancel",
			x->cancel_reason ? x->cancel_reason : x->reason, now_us);
	if (rc < 0)
		return rc;
	rc = emit(PC_TOPIC_APPOINTMENT_CANCELLED, "pin.calendar.appointment-cancelled", upd, 0,
			payload_cancelled(upd, 0, x->reason));
	if (rc < 0)
		return rc;
	pc_api->metric_add("pin_calendar_appointments_cancelled_total",
			pc_api->sprintf("reason=\"%s\"", x->reason), 1);
	return 0;
}

int cd_apt_end(const PGresult *locked, const struct cd_apt_end *x, int64_t now_us)
{
	return end_row(locked, 0, x, now_us);
}

int cd_apt_confirm(const PGresult *locked, int64_t now_us)
{
	const char *p[2];
	PGresult *upd;

	if (strcmp(PQgetvalue(locked, 0, CD_APT_C_STATUS), "Pending") != 0)
		return PC_E_TRANSITION;
	/* "before ConfirmDeadlineAt": at the deadline the row is already the
	 * timeout job's (ConfirmDeadlineAt <= now -> Expired) */
	if (now_us >= pc_col_us(locked, 0, CD_APT_C_DEADLINE))
		return CD_APT_E_DEADLINE;
	p[0] = PQgetvalue(locked, 0, CD_APT_C_ID);
	p[1] = pc_time_param(now_us);
	upd = pc_api->db_exec_prepared("apt_confirm",
		"UPDATE calendar.appointments a SET status = 'Confirmed', "
		"  decided_at = $2::timestamptz, updated_at = $2::timestamptz, "
		"  version = a.version + 1 "
		"WHERE a.id = $1::uuid AND a.status = 'Pending' RETURNING " CD_APT_COLS, 2, p);
	if (!pc_res_ok(upd, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(upd) != 1)
		return PC_E_TRANSITION;
	return emit(PC_TOPIC_APPOINTMENT_CONFIRMED, "pin.calendar.appointment-confirmed", upd, 0,
			payload_confirmed(upd, 0));
}

int cd_apt_complete(const PGresult *locked, const char *outcome, const char *note,
		int64_t now_us)
{
	const char *p[4];
	PGresult *upd;
	int rc;

	if (strcmp(PQgetvalue(locked, 0, CD_APT_C_STATUS), "Confirmed") != 0)
		return PC_E_TRANSITION;
	if (now_us < pc_col_us(locked, 0, CD_APT_C_START))
		return CD_APT_E_NOT_STARTED;
	p[0] = PQgetvalue(locked, 0, CD_APT_C_ID);
	p[1] = outcome;
	p[2] = note;
	p[3] = pc_time_param(now_us);
	upd = pc_api->db_exec_prepared("apt_complete",
		"UPDATE calendar.appointments a SET status = $2, outcome = $2, "
		"  outcome_note = $3, completed_at = $4::timestamptz, "
		"  updated_at = $4::timestamptz, version = a.version + 1 "
		"WHERE a.id = $1::uuid AND a.status = 'Confirmed' RETURNING " CD_APT_COLS, 4, p);
	if (!pc_res_ok(upd, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(upd) != 1)
		return PC_E_TRANSITION;
	rc = event_cascade(PQgetvalue(locked, 0, CD_APT_C_EVENT), "complete", NULL, now_us);
	if (rc < 0)
		return rc;
	return emit(PC_TOPIC_APPOINTMENT_COMPLETED, "pin.calendar.appointment-completed", upd, 0,
			payload_completed(upd, 0));
}

/* ------------------------------------------------------------------ expiry */

int cd_apt_expire_batch(int64_t now_us, int batch)
{
	static const struct cd_apt_end expire = {
		"Expired", "System", "Expired", NULL, 1, NULL, NULL
	};
	const char *p[2];
	PGresult *res;
	int i, n, rc;

	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	p[0] = pc_time_param(now_us);
	p[1] = pc_api->sprintf("%d", batch);
	res = pc_api->db_exec_prepared("apt_expire_pick",
		"SELECT " CD_APT_COLS ", NULL::text, NULL::text, NULL::int "
		"FROM calendar.appointments a "
		"WHERE a.status = 'Pending' AND a.confirm_deadline_at <= $1::timestamptz "
		"ORDER BY a.confirm_deadline_at LIMIT $2::int FOR UPDATE SKIP LOCKED", 2, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK)) {
		rc = PIN_ERR_DB;
		goto fail;
	}
	n = PQntuples(res);
	for (i = 0; i < n; i++)
		if ((rc = end_row(res, i, &expire, now_us)) < 0)
			goto fail;
	if (pc_api->db_commit() != 0)
		return PIN_ERR_DB;
	return n;
fail:
	pc_api->db_rollback();
	return rc < 0 && rc != PC_E_TRANSITION ? rc : PIN_ERR_DB;
}

/* ------------------------------------------------------- departed agents */

int cd_apt_decline_unavailable(const char *agent_user_id, int64_t now_us, int *declined)
{
	static const struct cd_apt_end gone = {
		"Declined", "System", "AgentUnavailable", NULL, 0, NULL, NULL
	};
	const char *p[1] = { agent_user_id };
	PGresult *res;
	int i, n, rc;

	*declined = 0;
	/* id order: the same order as any other multi-row lock of appointments */
	res = pc_api->db_exec_prepared("apt_unavailable_pick",
		"SELECT " CD_APT_COLS ", NULL::text, NULL::text, NULL::int "
		"FROM calendar.appointments a "
		"WHERE a.agent_user_id = $1::uuid AND a.status = 'Pending' "
		"ORDER BY a.id FOR UPDATE", 1, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	n = PQntuples(res);
	for (i = 0; i < n; i++) {
		rc = end_row(res, i, &gone, now_us);
		if (rc == PC_E_TRANSITION)
			continue;
		if (rc < 0)
			return rc;
		(*declined)++;
	}
	return 0;
}

/* ------------------------------------------------------------- time off */

int cd_apt_decline_time_off(const char *agent_user_id, const char *from, const char *to,
		int64_t now_us, const char ***ids, int *n)
{
	static const struct cd_apt_end off = {
		"Declined", "Agent", "DeclinedByAgent", NULL, 0, NULL, "time_off"
	};
	const char *p[3] = { agent_user_id, from, to };
	const char **out;
	PGresult *res;
	int i, rows, rc;

	*n = 0;
	*ids = NULL;
	/* id order: the same order as any other multi-row lock of appointments */
	res = pc_api->db_exec_prepared("apt_time_off_pick",
		"SELECT " CD_APT_COLS ", NULL::text, NULL::text, NULL::int "
		"FROM calendar.appointments a "
		"WHERE a.agent_user_id = $1::uuid AND a.status = 'Pending' "
		"  AND a.start_at < $3::timestamptz AND a.end_at > $2::timestamptz "
		"ORDER BY a.id FOR UPDATE", 3, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	rows = PQntuples(res);
	out = pc_api->alloc(sizeof(*out) * (size_t)(rows > 0 ? rows : 1));
	for (i = 0; i < rows; i++) {
		rc = end_row(res, i, &off, now_us);
		if (rc == PC_E_TRANSITION)
			continue;
		if (rc < 0)
			return rc;
		out[(*n)++] = PQgetvalue(res, i, CD_APT_C_ID);
	}
	*ids = out;
	return 0;
}
