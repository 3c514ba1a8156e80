/*
 * test_replica.c -- issue 15 point 4: the public showcase reads from a hot
 * standby (pg_dsn_read), booking stays on the primary, and the host falls
 * back to the primary when the standby lags or is down, and returns to it
 * without a restart.
 *
 * ./dev test starts a streaming standby next to the stack's primary
 * (PIN_PG_READ_DSN, PIN_PG_REPLICA_DATA/_LOG/_OPTS).  The stack's own API
 * host stays on the primary (the other suites read their own writes at
 * once); this suite spawns a second API host with --pg-dsn-read on its own
 * FastCGI socket and talks FastCGI to it directly (fcgi_client.c).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SHOWCASE "/api/public/calendar/slots"

static const char *sock_path(void)
{
	return h_sprintf("%s/replica-api.sock", h_env("PIN_DEV_DIR"));
}

/* method uri (path?query) [token] [body] on the replica host's socket */
static struct h_resp *fcgi(const char *method, const char *uri, const char *token,
		const char *body)
{
	return h_fcgi(sock_path(), method, uri, token, body);
}

/* Value of the sample "name{labels}" (exact text before the value) in the
 * replica host's /metrics; 0 when absent. */
static double metric(const char *sample)
{
	double v = h_fcgi_metric(sock_path(), sample);

	return isnan(v) ? 0 : v;
}

static double fallbacks(void)
{
	return metric("pin_db_read_fallback_total{reason=\"unreachable\"}") +
		metric("pin_db_read_fallback_total{reason=\"error\"}") +
		metric("pin_db_read_fallback_total{reason=\"not_streaming\"}") +
		metric("pin_db_read_fallback_total{reason=\"lag\"}");
}

/* ---- the standby ----------------------------------------------------------- */

static PGconn *standby(void)
{
	static PGconn *c;

	if (c && PQstatus(c) == CONNECTION_OK)
		return c;
	if (c)
		PQfinish(c);
	c = PQconnectdb(h_env("PIN_PG_READ_DSN"));
	return PQstatus(c) == CONNECTION_OK ? c : NULL;
}

/* first column of the first row on the standby, "" when none / an error */
static char *standby_scalar(const char *sql)
{
	PGconn *c = standby();
	PGresult *res = c ? PQexec(c, sql) : NULL;
	char *v = h_strdup(res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) ?
			PQgetvalue(res, 0, 0) : "");

	PQclear(res);
	return v;
}

static int standby_ctl(const char *action)
{
	char *cmd;

	if (!strcmp(action, "stop"))
		cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' -m fast -w "
				"stop >/dev/null 2>&1", h_env("PIN_PG_BIN"),
				h_env("PIN_PG_REPLICA_DATA"));
	else
		cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' -l '%s' -w "
				"-t 60 -o '%s' start >/dev/null 2>&1", h_env("PIN_PG_BIN"),
				h_env("PIN_PG_REPLICA_DATA"), h_env("PIN_PG_REPLICA_LOG"),
				h_env("PIN_PG_REPLICA_OPTS"));
	return system(cmd);
}

/* the standby replayed everything the primary has written so far */
static bool caught_up(void)
{
	char *lsn = h_sql_scalar("SELECT pg_current_wal_lsn()::text");
	char *sql = h_sprintf("SELECT pg_last_wal_replay_lsn() >= '%s'::pg_lsn", lsn);

	return H_WAIT_UNTIL(!strcmp(standby_scalar(sql), "t"), 20000);
}

/* ---- the API host on pg_dsn_read ------------------------------------------- */

static pid_t host_pid = -1;

static void host_start(void)
{
	const char *args[] = { "--threads", "4", "--pg-dsn-read", h_env("PIN_PG_READ_DSN"),
		NULL };

	host_pid = h_fcgi_host_start(sock_path(), "api-replica", args);
}

static void host_stop(void)
{
	int status;

	if (host_pid <= 0)
		return;
	kill(host_pid, SIGTERM);
	while (waitpid(host_pid, &status, 0) < 0 && errno == EINTR)
		;
	host_pid = -1;
	unlink(h_sprintf("%s/pids/api-replica.pid", h_env("PIN_DEV_DIR")));
}

/* ---- the scenario ------------------------------------------------------------- */

static char *publish_one(const struct h_agent *a, int days)
{
	char *d = h_date_in(days);
	char *body = h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"09:00\"}],"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
			"\"autoConfirm\":true,\"cancellationCutoffMinutes\":60}", d, d);
	struct h_resp *r = h_post("/api/v1/agent/calendar/slots/batches", a->token, body);

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	return h_strdup(h_jstr(json_object_array_get_idx(h_jget(r->json, "slots"), 0), "id"));
}

/* the showcase of the agent through the replica host: 200 asserted; does
 * it list slot? */
static bool lists(const char *agent, const char *slot)
{
	struct h_resp *r = fcgi("GET", h_sprintf(SHOWCASE "?agentUserId=%s&limit=100",
			agent), NULL, NULL);

	ck_assert_msg(r->status == 200, "showcase: %ld %s", r->status, r->body);
	return strstr(r->body, slot) != NULL;
}

static long log_size(void)
{
	struct stat st;
	char *p = h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR"));

	return stat(p, &st) == 0 ? (long)st.st_size : 0;
}

static bool log_has_since(long off, const char *needle)
{
	char *p = h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR"));
	FILE *f = fopen(p, "r");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	fseek(f, off, SEEK_SET);
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

START_TEST(showcase_on_standby_booking_on_primary_fallback_and_back)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char *inv = h_token("investor", h_uuid(), NULL);
	char *s1, *s2;
	double reads, fb, fb_lag;
	long off;
	struct h_resp *r;

	ck_assert_msg(standby() != NULL, "the standby does not answer");
	ck_assert_str_eq(standby_scalar("SELECT pg_is_in_recovery()"), "t");
	s1 = publish_one(&a, 2);
	host_start();

	/* 1. the showcase is served by the standby once it has the slot */
	ck_assert_msg(H_WAIT_UNTIL(lists(a.id, s1), 20000), "slot not on the showcase");
	ck_assert_msg(metric("pin_db_replica_reads_total") >= 1,
		"no showcase read went to the standby");
	ck_assert_int_eq((int)metric("pin_db_replica_up"), 1);
	ck_assert_msg(atoi(standby_scalar("SELECT count(*) FROM pg_stat_activity "
			"WHERE application_name = 'pin-host-read'")) >= 1,
		"no pin-host-read session on the standby");

	/* 2. booking goes to the primary (a standby refuses writes: 25006) */
	r = fcgi("POST", "/api/public/calendar/appointments", inv,
		h_sprintf("{\"slotId\":\"%s\"}", s1));
	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots "
			"WHERE id = $1", s1), "Booked");
	/* ... and the showcase shows it once the standby caught up */
	ck_assert_msg(H_WAIT_UNTIL(!lists(a.id, s1), 20000),
		"the booked slot stays on the showcase");

	/* 3. proof of the standby: with its replay paused, a new slot is on
	 * the primary but not on the showcase -- until the lag passes
	 * read_max_lag_s (5 s) and the reads fall back to the primary */
	h_sql("SELECT txid_current()");   /* a fresh commit, then replayed */
	ck_assert(caught_up());
	standby_scalar("SELECT pg_wal_replay_pause()");
	ck_assert_str_eq(standby_scalar("SELECT pg_is_wal_replay_paused()"), "t");
	fb_lag = metric("pin_db_read_fallback_total{reason=\"lag\"}");
	reads = metric("pin_db_replica_reads_total");
	s2 = publish_one(&a, 3);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots "
			"WHERE id = $1", s2), "Available");
	if (!lists(a.id, s2))
		ck_assert(metric("pin_db_replica_reads_total") > reads);
	else   /* only a lag fallback (a very slow machine) may show it already */
		ck_assert(metric("pin_db_read_fallback_total{reason=\"lag\"}") > fb_lag);
	ck_assert_msg(H_WAIT_UNTIL(lists(a.id, s2), 20000),
		"no fallback to the primary while the standby lags");
	ck_assert(metric("pin_db_read_fallback_total{reason=\"lag\"}") > fb_lag);
	ck_assert(metric("pin_db_replica_lag_seconds") > 5);
	ck_assert_int_eq((int)metric("pin_db_replica_up"), 0);
	standby_scalar("SELECT pg_wal_replay_resume()");
	reads = metric("pin_db_replica_reads_total");
	ck_assert_msg(H_WAIT_UNTIL(lists(a.id, s2) &&
			metric("pin_db_replica_reads_total") > reads, 20000),
		"reads did not return to the standby after its replay resumed");

	/* 4. the standby stops: every answer stays 200, from the primary */
	off = log_size();
	fb = fallbacks();
	ck_assert_int_eq(standby_ctl("stop"), 0);
	for (int i = 0; i < 12; i++)
		ck_assert(lists(a.id, s2));
	ck_assert_msg(fallbacks() > fb, "no fallback counted");
	ck_assert_int_eq((int)metric("pin_db_replica_up"), 0);
	ck_assert_msg(H_WAIT_UNTIL(log_has_since(off, "read replica not used"), 5000),
		"no WARN line for the fallback");

	/* 5. started again, it serves the showcase without a host restart */
	ck_assert_int_eq(standby_ctl("start"), 0);
	reads = metric("pin_db_replica_reads_total");
	ck_assert_msg(H_WAIT_UNTIL(lists(a.id, s2) &&
			metric("pin_db_replica_reads_total") > reads, 30000),
		"reads did not return to the standby after it started again");
	ck_assert_int_eq((int)metric("pin_db_replica_up"), 1);
	ck_assert(log_has_since(off, "read replica in use"));
	host_stop();
}
END_TEST

Suite *make_replica_suite(void)
{
	Suite *s = suite_create("replica");
	TCase *tc = h_tcase("replica", 150);

	tcase_add_test(tc, showcase_on_standby_booking_on_primary_fallback_and_back);
	suite_add_tcase(s, tc);
	return s;
}
