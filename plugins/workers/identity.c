/* identity.c -- the identity replica consumer (workers.md, events.md):
 * pin.identity.users.v1 -> calendar.user_replicas (display name, avatar,
 * status; e-mail and phone are never stored: PII minimisation).
 *
 * The host runs the inbox check, the transaction, the offset commit and the
 * DLQ.  Idempotent: a replay hits the inbox; an older message (envelope
 * createdAt <= the replica's last_event_at) does not overwrite a newer one.
 *
 * Departure (issue 12): an applied message whose status is not Active
 * archives the agent's Available slots and declines the Pending
 * appointments (reason AgentUnavailable) in the same transaction
 * (caldomain/agent.h cal_agent_depart).  Confirmed appointments stay.  A
 * later Active message only lets the agent publish again: nothing is
 * restored. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "caldomain/agent.h"
#include "caldomain/schema.h"
#include "workers.h"

#define CODE_INVALID "CAL_IDENTITY_INVALID_PAYLOAD"

static const char *const topics[] = { PC_TOPIC_IDENTITY_USERS, NULL };

static enum pin_consume_status fatal(struct pin_consume_result *res, const char *detail)
{
	return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, CODE_INVALID, detail, NULL);
}

/* The replica now says the agent is gone: the cascade of cal_agent_depart in
 * the message's transaction.  Logs ids and counts only. */
static enum pin_consume_status depart(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user_id)
{
	struct cal_agent_departure d;
	int rc;

	rc = cal_agent_depart(user_id, pc_api->now_us(), &d);
	if (rc < 0)
		return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "CAL_IDENTITY_DB_ERROR",
				"departure cascade failed", NULL);
	if (d.archived || d.declined || d.confirmed)
		pc_api->log(PIN_LOG_INFO, "agent unavailable: slots archived, pending declined",
				"messageId", msg->message_id, "userId", user_id,
				"archivedSlots", pc_api->sprintf("%d", d.archived),
				"declinedAppointments", pc_api->sprintf("%d", d.declined),
				"confirmedLeft", pc_api->sprintf("%d", d.confirmed), NULL);
	pc_api->metric_add("pin_calendar_agent_departure_slots_archived_total", NULL,
			d.archived);
	pc_api->metric_add("pin_calendar_agent_departure_declined_total", NULL, d.declined);
	return PIN_CONSUME_OK;
}

/* the fields of a valid message */
struct user_msg {
	const char *user_id, *name, *avatar, *status;
};

/* validation shared by both paths: OK with u filled, or FATAL */
static enum pin_consume_status parse_user(const struct pin_msg *msg,
		struct pin_consume_result *res, struct user_msg *u)
{
	const char *why;
	int bad = 0;

	pc_contract_check(msg, "identity replica: contract version mismatch",
			"calendar_identity_contract_mismatch_total");
	if ((why = pc_identity_user(msg->payload, &u->user_id, &u->name)))
		return fatal(res, why);
	u->avatar = pc_jstr_opt(msg->payload, "avatarUrl", &bad);
	if (bad)
		return fatal(res, "avatarUrl is not a string");
	if (u->avatar && strlen(u->avatar) > 2048)
		return fatal(res, "avatarUrl is too long");
	u->status = pc_jstr(msg->payload, "status");
	if (!u->status)
		return fatal(res, "status is missing");
	if (strcmp(u->status, "Active") != 0 && strcmp(u->status, "Deactivated") != 0) {
		/* fail-safe for an enum value this version does not know */
		pc_api->log(PIN_LOG_WARN, "unknown user status, stored as Deactivated",
				"topic", msg->topic, "messageId", msg->message_id, NULL);
		pc_api->metric_add("pin_calendar_identity_unknown_status_total", NULL, 1);
		u->status = "Deactivated";
	}
	if (msg->created_at_us <= 0)
		return fatal(res, "envelope createdAt is missing");
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_user(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	const char *p[6];
	struct user_msg u;
	enum pin_consume_status st;
	char created[40], now[40];
	PGresult *r;

	(void)ud;
	if ((st = parse_user(msg, res, &u)) != PIN_CONSUME_OK)
		return st;
	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = u.user_id;
	p[1] = u.name;
	p[2] = u.avatar;
	p[3] = u.status;
	p[4] = created;
	p[5] = now;
	r = pc_api->db_exec_prepared("identity_upsert",
		"INSERT INTO calendar.user_replicas AS u (user_id, display_name, avatar_url, "
		"  status, last_event_at, created_at, updated_at) "
		"VALUES ($1::uuid, $2, $3, $4, $5::timestamptz, $6::timestamptz, $6::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"  avatar_url = EXCLUDED.avatar_url, status = EXCLUDED.status, "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE u.last_event_at IS NULL OR u.last_event_at < EXCLUDED.last_event_at "
		"RETURNING u.status", 6, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, "CAL_IDENTITY_DB_ERROR",
				pc_api->sprintf("upsert failed (%s)",
					r ? pc_api->db_sqlstate(r) : "no connection"), NULL);
	if (PQntuples(r) == 0) {
		pc_api->metric_add("pin_calendar_identity_stale_total", NULL, 1);
		return PIN_CONSUME_OK;
	}
	if (strcmp(PQgetvalue(r, 0, 0), "Active") != 0)
		return depart(msg, res, u.user_id);
	return PIN_CONSUME_OK;
}

/*
 * [consume] The set-based batch handler (ABI 1.4 batch_fn): the batch's
 * valid messages become runs of distinct users (pc_batch_runs: a run ends
 * where a user repeats, so one user's messages apply in order, as one by
 * one), each run ONE upsert (json_to_recordset) with the same newest-wins
 * condition as on_user; the departure cascade for every row it left not
 * Active.  An invalid message is FATAL (no effect); a failed statement
 * gives the batch back to the host (per-message path).
 */
static enum pin_consume_status run_flush(struct pc_batch_run *u,
		struct pin_consume_result *res, void *ud)
{
	const char *p[2];
	PGresult *r;
	enum pin_consume_status st = PIN_CONSUME_OK;

	(void)ud;
	if (!(p[0] = pc_batch_run_json(u)))
		return PIN_CONSUME_RETRY;
	p[1] = u->now;
	r = pc_api->db_exec_prepared("identity_upsert_set",
		"INSERT INTO calendar.user_replicas AS u (user_id, display_name, avatar_url, "
		"  status, last_event_at, created_at, updated_at) "
		"SELECT x.user_id, x.display_name, x.avatar_url, x.status, x.last_event_at, "
		"  $2::timestamptz, $2::timestamptz "
		"FROM json_to_recordset($1::json) AS x(user_id uuid, display_name text, "
		"  avatar_url text, status text, last_event_at timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"  avatar_url = EXCLUDED.avatar_url, status = EXCLUDED.status, "
		"  last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE u.last_event_at IS NULL OR u.last_event_at < EXCLUDED.last_event_at "
		"RETURNING u.user_id, u.status", 2, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_CONSUME_RETRY;
	if ((size_t)PQntuples(r) < u->n)
		pc_api->metric_add("pin_calendar_identity_stale_total", NULL,
				(double)(u->n - (size_t)PQntuples(r)));
	for (int i = 0; i < PQntuples(r) && st == PIN_CONSUME_OK; i++) {
		long j;

		if (!strcmp(PQgetvalue(r, i, 1), "Active"))
			continue;
		if ((j = pc_batch_run_find(u, PQgetvalue(r, i, 0))) >= 0)
			st = depart(u->msg[j], res, u->key[j]);
	}
	return st;
}

/* pc_batch_runs' parse: a row of the run keyed by the user */
static enum pin_consume_status run_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *it, void *ud)
{
	struct user_msg m;
	enum pin_consume_status st;
	struct pc_jt *o;

	(void)ud;
	if ((st = parse_user(msg, res, &m)) != PIN_CONSUME_OK)
		return st;
	it->key = m.user_id;
	o = pc_batch_item_row(it);
	pc_batch_row_str(o, "user_id", m.user_id);
	pc_batch_row_str(o, "display_name", m.name);
	pc_batch_row_str(o, "avatar_url", m.avatar);
	pc_batch_row_str(o, "status", m.status);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_users(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	return pc_batch_runs(msgs, n, st, res, run_parse, run_flush, ud);
}

int wrk_identity_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = PC_GROUP_CAL_IDENTITY, .topics = topics,
		.inbox_table = PC_INBOX_TABLE, .fn = on_user, .batch_fn = on_users };

	return pc_register_consumer(reg, &c, "workers", err, errlen);
}
