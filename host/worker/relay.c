/*
 * relay.c -- the transactional outbox relay (worker mode).
 *
 * One thread.  Work units: every outbox (calendar.outbox and every table a
 * plugin registered, pin_registrar.outbox, ABI 1.1) is split into
 * relay_shards shards by a stable hash of the message key,
 * (hashtext(key) & 0x7fffffff) % relay_shards, computed by PostgreSQL when
 * the rows are read; every row of a key is in one shard, so per-key order
 * holds.  Each (outbox, shard) has its own leader: a session advisory lock
 * pg_try_advisory_lock(hashtext('pin.relay:' || outbox) & 0x7fffffff, shard)
 * on the relay thread's own connection.  If that connection is lost (new
 * backend pid) every lock is gone and is tried again.
 *
 * Several worker hosts share the shards: each host also holds a shared
 * "member" lock (RELAY_MEMBER_CLASS, relay_shards) per relay thread
 * (relay_threads, default 2: each thread has its own connection, producer
 * and shards, so two PostgreSQL backends work for one host); a member leads
 * at most ceil(relay_shards / members) shards of each outbox and releases
 * the extra ones (after their batches in flight are marked) when more
 * members join.  Hosts that run with a
 * different relay_shards (a change rolled out host by host) see each other's
 * member lock and relay nothing until they agree (ERROR log once).  Every
 * relay_failover_s / 5 (at most 1 s) a host tries the units nobody leads;
 * the relay's connection asks the server for TCP keepalives (idle 1 s,
 * interval 1 s, count relay_failover_s / 2 - 1, at least 1) and
 * tcp_user_timeout (relay_failover_s / 2), so the server ends a dead host's
 * session -- and its locks -- within about relay_failover_s / 2 + 1 s; a
 * killed process's socket is closed by its kernel at once.
 *
 * One unit is a pipeline: read up to relay_batch unpublished rows of the
 * shard in id order (after the rows in flight: a cursor) -> produce them
 * (key, value = envelope, no copy) with an idempotent producer, acks=all,
 * murmur2_random -> while their delivery reports come in, read and produce
 * the next batch (at most relay_inflight batches per unit) -> when every
 * report of the oldest batch is in, mark it: published_at = host clock for
 * the acknowledged rows in one UPDATE .. WHERE id = ANY($1); failed rows get
 * attempts + 1 and last_error, the unit stops reading, waits for its other
 * batches, and starts again from the oldest unpublished row of the shard
 * after a backoff (1 s doubling to 30 s), so per-key order holds.  A row is
 * marked published only after its delivery report.  The relay's session
 * commits with synchronous_commit off: a mark lost in a crash of the
 * database publishes its rows again (at-least-once), and no mark waits for
 * the WAL flush.  When delivery keeps
 * failing, the producer is recreated (the bootstrap file is re-read: the dev
 * broker comes back on a new port).  When a unit has nothing in flight its
 * cursor goes back to the start, so a row that committed late with a lower
 * id is read on the next pass: at once after a failed batch, else at most
 * every relay_rewind_ms (250: once caught up, a late row waits about that
 * long more; 0 = at every emptied window).  The time split of each relay thread is
 * logged at debug level once a second while rows flow ("outbox relay: time
 * split").
 *
 * Rows that can never be produced (larger than message.max.bytes, invalid,
 * a topic still unknown after relay_park_unknown_topic_attempts tries) do not
 * block the rows behind them: they are parked (parked_at, last_error,
 * pin_outbox_failed_total{outbox,reason} with reason too_large | invalid |
 * unknown_topic, one ERROR log line with id, topic, size, never the payload)
 * and the batch goes on.  A parked row is never retried by itself.
 *
 * Config: relay_batch (1000), relay_inflight (4), relay_shards (4),
 * relay_failover_s (5), relay_busy_interval_ms (50),
 * relay_idle_interval_ms (100), relay_rewind_ms (250), relay_backoff_max_ms (30000),
 * kafka_message_timeout_ms (10000), relay_once_timeout_ms (10000),
 * kafka_linger_ms (5), relay_park_unknown_topic_attempts (5),
 * metrics_textfile ("" = none: the worker host's metrics in Prometheus text
 * format, rewritten at most once a second, for node_exporter's textfile
 * collector; a worker host serves no HTTP).
 *
 * Metrics: pin_outbox_pending (gauge; also per {outbox}),
 * pin_outbox_oldest_unpublished_age_seconds{outbox} (host clock - created_at
 * of the oldest unpublished, unparked row; 0 when none; at most once a
 * second), pin_outbox_published_total, pin_outbox_failed_total{outbox,reason},
 * pin_outbox_publish_errors_total, pin_kafka_up (0/1),
 * pin_outbox_relay_leader (0/1: leads at least one shard),
 * pin_outbox_relay_shard_leader{outbox,shard} (0/1).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

/* advisory lock classes (two-int4 form): the member lock of every relay
 * host (second key: relay_shards); a unit's class is derived from its
 * outbox name (hashtext('pin.relay:' || outbox) & 0x7fffffff) */
#define RELAY_MEMBER_CLASS "730153"
#define RELAY_MAX_INFLIGHT 16

/* delivery state of one row in a batch */
enum dr_state { DR_PENDING = 0, DR_OK, DR_FAILED, DR_PARKED };

struct relay_batch;

struct relay_row {
	const char *id;
	const char *topic;
	size_t size;
	int attempts;               /* before this batch */
	enum dr_state st;
	rd_kafka_resp_err_t err;
	const char *reason;         /* DR_PARKED: metric label */
	const char *traceparent;    /* NULL when the writer had none */
	const char *message_id;
	struct relay_batch *b;
};

/* rows read together and handed to the producer; owns its arena (the
 * PGresult the producer points into) */
struct relay_batch {
	struct pin_arena *a;
	struct relay_row *rows;
	PGresult *res;              /* key and value of each row */
	int n;                      /* rows read */
	int produced;               /* rows looked at by the producer */
	int pending;                /* delivery reports still due */
	int64_t deadline_us;
	int64_t produced_us;        /* monotonic: produce done, last report */
	int64_t reported_us;
};

/* one (outbox, shard) */
struct relay_unit {
	const char *table;
	int shard;
	char lab[200];              /* outbox="..",shard="K" */
	bool led;
	bool releasing;             /* give the lock back once drained */
	bool stalled;               /* a batch failed: drain, then start over */
	bool caught_up;             /* the last read was not full */
	char cursor[24];            /* last id read (see unit_reap: rewinds) */
	int64_t rewound_us;         /* monotonic: the cursor last went to 0 */
	struct relay_batch *win[RELAY_MAX_INFLIGHT];
	int nwin;
};

/*
 * Where a relay thread's wall time goes, summed per window and logged at
 * debug level ("outbox relay: time split", doc/performance.md "Relay (session 7)"):
 * the leadership round, the batch reads, handing rows to the producer,
 * the marks (their UPDATE, then the published log lines), the pending
 * gauge, polling for delivery reports and sleeping; and per batch the
 * time from its produce to its last delivery report and from that report
 * to its mark.
 */
enum rc_step { RC_LEAD, RC_READ, RC_PRODUCE, RC_MARK, RC_LOG, RC_PENDING, RC_POLL,
	RC_SLEEP, RC_N };
static const char *const rc_name[RC_N] = { "lead_ms", "read_ms", "produce_ms", "mark_ms",
	"log_ms", "pending_ms", "poll_ms", "sleep_ms" };

struct relay_clock {
	int64_t us[RC_N];
	int64_t since;              /* window start */
	int64_t report_us, wait_us; /* produce -> last report, report -> mark */
	long rows, batches, rewinds;
};

static _Thread_local struct relay_clock *rclk;

/* adds the time since *t0 to step k and moves *t0 on */
static void rc_add(enum rc_step k, int64_t *t0)
{
	int64_t t = pin_clock_mono_us();

	if (rclk)
		rclk->us[k] += t - *t0;
	*t0 = t;
}

struct relay {
	rd_kafka_t *rk;
	char *boot;                 /* bootstrap the producer was built with */
	int consecutive_failures;
	int backoff_ms;
	int64_t pause_until_us;     /* no new reads before (backoff) */
	bool failing;               /* for "log once per state change" */
	bool create_failing;        /* same, for producer creation */
	bool mismatch;              /* hosts disagree on relay_shards */
	bool once;                  /* --once: no member lock, no balancing */
	int kafka_up;               /* -1 unknown */
	int conn_pid;               /* backend pid of the session set up */
	int nshards, batch, inflight;
	int64_t rewind_us;          /* relay_rewind_ms; 0 = at every empty window */
	int64_t next_lead_us;       /* next leadership round */
	int64_t next_pending_us;    /* next pending-gauge refresh */
	int members;
	struct relay_unit *units;
	int nunits;
	int any_led;                /* -1 unknown */
	long long done;             /* rows published or parked */
	int thread;                 /* 0 .. relay_threads - 1 */
	int64_t next_boot_check;
};

/* the outboxes served: calendar.outbox, then those plugins registered */
static size_t relay_noutboxes(void)
{
	return pin_reg.noutboxes ? pin_reg.noutboxes : 1;
}

static const char *relay_outbox(size_t i)
{
	return pin_reg.noutboxes ? pin_reg.outboxes[i] : PIN_OUTBOX_DEFAULT;
}

#define RELAY_MAX_THREADS 8
static pthread_t relay_thr[RELAY_MAX_THREADS];
static int relay_nthr;
static bool relay_running;
static _Atomic int relay_led_units;  /* over this host's relay threads */
static struct pin_waiter relay_w;    /* set up by start */

static bool should_stop(void)
{
	return relay_running ? pin_waiter_stopped(&relay_w) : pin_stopping;
}

/* Interruptible sleep: returns early when the relay is stopped. */
static void relay_sleep_ms(int ms)
{
	struct timespec ts;

	if (!relay_running) {         /* run_once: the caller's thread */
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (long)(ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		return;
	}
	pin_waiter_sleep(&relay_w, ms);
}


static void set_kafka_up(struct relay *r, int up)
{
	if (r->kafka_up != up)
		pin_metric_set("pin_kafka_up", NULL, up);
	r->kafka_up = up;
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct relay_row *row = m->_private;

	(void)rk;
	(void)opaque;
	if (!row || row->st != DR_PENDING)
		return;
	row->err = m->err;
	row->st = m->err ? DR_FAILED : DR_OK;
	if (--row->b->pending == 0)
		row->b->reported_us = pin_clock_mono_us();
}

static void relay_fail_pending(struct relay *r);

/* Destroys the producer; after rd_kafka_destroy no delivery report comes,
 * so the rows still pending in every batch become DR_FAILED. */
static void producer_destroy(struct relay *r)
{
	if (r->rk) {
		rd_kafka_purge(r->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(r->rk, 0);
		rd_kafka_destroy(r->rk);
		r->rk = NULL;
	}
	relay_fail_pending(r);
	free(r->boot);
	r->boot = NULL;
}

static int producer_create(struct relay *r)
{
	char err[512], tmo[32], linger[32];
	rd_kafka_conf_t *conf;

	conf = pin_kafka_conf_new("relay", err, sizeof(err));
	if (!conf)
		goto fail;
	snprintf(tmo, sizeof(tmo), "%lld", pin_config_int("kafka_message_timeout_ms"));
	snprintf(linger, sizeof(linger), "%lld", pin_config_int("kafka_linger_ms"));
	if (pin_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "linger.ms", linger, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "message.timeout.ms", tmo, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "queue.buffering.max.messages", "1000000", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "queue.buffering.max.kbytes", "1048576", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "batch.num.messages", "10000", err, sizeof(err))) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
	r->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!r->rk) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	r->boot = pin_kafka_bootstrap();
	r->create_failing = false;
	return 0;
fail:
	if (!r->create_failing)
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot create the kafka producer",
				"error", err, NULL);
	r->create_failing = true;
	set_kafka_up(r, 0);
	return -1;
}

/* True when there is a bootstrap address and it differs from the
 * producer's (a missing file is no news: the broker is down). */
static bool bootstrap_changed(struct relay *r)
{
	char *now = pin_kafka_bootstrap();
	bool changed = now && (!r->boot || strcmp(now, r->boot) != 0);

	free(now);
	return changed;
}

/* True when a bootstrap address can be read (the file exists again). */
static bool bootstrap_known(void)
{
	char *now = pin_kafka_bootstrap();
	bool known = now != NULL;

	free(now);
	return known;
}

/* Recreates the producer if the bootstrap address changed, or after a run
 * of failures (a producer stuck on a dead address or in a fatal state). */
static void producer_maybe_recreate(struct relay *r, bool force)
{
	bool changed = bootstrap_changed(r);

	if (!r->rk)
		return;             /* created on the next batch */
	if (!force && !changed && r->consecutive_failures % 5 != 0)
		return;
	pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
			"reason", changed ? "bootstrap changed" :
			force ? "fatal error" : "repeated failures", NULL);
	producer_destroy(r);
}

/* Every batch of every unit: rows still pending become DR_FAILED (the
 * producer is gone, no report will come). */
static void relay_fail_pending(struct relay *r)
{
	for (int u = 0; u < r->nunits; u++)
		for (int k = 0; k < r->units[u].nwin; k++) {
			struct relay_batch *b = r->units[u].win[k];

			for (int i = 0; i < b->produced; i++)
				if (b->rows[i].st == DR_PENDING) {
					b->rows[i].st = DR_FAILED;
					b->rows[i].err = RD_KAFKA_RESP_ERR__TIMED_OUT;
				}
			b->pending = 0;
		}
}

static void batch_free(struct relay_batch *b)
{
	if (!b)
		return;
	pin_arena_free(b->a);
	free(b);
}

static int relay_threads(void)
{
	long long t = pin_config_int("relay_threads");

	return t < 1 ? 1 : t > RELAY_MAX_THREADS ? RELAY_MAX_THREADS : (int)t;
}

static int64_t relay_failover_ms(void)
{
	long long s = pin_config_int("relay_failover_s");

	return (s < 1 ? 1 : s) * 1000;
}

static void units_build(struct relay *r)
{
	long long s = pin_config_int("relay_shards");
	long long w = pin_config_int("relay_inflight");

	r->nshards = s < 1 ? 1 : s > 1024 ? 1024 : (int)s;
	r->inflight = w < 1 ? 1 : w > RELAY_MAX_INFLIGHT ? RELAY_MAX_INFLIGHT : (int)w;
	r->batch = (int)pin_config_int("relay_batch");
	if (r->batch < 1)
		r->batch = 1;
	/* --once drains to a read from the start that finds nothing */
	r->rewind_us = r->once ? 0 : pin_config_int("relay_rewind_ms") * 1000;
	if (r->rewind_us < 0)
		r->rewind_us = 0;
	r->nunits = (int)relay_noutboxes() * r->nshards;
	r->units = calloc((size_t)r->nunits, sizeof(*r->units));
	if (!r->units) {
		r->nunits = 0;
		return;
	}
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];

		u->table = relay_outbox((size_t)i / (size_t)r->nshards);
		u->shard = i % r->nshards;
		snprintf(u->lab, sizeof(u->lab), "outbox=\"%s\",shard=\"%d\"", u->table, u->shard);
		strcpy(u->cursor, "0");
	}
}

/* every unit's gauge at 0, before any relay thread runs */
static void gauges_init(void)
{
	long long s = pin_config_int("relay_shards");
	char lab[200];

	if (s < 1)
		s = 1;
	for (size_t o = 0; o < relay_noutboxes(); o++)
		for (long long k = 0; k < s && k < 1024; k++) {
			snprintf(lab, sizeof(lab), "outbox=\"%s\",shard=\"%lld\"", relay_outbox(o), k);
			pin_metric_set("pin_outbox_relay_shard_leader", lab, 0);
		}
	pin_metric_set("pin_outbox_relay_leader", NULL, 0);
}

static void unit_log(struct relay_unit *u, int level, const char *msg, const char *reason,
		const struct relay *r)
{
	char sh[16], n[16];

	snprintf(sh, sizeof(sh), "%d", u->shard);
	snprintf(n, sizeof(n), "%d", r->nshards);
	pin_log(level, msg, "outbox", u->table, "shard", sh, "shards", n,
			"reason", reason, NULL);
}

static void leader_gauge(struct relay *r)
{
	int any = 0, n = 0, total;

	for (int i = 0; i < r->nunits; i++)
		n += r->units[i].led;
	any = n > 0;
	if (any != r->any_led) {
		total = atomic_fetch_add(&relay_led_units, any ? 1 : (r->any_led == 1 ? -1 : 0)) +
			(any ? 1 : (r->any_led == 1 ? -1 : 0));
		pin_metric_set("pin_outbox_relay_leader", NULL, total > 0);
	}
	r->any_led = any;
}

static void unit_lost(struct relay *r, struct relay_unit *u, const char *reason)
{
	if (!u->led)
		return;
	u->led = false;
	u->releasing = false;
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	unit_log(u, PIN_LOG_WARN, "outbox relay: shard lost", reason, r);
}

static void lose_all(struct relay *r, const char *reason)
{
	for (int i = 0; i < r->nunits; i++)
		unit_lost(r, &r->units[i], reason);
	leader_gauge(r);
}

/* Gives a unit's lock back (its batches are marked). */
static void unit_release(struct relay *r, struct relay_unit *u, const char *reason)
{
	PGconn *c = pin_db_conn();
	char sh[16];
	const char *p[2] = { u->table, sh };

	if (!u->led)
		return;
	snprintf(sh, sizeof(sh), "%d", u->shard);
	/* the gauge first: once unlocked, another thread of this host may take
	 * the shard and set it to 1 */
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	if (c && PQbackendPID(c) == r->conn_pid)
		pin_db_exec("SELECT pg_advisory_unlock(hashtext('pin.relay:' || $1) & 2147483647,"
				" $2::int)", 2, p);
	u->led = false;
	u->releasing = false;
	unit_log(u, PIN_LOG_INFO, "outbox relay: shard released", reason, r);
}

/* A new session: its name (pg_stat_activity shows which host leads what),
 * TCP keepalives / user timeout so the server ends it soon after this host
 * dies, and the member lock. */
static void session_setup(struct relay *r)
{
	char sql[600];
	long long f = relay_failover_ms() / 1000, cnt = f / 2 - 1;

	if (cnt < 1)
		cnt = 1;
	/* db.c may have re-run a statement of ours (count_members, try_lock) on
	 * this new session before we saw its pid: locks it took there are not in
	 * our books, and a re-entrant advisory lock taken twice would survive one
	 * unlock and starve its shard.  An adopted session starts with none. */
	pin_db_exec("SELECT pg_advisory_unlock_all()", 0, NULL);
	snprintf(sql, sizeof(sql), "SELECT set_config('application_name', 'pin-relay %ld', false),"
			" set_config('tcp_keepalives_idle', '1', false),"
			" set_config('tcp_keepalives_interval', '1', false),"
			" set_config('tcp_keepalives_count', '%lld', false),"
			" set_config('tcp_user_timeout', '%lld', false),"
			/* the batch read must walk the partial index in id order:
			 * the statistics of a queue table are always stale, and a
			 * seq scan + sort of the whole outbox per batch took 1.5 s
			 * at 100k rows (doc/performance.md "Outbox relay figures") */
			" set_config('enable_seqscan', 'off', false),"
			" set_config('enable_bitmapscan', 'off', false),"
			/* the marks need no flush to disk before the next batch:
			 * a mark lost in a crash of PostgreSQL only publishes its
			 * rows again (at-least-once; consumers dedupe on
			 * messageId), and waiting for the WAL flush of every
			 * 1000-row UPDATE held the relay thread */
			" set_config('synchronous_commit', 'off', false)",
			(long)getpid(), cnt, f * 1000 / 2);
	pin_db_exec(sql, 0, NULL);
	if (!r->once) {
		snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock_shared(" RELAY_MEMBER_CLASS
				", %d)", r->nshards);
		pin_db_exec(sql, 0, NULL);
	}
}

/* relay hosts with our relay_shards (*same) and with another (*other) */
static int count_members(struct relay *r, int *same, int *other)
{
	char sql[400], n[16];
	const char *p[1] = { n };
	PGresult *res;

	snprintf(n, sizeof(n), "%d", r->nshards);
	snprintf(sql, sizeof(sql), "SELECT count(*) FILTER (WHERE objid = $1::int),"
			" count(*) FILTER (WHERE objid <> $1::int) FROM pg_locks"
			" WHERE locktype = 'advisory' AND classid = " RELAY_MEMBER_CLASS
			" AND objsubid = 2 AND granted AND database ="
			" (SELECT oid FROM pg_database WHERE datname = current_database())");
	res = pin_db_exec(sql, 1, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return -1;
	*same = atoi(PQgetvalue(res, 0, 0));
	*other = atoi(PQgetvalue(res, 0, 1));
	return 0;
}

static bool try_lock(struct relay_unit *u)
{
	char sh[16];
	const char *p[2] = { u->table, sh };
	PGresult *res;

	snprintf(sh, sizeof(sh), "%d", u->shard);
	res = pin_db_exec("SELECT pg_try_advisory_lock(hashtext('pin.relay:' || $1) & 2147483647,"
			" $2::int)", 2, p);
	return res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!strcmp(PQgetvalue(res, 0, 0), "t");
}

/*
 * One leadership round: checks the session (a new backend has no locks),
 * counts the relay hosts, releases units above this host's share and tries
 * the units nobody leads, up to the share.
 */
static void lead_round(struct relay *r)
{
	PGconn *c = pin_db_conn();
	int pid, target, same = 1, other = 0;

	if (!c) {
		lose_all(r, "database link lost");
		r->conn_pid = 0;
		return;
	}
	pid = PQbackendPID(c);
	if (pid != r->conn_pid) {
		lose_all(r, "connection changed");
		session_setup(r);
		r->conn_pid = pid;
	}
	if (!r->once && count_members(r, &same, &other) < 0)
		return;
	if (other && !r->mismatch)
		pin_log(PIN_LOG_ERROR, "outbox relay: worker hosts run with different"
				" relay_shards; no host relays until they agree", NULL);
	else if (!other && r->mismatch)
		pin_log(PIN_LOG_INFO, "outbox relay: every worker host has the same relay_shards", NULL);
	r->mismatch = other > 0;
	r->members = same;
	if (same < 1)
		same = 1;
	/* each outbox's shards are shared out on their own: a member leads at
	 * most ceil(relay_shards / members) shards of every outbox */
	target = r->once ? r->nshards : (r->nshards + same - 1) / same;
	for (int o = 0; o < (int)relay_noutboxes(); o++) {
		int held = 0;

		for (int k = 0; k < r->nshards; k++) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing)
				held++;
		}
		for (int k = r->nshards - 1; k >= 0; k--) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing && (r->mismatch || held > target)) {
				u->releasing = true;
				held--;
			}
		}
		/* start at a different shard on every host and thread, so
		 * members that start at once do not all race for the same
		 * shards first */
		for (int k = 0; k < r->nshards && held < target && !r->mismatch; k++) {
			int sh = ((int)getpid() * 7 + r->thread * r->nshards / relay_threads() + k) %
				r->nshards;
			struct relay_unit *u = &r->units[o * r->nshards + sh];

			if (u->led || u->nwin)   /* nwin: still marking as a former leader */
				continue;
			if (!try_lock(u))
				continue;
			u->led = true;
			u->releasing = false;
			u->stalled = false;
			u->caught_up = false;
			strcpy(u->cursor, "0");
			held++;
			pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 1);
			unit_log(u, PIN_LOG_INFO, "outbox relay: shard acquired",
					r->once ? "once" : "free", r);
		}
	}
	leader_gauge(r);
}

/*
 * The pending gauges, on one relay thread of the host while the host leads
 * a shard, at most once a second -- and never more than a tenth of the
 * time: with a backlog of 100k rows this count was the relay's largest
 * statement.  The oldest row is the lowest id (created_at grows with id).
 */
static void update_pending(struct relay *r)
{
	int64_t now = pin_clock_now_us(), took;

	if (r->thread != 0 || atomic_load(&relay_led_units) <= 0 || now < r->next_pending_us)
		return;
	for (size_t i = 0; i < relay_noutboxes(); i++) {
		const char *t = relay_outbox(i);
		char *sql = pin_arena_alloc(400), *lab = pin_arena_alloc(160);
		PGresult *res;

		double oldest = 0;

		snprintf(sql, 400, "SELECT (SELECT count(*) FROM %s WHERE published_at IS NULL"
				" AND parked_at IS NULL), (SELECT extract(epoch FROM created_at)"
				" FROM %s WHERE published_at IS NULL AND parked_at IS NULL"
				" ORDER BY id LIMIT 1)", t, t);
		res = pin_db_exec(sql, 0, NULL);
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			continue;
		if (!strcmp(t, PIN_OUTBOX_DEFAULT))   /* the 1.0 series, unlabelled */
			pin_metric_set("pin_outbox_pending", NULL, atof(PQgetvalue(res, 0, 0)));
		snprintf(lab, 160, "outbox=\"%s\"", t);
		pin_metric_set("pin_outbox_pending", lab, atof(PQgetvalue(res, 0, 0)));
		if (!PQgetisnull(res, 0, 1))
			oldest = (double)pin_clock_now_us() / 1e6 - atof(PQgetvalue(res, 0, 1));
		pin_metric_set("pin_outbox_oldest_unpublished_age_seconds", lab,
				oldest > 0 ? oldest : 0);
	}
	took = pin_clock_now_us() - now;
	r->next_pending_us = now + (took * 10 > 1000000 ? took * 10 : 1000000);
}

/* "{1,2,3}": the ids of the rows in state want, as a bigint[] literal. */
static char *id_list(struct relay_row *rows, int n, enum dr_state want)
{
	size_t cap = 2 + (size_t)n * 21, len = 0;
	char *s = pin_arena_alloc(cap + 1);

	s[len++] = '{';
	for (int i = 0; i < n; i++) {
		if (rows[i].st != want)
			continue;
		len += (size_t)snprintf(s + len, cap - len, "%s%s",
				len > 1 ? "," : "", rows[i].id);
	}
	s[len++] = '}';
	s[len] = '\0';
	return s;
}

/*
 * Errors that no retry can cure for this row: the row is parked (see the
 * head comment) and the rows behind it go on.  Returns the metric's reason
 * label, or NULL for an error worth retrying.  An unknown topic is parked
 * only after relay_park_unknown_topic_attempts tries: a restarted broker
 * may not know a topic for a moment.
 */
static const char *park_reason(rd_kafka_resp_err_t e, int attempts)
{
	switch (e) {
	case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
	case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
		return "too_large";
	case RD_KAFKA_RESP_ERR__INVALID_ARG:
	case RD_KAFKA_RESP_ERR_INVALID_MSG:
	case RD_KAFKA_RESP_ERR_INVALID_RECORD:
	case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
	case RD_KAFKA_RESP_ERR__BAD_MSG:
		return "invalid";
	case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
	case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
		if (attempts + 1 >= pin_config_int("relay_park_unknown_topic_attempts"))
			return "unknown_topic";
		return NULL;
	default:
		return NULL;
	}
}

/* One row to the producer (not copied: the batch's PGresult lives until
 * its last delivery report or the producer's end), with its traceparent as a Kafka header
 * when the row has a valid one; the producer's error code. */
static rd_kafka_resp_err_t produce_row(struct relay *r, const char *topic,
		const char *key, const char *val, struct relay_row *row)
{
	rd_kafka_vu_t vu[6];
	rd_kafka_error_t *err;
	rd_kafka_resp_err_t e;
	size_t n = 0;

	vu[n].vtype = RD_KAFKA_VTYPE_TOPIC;
	vu[n++].u.cstr = topic;
	vu[n].vtype = RD_KAFKA_VTYPE_KEY;
	vu[n].u.mem.ptr = (void *)key;
	vu[n++].u.mem.size = key ? strlen(key) : 0;
	vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
	vu[n].u.mem.ptr = (void *)val;
	vu[n++].u.mem.size = row->size;
	vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
	vu[n++].u.i = 0;
	vu[n].vtype = RD_KAFKA_VTYPE_OPAQUE;
	vu[n++].u.ptr = row;
	if (row->traceparent && pin_traceparent_valid(row->traceparent)) {
		vu[n].vtype = RD_KAFKA_VTYPE_HEADER;
		vu[n].u.header.name = "traceparent";
		vu[n].u.header.val = row->traceparent;
		vu[n++].u.header.size = (ssize_t)strlen(row->traceparent);
	}
	err = rd_kafka_produceva(r->rk, vu, n);
	if (!err)
		return RD_KAFKA_RESP_ERR_NO_ERROR;
	e = rd_kafka_error_code(err);
	rd_kafka_error_destroy(err);
	return e;
}

/* 1. Reads up to relay_batch unpublished rows of the unit's shard after its
 *    cursor, in id order, into a new batch (its own arena), and checks that
 *    the session -- and so the lock -- is the one the read ran on.  NULL:
 *    failed or no longer leader. */
static struct relay_batch *batch_read(struct relay *r, struct relay_unit *u)
{
	struct pin_arena *prev = pin_arena_current();
	struct relay_batch *b = calloc(1, sizeof(*b));
	char lim[16], sh[16], *sql = pin_arena_alloc(400), *stmt = pin_arena_alloc(160);
	const char *p[3] = { lim, u->cursor, sh };
	PGconn *c;
	PGresult *res;

	if (!b || !(b->a = pin_arena_new())) {
		free(b);
		return NULL;
	}
	snprintf(lim, sizeof(lim), "%d", r->batch);
	snprintf(sh, sizeof(sh), "%d", u->shard);
	/* the shard count as a literal: it matches an index on the same
	 * expression (migration 0005 makes the one for 4 shards) */
	snprintf(sql, 400, "SELECT id, topic, key, envelope::text, attempts,"
			" traceparent, message_id FROM %s"
			" WHERE published_at IS NULL AND parked_at IS NULL AND id > $2::bigint"
			" AND (hashtext(key) & 2147483647) %% %d = $3::int"
			" ORDER BY id LIMIT $1::int", u->table, r->nshards);
	snprintf(stmt, 160, "pin_relay_batch:%s", u->table);
	pin_arena_set_current(b->a);
	res = pin_db_exec_prepared(stmt, sql, 3, p);
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
		b->rows = pin_arena_alloc(sizeof(*b->rows) * (size_t)(PQntuples(res) + 1));
	pin_arena_set_current(prev);
	/* a dead link is only noticed by a statement, and db.c runs it again
	 * on a new connection: that session does not hold the lock, and
	 * another host may lead by now.  Publish only what was read under
	 * the lock; else start over (as leader again, or not). */
	c = pin_db_conn();
	if (!c || PQbackendPID(c) != r->conn_pid) {
		lose_all(r, "connection changed");
		r->next_lead_us = 0;
		batch_free(b);
		return NULL;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		batch_free(b);
		return NULL;
	}
	b->n = PQntuples(res);
	for (int i = 0; i < b->n; i++) {
		struct relay_row *row = &b->rows[i];

		memset(row, 0, sizeof(*row));
		row->b = b;
		row->id = PQgetvalue(res, i, 0);
		row->topic = PQgetvalue(res, i, 1);
		row->size = (size_t)PQgetlength(res, i, 3);
		row->attempts = atoi(PQgetvalue(res, i, 4));
		row->traceparent = PQgetisnull(res, i, 5) ? NULL : PQgetvalue(res, i, 5);
		row->message_id = PQgetvalue(res, i, 6);
	}
	if (b->n)
		snprintf(u->cursor, sizeof(u->cursor), "%s", b->rows[b->n - 1].id);
	/* keep the result for the producer: produce_row reads key and value */
	b->res = res;
	return b;
}

/* 2. Hands the rows to the producer.  A row refused for good is parked
 *    and skipped; a row refused for now stops the batch (later rows must
 *    not overtake it). */
static void batch_produce(struct relay *r, struct relay_batch *b)
{
	b->produced = 0;
	for (int i = 0; i < b->n; i++) {
		struct relay_row *row = &b->rows[i];
		const char *key = PQgetisnull(b->res, i, 2) ? NULL : PQgetvalue(b->res, i, 2);
		rd_kafka_resp_err_t e;

		e = produce_row(r, row->topic, key, PQgetvalue(b->res, i, 3), row);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(r->rk, 100);
			i--;
			continue;
		}
		b->produced = i + 1;
		if (!e) {
			b->pending++;
			continue;
		}
		row->err = e;
		if ((row->reason = park_reason(e, row->attempts))) {
			row->st = DR_PARKED;
			continue;
		}
		row->st = DR_FAILED;
		break;
	}
	b->deadline_us = pin_clock_now_us() +
		(pin_config_int("kafka_message_timeout_ms") + 2000) * 1000;
	b->produced_us = b->reported_us = pin_clock_mono_us();
}

/*
 * "outbox relay: published", one INFO line per delivered row with the row's
 * trace id -- the lines pin_log writes (same keys, same order), built here
 * and written with one write per batch: pin_log's json-c object and fflush
 * per line were most of the relay's own CPU at 1000 rows per batch.  Every
 * value is plain: the outbox name is checked at registration, messageId is
 * a uuid, traceId hex, and Kafka accepted the topic name ([A-Za-z0-9._-]).
 */
static void log_published(const char *table, struct relay_row *rows, int produced)
{
	const char *lvl = pin_config_str("log_level");
	size_t cap = 4096, len = 0;
	char *buf, ts[40];

	if (strcmp(lvl, "info") && strcmp(lvl, "debug"))
		return;
	buf = malloc(cap);
	if (!buf)
		return;
	pin_clock_fmt(pin_clock_now_us(), ts, sizeof(ts));
	for (int i = 0; i < produced; i++) {
		char tid[64] = "";
		int w;

		if (rows[i].st != DR_OK)
			continue;
		if (rows[i].traceparent && pin_traceparent_valid(rows[i].traceparent))
			snprintf(tid, sizeof(tid), "\"traceId\":\"%.32s\",", rows[i].traceparent + 3);
		for (;;) {
			w = snprintf(buf + len, cap - len, "{\"ts\":\"%s\",\"level\":\"info\","
					"\"msg\":\"outbox relay: published\",%s\"outbox\":\"%s\","
					"\"messageId\":\"%s\",\"topic\":\"%s\"}\n", ts, tid, table,
					rows[i].message_id, rows[i].topic);
			if (w >= 0 && (size_t)w < cap - len)
				break;
			{
				char *n = realloc(buf, cap * 2);

				if (!n) {
					free(buf);
					return;
				}
				buf = n;
				cap *= 2;
			}
		}
		len += (size_t)w;
	}
	flockfile(stderr);
	fwrite(buf, 1, len, stderr);
	fflush(stderr);
	funlockfile(stderr);
	free(buf);
}

/* 3. Records the outcome: published_at for delivered rows, parked_at +
 *    last_error for parked ones (one log line each, without the payload),
 *    attempts + 1 for the ones kept for retry.  -1 when the marking
 *    itself failed. */
static int batch_mark(const char *table, struct relay_row *rows, int produced,
		int *ok, int *failed, int *parked, rd_kafka_resp_err_t *first_err)
{
	char now[40], *sql = pin_arena_alloc(300), *stmt = pin_arena_alloc(160);
	char *lab = pin_arena_alloc(200);
	PGresult *res;

	*ok = *failed = *parked = 0;
	for (int i = 0; i < produced; i++) {
		if (rows[i].st == DR_FAILED && rows[i].err != RD_KAFKA_RESP_ERR__TIMED_OUT &&
				(rows[i].reason = park_reason(rows[i].err, rows[i].attempts)))
			rows[i].st = DR_PARKED;
		if (rows[i].st == DR_OK) {
			(*ok)++;
		} else if (rows[i].st == DR_FAILED) {
			if (!*failed)
				*first_err = rows[i].err;
			(*failed)++;
		} else if (rows[i].st == DR_PARKED) {
			(*parked)++;
		}
	}
	pin_clock_fmt(pin_clock_now_us(), now, sizeof(now));
	if (*ok) {
		const char *p[2] = { now, id_list(rows, produced, DR_OK) };

		snprintf(sql, 300, "UPDATE %s SET published_at = $1::timestamptz"
				" WHERE id = ANY($2::bigint[])", table);
		snprintf(stmt, 160, "pin_relay_mark:%s", table);
		res = pin_db_exec_prepared(stmt, sql, 2, p);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			/* delivered but not marked: they will go out again
			 * (at-least-once; consumers dedupe on messageId) */
			pin_log(PIN_LOG_ERROR, "outbox relay: cannot mark rows published",
					"outbox", table, NULL);
			return -1;
		}
		pin_metric_add("pin_outbox_published_total", NULL, *ok);
		if (pin_config_bool("relay_log_published")) {
			int64_t l0 = pin_clock_mono_us(), d;

			log_published(table, rows, produced);
			d = pin_clock_mono_us() - l0;
			if (rclk) {
				rclk->us[RC_LOG] += d;
				rclk->us[RC_MARK] -= d;
			}
		}
	}
	for (int i = 0; i < produced; i++) {
		char id_s[24], size_s[24], att_s[16];
		const char *p[3];

		if (rows[i].st != DR_PARKED)
			continue;
		p[0] = rows[i].id;
		p[1] = now;
		p[2] = rd_kafka_err2str(rows[i].err);
		snprintf(sql, 300, "UPDATE %s SET parked_at = $2::timestamptz,"
				" attempts = attempts + 1, last_error = $3"
				" WHERE id = $1::bigint", table);
		snprintf(stmt, 160, "pin_relay_park:%s", table);
		res = pin_db_exec_prepared(stmt, sql, 3, p);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
			return -1;      /* tried again with the next batch */
		snprintf(lab, 200, "outbox=\"%s\",reason=\"%s\"", table, rows[i].reason);
		pin_metric_add("pin_outbox_failed_total", lab, 1);
		snprintf(id_s, sizeof id_s, "%s", rows[i].id);
		snprintf(size_s, sizeof size_s, "%zu", rows[i].size);
		snprintf(att_s, sizeof att_s, "%d", rows[i].attempts + 1);
		pin_log(PIN_LOG_ERROR, "outbox relay: row cannot be published, parked",
				"outbox", table, "id", id_s, "topic", rows[i].topic,
				"reason", rows[i].reason, "bytes", size_s, "attempts", att_s,
				"error", rd_kafka_err2str(rows[i].err), NULL);
	}
	if (*failed) {
		const char *p[2] = { id_list(rows, produced, DR_FAILED),
			rd_kafka_err2str(*first_err) };

		snprintf(sql, 300, "UPDATE %s SET attempts = attempts + 1,"
				" last_error = $2 WHERE id = ANY($1::bigint[])", table);
		snprintf(stmt, 160, "pin_relay_fail:%s", table);
		pin_db_exec_prepared(stmt, sql, 2, p);
		pin_metric_add("pin_outbox_publish_errors_total", NULL, *failed);
	}
	return 0;
}

/*
 * Marks the unit's finished batches, oldest first.  Returns -1 when a batch
 * had failed rows or could not be marked (the unit stops reading until its
 * window is empty, then starts again from the oldest row; the caller backs
 * off), else 0.  *done gets the rows published or parked.
 */
static int unit_reap(struct relay *r, struct relay_unit *u, int *done)
{
	int rc = 0;

	while (u->nwin > 0 && u->win[0]->pending == 0) {
		struct relay_batch *b = u->win[0];
		int ok = 0, failed = 0, parked = 0;
		rd_kafka_resp_err_t first_err = RD_KAFKA_RESP_ERR_NO_ERROR;
		int64_t t0 = pin_clock_mono_us();

		if (rclk) {
			rclk->report_us += b->reported_us - b->produced_us;
			rclk->wait_us += t0 - b->reported_us;
			rclk->batches++;
			rclk->rows += b->produced;
		}
		if (batch_mark(u->table, b->rows, b->produced, &ok, &failed, &parked,
				&first_err) < 0) {
			failed = 1;
			first_err = RD_KAFKA_RESP_ERR__FAIL;
		}
		rc_add(RC_MARK, &t0);
		*done += ok + parked;
		if (failed) {
			if (!r->failing)
				pin_log(PIN_LOG_WARN, "outbox relay: publishing fails, rows kept for retry",
						"outbox", u->table, "code", rd_kafka_err2name(first_err),
						"error", rd_kafka_err2str(first_err), NULL);
			r->failing = true;
			if (first_err != RD_KAFKA_RESP_ERR__FAIL)
				set_kafka_up(r, 0);
			u->stalled = true;
			rc = -1;
		} else if (ok) {
			if (r->failing)
				pin_log(PIN_LOG_INFO, "outbox relay: publishing again", NULL);
			r->failing = false;
			set_kafka_up(r, 1);
		}
		batch_free(b);
		memmove(&u->win[0], &u->win[1], sizeof(u->win[0]) * (size_t)(u->nwin - 1));
		u->nwin--;
	}
	if (u->nwin == 0) {
		int64_t now = pin_clock_mono_us();

		/* Back to the start of the shard for rows that committed late
		 * with a lower id: at once after a failure, else at most every
		 * relay_rewind_ms.  A read from the start walks the index entries
		 * of every row published since the last vacuum; at each emptied
		 * window (10-20 per second and relay thread under a trickle of
		 * commits) that made the reads cost 16-25 us per row instead of
		 * ~10 (doc/performance.md "Relay (session 8)"). */
		if (u->stalled || now - u->rewound_us >= r->rewind_us) {
			if (rclk && strcmp(u->cursor, "0"))
				rclk->rewinds++;
			strcpy(u->cursor, "0");
			u->rewound_us = now;
		}
		u->stalled = false;
		if (u->releasing)
			unit_release(r, u, r->mismatch ? "relay_shards mismatch" : "balance");
	}
	return rc;
}

/* Reads and produces the unit's next batch when it may.  *nrows gets the
 * rows read (-1: nothing tried). -1 on failure. */
static int unit_feed(struct relay *r, struct relay_unit *u, int *nrows)
{
	struct relay_batch *b;
	int64_t t0;

	*nrows = -1;
	if (!u->led || u->releasing || u->stalled || r->mismatch || should_stop() ||
	    u->nwin >= r->inflight || (u->caught_up && u->nwin > 0) ||
	    pin_clock_now_us() < r->pause_until_us)
		return 0;
	t0 = pin_clock_mono_us();
	b = batch_read(r, u);
	rc_add(RC_READ, &t0);
	if (!b)
		return u->led ? -1 : 0;
	*nrows = b->n;
	u->caught_up = b->n < r->batch;
	if (b->n == 0) {
		batch_free(b);
		return 0;
	}
	if (r->rk && bootstrap_changed(r)) {
		/* the broker moved while we were idle */
		pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
				"reason", "bootstrap changed", NULL);
		producer_destroy(r);
		if (u->nwin) {
			/* its batches in flight just failed: they go out again
			 * first (per-key order), not after this one */
			batch_free(b);
			*nrows = 0;
			u->stalled = true;
			return -1;
		}
	}
	if (!r->rk && producer_create(r) != 0) {
		batch_free(b);
		if (!u->nwin)
			strcpy(u->cursor, "0");
		else
			u->stalled = true;
		return -1;
	}
	t0 = pin_clock_mono_us();
	batch_produce(r, b);
	rc_add(RC_PRODUCE, &t0);
	u->win[u->nwin++] = b;
	if (b->produced < b->n)         /* a row refused for now: start over */
		u->stalled = true;
	return 0;
}

static void on_failure(struct relay *r)
{
	int max = (int)pin_config_int("relay_backoff_max_ms");

	r->consecutive_failures++;
	r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : 1000;
	if (r->backoff_ms > max)
		r->backoff_ms = max;
	if (bootstrap_changed(r))     /* new address: retry soon */
		r->backoff_ms = 1000;
	producer_maybe_recreate(r, false);
	if (r->rk && rd_kafka_fatal_error(r->rk, NULL, 0))
		producer_maybe_recreate(r, true);
	r->pause_until_us = pin_clock_now_us() + (int64_t)r->backoff_ms * 1000;
}

/* batches in flight over every unit */
static int relay_inflight(struct relay *r)
{
	int n = 0;

	for (int i = 0; i < r->nunits; i++)
		n += r->units[i].nwin;
	return n;
}

/*
 * Serves delivery reports for up to wait_ms and gives up on the batches in
 * flight (the producer is recreated) when one is past its deadline or the
 * broker moved (dev broker restart).
 */
static void relay_poll(struct relay *r, int wait_ms)
{
	int64_t now;
	bool give_up = false;

	if (!r->rk)
		return;
	rd_kafka_poll(r->rk, wait_ms);
	now = pin_clock_now_us();
	for (int i = 0; i < r->nunits && !give_up; i++)
		for (int k = 0; k < r->units[i].nwin && !give_up; k++)
			give_up = r->units[i].win[k]->pending &&
				now > r->units[i].win[k]->deadline_us;
	if (!give_up && now > r->next_boot_check && relay_inflight(r)) {
		r->next_boot_check = now + 1000000;
		give_up = bootstrap_changed(r);
	}
	if (give_up) {
		/* undelivered rows stay unpublished */
		pin_log(PIN_LOG_WARN, "outbox relay: delivery reports overdue, recreating"
				" the kafka producer", NULL);
		producer_destroy(r);
	}
}

/*
 * One step of every unit: mark finished batches, read and produce the next
 * ones.  Returns -1 when something failed (the caller backs off).
 * *busy: a unit read a full batch (go again at once); *read_any: rows read.
 */
static int relay_step(struct relay *r, bool *full, bool *read_any)
{
	int rc = 0;

	*full = *read_any = false;
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];
		int done = 0, nrows;

		if (unit_reap(r, u, &done) < 0)
			rc = -1;
		r->done += done;
		if (unit_feed(r, u, &nrows) < 0)
			rc = -1;
		if (nrows > 0)
			*read_any = true;
		if (nrows >= r->batch)
			*full = true;
	}
	if (rc == 0) {
		r->consecutive_failures = 0;
		r->backoff_ms = 0;
	}
	return rc;
}

/* Stopping: waits up to wait_ms for the batches in flight and marks them,
 * then gives the locks back. */
static void relay_finish(struct relay *r, int wait_ms)
{
	int64_t end = pin_clock_now_us() + (int64_t)wait_ms * 1000;
	int done = 0;

	while (relay_inflight(r) && pin_clock_now_us() < end) {
		relay_poll(r, 20);
		for (int i = 0; i < r->nunits; i++)
			unit_reap(r, &r->units[i], &done);
	}
	producer_destroy(r);           /* what is left: failed, kept */
	for (int i = 0; i < r->nunits; i++) {
		unit_reap(r, &r->units[i], &done);
		unit_release(r, &r->units[i], "stopping");
	}
	r->done += done;
	leader_gauge(r);
	if (pin_db_conn() && PQbackendPID(pin_db_conn()) == r->conn_pid && !r->once) {
		char sql[100];

		snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock_shared(" RELAY_MEMBER_CLASS
				", %d)", r->nshards);
		pin_db_exec(sql, 0, NULL);
	}
	free(r->units);
	r->units = NULL;
	r->nunits = 0;
}

/* Writes the metrics (node_exporter textfile format) to metrics_textfile,
 * at most once a second: a worker host serves no HTTP. */
static void write_metrics_file(void)
{
	static int64_t last;
	static int warned;
	const char *path = pin_config_str("metrics_textfile");
	char *tmp, *m;
	FILE *f;
	int ok;
	int64_t t = pin_clock_now_us();

	if (!*path || t - last < 1000000)
		return;
	last = t;
	if (!(m = pin_metrics_render()))
		return;
	tmp = pin_arena_alloc(strlen(path) + 8);
	sprintf(tmp, "%s.tmp", path);
	errno = 0;
	/* 0644 whatever the unit's UMask: node_exporter runs as another user */
	ok = (f = fopen(tmp, "w")) && fchmod(fileno(f), 0644) == 0 && fputs(m, f) >= 0;
	if (f && fclose(f) != 0)
		ok = 0;
	if (ok && rename(tmp, path) == 0) {
		if (warned)
			pin_log(PIN_LOG_INFO, "metrics_textfile written again", "path", path, NULL);
		warned = 0;
		free(m);
		return;
	}
	/* once per failure streak: an unwritable path (the unit's
	 * ProtectSystem=strict without ReadWritePaths) must not be silent */
	if (!warned)
		pin_log(PIN_LOG_WARN, "cannot write metrics_textfile", "path", path,
			"error", strerror(errno ? errno : EIO), NULL);
	warned = 1;
	free(m);
}

/* Every second of a window in which rows were marked: the thread's time
 * split at debug level, then a new window. */
static void clock_log(const struct relay *r, struct relay_clock *c, int64_t now)
{
	char v[RC_N + 7][24], th[16];
	int64_t win = now - c->since, sum = 0;

	if (win < 1000000)
		return;
	if (c->rows > 0) {
		for (int k = 0; k < RC_N; k++) {
			snprintf(v[k], sizeof(v[k]), "%.1f", (double)c->us[k] / 1000);
			sum += c->us[k];
		}
		snprintf(v[RC_N], sizeof(v[0]), "%.1f", (double)win / 1000);
		snprintf(v[RC_N + 1], sizeof(v[0]), "%.1f", (double)(win - sum) / 1000);
		snprintf(v[RC_N + 2], sizeof(v[0]), "%ld", c->rows);
		snprintf(v[RC_N + 3], sizeof(v[0]), "%ld", c->batches);
		snprintf(v[RC_N + 4], sizeof(v[0]), "%.1f",
				(double)c->report_us / 1000 / (double)c->batches);
		snprintf(v[RC_N + 5], sizeof(v[0]), "%.1f",
				(double)c->wait_us / 1000 / (double)c->batches);
		snprintf(v[RC_N + 6], sizeof(v[0]), "%ld", c->rewinds);
		snprintf(th, sizeof(th), "%d", r->thread);
		pin_log(PIN_LOG_DEBUG, "outbox relay: time split", "thread", th,
				"window_ms", v[RC_N], "rows", v[RC_N + 2], "batches", v[RC_N + 3],
				rc_name[RC_LEAD], v[RC_LEAD], rc_name[RC_READ], v[RC_READ],
				rc_name[RC_PRODUCE], v[RC_PRODUCE], rc_name[RC_MARK], v[RC_MARK],
				rc_name[RC_LOG], v[RC_LOG], rc_name[RC_PENDING], v[RC_PENDING],
				rc_name[RC_POLL], v[RC_POLL], rc_name[RC_SLEEP], v[RC_SLEEP],
				"other_ms", v[RC_N + 1], "report_ms_per_batch", v[RC_N + 4],
				"report_to_mark_ms_per_batch", v[RC_N + 5], "rewinds", v[RC_N + 6], NULL);
	}
	memset(c, 0, sizeof(*c));
	c->since = now;
}

static void *relay_main(void *arg)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .thread = (int)(intptr_t)arg };
	struct pin_arena *a = pin_arena_new();
	int busy = (int)pin_config_int("relay_busy_interval_ms");
	int idle = (int)pin_config_int("relay_idle_interval_ms");
	int64_t retry_us = relay_failover_ms() * 1000 / 5;
	struct relay_clock clk = { .since = pin_clock_mono_us() };

	if (retry_us > 1000000)
		retry_us = 1000000;
	rclk = &clk;
	pin_arena_set_current(a);
	pin_metric_add("pin_outbox_published_total", NULL, 0);
	units_build(&r);
	leader_gauge(&r);
	while (!should_stop()) {
		bool full = false, read_any = false;
		int64_t now = pin_clock_now_us(), sleep_us;
		int rc;

		int64_t t0 = pin_clock_mono_us();

		pin_trace_set(NULL);
		clock_log(&r, &clk, t0);
		if (now >= r.next_lead_us) {
			lead_round(&r);
			r.next_lead_us = now + retry_us;
		}
		rc_add(RC_LEAD, &t0);
		rc = relay_step(&r, &full, &read_any);
		if (rc < 0)
			on_failure(&r);
		t0 = pin_clock_mono_us();
		update_pending(&r);
		rc_add(RC_PENDING, &t0);
		if (r.thread == 0)
			write_metrics_file();
		pin_arena_reset(a);
		if (relay_inflight(&r)) {
			t0 = pin_clock_mono_us();
			relay_poll(&r, full || read_any ? 0 : 5);
			rc_add(RC_POLL, &t0);
			continue;
		}
		if (full && rc == 0)
			continue;
		now = pin_clock_now_us();
		sleep_us = (int64_t)(read_any ? busy : idle) * 1000;
		if (r.pause_until_us > now && r.pause_until_us - now < sleep_us)
			sleep_us = r.pause_until_us - now;
		if (r.next_lead_us - now < sleep_us)
			sleep_us = r.next_lead_us - now;
		if (r.rk && r.failing && bootstrap_changed(&r))
			r.pause_until_us = 0;     /* the broker has a new address */
		else if (!r.rk && r.failing && r.pause_until_us > now && bootstrap_known() &&
				r.consecutive_failures > 1)
			r.pause_until_us = 0;
		if (sleep_us > 0) {
			t0 = pin_clock_mono_us();
			relay_sleep_ms((int)((sleep_us + 999) / 1000));
			rc_add(RC_SLEEP, &t0);
		}
	}
	rclk = NULL;
	relay_finish(&r, 5000);
	pin_arena_reset(a);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

int pin_relay_start(void)
{
	if (relay_running)
		return 0;
	pin_waiter_init(&relay_w);
	gauges_init();
	relay_running = true;        /* before the threads read it */
	for (relay_nthr = 0; relay_nthr < relay_threads(); relay_nthr++)
		if (pthread_create(&relay_thr[relay_nthr], NULL, relay_main,
				(void *)(intptr_t)relay_nthr) != 0)
			break;
	if (relay_nthr == 0) {
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot start its thread", NULL);
		relay_running = false;
		pin_waiter_destroy(&relay_w);
		return -1;
	}
	{
		char n[16];

		snprintf(n, sizeof(n), "%d", relay_nthr);
		pin_log(PIN_LOG_INFO, "outbox relay started", "threads", n, NULL);
	}
	return 0;
}

void pin_relay_stop(void)
{
	if (!relay_running)
		return;
	pin_waiter_stop(&relay_w);
	for (int i = 0; i < relay_nthr; i++)
		pthread_join(relay_thr[i], NULL);
	relay_nthr = 0;
	pin_waiter_destroy(&relay_w);
	relay_running = false;
	pin_log(PIN_LOG_INFO, "outbox relay stopped", NULL);
}

/* --once: every shard nobody else leads, until each is empty (or
 * relay_once_timeout_ms). */
int pin_relay_run_once(void)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .once = true };
	struct pin_arena *prev = pin_arena_current(), *a = pin_arena_new();
	int64_t deadline = pin_clock_now_us() +
		pin_config_int("relay_once_timeout_ms") * 1000;
	int rc = 0;

	pin_arena_set_current(a);
	gauges_init();
	units_build(&r);
	{
		int same = 0, other = 0;

		/* running relays that split keys by another relay_shards: leading
		 * "our" shard 0 could publish keys one of them leads too */
		if (count_members(&r, &same, &other) < 0 || other > 0) {
			pin_log(PIN_LOG_WARN, "outbox relay: relays with another relay_shards"
					" are running (or the check failed), --once skips the relay", NULL);
			goto out;
		}
	}
	lead_round(&r);
	if (r.any_led != 1) {
		pin_log(PIN_LOG_INFO, "outbox relay: another host is the leader, skipping", NULL);
		goto out;
	}
	for (;;) {
		bool full = false, read_any = false, busy = false;

		if (pin_clock_now_us() > deadline) {
			rc = -1;
			break;
		}
		if (relay_step(&r, &full, &read_any) < 0) {
			on_failure(&r);
			r.pause_until_us = 0;
			relay_sleep_ms(500);
		}
		for (int i = 0; i < r.nunits; i++) {
			struct relay_unit *u = &r.units[i];

			/* a unit is done when nothing is in flight and its last
			 * read found no row */
			if (u->led && (u->nwin || !u->caught_up || u->stalled || read_any))
				busy = true;
		}
		pin_arena_reset(a);
		if (!busy)
			break;
		if (relay_inflight(&r))
			relay_poll(&r, full || read_any ? 0 : 5);
	}
	update_pending(&r);
	write_metrics_file();
out:
	relay_finish(&r, rc ? 0 : 2000);
	if (r.any_led >= 0) {
		char s[24];

		snprintf(s, sizeof(s), "%lld", r.done);
		pin_log(rc ? PIN_LOG_WARN : PIN_LOG_INFO, "outbox relay: one pass done",
				"published", s, "complete", rc ? "false" : "true", NULL);
	}
	pin_arena_reset(a);
	pin_arena_set_current(prev);
	pin_arena_free(a);
	return rc;
}
