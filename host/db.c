/* db.c -- one PostgreSQL connection per thread, reconnecting.
 * A thread never shares its connection.  When the database is down the
 * accessors return NULL and callers answer 503 / retry later; reconnects are
 * attempted at most once per second per thread. */
#include "config.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "host.h"

#define MAX_PREPARED 256

struct tdb {
	PGconn *conn;
	int64_t last_attempt_us;
	bool up : 1;
	bool in_tx : 1;
	bool conflict : 1;  /* a 40P01 / 40001 happened since the last take */
	char err_state[6];  /* SQLSTATE of the last failed statement since the
	                     * last pin_db_error_reset ("08006" for a lost link);
	                     * with the bit-fields it fits the old padding */
	size_t nprep;
	char *prep[MAX_PREPARED];
};

static char *dsn;
static __thread struct tdb t;
static atomic_int db_up_global = 1;

void pin_db_set_dsn(const char *d)
{
	free(dsn);
	dsn = d ? strdup(d) : NULL;
}

static void on_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;   /* NOTICEs (IF NOT EXISTS ...) are noise; keep stderr JSON */
}

static void forget_prepared(void)
{
	for (size_t i = 0; i < t.nprep; i++)
		free(t.prep[i]);
	t.nprep = 0;
}

static void mark(bool up)
{
	if (t.up != up || atomic_load(&db_up_global) != (int)up) {
		atomic_store(&db_up_global, up);
		pin_metric_set("pin_db_up", NULL, up ? 1 : 0);
	}
	t.up = up;
}

PGconn *pin_db_conn(void)
{
	int64_t now;

	if (t.conn && PQstatus(t.conn) == CONNECTION_OK)
		return t.conn;
	now = pin_clock_now_us();
	if (t.last_attempt_us && now - t.last_attempt_us < 1000000 &&
	    now >= t.last_attempt_us)
		return NULL;
	t.last_attempt_us = now;
	if (t.conn) {
		PQfinish(t.conn);
		t.conn = NULL;
	}
	forget_prepared();
	t.in_tx = false;
	t.conn = PQconnectdb(dsn ? dsn : "");
	if (PQstatus(t.conn) != CONNECTION_OK) {
		if (t.up || atomic_load(&db_up_global))
			pin_log(PIN_LOG_ERROR, "database unreachable", "error",
				PQerrorMessage(t.conn), NULL);
		PQfinish(t.conn);
		t.conn = NULL;
		mark(false);
		memcpy(t.err_state, "08001", 6);
		pin_metric_add("pin_db_connect_errors_total", NULL, 1);
		return NULL;
	}
	if (!t.up && !atomic_load(&db_up_global))
		pin_log(PIN_LOG_INFO, "database reachable again", NULL);
	PQsetNoticeProcessor(t.conn, on_notice, NULL);
	PQclear(PQexec(t.conn, "SET TIME ZONE 'UTC'"));
	mark(true);
	return t.conn;
}

bool pin_db_up(void)
{
	return atomic_load(&db_up_global) != 0;
}

void pin_db_close_thread(void)
{
	if (t.conn)
		PQfinish(t.conn);
	t.conn = NULL;
	forget_prepared();
	t.in_tx = false;
}

static void check_result(PGresult *res, const char *what)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return;
	if (t.conn && PQstatus(t.conn) != CONNECTION_OK) {
		pin_log(PIN_LOG_ERROR, "database connection lost", NULL);
		memcpy(t.err_state, "08006", 6);
		mark(false);
		t.last_attempt_us = 0;   /* reconnect on next use */
		return;
	}
	/* primary message only: DETAIL may carry values (PII) */
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (state && (!strcmp(state, "40P01") || !strcmp(state, "40001")))
		t.conflict = true;
	/* 25P02 (statement in an aborted transaction) only echoes the cause */
	if (state && strlen(state) == 5 && strcmp(state, "25P02") != 0)
		memcpy(t.err_state, state, 6);
	else if (!state && !t.err_state[0])
		memcpy(t.err_state, "XX000", 6);
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	/* so may the primary message of a data exception (class 22):
	 * 'invalid input syntax for type uuid: "<the value>"' */
	if (state && state[0] == '2' && state[1] == '2')
		msg = "data exception (message not logged: it may quote a value)";
	/* constraint violations are answered by handlers: log at debug */
	int lvl = (state && state[0] == '2' && state[1] == '3') ? PIN_LOG_DEBUG :
		PIN_LOG_ERROR;
	pin_log(lvl, "sql error", "sqlstate", state ? state : "", "error",
		msg ? msg : "", "statement", what, NULL);
}

/* A dead connection is only noticed when a statement fails.  Outside a
 * transaction the statement can safely run again on a fresh connection, so
 * the first request after a database restart does not answer 503. */
static __thread bool retried;

static bool retry_after_reconnect(PGresult **res)
{
	bool ok;

	if (retried || t.in_tx || !t.conn || PQstatus(t.conn) == CONNECTION_OK)
		return false;
	PQclear(*res);
	*res = NULL;
	t.last_attempt_us = 0;
	retried = true;
	ok = pin_db_conn() != NULL;
	return ok;
}

PGresult *pin_db_exec_raw(const char *sql, int n, const char *const *vals)
{
	PGconn *c = pin_db_conn();
	PGresult *res;

	if (!c)
		return NULL;
	res = PQexecParams(c, sql, n, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_FATAL_ERROR && retry_after_reconnect(&res))
		res = PQexecParams(t.conn, sql, n, NULL, vals, NULL, NULL, 0);
	retried = false;
	check_result(res, "exec");
	return res;
}

PGresult *pin_db_exec(const char *sql, int n, const char *const *vals)
{
	PGresult *res = pin_db_exec_raw(sql, n, vals);

	pin_arena_track_result(res);
	return res;
}

PGresult *pin_db_exec_prepared(const char *name, const char *sql, int n,
		const char *const *vals)
{
	PGconn *c = pin_db_conn();
	PGresult *res;
	bool have = false;

	if (!c)
		return NULL;
	for (size_t i = 0; i < t.nprep; i++)
		if (strcmp(t.prep[i], name) == 0) {
			have = true;
			break;
		}
	if (!have) {
		if (t.nprep == MAX_PREPARED)
			return pin_db_exec(sql, n, vals);
		res = PQprepare(c, name, sql, n, NULL);
		if (PQresultStatus(res) == PGRES_FATAL_ERROR &&
		    retry_after_reconnect(&res)) {
			c = t.conn;
			res = PQprepare(c, name, sql, n, NULL);
		}
		retried = false;
		check_result(res, name);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			pin_arena_track_result(res);
			return res;
		}
		PQclear(res);
		t.prep[t.nprep++] = strdup(name);
	}
	res = PQexecPrepared(c, name, n, vals, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_FATAL_ERROR && retry_after_reconnect(&res)) {
		res = pin_db_exec_prepared(name, sql, n, vals);   /* cache is empty now */
		retried = false;
		return res;
	}
	retried = false;
	check_result(res, name);
	pin_arena_track_result(res);
	return res;
}

static int simple(const char *sql, const char *expect_status)
{
	PGresult *res = pin_db_exec_raw(sql, 0, NULL);
	int rc = 0;

	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		rc = PIN_ERR_DB;
	else if (expect_status && strcmp(PQcmdStatus(res), expect_status) != 0)
		rc = PIN_ERR_DB;   /* COMMIT of an aborted tx answers ROLLBACK */
	PQclear(res);
	return rc;
}

int pin_db_begin(void)
{
	int rc = simple("BEGIN", NULL);

	t.in_tx = rc == 0;
	return rc;
}

int pin_db_commit(void)
{
	int rc = simple("COMMIT", "COMMIT");

	t.in_tx = false;
	if (rc != 0 && t.conn && PQtransactionStatus(t.conn) != PQTRANS_IDLE)
		simple("ROLLBACK", NULL);
	return rc;
}

void pin_db_rollback(void)
{
	t.in_tx = false;
	if (t.conn && PQstatus(t.conn) == CONNECTION_OK &&
	    PQtransactionStatus(t.conn) != PQTRANS_IDLE)
		simple("ROLLBACK", NULL);
}

bool pin_db_take_conflict(void)
{
	bool c = t.conflict;

	t.conflict = false;
	return c;
}

bool pin_db_in_tx(void)
{
	return t.conn && PQstatus(t.conn) == CONNECTION_OK &&
		PQtransactionStatus(t.conn) != PQTRANS_IDLE;
}

const char *pin_db_sqlstate(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	return s ? s : "";
}

const char *pin_db_constraint(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
	return s ? s : "";
}

void pin_db_error_reset(void)
{
	t.err_state[0] = '\0';
}

const char *pin_db_last_error(void)
{
	return t.err_state;
}

/* The policy of README "Error classes".  Transient: the same statement can
 * succeed later without the input changing. */
enum pin_db_class pin_db_classify(const char *state)
{
	static const char *const transient[] = {
		"40001",    /* serialization_failure */
		"40P01",    /* deadlock_detected */
		"55P03",    /* lock_not_available (lock_timeout, NOWAIT) */
		"57014",    /* query_canceled: statement_timeout under load */
		"57P01", "57P02", "57P03",  /* admin/crash shutdown, starting up */
		"XX000",    /* no SQLSTATE at all (out of memory in libpq) */
		NULL
	};

	if (!state || !*state)
		return PIN_DBC_NONE;
	if (!strncmp(state, "08", 2) || !strncmp(state, "53", 2) ||
	    !strncmp(state, "58", 2))
		return PIN_DBC_TRANSIENT;   /* connection, resources, system I/O */
	for (int i = 0; transient[i]; i++)
		if (!strcmp(state, transient[i]))
			return PIN_DBC_TRANSIENT;
	if (!strncmp(state, "22", 2))
		return PIN_DBC_DATA;
	if (!strcmp(state, "23505") || !strcmp(state, "23P01"))
		return PIN_DBC_EXPECTED;    /* unique / exclusion: handlers answer */
	if (!strncmp(state, "23", 2))
		return PIN_DBC_INTEGRITY;
	return PIN_DBC_PERMANENT;
}
