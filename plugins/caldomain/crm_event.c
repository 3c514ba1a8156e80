/* crm_event.c -- what the CRM booking and deal syncs of workers.so both do
 * to the calendar events they manage (caldomain/crm.h). */
#include "config.h"
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/crm.h"
#include "caldomain/event.h"

/* Terminal transition ("complete" / "cancel") of a link's event while it is
 * open (reminders Skipped, event-status-changed); an event already terminal
 * is left as it is.  0 / PIN_ERR_DB. */
int cd_crm_event_close(const char *event_id, const char *action, const char *reason,
		int64_t now)
{
	PGresult *locked, *row;
	const char *st;
	int rc;

	rc = cd_event_lock(event_id, NULL, NULL, &locked);
	if (rc == PC_E_NOT_FOUND)
		return 0;       /* purged by housekeeping */
	if (rc < 0)
		return rc;
	st = PQgetvalue(locked, 0, CD_EC_STATUS);
	if (strcmp(st, "Planned") != 0 && strcmp(st, "InProgress") != 0)
		return 0;
	rc = cd_event_transition(locked, action, reason, now, &row);
	return rc == PC_E_TRANSITION ? 0 : rc;
}

enum pin_consume_status cd_crm_invalid(const struct cd_crm_sync *s,
		const struct pin_msg *msg, struct pin_consume_result *res, const char *detail)
{
	return pc_consume_fail(msg, res, PIN_CONSUME_FATAL, s->code_invalid, detail,
			s->fail_log);
}

enum pin_consume_status cd_crm_db_error(const struct cd_crm_sync *s,
		const struct pin_msg *msg, struct pin_consume_result *res, const char *what)
{
	return pc_consume_fail(msg, res, PIN_CONSUME_RETRY, s->code_db,
			pc_api->sprintf("%s failed", what), s->db_fail_log);
}
