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
 * relay_cursor (default on; relay_batch.c "The commit-ordered cursor",
 * doc/operating.md "Outbox relay cursor"): nothing is marked.  A shard's rows
 * are read in (xid, id) order below the oldest running transaction, after the
 * shard's row in calendar.outbox_cursor, moved to the last delivered row
 * before the next read; no rewinds (no row can commit behind the cursor).  The
 * member lock's second key carries the mode; a host that wants the cursor
 * marks while a host that marks by choice runs, and goes over once none does
 * (relay_lead.c "Marking or the cursor").  Gauges: pending = rows beyond the cursors, the age of the oldest
 * of them, pin_outbox_relay_oldest_xact_age_seconds.
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
 *
 * The files, each calling only those below it: relay_run.c the relay
 * threads and their loop, --once; relay_batch.c the batch read and mark;
 * relay_lead.c the leadership of the shards; relay_produce.c the producer
 * and its delivery reports; relay_metrics.c the gauges, the metrics
 * textfile and the time split; relay.c (this one) what they all read --
 * the outboxes served, the relay's run state, its settings; relay.h the
 * types and functions they share.
 */
#include "config.h"
#include "config.h"

#include <stdatomic.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

bool relay_running;
_Atomic int relay_led_units;  /* over this host's relay threads */
struct pin_waiter relay_w;    /* set up by start */

/* the outboxes served: calendar.outbox, then those plugins registered */
size_t relay_noutboxes(void)
{
	return pin_reg.noutboxes ? pin_reg.noutboxes : 1;
}

const char *relay_outbox(size_t i)
{
	return pin_reg.noutboxes ? pin_reg.outboxes[i] : PIN_OUTBOX_DEFAULT;
}

bool relay_should_stop(void)
{
	return relay_running ? pin_waiter_stopped(&relay_w) : pin_stopping;
}

/* Interruptible sleep: returns early when the relay is stopped. */
void relay_sleep_ms(int ms)
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

int relay_threads(void)
{
	long long t = pin_config_int("relay_threads");

	return t < 1 ? 1 : t > RELAY_MAX_THREADS ? RELAY_MAX_THREADS : (int)t;
}

int64_t relay_failover_ms(void)
{
	long long s = pin_config_int("relay_failover_s");

	return (s < 1 ? 1 : s) * 1000;
}
