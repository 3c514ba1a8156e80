/* migrate.c -- apply sql/<schema>/NNNN_name.sql in order, once each.
 * Each file runs in its own transaction together with its row in
 * public.schema_migrations; a session advisory lock serialises hosts that
 * migrate at the same time.  Re-running is a no-op. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core.h"

#define MIGRATE_LOCK 7283110001LL

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sorted list of "schema/file.sql" under dir */
static char **list_files(const char *dir, size_t *n)
{
	char **out = NULL;
	size_t cnt = 0, cap = 0;
	DIR *d = opendir(dir), *sd;
	struct dirent *e, *f;
	char sub[4096];

	*n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
		if (!(sd = opendir(sub)))
			continue;
		while ((f = readdir(sd))) {
			size_t l = strlen(f->d_name);
			if (l < 5 || strcmp(f->d_name + l - 4, ".sql") != 0)
				continue;
			if (cnt == cap) {
				cap = cap ? cap * 2 : 32;
				char **nn = realloc(out, cap * sizeof *nn);
				if (!nn)
					break;
				out = nn;
			}
			size_t need = strlen(e->d_name) + l + 2;
			out[cnt] = malloc(need);
			if (!out[cnt])
				break;
			snprintf(out[cnt], need, "%s/%s", e->d_name, f->d_name);
			cnt++;
		}
		closedir(sd);
	}
	closedir(d);
	/* schema order: calendar before notifications (alphabetical), then file */
	qsort(out, cnt, sizeof *out, cmpstr);
	*n = cnt;
	return out;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1))) {
		if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
			free(buf);
			buf = NULL;
		} else {
			buf[len] = '\0';
		}
	}
	fclose(f);
	return buf;
}

static unsigned long long fnv(const char *s)
{
	unsigned long long h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static bool ok(PGresult *r)
{
	return r && (PQresultStatus(r) == PGRES_COMMAND_OK ||
		PQresultStatus(r) == PGRES_TUPLES_OK);
}

int pin_migrate(const char *sqldir)
{
	PGconn *c = pin_db_conn();
	char **files = NULL, path[4096], sum[32], lockid[32];
	size_t n = 0, applied = 0;
	int rc = -1;
	PGresult *r;

	if (!c) {
		pin_log(PIN_LOG_ERROR, "migrate: database unreachable", NULL);
		return -1;
	}
	snprintf(lockid, sizeof lockid, "%lld", MIGRATE_LOCK);
	const char *lp[1] = { lockid };
	r = pin_db_exec("SELECT pg_advisory_lock($1::bigint)", 1, lp);
	if (!ok(r))
		return -1;
	r = pin_db_exec("CREATE TABLE IF NOT EXISTS public.schema_migrations ("
		" name text PRIMARY KEY, checksum text NOT NULL,"
		" applied_at timestamptz NOT NULL DEFAULT clock_timestamp())", 0, NULL);
	if (!ok(r))
		goto out;
	files = list_files(sqldir, &n);
	if (!files && n == 0) {
		pin_log(PIN_LOG_ERROR, "migrate: no migrations found", "dir", sqldir, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p1[1] = { files[i] };
		char *sql;

		snprintf(path, sizeof path, "%s/%s", sqldir, files[i]);
		sql = slurp(path);
		if (!sql) {
			pin_log(PIN_LOG_ERROR, "migrate: cannot read", "file", path,
				"error", strerror(errno), NULL);
			goto out;
		}
		snprintf(sum, sizeof sum, "%016llx", fnv(sql));
		r = pin_db_exec("SELECT checksum FROM public.schema_migrations WHERE name = $1",
			1, p1);
		if (!ok(r)) {
			free(sql);
			goto out;
		}
		if (PQntuples(r) == 1) {
			if (strcmp(PQgetvalue(r, 0, 0), sum) != 0)
				pin_log(PIN_LOG_WARN, "migrate: applied file changed since; "
					"not re-applied", "file", files[i], NULL);
			free(sql);
			continue;
		}
		if (pin_db_begin() < 0) {
			free(sql);
			goto out;
		}
		r = PQexec(c, sql);
		free(sql);
		if (!ok(r)) {
			/* primary message and SQLSTATE only: DETAIL quotes row
			 * values ("Key (x)=(...) is duplicated") */
			const char *pm = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
			const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

			pin_log(PIN_LOG_ERROR, "migrate: file failed, rolled back",
				"file", files[i], "sqlstate", st ? st : "", "error",
				pm ? pm : PQerrorMessage(c), NULL);
			PQclear(r);
			pin_db_rollback();
			goto out;
		}
		PQclear(r);
		const char *p2[2] = { files[i], sum };
		r = pin_db_exec("INSERT INTO public.schema_migrations (name, checksum)"
			" VALUES ($1, $2)", 2, p2);
		if (!ok(r) || pin_db_commit() < 0) {
			pin_db_rollback();
			goto out;
		}
		pin_log(PIN_LOG_INFO, "migration applied", "file", files[i], NULL);
		applied++;
	}
	{
		char a[16], t[16];
		snprintf(a, sizeof a, "%zu", applied);
		snprintf(t, sizeof t, "%zu", n);
		pin_log(PIN_LOG_INFO, "migrations up to date", "applied", a, "known", t, NULL);
	}
	rc = 0;
out:
	pin_db_exec("SELECT pg_advisory_unlock($1::bigint)", 1, lp);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	return rc;
}
