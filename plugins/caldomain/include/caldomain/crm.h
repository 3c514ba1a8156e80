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


/* How one CRM sync (consumer group) answers a message it cannot take. */
struct cd_crm_sync {
	const char *code_invalid;   /* FATAL code of a bad payload (-> DLQ) */
	const char *code_db;        /* RETRY code of a database failure */
	const char *fail_log;       /* WARN line of a bad payload */
	const char *db_fail_log;    /* WARN line of a database failure, or NULL */
};
/* A bad payload: FATAL with detail (the host counts the DLQ route in the
 * registration's dlq_metric, ABI 1.8). */
enum pin_consume_status cd_crm_invalid(const struct cd_crm_sync *s,
		const struct pin_msg *msg, struct pin_consume_result *res, const char *detail);
/* A database failure in step what: RETRY with "<what> failed". */
enum pin_consume_status cd_crm_db_error(const struct cd_crm_sync *s,
		const struct pin_msg *msg, struct pin_consume_result *res, const char *what);

/* A CRM deadline event -> action ("complete" / "cancel") while it is open
 * (Planned | InProgress: reminders Skipped, event-status-changed); a
 * terminal or purged event is left alone.  0 / PIN_ERR_DB. */
int cd_crm_event_close(const char *event_id, const char *action, const char *reason,
		int64_t now_us);

#endif
