/* identity.c -- the identity replica consumer (workers.md, events.md):
 * pin.identity.users.v1 -> calendar.user_replicas (display name, avatar,
 * status; e-mail and phone are never stored: PII minimisation).
 *
 * The consumer is the SDK's replica skeleton (sdk/replica.h); the host runs
 * the inbox check, the transaction, the offset commit and the DLQ.
 * Idempotent: a replay hits the inbox; an older message (envelope
 * createdAt <= the replica's last_event_at) does not overwrite a newer one.
 *
 * Departure (issue 12): an applied message whose status is not Active
 * archives the agent's Available slots and declines the Pending
 * appointments (reason AgentUnavailable) in the same transaction
 * (caldomain/agent.h cd_agent_depart).  Confirmed appointments stay.  A
 * later Active message only lets the agent publish again: nothing is
 * restored.
 *
 * Deletion (issue 30): status Deleted (displayName null, absent or
 * present) stores a tombstone -- the user id, status Deleted and the
 * instants; name and avatar NULL -- and departs the agent like any status
 * but Active.  Deleted is final: the identity service never reuses a
 * deleted id, so no later message changes the row (pc_replica
 * final_status) and the name cannot come back.  No other calendar table
 * holds an identity name. */
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

static enum pin_consume_status fatal(struct pin_consume_result *res, const char *detail)
{
	return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, CODE_INVALID, detail, NULL);
}

/* The replica now says the agent is gone: the cascade of cd_agent_depart in
 * the message's transaction.  Logs ids and counts only. */
static enum pin_consume_status depart(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user_id)
{
	struct cd_agent_departure d;
	int rc;

	rc = cd_agent_depart(user_id, pc_api->now_us(), &d);
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

/* A Deleted message: the user's id and status only.  The identity
 * contract lets displayName be null (or absent) then; whatever name or
 * avatar the message still carries is not stored. */
static enum pin_consume_status parse_deleted(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_replica_row *row)
{
	row->user_id = pc_jstr(msg->payload, "userId");
	if (!pc_id_ok(row->user_id))
		return fatal(res, "userId is missing, not a uuid or the nil uuid");
	if (msg->created_at_us <= 0)
		return fatal(res, "envelope createdAt is missing");
	row->v[0] = NULL;
	row->v[1] = NULL;
	row->v[2] = "Deleted";
	return PIN_CONSUME_OK;
}

/* The message's row (pc_replica parse): user_id, display_name, avatar_url,
 * status.  OK, or FATAL. */
static enum pin_consume_status parse_user(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_replica_row *row)
{
	const char *why, *name, *avatar, *status;
	int bad = 0;

	status = msg->payload ? pc_jstr(msg->payload, "status") : NULL;
	if (status && !strcmp(status, "Deleted"))
		return parse_deleted(msg, res, row);
	if ((why = pc_identity_user(msg->payload, &row->user_id, &name)))
		return fatal(res, why);
	avatar = pc_jstr_opt(msg->payload, "avatarUrl", &bad);
	if (bad)
		return fatal(res, "avatarUrl is not a string");
	if (avatar && strlen(avatar) > 2048)
		return fatal(res, "avatarUrl is too long");
	if (!status)
		return fatal(res, "status is missing");
	if (strcmp(status, "Active") != 0 && strcmp(status, "Deactivated") != 0) {
		/* fail-safe for an enum value this version does not know */
		pc_api->log(PIN_LOG_WARN, "unknown user status, stored as Deactivated",
				"topic", msg->topic, "messageId", msg->message_id, NULL);
		pc_api->metric_add("pin_calendar_identity_unknown_status_total", NULL, 1);
		status = "Deactivated";
	}
	if (msg->created_at_us <= 0)
		return fatal(res, "envelope createdAt is missing");
	row->v[0] = name;
	row->v[1] = avatar;
	row->v[2] = status;
	return PIN_CONSUME_OK;
}

/* A row applied (newer than the stored one): a status other than Active
 * starts the departure cascade. */
static enum pin_consume_status applied(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user_id, const char *status)
{
	return strcmp(status, "Active") != 0 ? depart(msg, res, user_id) : PIN_CONSUME_OK;
}

/* The replica (sdk/replica.h): per message one upsert, per batch one upsert
 * of each run of distinct users, newest message wins. */
static struct pc_replica replica = {
	.plugin = "workers",
	.group = PC_GROUP_CAL_IDENTITY,
	.inbox_table = CD_INBOX_TABLE,
	.table = "calendar.user_replicas",
	.cols = { "display_name", "avatar_url", "status", NULL },
	.has_created_at = 1,
	.stmt = "identity_upsert",
	.code_db = "CAL_IDENTITY_DB_ERROR",
	.what = "upsert",
	.stale_metric = "pin_calendar_identity_stale_total",
	.final_status = "Deleted",
	.parse = parse_user,
	.applied = applied,
};

int wrk_identity_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	return pc_replica_register(reg, &replica, err, errlen);
}
