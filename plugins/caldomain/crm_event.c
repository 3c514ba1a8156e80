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
int wrk_crm_event_close(const char *event_id, const char *action, const char *reason,
		int64_t now)
{
	PGresult *locked, *row;
	const char *st;
	int rc;

	rc = pc_event_lock(event_id, NULL, NULL, &locked);
	if (rc == PC_E_NOT_FOUND)
		return 0;       /* purged by housekeeping */
	if (rc < 0)
		return rc;
	st = PQgetvalue(locked, 0, PC_EC_STATUS);
	if (strcmp(st, "Planned") != 0 && strcmp(st, "InProgress") != 0)
		return 0;
	rc = pc_event_transition(locked, action, reason, now, &row);
	return rc == PC_E_TRANSITION ? 0 : rc;
}
