/* caldomain/crm_rules.h -- pure decisions of the CRM booking sync (seed 004): no host,
 * no database; unit-tested (tests/unit/test_crm_rules.c). */
#ifndef PIN_CALDOMAIN_CRM_RULES_H
#define PIN_CALDOMAIN_CRM_RULES_H
#include <stddef.h>
#include <stdint.h>

/* CancelReason of booking-expired by its payload phase ("Reserve" /
 * "Booking"; anything else, NULL included: the fail-safe reason). Static. */
const char *cd_crm_expired_reason(const char *phase);

/* Title head of a deadline of phase ("Reserve" / "Booking"); the caller
 * appends the local moment.  Static string. */
const char *cd_crm_title_prefix(const char *phase);

/* Reminder offsets of a deadline of phase: Reserve {30}, Booking {1440, 60}.
 * out has room for 2; returns the count. */
size_t cd_crm_phase_offsets(const char *phase, int out[2]);

/* What a deadline message does with the link of its phase (steps 3-4). */
enum cd_crm_upsert {
	CD_CRM_CREATE = 0,     /* no link: create (routing and guards apply) */
	CD_CRM_MOVE,           /* Open link, another moment: reschedule */
	CD_CRM_NOOP            /* terminal link, or the same moment */
};
/* link_status NULL = no link; cur_start_us the event's StartAt; new_us the
 * payload's moment; can_move 0 for booking-created (no move, step 3). */
enum cd_crm_upsert cd_crm_upsert_action(const char *link_status, int64_t cur_start_us,
		int64_t new_us, int can_move);

#endif
