/* migrate.c -- apply the migrations of sql/<schema>/ (sql/README.md).
 *
 * Two kinds of file, told apart by name (any other .sql file is refused):
 *  - versioned, NNNN_name.sql: tables, indexes, constraints, data.  Applied
 *    once each, in order (schema, then file name), each in its own
 *    transaction together with its row in public.schema_migrations.
 *  - repeatable, R__name.sql: the schema's functions and triggers, each
 *    defined there once (CREATE OR REPLACE).  Applied after every versioned
 *    file of every schema, and again whenever its content changed or a
 *    versioned file was applied in the same run (a table rebuilt by one
 *    would have lost its triggers), each in one transaction with its row
 *    (the row's checksum and applied_at are then updated).
 * A session advisory lock serialises hosts that migrate at the same time.
 * Re-running is a no-op.
 *
 * An applied versioned file whose content changed since is not applied
 * again, and a warning says so, unless the file declares the checksum that
 * was recorded, with a line "-- valid-checksum: <16 hex digits>" (as
 * Liquibase's validCheckSum): a rewrite that keeps its meaning for the
 * databases that ran it (a function moved to the repeatable file, a comment
 * reworded).  The recorded checksum is then brought up to date. */
#include "config.h"
#include <ctype.h>
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

enum kind { K_OTHER, K_VERSIONED, K_REPEATABLE };

/* by the file name of "schema/file.sql" */
static enum kind file_kind(const char *rel)
{
	const char *b = strrchr(rel, '/');

	b = b ? b + 1 : rel;
	if (strncmp(b, "R__", 3) == 0 && strlen(b) > strlen("R__.sql"))
		return K_REPEATABLE;
	for (int i = 0; i < 4; i++)
		if (!isdigit((unsigned char)b[i]))
			return K_OTHER;
	return b[4] == '_' ? K_VERSIONED : K_OTHER;
}

/* sql has a line "-- valid-checksum: SUM" */
static bool declares_checksum(const char *sql, const char *sum)
{
	static const char tag[] = "-- valid-checksum: ";
	const char *p;

	for (p = sql; (p = strstr(p, tag)); p += sizeof tag - 1) {
		const char *v = p + sizeof tag - 1;

		if (p != sql && p[-1] != '\n')
			continue;
		if (strspn(v, "0123456789abcdef") == 16 && strncmp(v, sum, 16) == 0)
			return true;
	}
	return false;
}

/* sql and its row (name, sum) in one transaction; 0 ok, -1 rolled back */
static int apply(PGconn *c, const char *name, const char *sql, const char *sum)
{
	const char *p[2] = { name, sum };
	PGresult *r;

	if (pin_db_begin() < 0)
		return -1;
	r = PQexec(c, sql);
	/* a file of comments only (a migration whose statements moved to the
	 * repeatable file) is an empty query */
	if (!r || (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK &&
	    PQresultStatus(r) != PGRES_EMPTY_QUERY)) {
		/* primary message and SQLSTATE only: DETAIL quotes row
		 * values ("Key (x)=(...) is duplicated") */
		const char *pm = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

		pin_log(PIN_LOG_ERROR, "migrate: file failed, rolled back",
			"file", name, "sqlstate", st ? st : "", "error",
			pm ? pm : PQerrorMessage(c), NULL);
		PQclear(r);
		pin_db_rollback();
		return -1;
	}
	PQclear(r);
	r = pin_db_exec("INSERT INTO public.schema_migrations (name, checksum)"
		" VALUES ($1, $2) ON CONFLICT (name) DO UPDATE"
		" SET checksum = EXCLUDED.checksum, applied_at = clock_timestamp()", 2, p);
	if (!ok(r) || pin_db_commit() < 0) {
		pin_db_rollback();
		return -1;
	}
	return 0;
}

int pin_migrate(const char *sqldir)
{
	PGconn *c = pin_db_conn();
	char **files = NULL, path[4096], sum[32], lockid[32];
	size_t n = 0, applied = 0, reapplied = 0;
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
	for (size_t i = 0; i < n; i++)
		if (file_kind(files[i]) == K_OTHER) {
			pin_log(PIN_LOG_ERROR, "migrate: not a migration file name "
				"(NNNN_name.sql or R__name.sql); nothing applied",
				"file", files[i], NULL);
			goto out;
		}
	/* every versioned file of every schema, then the repeatable ones */
	for (int pass = 0; pass < 2; pass++) {
		enum kind want = pass == 0 ? K_VERSIONED : K_REPEATABLE;

		for (size_t i = 0; i < n; i++) {
			const char *p1[1] = { files[i] };
			const char *stored;
			char *sql;

			if (file_kind(files[i]) != want)
				continue;
			snprintf(path, sizeof path, "%s/%s", sqldir, files[i]);
			sql = slurp(path);
			if (!sql) {
				pin_log(PIN_LOG_ERROR, "migrate: cannot read", "file", path,
					"error", strerror(errno), NULL);
				goto out;
			}
			snprintf(sum, sizeof sum, "%016llx", fnv(sql));
			r = pin_db_exec("SELECT checksum FROM public.schema_migrations"
				" WHERE name = $1", 1, p1);
			if (!ok(r)) {
				free(sql);
				goto out;
			}
			stored = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : NULL;
			if (stored && want == K_VERSIONED) {
				const char *p2[2] = { files[i], sum };

				if (strcmp(stored, sum) == 0) {
					/* applied, unchanged */
				} else if (declares_checksum(sql, stored)) {
					r = pin_db_exec("UPDATE public.schema_migrations"
						" SET checksum = $2 WHERE name = $1", 2, p2);
					if (!ok(r)) {
						free(sql);
						goto out;
					}
					pin_log(PIN_LOG_INFO, "migrate: applied file rewritten "
						"(declares the recorded checksum); checksum updated",
						"file", files[i], NULL);
				} else {
					pin_log(PIN_LOG_WARN, "migrate: applied file changed since; "
						"not re-applied", "file", files[i], NULL);
				}
				free(sql);
				continue;
			}
			/* repeatable: new, changed, or after versioned files */
			const char *why = !stored ? "new" : strcmp(stored, sum) != 0 ?
				"changed" : applied > 0 ? "after versioned migrations" : NULL;

			if (want == K_REPEATABLE && !why) {
				free(sql);      /* unchanged, no schema change */
				continue;
			}
			if (apply(c, files[i], sql, sum) < 0) {
				free(sql);
				goto out;
			}
			free(sql);
			if (want == K_VERSIONED) {
				pin_log(PIN_LOG_INFO, "migration applied", "file", files[i], NULL);
				applied++;
			} else {
				pin_log(PIN_LOG_INFO, "repeatable migration applied",
					"file", files[i], "why", why, NULL);
				reapplied++;
			}
		}
	}
	{
		char a[16], ra[16], t[16];
		snprintf(a, sizeof a, "%zu", applied);
		snprintf(ra, sizeof ra, "%zu", reapplied);
		snprintf(t, sizeof t, "%zu", n);
		pin_log(PIN_LOG_INFO, "migrations up to date", "applied", a,
			"repeatable_applied", ra, "known", t, NULL);
	}
	rc = 0;
out:
	pin_db_exec("SELECT pg_advisory_unlock($1::bigint)", 1, lp);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	return rc;
}
