/*
 * caldomain/crm.h -- the calendar side of the CRM syncs (workers.so:
 * crm_booking.c and crm_deal.c share through this header, never through
 * each other): CRM deadline events (Origin CrmBooking) and their pure rules
 * (caldomain/crm_rules.h).
 *
 * Lock order of both syncs: deal replica -> deadline links -> events.
 */
#ifndef PIN_CALDOMAIN_CRM_H
#define PIN_CALDOMAIN_CRM_H

#include "sdk/core.h"
#include "caldomain/crm_rules.h"


/* A CRM deadline event -> action ("complete" / "cancel") while it is open
 * (Planned | InProgress: reminders Skipped, event-status-changed); a
 * terminal or purged event is left alone.  0 / PIN_ERR_DB. */
int wrk_crm_event_close(const char *event_id, const char *action, const char *reason,
		int64_t now_us);

#endif
