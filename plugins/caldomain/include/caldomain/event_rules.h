/* caldomain/event_rules.h -- the pure rules of the CalendarEvent
 * (domain.md INV-CAL-1/2/3, seed 000 rules 1-2): no host, no database,
 * unit-tested (tests/unit/test_calendar_rules.c). */
#ifndef PIN_CALDOMAIN_EVENT_RULES_H
#define PIN_CALDOMAIN_EVENT_RULES_H

#include <stdint.h>
#include <stddef.h>

/* Enum names (domain.md), NULL-terminated lists usable with pc_get_enum. */
extern const char *const cd_event_kinds[];     /* Showing, Consultation, Meeting, Task, BookingDeadline */
extern const char *const cd_manual_kinds[];    /* Showing, Consultation, Meeting, Task */
extern const char *const cd_event_origins[];   /* Manual, Appointment, CrmBooking */
extern const char *const cd_event_statuses[];  /* Planned, InProgress, Completed, Cancelled */
extern const char *const cd_event_priorities[];/* Normal, High, Critical */

#define CD_MAX_OFFSETS 5
#define CD_OFFSET_MIN 1
#define CD_OFFSET_MAX 40320
#define CD_MAX_EVENT_US (24LL * 3600 * 1000000)

/* Facts of an event that INV-CAL-1 looks at. */
struct cd_kind_facts {
	const char *kind;
	const char *origin;
	int has_end, has_booking, has_deal, has_appointment, has_client;
};
/* INV-CAL-1: NULL when allowed, else a message; *field names the field. */
const char *cd_rule_kind_matrix(const struct cd_kind_facts *f, const char **field);

/* EndAt rule: end absent (has_end = 0) or start < end <= start + 24 h.
 * NULL when fine, else a message. */
const char *cd_rule_span(int64_t start_us, int has_end, int64_t end_us);

/* INV-CAL-2: action "start" | "complete" | "cancel" from status; 0 and
 * *to (static string) when allowed, -1 otherwise. */
int cd_rule_transition(const char *from, const char *action, const char **to);

/* INV-CAL-3: reschedule allowed from status?  1 yes, 0 no. */
int cd_rule_can_reschedule(const char *status);
/* New EndAt keeping the duration; *has_new_end = has_end. */
int64_t cd_rule_reschedule_end(int64_t old_start, int has_end, int64_t old_end,
		int64_t new_start);

/* Issue 9 item 3: start, end (when has_end) and every reminder's DueAt
 * (start - offset) inside the supported range of sdk/instant.h.  0 when
 * they are, -1 otherwise. */
int cd_rule_event_instants(int64_t start_us, int has_end, int64_t end_us,
		const int *offsets, size_t n);

/* Reminder offsets: 0..5 distinct values in [1, 40320].  NULL or message. */
const char *cd_rule_offsets(const int *offsets, size_t n);

enum cd_rem_status { CD_REM_PENDING = 1, CD_REM_SENT = 2, CD_REM_SKIPPED = 3 };
/* Seed 000 rule 1: DueAt = StartAt - offset; DueAt <= now -> Skipped. */
enum cd_rem_status cd_rule_reminder(int64_t start_us, int offset_min,
		int64_t now_us, int64_t *due_us);
const char *cd_rem_status_name(enum cd_rem_status s);

#endif
