/* crm_booking.c -- Calendar CRM Booking Sync (seed 004_09754351dec30ab5,
 * group calendar-crm-booking-events): the reserve / booking deadlines of CRM
 * bookings as BookingDeadline events (Origin CrmBooking) in the calendar of
 * the deal's executor, plus the projection calendar.booking_deadline_links.
 *
 * The host runs the inbox check (idempotency by messageId), the transaction,
 * the offset commit, retries and the DLQ; this file only decides.  Business
 * idempotency: one link per (booking, phase); completion / cancellation are
 * idempotent by the terminal state of link and event; a move by comparing
 * StartAt.  Cross-topic order: terminal messages write tombstone links of
 * both phases, so late booking-created / booking-confirmed are no-ops;
 * booking-paid / booking-confirmed with no Reserve link write its tombstone,
 * so a late booking-created opens no Reserve deadline.
 *
 * Lock order (shared with crm_deal.c): deal replica -> links -> events. */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "caldomain/schema.h"
#include "workers.h"
#include "caldomain/crm.h"

#define CODE_INVALID "CAL_BOOKING_SYNC_INVALID_PAYLOAD"
#define CODE_NO_REPLICA "CAL_BOOKING_SYNC_DEAL_REPLICA_NOT_FOUND"
#define CODE_DB "CAL_BOOKING_SYNC_DB_ERROR"
#define CODE_CONFLICT "CAL_BOOKING_SYNC_CONCURRENT_MODIFICATION"
#define CONFLICT_RETRIES 3              /* seed 004: 3 attempts at once */
/* seed 004's DLQ counter: the host counts every DLQ route of the group
 * (pin_consumer.dlq_metric, ABI 1.8); this file never adds to it */
#define DLQ_METRIC "calendar_crm_booking_sync_dlq_total"
#define DEADLINE_TZ "Europe/Moscow"     /* seed 004, assumption v1 */

#define T_CREATED   PC_TOPIC_CRM_BOOKING_CREATED
#define T_CONFIRMED PC_TOPIC_CRM_BOOKING_CONFIRMED
#define T_PAID      PC_TOPIC_CRM_BOOKING_PAID
#define T_EXPIRED   PC_TOPIC_CRM_BOOKING_EXPIRED
#define T_CANCELLED PC_TOPIC_CRM_BOOKING_CANCELLED

static const char *const topics[] = { T_CREATED, T_CONFIRMED, T_PAID, T_EXPIRED,
	T_CANCELLED, NULL };

/* one message being handled */
struct bctx {
	const struct pin_msg *msg;
	struct pin_consume_result *res;
	const char *booking_id, *deal_id, *property_id;
	int64_t now;
	/* the deal replica, read (and locked FOR SHARE) once per attempt */
	int routed;
	int route_state;            /* enum route_state */
	const char *tenant, *owner;
};

/* a link row (booking_deadline_links), locked */
struct link {
	int found;
	const char *deal_id, *tenant_id, *event_id, *status;
};

/* ------------------------------------------------------------------ helpers */

static const struct cd_crm_sync sync = { CODE_INVALID, CODE_DB,
	"crm booking sync: failed", NULL };

static enum pin_consume_status invalid(struct bctx *c, const char *detail)
{
	return cd_crm_invalid(&sync, c->msg, c->res, detail);
}

static enum pin_consume_status db_error(struct bctx *c, const char *what)
{
	return cd_crm_db_error(&sync, c->msg, c->res, what);
}

static void log_ev(const struct bctx *c, const char *what, const char *phase)
{
	pc_api->log(PIN_LOG_INFO, what, "messageId", c->msg->message_id,
			"bookingId", c->booking_id, "dealId", c->deal_id ? c->deal_id : "",
			"phase", phase ? phase : "", "topic", c->msg->topic, NULL);
}

static void skipped(const struct bctx *c, const char *reason, const char *phase)
{
	pc_api->metric_add("calendar_crm_booking_sync_skipped_total",
			pc_api->sprintf("reason=\"%s\"", reason), 1);
	log_ev(c, pc_api->sprintf("crm booking sync: %s", reason), phase);
}

/* Locks the link (booking, phase).  0 (l->found says whether it exists) or
 * PIN_ERR_DB. */
static int link_lock(const char *booking_id, const char *phase, struct link *l)
{
	const char *p[2] = { booking_id, phase };
	PGresult *r = pc_api->db_exec_prepared("crmb_link_lock",
		"SELECT deal_id, tenant_id, calendar_event_id, status "
		"FROM calendar.booking_deadline_links "
		"WHERE booking_id = $1 AND phase = $2 FOR UPDATE", 2, p);

	memset(l, 0, sizeof(*l));
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(r) == 1) {
		l->found = 1;
		l->deal_id = pc_col(r, 0, 0);
		l->tenant_id = pc_col(r, 0, 1);
		l->event_id = pc_col(r, 0, 2);
		l->status = pc_col(r, 0, 3);
	}
	return 0;
}

static int link_set_status(const char *booking_id, const char *phase, const char *status,
		int64_t now)
{
	const char *p[4] = { booking_id, phase, status, pc_time_param(now) };
	PGresult *r = pc_api->db_exec_prepared("crmb_link_status",
		"UPDATE calendar.booking_deadline_links SET status = $3, updated_at = $4 "
		"WHERE booking_id = $1 AND phase = $2", 4, p);

	return pc_res_ok(r, PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

/* Inserts a link unless (booking, phase) exists.  event_id NULL = tombstone
 * (Cancelled).  msg_at: envelope createdAt of the message (0 = unknown), kept
 * as last_event_at.  0 (*inserted: 1 inserted, 0 existed; inserted may be
 * NULL), PIN_ERR_DB. */
static int link_insert(const char *booking_id, const char *phase, const char *deal_id,
		const char *tenant_id, const char *event_id, int64_t now, int64_t msg_at,
		int *inserted)
{
	const char *p[8] = { booking_id, phase, deal_id, tenant_id, event_id,
		event_id ? "Open" : "Cancelled", pc_time_param(now),
		msg_at > 0 ? pc_time_param(msg_at) : NULL };
	PGresult *r = pc_api->db_exec_prepared("crmb_link_insert",
		"INSERT INTO calendar.booking_deadline_links (booking_id, phase, deal_id, "
		"  tenant_id, calendar_event_id, status, created_at, updated_at, last_event_at) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) "
		"ON CONFLICT (booking_id, phase) DO NOTHING", 8, p);

	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	if (inserted)
		*inserted = strcmp(PQcmdTuples(r), "1") == 0;
	return 0;
}

/* link_insert of an Open link (event_id set) that also answers the deadline
 * `at` as the title shows it, in local time of DEADLINE_TZ ("01.12.2026
 * 12:00"; one round trip less than asking for it separately).  0 (*when is
 * NULL when the link existed), PIN_ERR_DB. */
static int link_insert_open(const char *booking_id, const char *phase, const char *deal_id,
		const char *tenant_id, const char *event_id, int64_t now, int64_t msg_at,
		int64_t at, const char **when)
{
	const char *p[10] = { booking_id, phase, deal_id, tenant_id, event_id, "Open",
		pc_time_param(now), msg_at > 0 ? pc_time_param(msg_at) : NULL,
		pc_time_param(at), DEADLINE_TZ };
	PGresult *r = pc_api->db_exec_prepared("crmb_link_insert_open",
		"INSERT INTO calendar.booking_deadline_links (booking_id, phase, deal_id, "
		"  tenant_id, calendar_event_id, status, created_at, updated_at, last_event_at) "
		"VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8) "
		"ON CONFLICT (booking_id, phase) DO NOTHING "
		"RETURNING to_char($9::timestamptz AT TIME ZONE $10, 'DD.MM.YYYY HH24:MI')", 10, p);

	*when = NULL;
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(r) == 1)
		*when = PQgetvalue(r, 0, 0);
	return 0;
}

enum route_state { ROUTE_OK, ROUTE_TERMINAL, ROUTE_MISSING };

/* Routing from the deal replica (locked FOR SHARE against a concurrent
 * executor change / close).  0 with *state (ROUTE_OK: *tenant, *owner set),
 * PIN_ERR_DB. */
static int route(const char *deal_id, const char **tenant, const char **owner,
		enum route_state *state)
{
	const char *p[1] = { deal_id };
	PGresult *r = pc_api->db_exec_prepared("crmb_route",
		"SELECT agency_company_id, executor_agent_user_id, is_terminal "
		"FROM calendar.crm_deal_replicas WHERE deal_id = $1 FOR SHARE", 1, p);

	*state = ROUTE_MISSING;
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(r) != 1)
		return 0;
	if (!strcmp(PQgetvalue(r, 0, 2), "t")) {
		*state = ROUTE_TERMINAL;
		return 0;
	}
	*tenant = pc_col(r, 0, 0);
	*owner = pc_col(r, 0, 1);
	if (*tenant && *owner)
		*state = ROUTE_OK;
	return 0;
}

/* route() of c's deal, once per attempt (the row stays locked FOR SHARE
 * until the transaction or the attempt's savepoint ends).  0 / PIN_ERR_DB. */
static int route_c(struct bctx *c)
{
	enum route_state rs;

	if (c->routed)
		return 0;
	if (route(c->deal_id, &c->tenant, &c->owner, &rs) < 0)
		return PIN_ERR_DB;
	c->route_state = rs;
	c->routed = 1;
	return 0;
}

/*
 * The 24 h path of a missing deal replica (seed 004 "Retry и DLQ").  The
 * host holds the message and retries it with backoff; this file remembers
 * when each held message first failed (process memory: the host's hold does
 * not survive a restart either) and, once the configured deadline has
 * passed, answers FATAL itself with its own code.  The host's own
 * deadline is set later (the grace), as a safety net only; either way the
 * host counts the route in calendar_crm_booking_sync_dlq_total.
 */
#define HELD_MAX 256
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char mid[37];
	int64_t first_us;
} held[HELD_MAX];
static size_t nheld;

/* When message mid first failed for a missing replica (now when new). */
static int64_t held_first(const char *mid, int64_t now)
{
	size_t i, slot;
	int64_t first;

	pthread_mutex_lock(&held_mu);
	for (i = 0; i < nheld; i++)
		if (!strcmp(held[i].mid, mid))
			break;
	if (i == nheld) {
		slot = nheld;
		if (nheld == HELD_MAX) {        /* full: the oldest entry goes */
			for (slot = 0, i = 1; i < nheld; i++)
				if (held[i].first_us < held[slot].first_us)
					slot = i;
		} else {
			nheld++;
		}
		snprintf(held[slot].mid, sizeof(held[slot].mid), "%s", mid);
		held[slot].first_us = now;
		i = slot;
	}
	first = held[i].first_us;
	pthread_mutex_unlock(&held_mu);
	return first;
}

static void held_forget(const char *mid)
{
	size_t i;

	pthread_mutex_lock(&held_mu);
	for (i = 0; i < nheld; i++)
		if (!strcmp(held[i].mid, mid)) {
			held[i] = held[--nheld];
			break;
		}
	pthread_mutex_unlock(&held_mu);
}

static enum pin_consume_status replica_missing(struct bctx *c)
{
	long long deadline_s = pc_api->config_num("crm_booking.replica_retry_deadline_s");
	long long grace_s = pc_api->config_num("consumer_backoff_max_ms") / 1000 * 2 + 60;
	int64_t first;

	pc_api->metric_add("calendar_crm_booking_sync_replica_not_found_total", NULL, 1);
	first = held_first(c->msg->message_id, c->now);
	if (c->now - first >= deadline_s * 1000000LL) {
		held_forget(c->msg->message_id);
		return pc_consume_fail(c->msg, c->res, PIN_CONSUME_FATAL, CODE_NO_REPLICA,
				pc_api->sprintf("no routed deal replica for dealId %s after %lld s",
					c->deal_id, deadline_s),
				"crm booking sync: replica deadline passed, to DLQ");
	}
	pc_consume_fail(NULL, c->res, PIN_CONSUME_RETRY, CODE_NO_REPLICA,
			pc_api->sprintf("no routed deal replica for dealId %s", c->deal_id), NULL);
	c->res->retry_deadline_s = (int)(deadline_s + grace_s);
	return PIN_CONSUME_RETRY;
}

/* "Оплата резерва до 01.12.2026 12:00" (local time of DEADLINE_TZ). */
static const char *title_for(const char *phase, int64_t at)
{
	const char *p[2] = { pc_time_param(at), DEADLINE_TZ };
	PGresult *r = pc_api->db_exec_prepared("crmb_title",
		"SELECT to_char($1::timestamptz AT TIME ZONE $2, 'DD.MM.YYYY HH24:MI')", 2, p);

	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != 1)
		return NULL;
	return pc_api->sprintf("%s%s", cd_crm_title_prefix(phase), PQgetvalue(r, 0, 0));
}

/*
 * Creates the deadline of phase at `at` unless its link exists (step 3, and
 * step 4's "link absent" branch).  Returns PIN_CONSUME_OK (created or a
 * no-op / tombstone), RETRY with a code.
 */
static enum pin_consume_status deadline_create(struct bctx *c, const char *phase, int64_t at)
{
	const char *tenant, *owner, *title, *when;
	struct cd_event_new ev;
	PGresult *row;
	char event_id[37];
	enum route_state rs;
	int rc;

	if (route_c(c) < 0)
		return db_error(c, "replica lookup");
	rs = (enum route_state)c->route_state;
	tenant = c->tenant;
	owner = c->owner;
	if (rs == ROUTE_MISSING)
		return replica_missing(c);
	if (rs == ROUTE_TERMINAL) {
		if (link_insert(c->booking_id, phase, c->deal_id, NULL, NULL, c->now,
				c->msg->created_at_us, NULL) < 0)
			return db_error(c, "tombstone insert");
		skipped(c, "deal-terminal-skip", phase);
		return PIN_CONSUME_OK;
	}
	if (at <= c->now) {
		if (link_insert(c->booking_id, phase, c->deal_id, tenant, NULL, c->now,
				c->msg->created_at_us, NULL) < 0)
			return db_error(c, "tombstone insert");
		skipped(c, "deadline-in-past", phase);
		return PIN_CONSUME_OK;
	}
	pc_api->uuid_v7(event_id);
	rc = link_insert_open(c->booking_id, phase, c->deal_id, tenant, event_id, c->now,
			c->msg->created_at_us, at, &when);
	if (rc < 0)
		return db_error(c, "link insert");
	if (!when) {            /* a concurrent delivery won */
		skipped(c, "business-duplicate", phase);
		return PIN_CONSUME_OK;
	}
	title = pc_api->sprintf("%s%s", cd_crm_title_prefix(phase), when);
	memset(&ev, 0, sizeof(ev));
	ev.id = event_id;
	ev.tenant_id = tenant;
	ev.owner_user_id = owner;
	ev.kind = "BookingDeadline";
	ev.origin = "CrmBooking";
	ev.priority = "Critical";
	ev.title = title;
	ev.start_us = at;
	ev.time_zone = DEADLINE_TZ;
	ev.deal_id = c->deal_id;
	ev.booking_id = c->booking_id;
	ev.property_object_id = c->property_id;
	ev.has_offsets = 1;
	ev.n_offsets = cd_crm_phase_offsets(phase, ev.offsets);
	rc = cd_event_create(&ev, c->now, &row);
	if (rc == PC_E_RANGE)
		return invalid(c, "the deadline leaves the supported instant range");
	if (rc < 0)
		return db_error(c, "event create");
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_created_total",
			pc_api->sprintf("phase=\"%s\"", phase), 1);
	log_ev(c, "crm booking sync: deadline-created", phase);
	return PIN_CONSUME_OK;
}

/* Step 4, first part / step 5: the Open reserve deadline -> Completed. */
static enum pin_consume_status reserve_complete(struct bctx *c)
{
	struct link l;

	if (link_lock(c->booking_id, "Reserve", &l) < 0)
		return db_error(c, "link lock");
	if (!l.found) {
		/* paid / confirmed before created: the reserve phase is over, so
		 * a late booking-created must not open its deadline.  A terminal
		 * tombstone (no event) makes that created a no-op. */
		if (link_insert(c->booking_id, "Reserve", c->deal_id, NULL, NULL, c->now,
				c->msg->created_at_us, NULL) < 0)
			return db_error(c, "tombstone insert");
		skipped(c, "reserve-closed-before-created", "Reserve");
		return PIN_CONSUME_OK;
	}
	if (strcmp(l.status, "Open") != 0)
		return PIN_CONSUME_OK;  /* already done */
	if (cd_crm_event_close(l.event_id, "complete", NULL, c->now) < 0)
		return db_error(c, "event complete");
	if (link_set_status(c->booking_id, "Reserve", "Completed", c->now) < 0)
		return db_error(c, "link update");
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_completed_total", NULL, 1);
	log_ev(c, "crm booking sync: deadline-completed", "Reserve");
	return PIN_CONSUME_OK;
}

/* Step 4, second part: upsert of the booking-phase deadline. */
static enum pin_consume_status booking_upsert(struct bctx *c, int64_t at)
{
	PGresult *locked = NULL, *row, *r;
	struct link l;
	const char *title, *p[3];
	int64_t cur = 0;
	int rc, changed = 0;

	if (link_lock(c->booking_id, "Booking", &l) < 0)
		return db_error(c, "link lock");
	if (l.found && !strcmp(l.status, "Open")) {
		rc = cd_event_lock(l.event_id, NULL, NULL, &locked);
		if (rc == PC_E_NOT_FOUND)
			return PIN_CONSUME_OK;
		if (rc < 0)
			return db_error(c, "event lock");
		cur = pc_col_us(locked, 0, CD_EC_START);
	}
	switch (cd_crm_upsert_action(l.found ? l.status : NULL, cur, at, 1)) {
	case CD_CRM_CREATE:
		return deadline_create(c, "Booking", at);
	case CD_CRM_NOOP:
		if (strcmp(l.status, "Open") != 0)
			skipped(c, "late-after-terminal", "Booking");
		return PIN_CONSUME_OK;
	case CD_CRM_MOVE:
		break;
	}
	/* an older message never moves the moment: a replay from offset 0 (inbox
	 * rows purged) must not take an extended deadline back.  Equal createdAt
	 * applies (producers stamp in ms or s: two real updates can share one);
	 * replaying the same message again moves to the same moment = no-op. */
	if (c->msg->created_at_us > 0) {
		p[0] = c->booking_id;
		p[1] = pc_time_param(c->msg->created_at_us);
		r = pc_api->db_exec_prepared("crmb_link_newer",
			"UPDATE calendar.booking_deadline_links SET last_event_at = $2::timestamptz "
			"WHERE booking_id = $1 AND phase = 'Booking' "
			"  AND (last_event_at IS NULL OR last_event_at <= $2::timestamptz)", 2, p);
		if (!pc_res_ok(r, PGRES_COMMAND_OK))
			return db_error(c, "link update");
		if (strcmp(PQcmdTuples(r), "0") == 0) {
			skipped(c, "older-message", "Booking");
			return PIN_CONSUME_OK;
		}
	}
	rc = cd_event_reschedule(locked, at, c->now, &row, &changed);
	if (rc == PC_E_TRANSITION || (rc == 0 && !changed))
		return PIN_CONSUME_OK;
	if (rc == PC_E_RANGE)
		return invalid(c, "the deadline leaves the supported instant range");
	if (rc < 0)
		return db_error(c, "event reschedule");
	/* the title names the moment: follow the move */
	title = title_for("Booking", at);
	if (!title)
		return db_error(c, "title");
	p[0] = l.event_id;
	p[1] = title;
	p[2] = pc_time_param(c->now);
	if (!pc_res_ok(pc_api->db_exec_prepared("crmb_title_set",
			"UPDATE calendar.calendar_events SET title = $2, updated_at = $3 "
			"WHERE id = $1", 3, p), PGRES_COMMAND_OK))
		return db_error(c, "title update");
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_rescheduled_total", NULL, 1);
	log_ev(c, "crm booking sync: deadline-rescheduled", "Booking");
	return PIN_CONSUME_OK;
}

/* Step 6: every Open deadline of the booking -> Cancelled; absent phases get
 * tombstones.  deal_id of a tombstone: the other phase's link, else the
 * payload's dealId when it carries one (else NULL). */
static enum pin_consume_status cancel_all(struct bctx *c, const char *reason)
{
	static const char *const phases[] = { "Reserve", "Booking" };
	struct link l[2];
	const char *deal = c->deal_id;
	int i, n = 0;

	for (i = 0; i < 2; i++) {
		if (link_lock(c->booking_id, phases[i], &l[i]) < 0)
			return db_error(c, "link lock");
		if (l[i].found && l[i].deal_id)
			deal = l[i].deal_id;
	}
	for (i = 0; i < 2; i++) {
		if (!l[i].found) {
			if (link_insert(c->booking_id, phases[i], deal, NULL, NULL, c->now,
					c->msg->created_at_us, NULL) < 0)
				return db_error(c, "tombstone insert");
			continue;
		}
		if (strcmp(l[i].status, "Open") != 0)
			continue;
		if (cd_crm_event_close(l[i].event_id, "cancel", reason, c->now) < 0)
			return db_error(c, "event cancel");
		if (link_set_status(c->booking_id, phases[i], "Cancelled", c->now) < 0)
			return db_error(c, "link update");
		n++;
	}
	if (n)
		pc_api->metric_add("calendar_crm_booking_sync_deadlines_cancelled_total", NULL, n);
	pc_api->log(PIN_LOG_INFO, "crm booking sync: deadline-cancelled",
			"messageId", c->msg->message_id, "bookingId", c->booking_id,
			"count", pc_api->sprintf("%d", n), "topic", c->msg->topic, NULL);
	return PIN_CONSUME_OK;
}

/* ------------------------------------------------------------------ handler */

static int req_instant(json_object *o, const char *key, int64_t *us)
{
	const char *s = pc_jstr(o, key);

	return s && pc_api->parse_time(s, us) == 0 ? 0 : -1;
}

/* The payload of topic t into c (and *at, the deadline of created /
 * confirmed): NULL when valid, else what is wrong. */
static const char *validate(struct bctx *c, json_object *pl, const char *t, int64_t *at)
{
	if (!pl || !json_object_is_type(pl, json_type_object))
		return "payload is not an object";
	c->booking_id = pc_jstr(pl, "bookingId");
	if (!pc_id_ok(c->booking_id))
		return "bookingId is missing, not a uuid or the nil uuid";
	if (pc_opt_uuid(pl, "dealId", &c->deal_id) < 0)
		return "dealId is not a uuid (or the nil uuid)";
	if (pc_opt_uuid(pl, "propertyObjectId", &c->property_id) < 0)
		return "propertyObjectId is not a uuid (or the nil uuid)";
	if (!strcmp(t, T_CREATED)) {
		if (!c->deal_id || !c->property_id)
			return "dealId and propertyObjectId are required";
		if (req_instant(pl, "reserveExpiresAt", at) < 0)
			return "reserveExpiresAt is missing or not an instant";
	} else if (!strcmp(t, T_CONFIRMED)) {
		if (!c->deal_id)
			return "dealId is required";
		if (req_instant(pl, "bookingExpiresAt", at) < 0)
			return "bookingExpiresAt is missing or not an instant";
	} else if (strcmp(t, T_PAID) && strcmp(t, T_EXPIRED) && strcmp(t, T_CANCELLED)) {
		return "unknown topic";
	}
	return NULL;
}

/* booking-created: the Reserve deadline, once per booking. */
static enum pin_consume_status on_created(struct bctx *c, int64_t at)
{
	struct link l;

	/* lock order: replica, then the link */
	if (route_c(c) < 0)
		return db_error(c, "replica lock");
	if (link_lock(c->booking_id, "Reserve", &l) < 0)
		return db_error(c, "link lock");
	if (cd_crm_upsert_action(l.found ? l.status : NULL, 0, at, 0) == CD_CRM_CREATE)
		return deadline_create(c, "Reserve", at);
	skipped(c, l.event_id ? "business-duplicate" : "late-after-terminal", "Reserve");
	return PIN_CONSUME_OK;
}

/* The work of a valid message of topic t. */
static enum pin_consume_status dispatch(struct bctx *c, json_object *pl, const char *t,
		int64_t at)
{
	enum pin_consume_status st;

	if (!strcmp(t, T_CREATED))
		return on_created(c, at);
	if (!strcmp(t, T_CONFIRMED)) {
		if (route_c(c) < 0)
			return db_error(c, "replica lock");
		st = reserve_complete(c);
		return st == PIN_CONSUME_OK ? booking_upsert(c, at) : st;
	}
	if (!strcmp(t, T_PAID))
		return reserve_complete(c);
	if (!strcmp(t, T_EXPIRED))
		return cancel_all(c, cd_crm_expired_reason(pc_jstr(pl, "phase")));
	return cancel_all(c, "Бронь отменена");
}

static int sp_exec(const char *sql)
{
	return pc_res_ok(pc_api->db_exec(sql, 0, NULL), PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

/*
 * dispatch() with the seed 004 policy for a concurrent modification (a
 * deadlock, serialization failure or lock timeout against the deal consumer
 * or the reminder dispatcher): the work runs in a savepoint; when its first
 * failing statement says 40P01 / 40001 / 55P03 it is rolled back to the
 * savepoint (every lock it took is released) and run again at once on fresh
 * state, CONFLICT_RETRIES times; then FATAL with
 * CAL_BOOKING_SYNC_CONCURRENT_MODIFICATION (DLQ).  Any other failure keeps its
 * own answer (RETRY / FATAL) for the host.
 */
static enum pin_consume_status dispatch_retrying(struct bctx *c, int64_t at)
{
	enum pin_consume_status st;
	const char *state;
	int attempt;

	for (attempt = 0;; attempt++) {
		if (sp_exec("SAVEPOINT crm_booking_work") < 0)
			return db_error(c, "savepoint");
		pc_sqlstate_clear();
		memset(c->res, 0, sizeof(*c->res));
		c->routed = 0;      /* a rolled-back attempt released its locks */
		st = dispatch(c, c->msg->payload, c->msg->topic, at);
		state = pc_sqlstate_first();
		/* no RELEASE (one round trip less): the host's COMMIT, or its
		 * RELEASE of the message's own savepoint in a batch, ends it */
		if (st == PIN_CONSUME_OK)
			return st;
		if (!pc_sqlstate_is_concurrency(state))
			return st;
		if (sp_exec("ROLLBACK TO SAVEPOINT crm_booking_work") < 0)
			return db_error(c, "savepoint rollback");
		pc_api->log(PIN_LOG_WARN, "crm booking sync: concurrent modification",
				"messageId", c->msg->message_id, "bookingId", c->booking_id,
				"sqlstate", state, "attempt", pc_api->sprintf("%d", attempt + 1),
				NULL);
		if (attempt == CONFLICT_RETRIES)
			break;
		pc_api->metric_add("calendar_crm_booking_sync_conflict_retries_total", NULL, 1);
		c->now = pc_api->now_us();
	}
	return pc_consume_fail(c->msg, c->res, PIN_CONSUME_FATAL, CODE_CONFLICT,
			pc_api->sprintf("concurrent modification (SQLSTATE %s) after %d "
				"immediate retries", state, CONFLICT_RETRIES),
			"crm booking sync: concurrent modification, to DLQ");
}

static enum pin_consume_status on_booking(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	struct bctx c;
	const char *bad;
	enum pin_consume_status st;
	int64_t at = 0, t0 = pc_api->now_us();

	(void)ud;
	memset(&c, 0, sizeof(c));
	c.msg = msg;
	c.res = res;
	c.now = t0;
	if ((bad = validate(&c, msg->payload, msg->topic, &at)))
		return invalid(&c, bad);
	log_ev(&c, "crm booking sync: consumed", NULL);
	st = dispatch_retrying(&c, at);
	if (st == PIN_CONSUME_OK)
		held_forget(msg->message_id);
	pc_api->metric_observe("calendar_crm_booking_sync_consume_duration_ms", NULL,
			(double)(pc_api->now_us() - t0) / 1e3);
	if (st != PIN_CONSUME_OK)
		pc_api->log(PIN_LOG_WARN, "crm booking sync: failed", "messageId", msg->message_id,
				"bookingId", c.booking_id, "topic", msg->topic, "code", res->code, NULL);
	return st;
}

/* ------------------------------------------------ [crm] set-based batches
 *
 * The batch handler (pin_consumer.batch_fn, ABI 1.4; driven by the SDK's
 * pc_batch_runs, as identity and notify's contacts).  booking-created, the
 * bulk of the group's traffic, is applied set-based: the batch's valid
 * created messages become runs of distinct bookings (a booking that repeats
 * starts a new run, so its second message sees the first one's link: a
 * business duplicate, exactly as one by one), and a run is FOUR statements
 * whatever its size: the deal replicas locked FOR SHARE, the existing
 * Reserve links locked FOR UPDATE (the lock order of on_created), ONE
 * INSERT of the links, events and reminders (data-modifying CTEs; an Open
 * link whose insert met a concurrent one creates no event), and ONE outbox
 * statement of the event-created messages (pc_outbox_many: the envelopes of
 * outbox_put).  The decisions are on_created's / deadline_create's: a
 * terminal deal or a deadline already past -> tombstone; a link that
 * exists -> skipped; a deadline outside the instant range -> FATAL
 * (CODE_INVALID) like a bad payload.  A missing replica (RETRY with the
 * 24 h deadline) gives the batch back to the host's per-message path.
 *
 * The other topics (confirmed / paid / expired / cancelled) are rare: each
 * is handled in its place in the batch by dispatch_retrying (the run before
 * it is flushed first, so one booking's messages apply in order), at most
 * INPLACE_MAX of them (each takes a subtransaction); anything but OK there
 * gives the batch back.  A failed statement does too (the host rolls back
 * and takes fn, one savepoint per message).  Logs: one line per run (count,
 * first and last messageId), the skips and failures per message.
 */
#define INPLACE_MAX 24

/* a validated message of a set batch (pc_batch_runs' item data) */
struct set_item {
	struct bctx c;
	int64_t at;
};

/* pc_batch_runs' ud */
struct set_batch {
	int64_t t0;
	int inplace;                /* in-place messages so far */
};

static struct set_item *set_item(const struct pc_batch_run *run, size_t j)
{
	return run->data[j];
}

/* "{a,b,...}" of the run's ids (which: 0 bookings, 1 deals) */
static const char *run_ids(const struct pc_batch_run *run, int which)
{
	size_t len = 3 + run->n * 37;
	char *s = pc_api->alloc(len), *w = s;

	*w++ = '{';
	for (size_t i = 0; i < run->n; i++) {
		const struct bctx *c = &set_item(run, i)->c;

		if (i)
			*w++ = ',';
		memcpy(w, which ? c->deal_id : c->booking_id, 36);
		w += 36;
	}
	*w++ = '}';
	*w = '\0';
	return s;
}

/* The statements of a run of created messages (see above).
 * PIN_CONSUME_OK: every message has its verdict (run->st); RETRY: give the
 * batch back. */
static enum pin_consume_status run_apply(struct pc_batch_run *run)
{
	static const char *const sql_route =
		"SELECT deal_id, agency_company_id, executor_agent_user_id, is_terminal "
		"FROM calendar.crm_deal_replicas WHERE deal_id = ANY ($1::uuid[]) "
		"ORDER BY deal_id FOR SHARE";
	static const char *const sql_links =
		"SELECT booking_id, calendar_event_id IS NOT NULL "
		"FROM calendar.booking_deadline_links "
		"WHERE booking_id = ANY ($1::uuid[]) AND phase = 'Reserve' "
		"ORDER BY booking_id FOR UPDATE";
	int offs[2];
	size_t noffs = cd_crm_phase_offsets("Reserve", offs), nnew = 0, nrows = 0;
	const char *p[6], *offs_pg = pc_pg_int_array(offs, noffs);
	struct pc_jt rows, rems, o;     /* JSON text: rows, reminders, one row */
	struct pin_outbox_msg *ob;
	struct pc_col_index deals, links;
	PGresult *rt, *lk, *ins;
	int64_t now = set_item(run, 0)->c.now;
	char now_s[40];
	/* per run message: a new event was asked for / came back */
	char *want = pc_api->alloc(run->n), *got = pc_api->alloc(run->n);
	enum pin_consume_status ret = PIN_CONSUME_RETRY;

	pc_jt_init(&rows, 64 * 1024);
	pc_jt_init(&rems, 64 * 1024);
	pc_jt_init(&o, 1024);
	pc_jt_arr(&rows);
	pc_jt_arr(&rems);
	if (!want || !got)
		goto out;
	memset(want, 0, run->n);
	memset(got, 0, run->n);
	/* planned at each execution (not prepared): a connection's generic plan
	 * made while the table was small is a sequential scan comparing every
	 * row with every id of the array (a parameter's array is not hashed, a
	 * constant one is), and it stays until the next ANALYZE
	 * -- 200 ms per run of 500 once a burst has put 20k links in
	 * (doc/performance.md, consumers) */
	if (!(rt = pc_api->db_exec(sql_route, 1, (p[0] = run_ids(run, 1), p))) ||
			!pc_res_ok(rt, PGRES_TUPLES_OK))
		goto out;
	if (!(lk = pc_api->db_exec(sql_links, 1, (p[0] = run_ids(run, 0), p))) ||
			!pc_res_ok(lk, PGRES_TUPLES_OK))
		goto out;
	if (pc_col_index_init(&deals, rt, 0) < 0 || pc_col_index_init(&links, lk, 0) < 0)
		goto out;
	for (size_t i = 0; i < run->n; i++) {
		struct set_item *x = set_item(run, i);
		struct bctx *c = &x->c;
		int k = pc_col_index_find(&deals, c->deal_id);
		int l = pc_col_index_find(&links, c->booking_id);
		char ev[37];

		if (k < 0 || (strcmp(PQgetvalue(rt, k, 3), "t") &&
				(PQgetisnull(rt, k, 1) || PQgetisnull(rt, k, 2))))
			goto out;       /* no routed replica: the per-message path */
		if (l >= 0) {       /* on_created: the link exists */
			skipped(c, !strcmp(PQgetvalue(lk, l, 1), "t") ? "business-duplicate" :
					"late-after-terminal", "Reserve");
			continue;
		}
		pc_jt_reset(&o);
		pc_jt_obj(&o);
		PC_JT_KV(&o, "i", pc_jt_int(&o, (int64_t)i));
		pc_batch_row_str(&o, "booking_id", c->booking_id);
		pc_batch_row_str(&o, "deal_id", c->deal_id);
		if (c->msg->created_at_us > 0)
			PC_JT_KV(&o, "last_event_at", pc_jt_time(&o, c->msg->created_at_us));
		if (!strcmp(PQgetvalue(rt, k, 3), "t")) {
			skipped(c, "deal-terminal-skip", "Reserve");
			goto row;
		}
		pc_batch_row_str(&o, "tenant_id", PQgetvalue(rt, k, 1));
		if (x->at <= c->now) {
			skipped(c, "deadline-in-past", "Reserve");
			goto row;
		}
		if (cd_rule_event_instants(x->at, 0, 0, offs, noffs) != 0) {
			run->st[run->idx[i]] = invalid(c,
					"the deadline leaves the supported instant range");
			continue;
		}
		pc_api->uuid_v7(ev);
		want[i] = 1;
		pc_batch_row_str(&o, "event_id", ev);
		pc_batch_row_str(&o, "owner_id", PQgetvalue(rt, k, 2));
		pc_batch_row_str(&o, "property_id", c->property_id);
		PC_JT_KV(&o, "at", pc_jt_time(&o, x->at));
		for (size_t j = 0; j < noffs; j++) {
			int64_t due;
			enum cd_rem_status rs = cd_rule_reminder(x->at, offs[j], now, &due);
			char rid[37];

			pc_api->uuid_v7(rid);
			pc_jt_obj(&rems);
			pc_batch_row_str(&rems, "id", rid);
			pc_batch_row_str(&rems, "event_id", ev);
			PC_JT_KV(&rems, "off", pc_jt_int(&rems, offs[j]));
			PC_JT_KV(&rems, "due", pc_jt_time(&rems, due));
			pc_batch_row_str(&rems, "st", cd_rem_status_name(rs));
			pc_jt_end_obj(&rems);
		}
		nnew++;
row:
		pc_jt_end_obj(&o);
		pc_jt_raw(&rows, o.buf, o.len);
		nrows++;
	}
	ret = PIN_CONSUME_OK;
	if (!nrows)
		goto out;
	pc_jt_end_arr(&rows);
	pc_jt_end_arr(&rems);
	if (rows.failed || rems.failed || o.failed) {
		ret = PIN_CONSUME_RETRY;
		goto out;
	}
	rows.buf[rows.len] = '\0';
	rems.buf[rems.len] = '\0';
	pc_api->fmt_time(now, now_s, sizeof(now_s));
	p[0] = rows.buf;
	p[1] = rems.buf;
	p[2] = now_s;
	p[3] = cd_crm_title_prefix("Reserve");
	p[4] = DEADLINE_TZ;
	p[5] = offs_pg;
	/* links first; an event (and its reminders) only for an Open link that
	 * was inserted (a concurrent delivery's link wins, as in
	 * link_insert_open).  The foreign keys are checked at the statement's
	 * end, when every row exists. */
	ins = pc_api->db_exec_prepared("crmb_set_insert",
		"WITH x AS (SELECT * FROM json_to_recordset($1::json) AS x(i int, booking_id uuid, "
		"    deal_id uuid, tenant_id uuid, event_id uuid, owner_id uuid, property_id uuid, "
		"    at timestamptz, last_event_at timestamptz)), "
		"l AS (INSERT INTO calendar.booking_deadline_links (booking_id, phase, deal_id, "
		"    tenant_id, calendar_event_id, status, created_at, updated_at, last_event_at) "
		"  SELECT booking_id, 'Reserve', deal_id, tenant_id, event_id, "
		"    CASE WHEN event_id IS NULL THEN 'Cancelled' ELSE 'Open' END, "
		"    $3::timestamptz, $3::timestamptz, last_event_at FROM x ORDER BY i "
		"  ON CONFLICT (booking_id, phase) DO NOTHING RETURNING calendar_event_id), "
		"e AS (INSERT INTO calendar.calendar_events AS e (id, tenant_id, owner_user_id, "
		"    kind, origin, status, priority, title, start_at, time_zone, deal_id, "
		"    booking_id, property_object_id, reminder_offsets_minutes, created_at, "
		"    updated_at, version) "
		"  SELECT x.event_id, x.tenant_id, x.owner_id, 'BookingDeadline', 'CrmBooking', "
		"    'Planned', 'Critical', $4 || to_char(x.at AT TIME ZONE $5, 'DD.MM.YYYY HH24:MI'), "
		"    x.at, $5, x.deal_id, x.booking_id, x.property_id, $6::int[], $3::timestamptz, "
		"    $3::timestamptz, 1 "
		"  FROM x JOIN l ON l.calendar_event_id = x.event_id ORDER BY x.i RETURNING e.*), "
		"r AS (INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes, "
		"    due_at, status, created_at, updated_at) "
		"  SELECT m.id, m.event_id, m.off, m.due, m.st, $3::timestamptz, $3::timestamptz "
		"  FROM json_to_recordset($2::json) AS m(id uuid, event_id uuid, off int, "
		"    due timestamptz, st text) JOIN l ON l.calendar_event_id = m.event_id) "
		"SELECT " CD_EVENT_COLS ", x.i FROM e JOIN x ON x.event_id = e.id ORDER BY x.i",
		6, p);
	if (!pc_res_ok(ins, PGRES_TUPLES_OK)) {
		ret = PIN_CONSUME_RETRY;
		goto out;
	}
	for (int k = 0; k < PQntuples(ins); k++)
		got[atoi(PQgetvalue(ins, k, CD_EC__N))] = 1;
	if ((size_t)PQntuples(ins) < nnew)      /* a concurrent delivery won */
		for (size_t i = 0; i < run->n; i++)
			if (want[i] && !got[i])
				skipped(&set_item(run, i)->c, "business-duplicate", "Reserve");
	if (PQntuples(ins) == 0)
		goto out;
	{
		int n = PQntuples(ins);

		ob = pc_api->alloc((size_t)n * sizeof(*ob));
		for (int k = 0; k < n; k++) {
			const char *id = PQgetvalue(ins, k, CD_EC_ID);

			ob[k] = (struct pin_outbox_msg){ .topic = PC_TOPIC_EVENT_CREATED, .key = id,
				.event_type = "pin.calendar.event-created",
				.aggregate_type = "CalendarEvent", .aggregate_id = id,
				.payload = cd_payload_event_created(ins, k) };
		}
		if (pc_outbox_many(NULL, ob, (size_t)n) < 0) {
			ret = PIN_CONSUME_RETRY;
			goto out;
		}
		pc_api->metric_add("pin_calendar_events_created_total", "origin=\"CrmBooking\"", n);
		pc_api->metric_add("calendar_crm_booking_sync_deadlines_created_total",
				"phase=\"Reserve\"", n);
		pc_api->log(PIN_LOG_INFO, "crm booking sync: deadlines created (batch)",
				"count", pc_api->sprintf("%d", n),
				"firstMessageId", run->msg[atoi(PQgetvalue(ins, 0, CD_EC__N))]->message_id,
				"lastMessageId", run->msg[atoi(PQgetvalue(ins, n - 1, CD_EC__N))]->message_id,
				"phase", "Reserve", NULL);
	}
out:
	pc_jt_free(&rows);
	pc_jt_free(&rems);
	pc_jt_free(&o);
	return ret;
}

/* pc_batch_runs' parse: created messages join the run of their booking;
 * the other topics apply alone, in their place */
static enum pin_consume_status set_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *it, void *ud)
{
	struct set_batch *b = ud;
	struct set_item *x = pc_api->alloc(sizeof(*x));
	const char *bad;

	memset(x, 0, sizeof(*x));
	x->c.msg = msg;
	x->c.res = res;
	x->c.now = b->t0;
	if ((bad = validate(&x->c, msg->payload, msg->topic, &x->at)))
		return invalid(&x->c, bad);
	it->key = x->c.booking_id;
	it->data = x;
	it->alone = strcmp(msg->topic, T_CREATED) != 0;
	return PIN_CONSUME_OK;
}

/* pc_batch_runs' flush: a run of created messages, or an in-place one */
static enum pin_consume_status set_flush(struct pc_batch_run *run,
		struct pin_consume_result *res, void *ud)
{
	struct set_batch *b = ud;
	struct set_item *x = set_item(run, 0);
	enum pin_consume_status st;

	(void)res;
	if (!run->alone) {
		st = run_apply(run);
		for (size_t j = 0; j < run->n && st == PIN_CONSUME_OK; j++)
			if (run->st[run->idx[j]] == PIN_CONSUME_OK)
				held_forget(run->msg[j]->message_id);
		return st;
	}
	if (++b->inplace > INPLACE_MAX)
		return PIN_CONSUME_RETRY;
	log_ev(&x->c, "crm booking sync: consumed", NULL);
	x->c.now = pc_api->now_us();
	if (dispatch_retrying(&x->c, x->at) != PIN_CONSUME_OK)
		return PIN_CONSUME_RETRY;       /* its failure: the per-message path */
	held_forget(run->msg[0]->message_id);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_bookings(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	struct set_batch b = { .t0 = pc_api->now_us() };
	enum pin_consume_status rc;
	int64_t dt;

	(void)ud;
	rc = pc_batch_runs(msgs, n, st, res, set_parse, set_flush, &b);
	dt = pc_api->now_us() - b.t0;
	for (size_t i = 0; i < n; i++)
		pc_api->metric_observe("calendar_crm_booking_sync_consume_duration_ms",
				NULL, (double)dt / 1e3 / (double)n);
	return rc;
}

int wrk_crm_booking_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = PC_GROUP_CRM_BOOKING, .topics = topics,
		.inbox_table = CD_INBOX_TABLE, .fn = on_booking,
		/* [consume] its savepoint + the host's: 2 subxids a message, 32
		 * stay within PostgreSQL's 64-per-backend subxid cache */
		.batch_max = 32,
		/* seed 004's names, kept by the host (ABI 1.8) */
		.dlq_metric = DLQ_METRIC,
		.lag_metric = "calendar_crm_booking_sync_lag_seconds",
		.version_metric = "calendar_crm_booking_sync_contract_mismatch_total" };

	/* [crm] the set-based batch handler; crm_booking.batch_set = 0 leaves
	 * the group on the savepoint path (A/B of the bench) */
	if (pc_api->config_bool("crm_booking.batch_set"))
		c.batch_fn = on_bookings;
	/* 0 from the start: the alert's increase() sees the first one */
	pc_api->metric_add("calendar_crm_booking_sync_replica_not_found_total", NULL, 0);
	/* seed 004's unlabelled counters, 0 before the first event */
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_completed_total", NULL, 0);
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_rescheduled_total", NULL, 0);
	pc_api->metric_add("calendar_crm_booking_sync_deadlines_cancelled_total", NULL, 0);
	return pc_register_consumer(reg, &c, "workers", err, errlen);
}
