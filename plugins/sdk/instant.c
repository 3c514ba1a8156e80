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

char *pc_time_str(int64_t us)
{
	char *buf = pc_api->alloc(40);

	return pc_time_fmt(us, buf, 40);
}

char *pc_time_param(int64_t us)
{
	int64_t frac = ((us % 1000000) + 1000000) % 1000000;
	char base[40];

	pc_time_fmt(us - frac, base, sizeof(base));
	base[strlen(base) - 1] = 0;     /* drop the Z */
	return pc_api->sprintf("%s.%06lldZ", base, (long long)frac);
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
