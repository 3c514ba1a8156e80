/* crm_deal.c -- Calendar CRM Deal Sync (group calendar-crm-deal-events,
 * events.md "Deal sync"):
 *   1. deal-created / deal-members-changed upsert calendar.crm_deal_replicas;
 *      an older message (envelope createdAt <= last_event_at) does not
 *      overwrite a newer one;
 *   2. deal-members-changed ExecutorChanged to another executor: open
 *      (Planned | InProgress) CrmBooking and Manual events of the deal move
 *      to the new executor and agency (INV-CAL-8), event-owner-changed per
 *      event; Appointment events are not touched;
 *   3. deal-closed: replica IsTerminal (sticky), Open deadline links of the
 *      deal and their events -> Cancelled ("Сделка закрыта").
 * The host runs the inbox, the transaction, offsets, retries and the DLQ.
 * Lock order (shared with crm_booking.c): replica -> links -> events. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "caldomain/crm.h"
#include "caldomain/schema.h"
#include "workers.h"

#define CODE_INVALID "CAL_DEAL_SYNC_INVALID_PAYLOAD"
#define CODE_DB "CAL_DEAL_SYNC_DB_ERROR"
#define CLOSE_REASON "Сделка закрыта"   /* class Internal: never logged */

#define T_CREATED PC_TOPIC_CRM_DEAL_CREATED
#define T_MEMBERS PC_TOPIC_CRM_DEAL_MEMBERS_CHANGED
#define T_CLOSED  PC_TOPIC_CRM_DEAL_CLOSED

static const char *const topics[] = { T_CREATED, T_MEMBERS, T_CLOSED, NULL };

struct dctx {
	const struct pin_msg *msg;
	struct pin_consume_result *res;
	const char *deal_id;
	int64_t now;
};

static const struct cd_crm_sync sync = { CODE_INVALID, CODE_DB,
	"crm deal sync: failed", "crm deal sync: failed" };

static enum pin_consume_status invalid(struct dctx *c, const char *detail)
{
	return cd_crm_invalid(&sync, c->msg, c->res, detail);
}

static enum pin_consume_status db_error(struct dctx *c, const char *what)
{
	return cd_crm_db_error(&sync, c->msg, c->res, what);
}

/*
 * Step 1: the routing fields, guarded by last_event_at.  *applied = 1 when
 * this message wrote them; *prev_executor = the executor before (NULL when
 * none).  0 / PIN_ERR_DB.
 */
static int replica_upsert(struct dctx *c, const char *agency, const char *executor,
		int *applied, const char **prev_executor)
{
	const char *p[5];
	PGresult *r;

	*applied = 0;
	*prev_executor = NULL;
	p[0] = c->deal_id;
	r = pc_api->db_exec_prepared("crmd_replica_lock",
		"SELECT executor_agent_user_id FROM calendar.crm_deal_replicas "
		"WHERE deal_id = $1 FOR UPDATE", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
		*prev_executor = PQgetvalue(r, 0, 0);
	p[1] = agency;
	p[2] = executor;
	p[3] = pc_time_param(c->msg->created_at_us);
	p[4] = pc_time_param(c->now);
	r = pc_api->db_exec_prepared("crmd_replica_upsert",
		"INSERT INTO calendar.crm_deal_replicas AS r (deal_id, agency_company_id, "
		"  executor_agent_user_id, is_terminal, last_event_at, created_at, updated_at) "
		"VALUES ($1, $2, $3, false, $4, $5, $5) "
		"ON CONFLICT (deal_id) DO UPDATE SET agency_company_id = EXCLUDED.agency_company_id, "
		"  executor_agent_user_id = EXCLUDED.executor_agent_user_id, "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE r.last_event_at IS NULL OR r.last_event_at < EXCLUDED.last_event_at", 5, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	*applied = strcmp(PQcmdTuples(r), "1") == 0;
	if (!*applied) {
		pc_api->metric_add("calendar_crm_deal_sync_stale_total", NULL, 1);
		pc_api->log(PIN_LOG_INFO, "crm deal sync: stale message, replica kept",
				"messageId", c->msg->message_id, "dealId", c->deal_id,
				"topic", c->msg->topic, NULL);
	}
	return 0;
}

/* Step 2 (INV-CAL-8): open CrmBooking / Manual events of the deal -> the
 * new executor (and agency, when known).  Returns the number moved or
 * PIN_ERR_DB. */
static int reassign(struct dctx *c, const char *agency, const char *executor)
{
	const char *p[3] = { c->deal_id, agency, pc_time_param(c->now) }, *q[3];
	PGresult *r, *locked, *row;
	int i, n = 0, rc, changed = 0;

	/* links first (lock order): they name the calendar's tenant */
	r = pc_api->db_exec_prepared("crmd_links_lock_open",
		"SELECT booking_id FROM calendar.booking_deadline_links "
		"WHERE deal_id = $1 AND status = 'Open' "
		"ORDER BY booking_id, phase DESC FOR UPDATE", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (agency && PQntuples(r) > 0) {
		r = pc_api->db_exec_prepared("crmd_links_tenant",
			"UPDATE calendar.booking_deadline_links SET tenant_id = $2, updated_at = $3 "
			"WHERE deal_id = $1 AND status = 'Open' AND tenant_id IS DISTINCT FROM $2",
			3, p);
		if (!pc_res_ok(r, PGRES_COMMAND_OK))
			return PIN_ERR_DB;
	}
	q[0] = c->deal_id;
	q[1] = agency;
	q[2] = executor;
	r = pc_api->db_exec_prepared("crmd_events_to_move",
		"SELECT id FROM calendar.calendar_events "
		"WHERE deal_id = $1 AND origin IN ('CrmBooking', 'Manual') "
		"  AND status IN ('Planned', 'InProgress') "
		"  AND (owner_user_id <> $3::uuid OR tenant_id <> COALESCE($2::uuid, tenant_id)) "
		"ORDER BY id", 3, q);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	for (i = 0; i < PQntuples(r); i++) {
		const char *st;

		rc = cd_event_lock(PQgetvalue(r, i, 0), NULL, NULL, &locked);
		if (rc == PC_E_NOT_FOUND)
			continue;
		if (rc < 0)
			return rc;
		st = PQgetvalue(locked, 0, CD_EC_STATUS);
		if (strcmp(st, "Planned") != 0 && strcmp(st, "InProgress") != 0)
			continue;
		rc = cd_event_change_owner(locked, agency, executor, "ExecutorChanged",
				c->now, &row, &changed);
		if (rc < 0)
			return rc;
		if (changed)
			n++;
	}
	return n;
}

/* Step 3: replica terminal, Open links of the deal and their events ->
 * Cancelled.  Returns the number cancelled or PIN_ERR_DB. */
static int close_deal(struct dctx *c)
{
	const char *p[2] = { c->deal_id, pc_time_param(c->now) };
	PGresult *r;
	int i, n;

	r = pc_api->db_exec_prepared("crmd_replica_close",
		"INSERT INTO calendar.crm_deal_replicas AS r (deal_id, is_terminal, "
		"  created_at, updated_at) VALUES ($1, true, $2, $2) "
		"ON CONFLICT (deal_id) DO UPDATE SET is_terminal = true, "
		"  updated_at = EXCLUDED.updated_at WHERE NOT r.is_terminal", 2, p);
	if (!pc_res_ok(r, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	r = pc_api->db_exec_prepared("crmd_links_open",
		"SELECT booking_id, phase, calendar_event_id FROM calendar.booking_deadline_links "
		"WHERE deal_id = $1 AND status = 'Open' "
		"ORDER BY booking_id, phase DESC FOR UPDATE", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	n = PQntuples(r);
	for (i = 0; i < n; i++) {
		const char *q[4] = { PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), p[1], NULL };
		PGresult *u;

		if (cd_crm_event_close(PQgetvalue(r, i, 2), "cancel", CLOSE_REASON, c->now) < 0)
			return PIN_ERR_DB;
		u = pc_api->db_exec_prepared("crmd_link_cancel",
			"UPDATE calendar.booking_deadline_links SET status = 'Cancelled', "
			"  updated_at = $3 WHERE booking_id = $1 AND phase = $2", 3, q);
		if (!pc_res_ok(u, PGRES_COMMAND_OK))
			return PIN_ERR_DB;
	}
	return n;
}

static enum pin_consume_status on_deal(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	struct dctx c;
	json_object *pl = msg->payload;
	const char *t = msg->topic, *agency = NULL, *executor = NULL, *prev = NULL;
	int applied, n;

	(void)ud;
	memset(&c, 0, sizeof(c));
	c.msg = msg;
	c.res = res;
	c.now = pc_api->now_us();
	if (!pl || !json_object_is_type(pl, json_type_object))
		return invalid(&c, "payload is not an object");
	c.deal_id = pc_jstr(pl, "dealId");
	if (!pc_id_ok(c.deal_id))
		return invalid(&c, "dealId is missing, not a uuid or the nil uuid");

	if (!strcmp(t, T_CLOSED)) {
		n = close_deal(&c);
		if (n < 0)
			return db_error(&c, "deal close");
		pc_api->metric_add("calendar_crm_deal_sync_deadlines_cancelled_total", NULL, n);
		pc_api->log(PIN_LOG_INFO, "crm deal sync: deal closed", "messageId",
				msg->message_id, "dealId", c.deal_id,
				"cancelled", pc_api->sprintf("%d", n), NULL);
		return PIN_CONSUME_OK;
	}
	if (strcmp(t, T_CREATED) != 0 && strcmp(t, T_MEMBERS) != 0)
		return invalid(&c, "unknown topic");
	if (pc_opt_uuid(pl, "agencyCompanyId", &agency) < 0)
		return invalid(&c, "agencyCompanyId is not a uuid");
	if (pc_opt_uuid(pl, "executorAgentUserId", &executor) < 0)
		return invalid(&c, "executorAgentUserId is not a uuid");
	if (msg->created_at_us <= 0)
		return invalid(&c, "envelope createdAt is missing");
	if (!strcmp(t, T_MEMBERS)) {
		const char *ct = pc_jstr(pl, "changeType");

		if (!ct)
			return invalid(&c, "changeType is missing");
		if (strcmp(ct, "ExecutorChanged") != 0) {
			/* other member changes do not route calendars */
			pc_api->metric_add("calendar_crm_deal_sync_skipped_total",
					"reason=\"change-type\"", 1);
			return PIN_CONSUME_OK;
		}
	}
	if (replica_upsert(&c, agency, executor, &applied, &prev) < 0)
		return db_error(&c, "replica upsert");
	if (!strcmp(t, T_MEMBERS) && applied && executor &&
	    (!prev || strcmp(prev, executor) != 0)) {
		n = reassign(&c, agency, executor);
		if (n < 0)
			return db_error(&c, "reassignment");
		pc_api->metric_add("calendar_crm_deal_sync_events_reassigned_total", NULL, n);
		pc_api->log(PIN_LOG_INFO, "crm deal sync: executor changed", "messageId",
				msg->message_id, "dealId", c.deal_id,
				"moved", pc_api->sprintf("%d", n), NULL);
	}
	return PIN_CONSUME_OK;
}

int wrk_crm_deal_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = PC_GROUP_CRM_DEAL, .topics = topics,
		.inbox_table = CD_INBOX_TABLE, .fn = on_deal,
		/* counted by the host for every DLQ route (ABI 1.8) */
		.dlq_metric = "calendar_crm_deal_sync_dlq_total" };

	return pc_register_consumer(reg, &c, "workers", err, errlen);
}
