/* batch_rules.c -- pure SlotBatch rules: no host, no database (tests/unit/test_slots_rules.c).
 * The generation itself is set-based SQL: calendar.slot_plan (sql/calendar/0200_slots.sql). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "slots.h"

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

/* days from civil (Howard Hinnant's algorithm), proleptic Gregorian */
static long days_from_civil(long y, unsigned m, unsigned d)
{
	long era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (long)doe - 719468;
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
	*days = days_from_civil(y, (unsigned)mo, (unsigned)d);
	return 0;
}

char *slot_format_date(long z, char *buf, size_t len)
{
	long era, y;
	unsigned doe, yoe, doy, mp, d, m;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = (long)yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y += m <= 2;
	snprintf(buf, len, "%04ld-%02u-%02u", y, m, d);
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
