/*
 * consumer_group.c -- the consumers' threads (consumer.c has the overview):
 * per registered consumer a KafkaConsumer in its group, its rebalances,
 * the poll loop that hands messages to the batch or per-message path, and
 * start / stop.
 */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

static struct cons *cs;
static size_t ncs;
/* the scrape reads cs (lag_collect) while pin_consumers_stop frees it */
static pthread_mutex_t cs_mu = PTHREAD_MUTEX_INITIALIZER;

/* at every /metrics scrape: the seed's lag gauges (consumer_lag.c) */
static void lag_collect(void)
{
	pthread_mutex_lock(&cs_mu);
	if (cs)
		cons_lag_collect(cs, ncs);
	pthread_mutex_unlock(&cs_mu);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
		rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	struct cons *c = opaque;
	bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
	rd_kafka_error_t *e = NULL;

	c->rebal++;     /* a batch being collected re-checks its partitions */
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		if (coop)
			e = rd_kafka_incremental_assign(rk, parts);
		else
			rd_kafka_assign(rk, parts);
		pin_log(PIN_LOG_INFO, "consumer: partitions assigned",
				"group", c->e->c.group, NULL);
		pin_metric_set("pin_consumer_rebalancing", c->labels, 0);
	} else {
		pin_metric_set("pin_consumer_rebalancing", c->labels, 1);
		/* revoked: whoever gets them redelivers from the committed offset */
		for (int i = 0; i < parts->cnt; i++) {
			struct held *h = cons_held_find(c, parts->elems[i].topic,
					parts->elems[i].partition);

			if (h) {
				cons_part_list_op(c, parts->elems[i].topic,
						parts->elems[i].partition,
						RD_KAFKA_OFFSET_INVALID, 1);
				cons_held_remove(c, h);
			}
		}
		cons_lag_forget(c, parts);
		if (!coop)
			cons_held_drop_all(c, true);
		cons_commits_revoke(c, parts);
		if (coop)
			e = rd_kafka_incremental_unassign(rk, parts);
		else
			rd_kafka_assign(rk, NULL);
	}
	if (e) {
		pin_log(PIN_LOG_WARN, "consumer: rebalance", "group", c->e->c.group,
				"error", rd_kafka_error_string(e), NULL);
		rd_kafka_error_destroy(e);
	}
	cons_assigned_gauge(c, rk);
}

/* [ident] the result of an asynchronous offset commit (served by
 * rd_kafka_consumer_poll on the consumer thread): a failure is committed
 * again (cons_commit_failed, cons_commit_retry); until then a crash or a rebalance
 * only redelivers, and the inbox turns the messages into duplicates.  A
 * synchronous commit's result is handled where it is made. */
static void offset_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
		rd_kafka_topic_partition_list_t *offs, void *opaque)
{
	struct cons *c = opaque;

	(void)rk;
	if (!c->commit_async || err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		return;
	if ((err = cons_commit_error(err, offs)) && offs)
		cons_commit_failed(c, offs, err);
}

static int consumer_create(struct cons *c)
{
	char err[512];
	char sto[24], hb[24], fw[24];
	rd_kafka_conf_t *conf;
	rd_kafka_topic_partition_list_t *topics = NULL;
	rd_kafka_resp_err_t e;
	size_t n = 0;

	conf = pin_kafka_conf_new(c->e->c.group, err, sizeof(err));
	if (!conf)
		goto fail;
	snprintf(sto, sizeof(sto), "%lld", pin_config_int("kafka_session_timeout_ms"));
	snprintf(hb, sizeof(hb), "%lld", pin_config_int("kafka_heartbeat_interval_ms"));
	snprintf(fw, sizeof(fw), "%lld", pin_config_int("kafka_fetch_wait_max_ms"));
	if (pin_kafka_conf_set(conf, "group.id", c->e->c.group, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "session.timeout.ms", sto, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "heartbeat.interval.ms", hb, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "fetch.wait.max.ms", fw, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partition.assignment.strategy",
				pin_config_str("kafka_assignment_strategy"),
				err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "allow.auto.create.topics", "true", err, sizeof(err))) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
	rd_kafka_conf_set_offset_commit_cb(conf, offset_commit_cb);
	rd_kafka_conf_set_opaque(conf, c);
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!c->rk) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_poll_set_consumer(c->rk);
	for (char **t = c->e->topics; t && *t; t++)
		n++;
	topics = rd_kafka_topic_partition_list_new((int)n);
	for (char **t = c->e->topics; t && *t; t++)
		rd_kafka_topic_partition_list_add(topics, *t, RD_KAFKA_PARTITION_UA);
	e = rd_kafka_subscribe(c->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (e) {
		snprintf(err, sizeof(err), "subscribe: %s", rd_kafka_err2str(e));
		rd_kafka_destroy(c->rk);
		c->rk = NULL;
		goto fail;
	}
	c->boot = pin_kafka_bootstrap();
	c->create_failing = false;
	pin_log(PIN_LOG_INFO, "consumer subscribed", "group", c->e->c.group, NULL);
	return 0;
fail:
	if (!c->create_failing)
		pin_log(PIN_LOG_ERROR, "consumer: cannot create the kafka consumer",
				"group", c->e->c.group, "error", err, NULL);
	c->create_failing = true;
	return -1;
}

/* gone: the broker moved (a restarted dev broker is a new, empty cluster):
 * leaving the old group through a coordinator that no longer exists can
 * only wait, so the client is destroyed without the consumer close. */
static void consumer_destroy(struct cons *c, bool gone)
{
	if (c->rk) {
		cons_held_drop_all(c, false);
		if (c->commits)
			rd_kafka_topic_partition_list_destroy(c->commits);
		c->commits = NULL;
		if (gone) {
			/* no revoke callback runs: what it forgets, forgotten here */
			rd_kafka_topic_partition_list_t *l = NULL;

			if (rd_kafka_assignment(c->rk, &l) == RD_KAFKA_RESP_ERR_NO_ERROR && l) {
				cons_lag_forget(c, l);
				rd_kafka_topic_partition_list_destroy(l);
			}
			rd_kafka_destroy_flags(c->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
		} else {
			rd_kafka_consumer_close(c->rk);
			rd_kafka_destroy(c->rk);
		}
		c->rk = NULL;
	}
	free(c->boot);
	c->boot = NULL;
}

/* Retries the held messages that are due; returns ms until the next one. */
static int retry_due(struct cons *c, struct pin_arena *a)
{
	int64_t now = pin_clock_now_us(), next = INT64_MAX;

	for (size_t i = 0; i < c->nheld && !cons_stopping(); ) {
		struct held *h = &c->held[i];
		size_t before = c->nheld;

		if (h->next_us <= now) {
			cons_handle(c, h->m, h);
			pin_arena_reset(a);
			if (c->nheld < before)
				continue;       /* slot i now holds another one */
		}
		if (c->held[i].next_us < next)
			next = c->held[i].next_us;
		i++;
	}
	if (next == INT64_MAX)
		return 200;
	next = (next - pin_clock_now_us()) / 1000;
	return next < 0 ? 0 : next > 200 ? 200 : (int)next;
}

/* A consumer to poll: created (retried every 2 s while the broker is
 * away), and re-created when the bootstrap address moved (dev broker
 * restart).  false: none this round. */
static bool ensure_consumer(struct cons *c, int64_t *next_boot_check)
{
	if (!c->rk && consumer_create(c) != 0) {
		for (int i = 0; i < 20 && !cons_stopping(); i++) {
			struct timespec ts = { 0, 100000000L };

			nanosleep(&ts, NULL);
		}
		return false;
	}
	if (pin_clock_now_us() > *next_boot_check) {
		char *b = pin_kafka_bootstrap();
		bool moved = b && c->boot && strcmp(b, c->boot) != 0;

		*next_boot_check = pin_clock_now_us() + 5000000;
		free(b);
		if (moved) {
			pin_log(PIN_LOG_INFO, "consumer: bootstrap changed, reconnecting",
					"group", c->e->c.group, NULL);
			consumer_destroy(c, true);
			cons_wm_forget(c);
			cons_dlq_destroy(c);
			return false;
		}
	}
	return true;
}

/* A polled message to handle (NULL: none, an error or a held partition's). */
static rd_kafka_message_t *next_message(struct cons *c, int wait)
{
	rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, wait);

	if (!m)
		return NULL;
	if (m->err) {
		if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			pin_log(PIN_LOG_DEBUG, "consumer: poll error", "group", c->e->c.group,
					"error", rd_kafka_message_errstr(m), NULL);
		rd_kafka_message_destroy(m);
		return NULL;
	}
	if (cons_held_find(c, rd_kafka_topic_name(m->rkt), m->partition)) {
		/* fetched before the pause: comes again after the seek */
		rd_kafka_message_destroy(m);
		return NULL;
	}
	return m;
}

static void *cons_main(void *arg)
{
	struct cons *c = arg;
	struct pin_arena *a = pin_arena_new();
	int64_t next_boot_check = 0;
	long long bmax = pin_config_int("consumer_batch_max");
	struct bitem *b;

	if (bmax < 1)
		bmax = 1;
	if (bmax > 10000)
		bmax = 10000;
	if (c->e->c.batch_max > 0 && bmax > c->e->c.batch_max)
		bmax = c->e->c.batch_max;   /* [consume] the consumer's own cap (1.4) */
	c->sp_max = (size_t)bmax;
	if (c->e->c.batch_fn && bmax > 1) {
		/* [consume] no savepoint per message on the set path: larger */
		long long smax = pin_config_int("consumer_batch_set_max");

		if (smax > 10000)
			smax = 10000;
		/* [crm] batch_max caps the savepoint batches only (its reason,
		 * the subxid cache, does not apply to a set batch) */
		if (smax > bmax)
			bmax = smax;
	}
	b = calloc((size_t)bmax, sizeof(*b));
	pin_arena_set_current(a);
	while (!cons_stopping()) {
		rd_kafka_message_t *m;
		size_t n = 1;
		unsigned gen;

		if (!ensure_consumer(c, &next_boot_check))
			continue;
		cons_commit_retry(c);
		cons_lag_sample(c);
		cons_dead_letters_sample(c, false);
		m = next_message(c, retry_due(c, a));
		if (!m) {
			cons_lag_pending(c, NULL, 0);   /* nothing new: the held ones */
			continue;
		}
		if (!b) {
			cons_lag_pending(c, &m, 1);
			cons_handle(c, m, NULL);
			pin_arena_reset(a);
			continue;
		}
		/* the batch: what is already fetched, without waiting (only
		 * the items used are cleared: a set batch's array is large) */
		memset(b, 0, sizeof(*b));
		b[0].m = m;
		gen = c->rebal;
		while (n < (size_t)bmax && (m = next_message(c, 0))) {
			memset(&b[n], 0, sizeof(*b));
			b[n++].m = m;
		}
		if (c->rebal != gen)
			n = cons_batch_keep_assigned(c, b, n);
		{
			rd_kafka_message_t *pm[64];
			size_t np = 0;

			/* the oldest of a batch is (nearly always) among its
			 * first: one per partition is enough, 64 at most */
			for (size_t i = 0; i < n && np < 64; i++)
				if (!i || b[i].m->partition != b[i - 1].m->partition ||
						b[i].m->rkt != b[i - 1].m->rkt)
					pm[np++] = b[i].m;
			cons_lag_pending(c, pm, np);
		}
		if (n)
			pin_metric_add("pin_consumer_batches_total", c->labels, 1);
		if (n == 1)         /* nothing else fetched: no savepoint round trips */
			cons_handle(c, b[0].m, NULL);
		else if (n)
			cons_handle_batch(c, b, n);
		pin_arena_reset(a);
	}
	free(b);
	consumer_destroy(c, false);
	cons_dlq_destroy(c);
	free(c->held);
	c->held = NULL;
	free(c->lagp);
	c->lagp = NULL;
	c->nlagp = 0;
	c->nheld = c->capheld = 0;
	pin_arena_reset(a);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

/* inbox table names come from plugins: allow [a-z0-9_.] only */
static bool table_name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) ||
				*s == '_' || *s == '.'))
			return false;
	return true;
}

int pin_consumers_start(void)
{
	if (cs || pin_reg.nconsumers == 0)
		return 0;
	__atomic_store_n(&cons_stop_flag, 0, __ATOMIC_RELEASE);
	cs = calloc(pin_reg.nconsumers, sizeof(*cs));
	if (!cs)
		return -1;
	ncs = pin_reg.nconsumers;
	for (size_t i = 0; i < ncs; i++) {
		struct cons *c = &cs[i];
		const char *inbox;

		c->e = &pin_reg.consumers[i];
		c->commit_async = pin_config_bool("consumer_commit_async");
		inbox = c->e->c.inbox_table ? c->e->c.inbox_table : "calendar.inbox";
		if (!table_name_ok(inbox)) {
			pin_log(PIN_LOG_ERROR, "consumer: invalid inbox table name",
					"group", c->e->c.group, NULL);
			pin_consumers_stop();
			return -1;
		}
		snprintf(c->dlq_topic, sizeof(c->dlq_topic), "%s.dlq", c->e->c.group);
		snprintf(c->labels, sizeof(c->labels), "group=\"%s\"", c->e->c.group);
		/* 0 from the start: increase() sees the first dead letter */
		pin_metric_add("pin_dlq_total", c->labels, 0);
		/* the seed's names (pin_consumer 1.8) */
		if (c->e->c.dlq_metric)
			pin_metric_add(c->e->c.dlq_metric, NULL, 0);
		if (c->e->c.lag_metric)
			pin_metric_set(c->e->c.lag_metric, NULL, 0);
		if (c->e->c.version_metric)
			pin_metric_add(c->e->c.version_metric, NULL, 0);
		pin_metric_add("pin_consumer_processed_total", c->labels, 0);
		pin_metric_add("pin_consumer_retries_total", c->labels, 0);
		pin_metric_add("pin_consumer_offset_commit_failures_total", c->labels, 0);
		pin_metric_set("pin_consumer_partitions_assigned", c->labels, 0);
		/* 1 until the first assignment, and from a revoke to the next
		 * one: a rolling restart waits for 0 before the next host
		 * (operating.md, "Rolling restart of the worker hosts") */
		pin_metric_set("pin_consumer_rebalancing", c->labels, 1);
		/* [consume] the histogram before the first message */
		pin_metric_hist_declare("pin_consumer_consume_duration_seconds", c->labels);
		if (c->e->c.batch_fn)
			pin_metric_add("pin_consumer_batch_fallbacks_total", c->labels, 0);
		pin_metric_add("pin_consumer_batches_total", c->labels, 0);
		snprintf(c->inbox_sql, sizeof(c->inbox_sql),
				"INSERT INTO %s (consumer_group, message_id, processed_at)"
				" VALUES ($1, $2::uuid, $3::timestamptz) ON CONFLICT DO NOTHING",
				inbox);
		snprintf(c->claim_sql, sizeof(c->claim_sql),
				"INSERT INTO %s (consumer_group, message_id, processed_at)"
				" SELECT $1, m, $3::timestamptz FROM unnest($2::uuid[]) AS m"
				" ON CONFLICT DO NOTHING RETURNING message_id", inbox);
		snprintf(c->unclaim_sql, sizeof(c->unclaim_sql),
				"DELETE FROM %s WHERE consumer_group = $1"
				" AND message_id = ANY ($2::uuid[])", inbox);
		cons_dead_letters_init(c, inbox);
		if (pthread_mutex_init(&c->wm_mu, NULL) == 0) {
			if (pthread_create(&c->wm_thr, NULL, cons_wm_main, c) == 0)
				c->wm_started = true;
			else
				pthread_mutex_destroy(&c->wm_mu);
		}
		if (pthread_create(&c->thr, NULL, cons_main, c) != 0) {
			pin_log(PIN_LOG_ERROR, "cannot start a consumer thread",
					"group", c->e->c.group, NULL);
			pin_consumers_stop();
			return -1;
		}
		c->started = true;
	}
	pin_metrics_collector(lag_collect);
	return 0;
}

void pin_consumers_stop(void)
{
	if (!cs)
		return;
	__atomic_store_n(&cons_stop_flag, 1, __ATOMIC_RELEASE);
	for (size_t i = 0; i < ncs; i++) {
		struct cons *c = &cs[i];

		if (c->started)
			pthread_join(c->thr, NULL);
		if (c->wm_started) {
			/* the stop flag is set; each query is bounded by its 1 s
			 * timeout, and the sampler's handle is destroyed last */
			pthread_join(c->wm_thr, NULL);
			pthread_mutex_destroy(&c->wm_mu);
		}
		free(c->wm);
	}
	pin_metrics_collector(NULL);
	pthread_mutex_lock(&cs_mu);
	free(cs);
	cs = NULL;
	ncs = 0;
	pthread_mutex_unlock(&cs_mu);
	pin_log(PIN_LOG_INFO, "consumers stopped", NULL);
}

