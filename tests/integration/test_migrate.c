/*
 * test_migrate.c -- pin-host --migrate (host/core/migrate.c, sql/README.md):
 * versioned files once each, the repeatable file of a schema
 * (calendar/R__functions.sql, the one place of its functions and triggers)
 * after them and again when it changed.
 *
 *  - a fresh database and upgraded ones end with the same functions,
 *    triggers and views (pg_get_functiondef, pg_get_triggerdef,
 *    pg_get_viewdef) and the same schema (pg_dump --schema-only): upgraded
 *    from the files as they were before the functions moved (all of them
 *    applied; an install that stopped at calendar 0610), and from the
 *    current files in two steps;
 *  - a changed repeatable file, or a new versioned file, applies the
 *    repeatable file again; a second run changes nothing;
 *  - an applied versioned file edited since is not applied again (a
 *    warning), unless it declares the recorded checksum; a .sql file of
 *    neither kind is refused.
 *
 * Works on scratch databases (pin_mig_*) of the stack's cluster, created
 * and dropped here; the stack's own database is not touched.  The files as
 * they were come from git (PIN_SOURCE_DIR is a checkout).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The last commit whose sql/ still defined the functions in the versioned
 * files (0100, 0200, 0620, 0630, 0640, 0660): what installed databases ran. */
#define BEFORE_REPEATABLE "35747111c02581f4625a4342f09bfff0458b1e8a"

/* PIN_PG_DSN with another database name */
static char *dsn_for(const char *db)
{
	const char *dsn = h_env("PIN_PG_DSN");
	const char *slash = strrchr(dsn, '/');
	const char *q = strchr(dsn, '?');

	ck_assert_msg(slash && slash > strstr(dsn, "//") + 1, "PIN_PG_DSN %s: no database", dsn);
	return h_sprintf("%.*s/%s%s", (int)(slash - dsn), dsn, db, q ? q : "");
}

static PGconn *connect_to(const char *db)
{
	PGconn *c = PQconnectdb(dsn_for(db));

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "connect %s: %s", db, PQerrorMessage(c));
	return c;
}

static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* statements on the cluster's maintenance database */
static void admin(const char *sql)
{
	PGconn *c = connect_to("postgres");
	PGresult *r;

	PQsetNoticeProcessor(c, quiet, NULL);   /* "does not exist, skipping" */
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
			PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

static void db_create(const char *db)
{
	admin(h_sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db));
	admin(h_sprintf("CREATE DATABASE %s", db));
}

static void db_drop(const char *db)
{
	admin(h_sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db));
}

/* the rows of sql on db as text: fields separated by '|', rows by '\n' */
static char *query_text(const char *db, const char *sql)
{
	PGconn *c = connect_to(db);
	PGresult *r = PQexec(c, sql);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap), *out;

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	ck_assert_ptr_nonnull(buf);
	buf[0] = '\0';
	for (int i = 0; i < PQntuples(r); i++)
		for (int j = 0; j < PQnfields(r); j++) {
			const char *v = PQgetisnull(r, i, j) ? "NULL" : PQgetvalue(r, i, j);
			size_t need = strlen(v) + 2;

			if (len + need + 1 > cap) {
				while (len + need + 1 > cap)
					cap *= 2;
				buf = realloc(buf, cap);
				ck_assert_ptr_nonnull(buf);
			}
			len += (size_t)sprintf(buf + len, "%s%c", v,
					j + 1 == PQnfields(r) ? '\n' : '|');
		}
	PQclear(r);
	PQfinish(c);
	out = h_strdup(buf);
	free(buf);
	return out;
}

/* The definitions the repeatable files own, over the service's schemas. */
static char *definitions(const char *db)
{
	return query_text(db,
		"SELECT 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)"
		"  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
		" WHERE n.nspname IN ('calendar', 'notifications')"
		" UNION ALL "
		"SELECT 'trigger', c.relname || '.' || t.tgname, pg_get_triggerdef(t.oid)"
		"  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
		"  JOIN pg_namespace n ON n.oid = c.relnamespace"
		" WHERE n.nspname IN ('calendar', 'notifications') AND NOT t.tgisinternal"
		" UNION ALL "
		"SELECT 'view', schemaname || '.' || viewname, definition FROM pg_views"
		" WHERE schemaname IN ('calendar', 'notifications')"
		" ORDER BY 1, 2");
}

/* every migration's name and checksum */
static char *recorded(const char *db)
{
	return query_text(db, "SELECT name, checksum FROM public.schema_migrations ORDER BY name");
}

static char *scratch_dir(void)
{
	char *d = h_sprintf("%s/migrate-XXXXXX", h_env("PIN_DEV_DIR"));

	ck_assert_msg(mkdtemp(d) != NULL, "mkdtemp %s: %s", d, strerror(errno));
	return d;
}

/* sh -c cmd; asserts exit 0 */
static void sh(const char *cmd)
{
	int st = system(cmd);

	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
			"%s: exit %d", cmd, st);
}

/* sql/ of the source tree at rev (git) or as it is (rev NULL), in a scratch
 * directory of its own; the path of its sql/ */
static char *sql_tree(const char *rev)
{
	char *d = scratch_dir();
	const char *src = h_env("PIN_SOURCE_DIR");

	if (rev)
		sh(h_sprintf("git -C '%s' archive %s sql | tar -x -C '%s'", src, rev, d));
	else
		sh(h_sprintf("cp -r '%s/sql' '%s/sql'", src, d));
	return h_sprintf("%s/sql", d);
}

/* removes the scratch directory of a sql_tree() */
static void rm_tree(const char *sqldir)
{
	size_t n = strlen(sqldir);

	ck_assert(n > 4 && strcmp(sqldir + n - 4, "/sql") == 0);
	sh(h_sprintf("rm -rf '%.*s'", (int)(n - 4), sqldir));
}

/* removes the files of sqldir/schema that sort after last */
static void keep_upto(const char *sqldir, const char *schema, const char *last)
{
	char *dir = h_sprintf("%s/%s", sqldir, schema);
	DIR *d = opendir(dir);
	struct dirent *e;
	int kept = 0;

	ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			if (strcmp(e->d_name, last) > 0)
				ck_assert_int_eq(unlink(h_sprintf("%s/%s", dir, e->d_name)), 0);
			else
				kept++;
		}
	closedir(d);
	ck_assert_msg(kept > 0, "%s: nothing up to %s", dir, last);
}

static void append(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* pin-host --migrate on db with sqldir; its exit status, *out its output */
static int migrate(const char *db, const char *sqldir, char **out)
{
	char *log = h_sprintf("%s/migrate-run.log", h_env("PIN_DEV_DIR"));
	const char *asan = h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL);
	const char *argv[] = { h_env("PIN_HOST_BIN"), "--mode", "api",
		"--config", h_env("PIN_CONFIG"), "--pg-dsn", dsn_for(db),
		"--migrate", "--sql-dir", sqldir, NULL };
	int status = 0;
	pid_t pid;

	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (asan && *asan)
			setenv("ASAN_OPTIONS", asan, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*out = h_slurp(log);
	if (!*out)
		*out = h_strdup("");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void migrate_ok(const char *db, const char *sqldir, char **out)
{
	int rc = migrate(db, sqldir, out);

	ck_assert_msg(rc == 0, "migrate %s with %s: exit %d\n%s", db, sqldir, rc, *out);
}

/* pg_dump --schema-only of db, without the lines that differ per run */
static char *dump(const char *db)
{
	char *file = h_sprintf("%s/migrate-dump.sql", h_env("PIN_DEV_DIR"));
	char *text, *out, *o;
	const char *p;

	sh(h_sprintf("'%s/pg_dump' --schema-only -f '%s' '%s'", h_env("PIN_PG_BIN"), file,
			dsn_for(db)));
	text = h_slurp(file);
	ck_assert_ptr_nonnull(text);
	out = o = h_strdup(text);
	/* \restrict / \unrestrict carry a random key (pg_dump 15.14 and later) */
	for (p = text; *p; ) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);

		if (strncmp(p, "\\restrict", 9) != 0 && strncmp(p, "\\unrestrict", 11) != 0) {
			memcpy(o, p, n);
			o += n;
		}
		p += n;
	}
	*o = '\0';
	unlink(file);
	return out;
}

/* a and b equal, else the first line where they differ */
static void assert_same(const char *what, const char *a, const char *b)
{
	size_t line = 1, i = 0;

	if (strcmp(a, b) == 0)
		return;
	while (a[i] && a[i] == b[i]) {
		if (a[i] == '\n')
			line++;
		i++;
	}
	while (i > 0 && a[i - 1] != '\n')
		i--;
	ck_abort_msg("%s differ at line %zu:\n  fresh:    %.200s\n  upgraded: %.200s",
			what, line, a + i, b + i);
}

/* db, migrated from sqldir first, then from the current files, equals
 * the fresh database */
static void assert_upgrade_equals_fresh(const char *db, const char *first_sqldir,
		int rewritten, const char *fresh_defs, const char *fresh_dump,
		const char *fresh_rec)
{
	char *out;
	int n = 0;

	db_create(db);
	migrate_ok(db, first_sqldir, &out);
	migrate_ok(db, h_sprintf("%s/sql", h_env("PIN_SOURCE_DIR")), &out);
	ck_assert_msg(strstr(out, "changed since") == NULL,
			"%s: an applied file warned as changed:\n%s", db, out);
	/* each applied file rewritten since declares its recorded checksum */
	for (const char *p = out; (p = strstr(p, "checksum updated")); p++)
		n++;
	ck_assert_msg(n == rewritten, "%s: %d rewritten files taken as applied, not %d:\n%s",
			db, n, rewritten, out);
	ck_assert_msg(strstr(out, "repeatable migration applied") != NULL, "%s", out);
	assert_same(h_sprintf("%s: functions, triggers, views", db), fresh_defs, definitions(db));
	assert_same(h_sprintf("%s: pg_dump --schema-only", db), fresh_dump, dump(db));
	/* every file the fresh database ran is recorded with the same checksum
	 * (an upgraded one may hold more rows: none here) */
	assert_same(h_sprintf("%s: schema_migrations", db), fresh_rec, recorded(db));
	db_drop(db);
}

START_TEST(fresh_equals_upgraded)
{
	const char *cur = h_sprintf("%s/sql", h_env("PIN_SOURCE_DIR"));
	char *old = sql_tree(BEFORE_REPEATABLE), *out, *defs, *fresh_dump, *rec, *part;

	db_create("pin_mig_fresh");
	migrate_ok("pin_mig_fresh", cur, &out);
	ck_assert_msg(strstr(out, "repeatable migration applied") != NULL, "%s", out);
	defs = definitions("pin_mig_fresh");
	fresh_dump = dump("pin_mig_fresh");
	rec = recorded("pin_mig_fresh");
	/* the functions and the trigger are there, once each */
	ck_assert_msg(strstr(defs, "function|calendar.slot_plan(uuid,text,jsonb,date,date,"
			"integer,integer,timestamp with time zone,integer)|") != NULL, "%s", defs);
	ck_assert_msg(strstr(defs, "function|calendar.us(timestamp with time zone)|") != NULL,
			"%s", defs);
	ck_assert_msg(strstr(defs, "trigger|event_reminders.tr_event_reminders_terminal_guard|"
			"CREATE TRIGGER tr_event_reminders_terminal_guard BEFORE UPDATE ON "
			"calendar.event_reminders FOR EACH ROW WHEN (((old.status)::text <> "
			"'Pending'::text))") != NULL, "%s", defs);
	ck_assert_msg(strstr(defs, "uuid_hash_extended(s.owner_user_id, 0)") != NULL, "%s", defs);
	ck_assert_msg(strstr(rec, "calendar/R__functions.sql|") != NULL, "%s", rec);
	ck_assert_msg(strstr(fresh_dump, "CREATE FUNCTION calendar.slot_plan(") != NULL &&
			strstr(fresh_dump, "CREATE TABLE calendar.availability_slots") != NULL,
			"%.2000s", fresh_dump);
	db_drop("pin_mig_fresh");

	/* an installation that ran every file as they were */
	assert_upgrade_equals_fresh("pin_mig_up_all", old, 12, defs, fresh_dump, rec);

	rm_tree(old);

	/* one that stopped before the first redefinition (calendar 0610) */
	part = sql_tree(BEFORE_REPEATABLE);
	keep_upto(part, "calendar", "0610_slots_tenant_start.sql");
	keep_upto(part, "notifications", "0030_agent_unavailable_templates.sql");
	assert_upgrade_equals_fresh("pin_mig_up_0610", part, 4, defs, fresh_dump, rec);
	rm_tree(part);

	/* the current files in two steps */
	part = sql_tree(NULL);
	keep_upto(part, "calendar", "0640_slots_publish.sql");
	keep_upto(part, "notifications", "0020_final_states_retention.sql");
	assert_upgrade_equals_fresh("pin_mig_up_now", part, 0, defs, fresh_dump, rec);
	rm_tree(part);
}
END_TEST

/* xmin of the catalog rows of the schema's functions and triggers: a new
 * value when CREATE OR REPLACE rewrote one */
static char *catalog_versions(const char *db)
{
	return query_text(db,
		"SELECT p.oid::regprocedure::text, p.xmin FROM pg_proc p"
		"  JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'calendar'"
		" UNION ALL SELECT t.tgname, t.xmin FROM pg_trigger t"
		"  JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
		" WHERE n.nspname = 'calendar' AND NOT t.tgisinternal ORDER BY 1");
}

#define SLOT_PLAN_XMIN "SELECT p.xmin FROM pg_proc p JOIN pg_namespace n" \
	" ON n.oid = p.pronamespace WHERE n.nspname = 'calendar' AND p.proname = 'slot_plan'"

static char *recorded_at(const char *db)
{
	return query_text(db, "SELECT name, checksum, applied_at FROM public.schema_migrations"
			" ORDER BY name");
}

START_TEST(second_run_changes_nothing)
{
	char *sqldir = sql_tree(NULL), *out, *rec, *cat;

	db_create("pin_mig_twice");
	migrate_ok("pin_mig_twice", sqldir, &out);
	rec = recorded_at("pin_mig_twice");
	cat = catalog_versions("pin_mig_twice");
	migrate_ok("pin_mig_twice", sqldir, &out);
	ck_assert_msg(strstr(out, "\"applied\":\"0\"") != NULL &&
			strstr(out, "\"repeatable_applied\":\"0\"") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "migration applied") == NULL, "%s", out);
	assert_same("schema_migrations", rec, recorded_at("pin_mig_twice"));
	assert_same("catalog rows", cat, catalog_versions("pin_mig_twice"));
	db_drop("pin_mig_twice");
	rm_tree(sqldir);
}
END_TEST

START_TEST(repeatable_reapplied_when_changed)
{
	char *sqldir = sql_tree(NULL), *out, *rec, *cat;
	char *rfile = h_sprintf("%s/calendar/R__functions.sql", sqldir);
	const char *db = "pin_mig_rep";

	db_create(db);
	migrate_ok(db, sqldir, &out);
	rec = recorded_at(db);
	cat = query_text(db, SLOT_PLAN_XMIN);

	/* a new function in the repeatable file: applied on the next run */
	append(rfile, "CREATE OR REPLACE FUNCTION calendar.migrate_probe() RETURNS int\n"
			"\tLANGUAGE sql IMMUTABLE RETURN 1;\n");
	migrate_ok(db, sqldir, &out);
	ck_assert_msg(strstr(out, "repeatable migration applied") != NULL &&
			strstr(out, "\"why\":\"changed\"") != NULL, "%s", out);
	ck_assert_str_eq(query_text(db, "SELECT calendar.migrate_probe()"), "1\n");
	ck_assert_msg(strcmp(rec, recorded_at(db)) != 0, "R__functions.sql's row unchanged");
	/* the whole file ran again: slot_plan rewritten too */
	ck_assert_msg(strcmp(cat, query_text(db, SLOT_PLAN_XMIN)) != 0, "slot_plan not rewritten");
	/* only a comment changed: applied too (its text is what is recorded) */
	rec = recorded_at(db);
	append(rfile, "-- a comment\n");
	migrate_ok(db, sqldir, &out);
	ck_assert_msg(strstr(out, "\"why\":\"changed\"") != NULL, "%s", out);
	ck_assert_msg(strcmp(rec, recorded_at(db)) != 0, "R__functions.sql's row unchanged");

	/* a new versioned file: the repeatable file runs again after it */
	rec = recorded_at(db);
	append(h_sprintf("%s/calendar/9999_migrate_probe.sql", sqldir),
			"CREATE TABLE calendar.migrate_probe (x int);\n");
	migrate_ok(db, sqldir, &out);
	ck_assert_msg(strstr(out, "9999_migrate_probe.sql") != NULL &&
			strstr(out, "\"why\":\"after versioned migrations\"") != NULL, "%s", out);
	db_drop(db);
	rm_tree(sqldir);
}
END_TEST

START_TEST(edited_versioned_file)
{
	char *sqldir = sql_tree(NULL), *out, *sum;
	char *file = h_sprintf("%s/calendar/0300_appointments.sql", sqldir);
	const char *db = "pin_mig_edit";

	db_create(db);
	migrate_ok(db, sqldir, &out);
	sum = query_text(db, "SELECT checksum FROM public.schema_migrations"
			" WHERE name = 'calendar/0300_appointments.sql'");
	sum[strcspn(sum, "\n")] = '\0';

	/* edited after it ran: not applied again, a warning at every run */
	append(file, "-- an edit\n");
	for (int i = 0; i < 2; i++) {
		migrate_ok(db, sqldir, &out);
		ck_assert_msg(strstr(out, "applied file changed since; not re-applied") != NULL &&
				strstr(out, "0300_appointments.sql") != NULL, "%s", out);
	}
	/* declares the recorded checksum: taken as applied, recorded anew */
	append(file, h_sprintf("-- valid-checksum: %s\n", sum));
	migrate_ok(db, sqldir, &out);
	ck_assert_msg(strstr(out, "checksum updated") != NULL &&
			strstr(out, "changed since") == NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"applied\":\"0\"") != NULL, "%s", out);
	migrate_ok(db, sqldir, &out);
	ck_assert_msg(strstr(out, "checksum updated") == NULL &&
			strstr(out, "changed since") == NULL, "%s", out);
	db_drop(db);
	rm_tree(sqldir);
}
END_TEST

START_TEST(other_file_name_refused)
{
	char *sqldir = sql_tree(NULL), *out;
	const char *db = "pin_mig_other";

	append(h_sprintf("%s/calendar/functions.sql", sqldir), "SELECT 1;\n");
	db_create(db);
	ck_assert_int_ne(migrate(db, sqldir, &out), 0);
	ck_assert_msg(strstr(out, "not a migration file name") != NULL &&
			strstr(out, "calendar/functions.sql") != NULL, "%s", out);
	ck_assert_str_eq(query_text(db, "SELECT count(*) FROM public.schema_migrations"), "0\n");
	db_drop(db);
	rm_tree(sqldir);
}
END_TEST

Suite *make_migrate_suite(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = h_tcase("migrate", 300);

	tcase_add_test(tc, fresh_equals_upgraded);
	tcase_add_test(tc, second_run_changes_nothing);
	tcase_add_test(tc, repeatable_reapplied_when_changed);
	tcase_add_test(tc, edited_versioned_file);
	tcase_add_test(tc, other_file_name_refused);
	suite_add_tcase(s, tc);
	return s;
}
