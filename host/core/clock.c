/* clock.c -- the host clock: the only "now" of the process. */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core.h"

static int64_t offset_us;

void pin_clock_set_offset_s(int64_t s)
{
	offset_us = s * 1000000;
}

int64_t pin_clock_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + offset_us;
}

/* Microseconds of CLOCK_MONOTONIC: durations, not instants (no offset). */
int64_t pin_clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *pin_clock_fmt(int64_t us, char *out, size_t outlen)
{
	time_t s = (time_t)(us / 1000000);
	int64_t frac = us % 1000000;
	struct tm tm;

	if (frac < 0) {
		frac += 1000000;
		s -= 1;
	}
	gmtime_r(&s, &tm);
	if (frac)
		snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
			tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			tm.tm_min, tm.tm_sec, (long long)frac);
	else
		snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02dZ",
			tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			tm.tm_min, tm.tm_sec);
	return out;
}

/* us as the envelope's createdAt: always "YYYY-MM-DDTHH:MM:SS.mmmZ" (events.md),
 * the microseconds truncated -- also on a whole second, where pin_clock_fmt
 * leaves the fraction out.  outlen >= 25. */
char *pin_clock_fmt_ms(int64_t us, char *out, size_t outlen)
{
	int64_t sec = us / 1000000, frac = us % 1000000;

	if (frac < 0) {
		frac += 1000000;
		sec -= 1;
	}
	pin_clock_fmt(sec * 1000000, out, outlen);   /* "...SSZ" */
	if (strlen(out) == 20)
		snprintf(out + 19, outlen - 19, ".%03dZ", (int)(frac / 1000));
	return out;
}

static int digits(const char **p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (**p - '0');
		(*p)++;
	}
	*out = v;
	return 0;
}

static int64_t days_from_civil(int y, int m, int d)
{
	/* Howard Hinnant's algorithm */
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

/* "YYYY-MM-DDTHH:MM[:SS[.ffffff]](Z|+HH:MM|-HH:MM)" */
int pin_clock_parse(const char *s, int64_t *us_out)
{
	const char *p = s;
	int y, mo, d, h, mi, sec = 0, oh = 0, om = 0, sign = 0;
	int64_t frac = 0;
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (!s)
		return -1;
	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
		return -1;
	p++;
	if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
		return -1;
	if (*p == ':') {
		p++;
		if (digits(&p, 2, &sec))
			return -1;
		if (*p == '.') {
			int n = 0;
			p++;
			while (isdigit((unsigned char)*p)) {
				if (n < 6) {
					frac = frac * 10 + (*p - '0');
					n++;
				}
				p++;
			}
			if (n == 0)
				return -1;
			while (n++ < 6)
				frac *= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		p++;
		if (digits(&p, 2, &oh))
			return -1;
		if (*p == ':')
			p++;
		if (digits(&p, 2, &om))
			return -1;
	} else {
		return -1;
	}
	if (*p != '\0')
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
	    sec > 59 || oh > 23 || om > 59 || y < 1900 || y > 9999)
		return -1;
	if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return -1;
	int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	t -= sign * (oh * 3600 + om * 60);
	/* the instant too stays in years 1900..9999 (UTC), so that what
	 * pin_clock_fmt writes parses back */
	if (t < days_from_civil(1900, 1, 1) * 86400 ||
	    t >= days_from_civil(10000, 1, 1) * 86400)
		return -1;
	*us_out = t * 1000000 + frac;
	return 0;
}
