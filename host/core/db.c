/* db.c -- one PostgreSQL connection per thread, reconnecting.
 * A thread never shares its connection.  The API host's request threads are
 * the exception: with a db_concurrency cap they use the connection of the
 * gate slot they hold (pin_db_slot_use, doc/performance.md "A cap on concurrent database work"),
 * so 4 backends serve 64 threads, warm, instead of 64 used in turn.  When
 * the database is down the
 * accessors return NULL and callers answer 503 / retry later; reconnects are
 * attempted at most once per second per thread.
 *
 * Read replica (pg_dsn_read): a thread may own a second link, to a
 * hot standby.  pin_db_read_bind() points every accessor of this file at it
 * for one request of a route that tolerates staleness (ABI 1.3
 * route_replica_ok); the standby is checked at most once a second per
 * host (reachable, in recovery, streaming, replay lag <= read_max_lag_s),
 * otherwise the request stays on the primary (fallback, counted). */
#include "config.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core.h"

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
static char *dsn_read;              /* pg_dsn_read; NULL: no replica */
static double read_max_lag_s = 5;
static __thread struct tdb tprim;   /* the primary */
static __thread struct tdb trepl;   /* the standby (pg_dsn_read) */
/* the links of the gate slot this thread holds (pin_db_slot_use), or NULL:
 * the thread's own */
static __thread struct tdb *slot_links;
static struct tdb *pool;            /* 2 per slot: primary, standby */
static int pool_n;
#define PRIM (slot_links ? &slot_links[0] : &tprim)
#define REPL (slot_links ? &slot_links[1] : &trepl)
static __thread struct tdb *tsel;   /* NULL or REPL during a bound request */
/* the link the accessors use */
#define T (tsel ? tsel : PRIM)
#define ON_REPLICA (tsel != NULL)
static atomic_int db_up_global = 1;

void pin_db_set_dsn(const char *d)
{
	free(dsn);
	dsn = d ? strdup(d) : NULL;
}

void pin_db_set_read_dsn(const char *d, double max_lag_s)
{
	free(dsn_read);
	dsn_read = d && *d ? strdup(d) : NULL;
	read_max_lag_s = max_lag_s > 0 ? max_lag_s : 5;
}

static void on_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;   /* NOTICEs (IF NOT EXISTS ...) are noise; keep stderr JSON */
}

static void forget_prepared(void)
{
	for (size_t i = 0; i < T->nprep; i++)
		free(T->prep[i]);
	T->nprep = 0;
}

static void mark(bool up)
{
	if (ON_REPLICA) {
		T->up = up;
		return;
	}
	if (T->up != up || atomic_load(&db_up_global) != (int)up) {
		atomic_store(&db_up_global, up);
		pin_metric_set("pin_db_up", NULL, up ? 1 : 0);
	}
	T->up = up;
}

PGconn *pin_db_conn(void)
{
	int64_t now;

	if (T->conn && PQstatus(T->conn) == CONNECTION_OK)
		return T->conn;
	if (T->in_tx) {
		/* the transaction died with its link: its statements must not go
		 * on, in autocommit, on a fresh session (a COMMIT there would
		 * "succeed" with a warning).  pin_db_commit/rollback clear in_tx;
		 * the next BEGIN reconnects. */
		memcpy(T->err_state, "08006", 6);
		return NULL;
	}
	now = pin_clock_now_us();
	if (T->last_attempt_us && now - T->last_attempt_us < 1000000 &&
	    now >= T->last_attempt_us)
		return NULL;
	T->last_attempt_us = now;
	if (T->conn) {
		PQfinish(T->conn);
		T->conn = NULL;
	}
	forget_prepared();
	T->in_tx = false;
	if (ON_REPLICA) {
		/* the standby's sessions are told apart in pg_stat_activity */
		/* a standby that stops answering (no TCP reset) must not hold
		 * API threads and db_concurrency slots for minutes: bounded
		 * connect, keepalives, user timeout and statement time (the DSN,
		 * expanded last, may override them) */
		static const char *const kw[] = { "fallback_application_name",
			"connect_timeout", "tcp_user_timeout", "keepalives_idle",
			"keepalives_interval", "keepalives_count", "options", "dbname", NULL };
		const char *const vals[] = { "pin-host-read", "2", "3000", "1", "1", "3",
			"-c statement_timeout=3000", dsn_read, NULL };
		T->conn = PQconnectdbParams(kw, vals, 1);
	} else {
		T->conn = PQconnectdb(dsn ? dsn : "");
	}
	if (PQstatus(T->conn) != CONNECTION_OK && ON_REPLICA) {
		PQfinish(T->conn);   /* pin_db_read_bind counts and logs it */
		T->conn = NULL;
		T->up = false;
		memcpy(T->err_state, "08001", 6);
		return NULL;
	}
	if (PQstatus(T->conn) != CONNECTION_OK) {
		if (T->up || atomic_load(&db_up_global))
			pin_log(PIN_LOG_ERROR, "database unreachable", "error",
				PQerrorMessage(T->conn), NULL);
		PQfinish(T->conn);
		T->conn = NULL;
		mark(false);
		memcpy(T->err_state, "08001", 6);
		pin_metric_add("pin_db_connect_errors_total", NULL, 1);
		return NULL;
	}
	if (!ON_REPLICA && !T->up && !atomic_load(&db_up_global))
		pin_log(PIN_LOG_INFO, "database reachable again", NULL);
	PQsetNoticeProcessor(T->conn, on_notice, NULL);
	/* UTC and ISO dates: the text of a timestamptz the readers parse
	 * (sdk pc_pg_ts_text_us), whatever the server's or role's defaults.
	 * No JIT: the host's statements are short, and a plan whose estimate
	 * passed jit_above_cost (a queue table's statistics are always stale)
	 * was compiled again at every execution -- the relay's pending gauge
	 * on an outbox of 200k sent rows: 18 ms of JIT for a 0.9 ms count,
	 * once a second (2026-12-06). */
	PQclear(PQexec(T->conn, "SET TIME ZONE 'UTC'; SET DateStyle = ISO; SET jit = off"));
	mark(true);
	return T->conn;
}

bool pin_db_up(void)
{
	return atomic_load(&db_up_global) != 0;
}

void pin_db_close_thread(void)
{
	tsel = REPL;
	for (int i = 0; i < 2; i++) {
		if (T->conn)
			PQfinish(T->conn);
		T->conn = NULL;
		forget_prepared();
		T->in_tx = false;
		tsel = NULL;
	}
}

static void check_result(PGresult *res, const char *what)
{
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return;
	if (T->conn && PQstatus(T->conn) != CONNECTION_OK) {
		pin_log(ON_REPLICA ? PIN_LOG_WARN : PIN_LOG_ERROR, ON_REPLICA ?
			"read replica connection lost" : "database connection lost", NULL);
		memcpy(T->err_state, "08006", 6);
		mark(false);
		T->last_attempt_us = 0;   /* reconnect on next use */
		return;
	}
	/* primary message only: DETAIL may carry values (PII) */
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (state && (!strcmp(state, "40P01") || !strcmp(state, "40001")))
		T->conflict = true;
	/* 25P02 (statement in an aborted transaction) only echoes the cause */
	if (state && strlen(state) == 5 && strcmp(state, "25P02") != 0)
		memcpy(T->err_state, state, 6);
	else if (!state && !T->err_state[0])
		memcpy(T->err_state, "XX000", 6);
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

	if (retried || T->in_tx || !T->conn || PQstatus(T->conn) == CONNECTION_OK)
		return false;
	PQclear(*res);
	*res = NULL;
	T->last_attempt_us = 0;
	retried = true;
	ok = pin_db_conn() != NULL;
	return ok;
}

/* fmt: the result format, 0 text, 1 binary (the parameters are text) */
/* lens / fmts: the parameters' lengths and formats (NULL: all text) */
static PGresult *exec_raw(const char *sql, int n, const char *const *vals,
		const int *lens, const int *fmts, int fmt)
{
	PGconn *c = pin_db_conn();
	PGresult *res;

	if (!c)
		return NULL;
	res = PQexecParams(c, sql, n, NULL, vals, lens, fmts, fmt);
	if (PQresultStatus(res) == PGRES_FATAL_ERROR && retry_after_reconnect(&res))
		res = PQexecParams(T->conn, sql, n, NULL, vals, lens, fmts, fmt);
	retried = false;
	check_result(res, "exec");
	return res;
}

PGresult *pin_db_exec_raw(const char *sql, int n, const char *const *vals)
{
	return exec_raw(sql, n, vals, NULL, NULL, 0);
}

PGresult *pin_db_exec(const char *sql, int n, const char *const *vals)
{
	PGresult *res = pin_db_exec_raw(sql, n, vals);

	pin_arena_track_result(res);
	return res;
}

/* as exec_raw, prepared once per connection under name */
static PGresult *exec_prepared(const char *name, const char *sql, int n,
		const char *const *vals, const int *lens, const int *fmts, int fmt)
{
	PGconn *c = pin_db_conn();
	PGresult *res;
	bool have = false;

	if (!c)
		return NULL;
	for (size_t i = 0; i < T->nprep; i++)
		if (strcmp(T->prep[i], name) == 0) {
			have = true;
			break;
		}
	if (!have) {
		if (T->nprep == MAX_PREPARED) {
			res = exec_raw(sql, n, vals, lens, fmts, fmt);
			pin_arena_track_result(res);
			return res;
		}
		res = PQprepare(c, name, sql, n, NULL);
		if (PQresultStatus(res) == PGRES_FATAL_ERROR &&
		    retry_after_reconnect(&res)) {
			c = T->conn;
			res = PQprepare(c, name, sql, n, NULL);
		}
		retried = false;
		check_result(res, name);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			pin_arena_track_result(res);
			return res;
		}
		PQclear(res);
		T->prep[T->nprep++] = strdup(name);
	}
	res = PQexecPrepared(c, name, n, vals, lens, fmts, fmt);
	if (PQresultStatus(res) == PGRES_FATAL_ERROR && retry_after_reconnect(&res)) {
		/* cache is empty now */
		res = exec_prepared(name, sql, n, vals, lens, fmts, fmt);
		retried = false;
		return res;
	}
	retried = false;
	check_result(res, name);
	pin_arena_track_result(res);
	return res;
}

PGresult *pin_db_exec_prepared(const char *name, const char *sql, int n,
		const char *const *vals)
{
	return exec_prepared(name, sql, n, vals, NULL, NULL, 0);
}

PGresult *pin_db_exec_prepared_bin(const char *name, const char *sql, int n,
		const char *const *vals)
{
	return exec_prepared(name, sql, n, vals, NULL, NULL, 1);
}

PGresult *pin_db_exec_prepared_fmt(const char *name, const char *sql, int n,
		const char *const *vals, const int *lens, const int *fmts)
{
	return exec_prepared(name, sql, n, vals, lens, fmts, 0);
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

	T->in_tx = rc == 0;
	return rc;
}

int pin_db_commit(void)
{
	int rc = simple("COMMIT", "COMMIT");

	T->in_tx = false;
	if (rc != 0 && T->conn && PQtransactionStatus(T->conn) != PQTRANS_IDLE)
		simple("ROLLBACK", NULL);
	return rc;
}

void pin_db_rollback(void)
{
	T->in_tx = false;
	if (T->conn && PQstatus(T->conn) == CONNECTION_OK &&
	    PQtransactionStatus(T->conn) != PQTRANS_IDLE)
		simple("ROLLBACK", NULL);
}

bool pin_db_take_conflict(void)
{
	bool c = T->conflict;

	T->conflict = false;
	return c;
}

bool pin_db_in_tx(void)
{
	return T->conn && PQstatus(T->conn) == CONNECTION_OK &&
		PQtransactionStatus(T->conn) != PQTRANS_IDLE;
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
	T->err_state[0] = '\0';
}

const char *pin_db_last_error(void)
{
	return T->err_state;
}

/* The policy of README "Error classes" and of doc/operating.md "What a
 * consumer does with a database error" (issue 30).  Transient: the state or
 * the capacity of the database, not the input -- the same statement can
 * succeed later without the input changing. */
enum pin_db_class pin_db_classify(const char *state)
{
	static const char *const transient[] = {
		"25006",    /* read_only_sql_transaction: a standby after a failover */
		"25P03",    /* idle_in_transaction_session_timeout */
		"25P04",    /* transaction_timeout (PostgreSQL 17) */
		"40000",    /* transaction_rollback */
		"40001",    /* serialization_failure */
		"40003",    /* statement_completion_unknown */
		"40P01",    /* deadlock_detected */
		"55006",    /* object_in_use */
		"55P03",    /* lock_not_available (lock_timeout, NOWAIT) */
		"72000",    /* snapshot_too_old */
		NULL
	};
	/* whole classes: 08 connection, 53 insufficient resources (disk,
	 * memory, too many connections), 57 operator intervention (57014
	 * statement_timeout / cancel, 57P01 admin shutdown, 57P03 cannot connect
	 * now), 58 system error (I/O), F0 configuration file error, XX internal
	 * error (also "no SQLSTATE at all": out of memory in libpq) */
	static const char *const transient_class[] = { "08", "53", "57", "58", "F0",
		"XX", NULL };

	if (!state || !*state)
		return PIN_DBC_NONE;
	for (int i = 0; transient_class[i]; i++)
		if (!strncmp(state, transient_class[i], 2))
			return PIN_DBC_TRANSIENT;
	for (int i = 0; transient[i]; i++)
		if (!strcmp(state, transient[i]))
			return PIN_DBC_TRANSIENT;
	/* 54 program limit exceeded (statement too complex, too many
	 * arguments): the input made the statement too large, every time */
	if (!strncmp(state, "22", 2) || !strncmp(state, "54", 2))
		return PIN_DBC_DATA;
	if (!strcmp(state, "23505") || !strcmp(state, "23P01"))
		return PIN_DBC_EXPECTED;    /* unique / exclusion: handlers answer */
	/* 40002 a deferred constraint at COMMIT, 44000 WITH CHECK OPTION */
	if (!strncmp(state, "23", 2) || !strcmp(state, "40002") ||
	    !strcmp(state, "44000"))
		return PIN_DBC_INTEGRITY;
	return PIN_DBC_PERMANENT;
}

/* ---- read replica ---------------------------------------------------------- */

#define READ_CHECK_US 1000000      /* the standby is checked once a second */
#define READ_WARN_US 10000000      /* repeated fallback WARN lines: one per 10 s */

/* The verdict is the host's, not a thread's: one thread checks at most once
 * a second (it wins a compare-and-swap on read_checked_us), the others use
 * the last verdict.  Measured (README "Read replica"): a check per thread
 * and second was a fifth of the standby's statements at 300 req/s. */
static const char *const read_reasons[] = { NULL, "unreachable", "not_standby",
	"not_streaming", "lag" };
static _Atomic int64_t read_checked_us;    /* 0: check on the next request */
static atomic_int read_verdict = 1;        /* index into read_reasons */
/* 1 standby in use, 0 not, -1 not known yet (log transitions only) */
static atomic_int read_state = -1;
static _Atomic int64_t read_warned_us;

bool pin_db_read_configured(void)
{
	return dsn_read != NULL;
}

/* On the bound standby link.  The lag as the standby sees it: 0 when it
 * replayed all it received (after a restart the receive position starts at
 * the segment's beginning, behind the replay position, until WAL arrives;
 * an idle primary sends nothing, and
 * pg_last_xact_replay_timestamp() stays old), else the age of the last
 * replayed commit.  Without a WAL receiver (the primary unreachable from
 * the standby, or streaming not started) the standby cannot know how far
 * behind it is: not used.  Returns an index into read_reasons. */
static int read_check(double *lag)
{
	static const char *const sql =
		"SELECT pg_is_in_recovery(), "
		"  EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'), "
		"  CASE WHEN pg_last_wal_receive_lsn() IS NULL OR "
		"            pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0 "
		"       ELSE COALESCE(extract(epoch FROM now() - "
		"            pg_last_xact_replay_timestamp()), 0) END";
	int reason = 0;
	PGresult *res;

	*lag = -1;
	if (!pin_db_conn())
		return 1;
	res = pin_db_exec_raw(sql, 0, NULL);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		reason = 1;
	else if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
		reason = 2;
	else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0)
		reason = 3;
	else if ((*lag = strtod(PQgetvalue(res, 0, 2), NULL)) > read_max_lag_s)
		reason = 4;
	PQclear(res);
	return reason;
}

static void read_note(const char *reason, double lag)
{
	int64_t now = pin_clock_mono_us(), last;
	char lbl[64], lags[32];

	snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
	pin_metric_add("pin_db_read_fallback_total", lbl, 1);
	if (atomic_exchange(&read_state, 0) != 0) {
		pin_metric_set("pin_db_replica_up", NULL, 0);
		atomic_store(&read_warned_us, now);
	} else {
		last = atomic_load(&read_warned_us);
		if (now - last < READ_WARN_US ||
		    !atomic_compare_exchange_strong(&read_warned_us, &last, now))
			return;
	}
	snprintf(lags, sizeof lags, "%.1f", lag);
	pin_log(PIN_LOG_WARN, "read replica not used, reads go to the primary",
		"reason", reason, "lag_s", lag >= 0 ? lags : "unknown", NULL);
}

bool pin_db_read_bind(void)
{
	int64_t now = pin_clock_mono_us(), last;
	double lag = -1;
	int v;

	tsel = NULL;
	if (!dsn_read)
		return false;
	last = atomic_load(&read_checked_us);
	if ((!last || now - last >= READ_CHECK_US || now < last) &&
	    atomic_compare_exchange_strong(&read_checked_us, &last, now)) {
		tsel = REPL;
		v = read_check(&lag);
		tsel = NULL;
		atomic_store(&read_verdict, v);
		if (lag >= 0)
			pin_metric_set("pin_db_replica_lag_seconds", NULL, lag);
		if (!v && atomic_exchange(&read_state, 1) != 1) {
			pin_metric_set("pin_db_replica_up", NULL, 1);
			pin_log(PIN_LOG_INFO, "read replica in use", NULL);
		}
	}
	v = atomic_load(&read_verdict);
	if (v) {
		read_note(read_reasons[v], lag);
		return false;
	}
	/* the verdict is fit; this thread's own link may not be (yet) */
	tsel = REPL;
	if (!pin_db_conn()) {
		tsel = NULL;
		read_note("unreachable", -1);
		return false;
	}
	pin_metric_add("pin_db_replica_reads_total", NULL, 1);
	return true;
}

bool pin_db_read_bound(void)
{
	return ON_REPLICA;
}

void pin_db_read_fallback(const char *reason)
{
	if (!ON_REPLICA)
		return;
	if (T->in_tx)
		pin_db_rollback();
	tsel = NULL;
	atomic_store(&read_checked_us, 0);   /* check again on the next request */
	read_note(reason, -1);
}

void pin_db_read_unbind(void)
{
	tsel = NULL;
}

/* ---- connections per gate slot (API host) ----------------------------- */

int pin_db_pool_init(int n)
{
	pool = calloc((size_t)n * 2, sizeof *pool);
	if (!pool)
		return -1;
	pool_n = n;
	return 0;
}

void pin_db_slot_use(int k)
{
	tsel = NULL;
	slot_links = k >= 0 && k < pool_n ? &pool[2 * k] : NULL;
}

void pin_db_pool_connect(void)
{
	for (int k = 0; k < pool_n; k++) {
		pin_db_slot_use(k);
		if (!pin_db_conn())
			PRIM->last_attempt_us = 0;   /* the first request tries again */
	}
	pin_db_slot_use(-1);
}

int pin_db_slot_current(void)
{
	return slot_links ? (int)((slot_links - pool) / 2) : -1;
}

void pin_db_pool_close(void)
{
	for (int k = 0; k < pool_n; k++) {
		pin_db_slot_use(k);
		pin_db_close_thread();
	}
	pin_db_slot_use(-1);
	free(pool);
	pool = NULL;
	pool_n = 0;
}
