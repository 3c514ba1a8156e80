/* instant.c -- instants as API text and SQL parameters, IANA time zones. */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "sdk/instant.h"
#include "sdk/pg.h"


/* gmtime + strftime: any year (5 digits past 9999, strftime's below 1000) */
static char *fmt_slow(int64_t us, char *buf, size_t len)
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

/* v (0..99) as two digits */
static char *two(char *o, unsigned v)
{
	static const char dd[201] =
		"00010203040506070809101112131415161718192021222324"
		"25262728293031323334353637383940414243444546474849"
		"50515253545556575859606162636465666768697071727374"
		"75767778798081828384858687888990919293949596979899";

	memcpy(o, dd + 2 * v, 2);
	return o + 2;
}

/* us as whole days since the epoch, the second of that day and the
 * microseconds of that second (floor division, as gmtime) */
int64_t pc_us_split(int64_t us, unsigned *sod, int64_t *frac)
{
	int64_t secs = us / 1000000, days;

	*frac = us % 1000000;
	if (*frac < 0) {
		*frac += 1000000;
		secs -= 1;
	}
	days = secs / 86400;
	*sod = (unsigned)(secs % 86400);
	if (secs % 86400 < 0) {
		*sod = (unsigned)(secs % 86400 + 86400);
		days -= 1;
	}
	return days;
}

/* "YYYY-MM-DD" of a day into o (10 bytes); -1 when the year has not 4
 * digits (strftime's %Y differs there: the caller takes fmt_slow) */
int pc_date_fmt(int64_t days, char *o)
{
	int64_t y;
	unsigned m, d;

	pc_civil_from_days(days, &y, &m, &d);
	if (y < 1000 || y > 9999)
		return -1;
	o = two(o, (unsigned)(y / 100));
	o = two(o, (unsigned)(y % 100));
	*o++ = '-';
	o = two(o, m);
	*o++ = '-';
	two(o, d);
	return 0;
}

/* "THH:MM:SS[.ffffff]Z" into o; returns the end (no NUL) */
char *pc_tod_fmt(char *o, unsigned sod, int64_t frac)
{
	*o++ = 'T';
	o = two(o, sod / 3600);
	*o++ = ':';
	o = two(o, sod / 60 % 60);
	*o++ = ':';
	o = two(o, sod % 60);
	if (frac) {
		*o++ = '.';
		for (int i = 5; i >= 0; i--) {
			o[i] = (char)('0' + frac % 10);
			frac /= 10;
		}
		o += 6;
	}
	*o++ = 'Z';
	return o;
}

size_t pc_instant_fmt(int64_t us, char *out)
{
	unsigned sod;
	int64_t frac, days = pc_us_split(us, &sod, &frac);
	char *o;

	if (pc_date_fmt(days, out) < 0)
		return strlen(fmt_slow(us, out, 40));
	o = pc_tod_fmt(out + 10, sod, frac);
	*o = '\0';
	return (size_t)(o - out);
}

char *pc_time_fmt(int64_t us, char *buf, size_t len)
{
	if (len < 40)
		return fmt_slow(us, buf, len);
	pc_instant_fmt(us, buf);
	return buf;
}

char *pc_time_str(int64_t us)
{
	char *buf = pc_api->alloc(40);

	return pc_time_fmt(us, buf, 40);
}

char *pc_time_param(int64_t us)
{
	int64_t frac = ((us % 1000000) + 1000000) % 1000000;
	char *buf = pc_api->alloc(48), *o;

	if (!buf)
		return NULL;
	/* the whole second, then its 6 fraction digits before the Z */
	o = buf + pc_instant_fmt(us - frac, buf) - 1;
	*o++ = '.';
	for (int i = 5; i >= 0; i--) {
		o[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	o += 6;
	*o++ = 'Z';
	*o = '\0';
	return buf;
}

/* -------------------------------------------------------------- time zones */

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;
static char **tz_names;
static size_t tz_n;

static int tz_cmp(const void *a, const void *b)
{
	return strcasecmp(*(char *const *)a, *(char *const *)b);
}

static int tz_load(void)
{
	PGresult *res;
	int i, n;
	char **names;
	size_t k = 0;

	res = pc_api->db_exec("SELECT name FROM pg_timezone_names", 0, NULL);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	n = PQntuples(res);
	names = calloc((size_t)n + 1, sizeof(*names));
	if (!names)
		return PIN_ERR;
	for (i = 0; i < n; i++) {
		const char *s = PQgetvalue(res, i, 0);
		if (strncmp(s, "posix/", 6) == 0 || strncmp(s, "right/", 6) == 0)
			continue;
		names[k++] = strdup(s);
	}
	qsort(names, k, sizeof(*names), tz_cmp);
	tz_names = names;
	tz_n = k;
	return 0;
}

int pc_tz_lookup(const char *name, const char **canonical)
{
	char **hit;
	int rc = 0;

	if (!name || !*name || strlen(name) > 64)
		return PC_E_TZ;
	pthread_mutex_lock(&tz_lock);
	if (!tz_names)
		rc = tz_load();
	pthread_mutex_unlock(&tz_lock);
	if (rc < 0)
		return rc;
	hit = bsearch(&name, tz_names, tz_n, sizeof(*tz_names), tz_cmp);
	if (!hit)
		return PC_E_TZ;
	*canonical = *hit;
	return 0;
}

void pc_json_col_time(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	char buf[40];

	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_string(pc_time_fmt(pc_col_us(res, row, col),
					buf, sizeof(buf))));
}
