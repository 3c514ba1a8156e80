/* rules.c -- pure calendar rules and text helpers: no host, no database.
 * Everything here is unit-tested (tests/unit/test_calendar_rules.c). */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"

const char *const pc_event_kinds[] = { "Showing", "Consultation", "Meeting", "Task",
	"BookingDeadline", NULL };
const char *const pc_manual_kinds[] = { "Showing", "Consultation", "Meeting", "Task", NULL };
const char *const pc_event_origins[] = { "Manual", "Appointment", "CrmBooking", NULL };
const char *const pc_event_statuses[] = { "Planned", "InProgress", "Completed",
	"Cancelled", NULL };
const char *const pc_event_priorities[] = { "Normal", "High", "Critical", NULL };

static int streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

const char *pc_rule_kind_matrix(const struct pc_kind_facts *f, const char **field)
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

const char *pc_rule_span(int64_t start_us, int has_end, int64_t end_us)
{
	if (!has_end)
		return NULL;
	if (end_us <= start_us)
		return "endAt must be after startAt";
	if (end_us - start_us > PC_MAX_EVENT_US)
		return "an event lasts at most 24 hours";
	return NULL;
}

int pc_rule_transition(const char *from, const char *action, const char **to)
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

int pc_rule_can_reschedule(const char *status)
{
	return streq(status, "Planned") || streq(status, "InProgress");
}

int64_t pc_rule_reschedule_end(int64_t old_start, int has_end, int64_t old_end,
		int64_t new_start)
{
	if (!has_end)
		return 0;
	return new_start + (old_end - old_start);
}

const char *pc_rule_offsets(const int *offsets, size_t n)
{
	size_t i, j;

	if (n > PC_MAX_OFFSETS)
		return "at most 5 reminder offsets";
	for (i = 0; i < n; i++) {
		if (offsets[i] < PC_OFFSET_MIN || offsets[i] > PC_OFFSET_MAX)
			return "each offset must be between 1 and 40320 minutes";
		for (j = 0; j < i; j++)
			if (offsets[j] == offsets[i])
				return "offsets must be distinct";
	}
	return NULL;
}

enum pc_rem_status pc_rule_reminder(int64_t start_us, int offset_min,
		int64_t now_us, int64_t *due_us)
{
	*due_us = start_us - (int64_t)offset_min * 60 * 1000000;
	return *due_us <= now_us ? PC_REM_SKIPPED : PC_REM_PENDING;
}

const char *pc_rem_status_name(enum pc_rem_status s)
{
	switch (s) {
	case PC_REM_PENDING: return "Pending";
	case PC_REM_SENT: return "Sent";
	case PC_REM_SKIPPED: return "Skipped";
	}
	return "Pending";
}

size_t pc_utf8_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

char *pc_time_fmt(int64_t us, char *buf, size_t len)
{
	int64_t secs = us / 1000000, frac = us % 1000000;
	time_t t;
	struct tm tm;
	char base[32];

	if (frac < 0) {
		frac += 1000000;
		secs -= 1;
	}
	t = (time_t)secs;
	gmtime_r(&t, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(buf, len, "%s.%06lldZ", base, (long long)frac);
	else
		snprintf(buf, len, "%sZ", base);
	return buf;
}

int pc_parse_if_match(const char *v, int *version)
{
	char *end;
	long n;
	size_t len;

	if (!v)
		return -1;
	while (*v == ' ')
		v++;
	if (strncmp(v, "W/", 2) == 0)
		v += 2;
	len = strlen(v);
	while (len && v[len - 1] == ' ')
		len--;
	if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
		v++;
		len -= 2;
	}
	if (len == 0 || len > 10 || !isdigit((unsigned char)v[0]))
		return -1;
	n = strtol(v, &end, 10);
	if ((size_t)(end - v) != len || n < 0 || n > 2147483647L)
		return -1;
	*version = (int)n;
	return 0;
}

static int is_uuid_text(const char *s)
{
	int i;

	if (strlen(s) != 36)
		return 0;
	for (i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char)s[i])) {
			return 0;
		}
	}
	return 1;
}

void pc_hex_encode(const char *plain, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (; *plain; plain++) {
		*out++ = hx[((unsigned char)*plain) >> 4];
		*out++ = hx[((unsigned char)*plain) & 15];
	}
	*out = 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int pc_cursor_parse(const char *cursor, int64_t *us, char id[37])
{
	char plain[96], *bar, *end;
	size_t len, i;
	long long v;

	if (!cursor)
		return -1;
	len = strlen(cursor);
	if (len == 0 || len % 2 || len / 2 >= sizeof(plain))
		return -1;
	for (i = 0; i < len / 2; i++) {
		int hi = hexval(cursor[2 * i]), lo = hexval(cursor[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		plain[i] = (char)(hi * 16 + lo);
	}
	plain[len / 2] = 0;
	bar = strchr(plain, '|');
	if (!bar || bar == plain)
		return -1;
	*bar = 0;
	v = strtoll(plain, &end, 10);
	if (*end)
		return -1;
	if (!is_uuid_text(bar + 1))
		return -1;
	*us = v;
	memcpy(id, bar + 1, 37);
	return 0;
}
