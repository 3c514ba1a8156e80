/* batch_rules.c -- pure SlotBatch rules: no host, no database (tests/unit/test_slots_rules.c).
 * The generation itself is set-based SQL: calendar.slot_plan (sql/calendar/0200_slots.sql). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "slots.h"
#include "sdk/civil.h"

static int two_digits(const char *s, int *v)
{
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
		return -1;
	*v = (s[0] - '0') * 10 + (s[1] - '0');
	return 0;
}

int slot_parse_hhmm(const char *s, int allow_24, int *minutes)
{
	int h, m;

	if (!s || strlen(s) != 5 || s[2] != ':')
		return -1;
	if (two_digits(s, &h) < 0 || two_digits(s + 3, &m) < 0)
		return -1;
	if (h == 24 && m == 0 && allow_24) {
		*minutes = 24 * 60;
		return 0;
	}
	if (h > 23 || m > 59)
		return -1;
	*minutes = h * 60 + m;
	return 0;
}

static int is_leap(long y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int slot_parse_date(const char *s, long *days)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int c1, c2, mo, d;
	long y;

	if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-')
		return -1;
	if (two_digits(s, &c1) < 0 || two_digits(s + 2, &c2) < 0 ||
	    two_digits(s + 5, &mo) < 0 || two_digits(s + 8, &d) < 0)
		return -1;
	y = c1 * 100 + c2;
	if (y < 1900 || mo < 1 || mo > 12 || d < 1)
		return -1;
	if (d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
		return -1;
	*days = (long)pc_days_from_civil(y, (unsigned)mo, (unsigned)d);
	return 0;
}

char *slot_format_date(long z, char *buf, size_t len)
{
	int64_t y;
	unsigned m, d;

	pc_civil_from_days(z, &y, &m, &d);
	snprintf(buf, len, "%04ld-%02u-%02u", (long)y, m, d);
	return buf;
}

const char *slot_rule_dates(long from, long to, long today, const char **field)
{
	*field = "toDate";
	if (to < from)
		return "must not be before fromDate";
	if (to - from >= SLOT_MAX_RANGE_DAYS)
		return "toDate - fromDate must be less than 92 days";
	if (to > today + SLOT_MAX_AHEAD_DAYS)
		return "must be at most 183 days after today (in the batch time zone)";
	*field = "fromDate";
	if (from < today)
		return "must not be in the past (in the batch time zone)";
	return NULL;
}

const char *slot_rule_window(int from_min, int to_min)
{
	if (from_min >= to_min)
		return "from must be before to (same local day)";
	return NULL;
}

int slot_rule_per_window(int from_min, int to_min, int duration, int gap)
{
	if (duration <= 0 || gap < 0 || to_min - from_min < duration)
		return 0;
	return (to_min - from_min - duration) / (duration + gap) + 1;
}
