/* event_rules.c -- pure calendar rules: no host, no database.
 * Everything here is unit-tested (tests/unit/test_calendar_rules.c). */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caldomain/event_rules.h"
#include "sdk/instant.h"

const char *const cd_event_kinds[] = { "Showing", "Consultation", "Meeting", "Task",
	"BookingDeadline", NULL };
const char *const cd_manual_kinds[] = { "Showing", "Consultation", "Meeting", "Task", NULL };
const char *const cd_event_origins[] = { "Manual", "Appointment", "CrmBooking", NULL };
const char *const cd_event_statuses[] = { "Planned", "InProgress", "Completed",
	"Cancelled", NULL };
const char *const cd_event_priorities[] = { "Normal", "High", "Critical", NULL };

static int streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

const char *cd_rule_kind_matrix(const struct cd_kind_facts *f, const char **field)
{
	*field = "kind";
	if (!f->kind || !f->origin)
		return "kind and origin are required";
	if (streq(f->kind, "BookingDeadline") != streq(f->origin, "CrmBooking"))
		return "BookingDeadline events exist only with origin CrmBooking";
	if (streq(f->origin, "CrmBooking")) {
		if (f->has_end) {
			*field = "endAt";
			return "a BookingDeadline is a point event (no endAt)";
		}
		if (!f->has_booking) {
			*field = "bookingId";
			return "a BookingDeadline needs bookingId";
		}
		if (!f->has_deal) {
			*field = "dealId";
			return "a BookingDeadline needs dealId";
		}
		return NULL;
	}
	if (streq(f->origin, "Appointment")) {
		if (!streq(f->kind, "Showing") && !streq(f->kind, "Consultation"))
			return "appointment events are Showing or Consultation";
		if (!f->has_appointment) {
			*field = "appointmentId";
			return "appointmentId is required";
		}
		if (!f->has_client) {
			*field = "clientUserId";
			return "clientUserId is required";
		}
		if (!f->has_end) {
			*field = "endAt";
			return "endAt is required";
		}
		return NULL;
	}
	if (streq(f->origin, "Manual")) {
		if (streq(f->kind, "Task"))
			return NULL;
		if (streq(f->kind, "Showing") || streq(f->kind, "Consultation") ||
				streq(f->kind, "Meeting")) {
			if (!f->has_end) {
				*field = "endAt";
				return "endAt is required for this kind";
			}
			return NULL;
		}
		return "kind is not allowed for manual events";
	}
	*field = "origin";
	return "unknown origin";
}

const char *cd_rule_span(int64_t start_us, int has_end, int64_t end_us)
{
	if (!has_end)
		return NULL;
	if (end_us <= start_us)
		return "endAt must be after startAt";
	if (end_us - start_us > CD_MAX_EVENT_US)
		return "an event lasts at most 24 hours";
	return NULL;
}

int cd_rule_transition(const char *from, const char *action, const char **to)
{
	int open = streq(from, "Planned") || streq(from, "InProgress");

	if (streq(action, "start") && streq(from, "Planned")) {
		*to = "InProgress";     /* never Cancelled: ADR-0064 fixes the draft's bug */
		return 0;
	}
	if (streq(action, "complete") && open) {
		*to = "Completed";
		return 0;
	}
	if (streq(action, "cancel") && open) {
		*to = "Cancelled";
		return 0;
	}
	return -1;
}

int cd_rule_can_reschedule(const char *status)
{
	return streq(status, "Planned") || streq(status, "InProgress");
}

int64_t cd_rule_reschedule_end(int64_t old_start, int has_end, int64_t old_end,
		int64_t new_start)
{
	if (!has_end)
		return 0;
	return new_start + (old_end - old_start);
}

int cd_rule_event_instants(int64_t start_us, int has_end, int64_t end_us,
		const int *offsets, size_t n)
{
	size_t i;

	if (!pc_instant_ok(start_us) || (has_end && !pc_instant_ok(end_us)))
		return -1;
	for (i = 0; i < n; i++)
		if (!pc_instant_ok(start_us - (int64_t)offsets[i] * 60 * 1000000))
			return -1;
	return 0;
}

const char *cd_rule_offsets(const int *offsets, size_t n)
{
	size_t i, j;

	if (n > CD_MAX_OFFSETS)
		return "at most 5 reminder offsets";
	for (i = 0; i < n; i++) {
		if (offsets[i] < CD_OFFSET_MIN || offsets[i] > CD_OFFSET_MAX)
			return "each offset must be between 1 and 40320 minutes";
		for (j = 0; j < i; j++)
			if (offsets[j] == offsets[i])
				return "offsets must be distinct";
	}
	return NULL;
}

enum cd_rem_status cd_rule_reminder(int64_t start_us, int offset_min,
		int64_t now_us, int64_t *due_us)
{
	*due_us = start_us - (int64_t)offset_min * 60 * 1000000;
	return *due_us <= now_us ? CD_REM_SKIPPED : CD_REM_PENDING;
}

const char *cd_rem_status_name(enum cd_rem_status s)
{
	switch (s) {
	case CD_REM_PENDING: return "Pending";
	case CD_REM_SENT: return "Sent";
	case CD_REM_SKIPPED: return "Skipped";
	}
	return "Pending";
}
