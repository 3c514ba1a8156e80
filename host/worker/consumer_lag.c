/*
 * consumer_lag.c -- the real lag of a consumer (consumer.c) and its lag
 * sampler thread.
 *
 * Real lag, every consumer_lag_interval_ms (5000) per assigned partition:
 * pin_consumer_lag_messages{group,topic,partition} = high watermark (asked
 * from the broker by the consumer's lag sampler thread with its own handle
 * and a 1 s timeout, cons_wm_main; at least the consumer's cached value) -
 * committed offset of the group (no commit yet: - low watermark), and pin_consumer_oldest_unprocessed_age_seconds{group} =
 * the largest over the partitions of: a held message's age (its Kafka
 * timestamp), else, while lag > 0, the time since the committed offset last
 * moved (or since lag appeared); at each scrape (cons_lag_collect) grown by
 * the time since the sample, and at least the age of the oldest message the
 * consumer has in hand (a handler stuck on a lock: no sample runs then).  A
 * consumer that is stuck, paused or starved shows growing values; a host
 * that is gone shows no series (its scrape fails: the host-down alert).
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

static struct lagp *lagp_find(struct cons *c, const char *topic, int32_t part)
{
	for (size_t i = 0; i < c->nlagp; i++)
		if (c->lagp[i].part == part && !strcmp(c->lagp[i].topic, topic))
			return &c->lagp[i];
	return NULL;
}

static struct lagp *lagp_get(struct cons *c, const char *topic, int32_t part)
{
	struct lagp *n;

	for (size_t i = 0; i < c->nlagp; i++)
		if (c->lagp[i].part == part && !strcmp(c->lagp[i].topic, topic))
			return &c->lagp[i];
	n = realloc(c->lagp, (c->nlagp + 1) * sizeof(*n));
	if (!n)
		return NULL;
	c->lagp = n;
	n = &c->lagp[c->nlagp++];
	memset(n, 0, sizeof(*n));
	snprintf(n->topic, sizeof(n->topic), "%s", topic);
	n->part = part;
	n->committed = -2;
	return n;
}

/* Partitions this consumer no longer owns: their new owner reports their
 * lag, so a stale series here would add the last value to the group's sum. */
void cons_lag_forget(struct cons *c, const rd_kafka_topic_partition_list_t *parts)
{
	for (int i = 0; i < parts->cnt; i++) {
		char lab[400];
		struct lagp *s = lagp_find(c, parts->elems[i].topic, parts->elems[i].partition);

		snprintf(lab, sizeof(lab), "%s,topic=\"%s\",partition=\"%d\"", c->labels,
				parts->elems[i].topic, (int)parts->elems[i].partition);
		pin_metric_set("pin_consumer_lag_messages", lab, 0);
		if (s)
			s->since_us = 0;
	}
}

/* The lag sampler of one consumer: its own producer-type handle asks the
 * broker for the high watermarks of the partitions the consumer registered
 * (wm_hi), every consumer_lag_interval_ms, with a 1 s timeout.  The
 * consumer's cached watermarks (rd_kafka_get_watermark_offsets) never move
 * for a paused (held) partition because it is not fetched; asking from the
 * consumer thread hung it in librdkafka 2.0.2 once the broker moved.  Here
 * a misbehaving query only makes the sampler late.  The handle is rebuilt
 * when the bootstrap moves.
 *
 * How late (measured 2026-12-03): librdkafka 2.0.2 waits for the ListOffsets answer
 * without looking at the query's timeout, so a request queued for a broker
 * that went away ends only by socket.timeout.ms (60 s, then retried), and
 * the loop asked every registered partition in turn before it looked at
 * the bootstrap again: after the dev broker moved, a sampler stayed on the
 * dead address for minutes (obs/lag's "lag did not grow: 2 then 2": a held
 * partition is not fetched, so its lag moves only with the sampler).  Its
 * handle now gives a request up after WM_SOCKET_TIMEOUT_MS, and a move
 * (wm_forget) ends the round after the query in flight.
 *
 * That was not all (2026-12-05): a request that was never sent (its broker
 * went away before the connection came up) is retried by librdkafka 2.0.2
 * without counting (rd_kafka_buf_retry counts sent buffers only), so the
 * query waited as long as the dead broker stayed dead: a clean-clone ASan
 * run had every sampler of a worker reconnecting to the first dev broker for
 * 6 minutes after it moved, and obs/lag's held partitions stuck at 2.  So
 * each query runs on a thread of its own (wm_query) and the sampler waits
 * WM_QUERY_DEADLINE_MS for it: past that the query's thread keeps the
 * handle (destroyed once the call returns, if ever) and the sampler builds
 * a new one from the bootstrap of the moment. */
#define WM_SOCKET_TIMEOUT_MS "3000"
#define WM_RETRY_MS 500
#define WM_QUERY_DEADLINE_MS 5000

struct wm_query {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rd_kafka_t *rk;
	char topic[200];
	int32_t part;
	int64_t hi;
	rd_kafka_resp_err_t err;
	bool done, abandoned;
};

static void wm_query_free(struct wm_query *q)
{
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q);
}

static void *wm_query_main(void *arg)
{
	struct wm_query *q = arg;
	int64_t lo = 0, hi = -1;
	rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(q->rk, q->topic, q->part,
			&lo, &hi, 1000);
	bool abandoned;

	pthread_mutex_lock(&q->mu);
	q->hi = hi;
	q->err = err;
	q->done = true;
	abandoned = q->abandoned;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (abandoned) {        /* the sampler went on without us: ours to free */
		rd_kafka_destroy(q->rk);
		wm_query_free(q);
	}
	return NULL;
}

/* The high watermark of topic/part through *rk, waited for at most
 * WM_QUERY_DEADLINE_MS.  Past it *rk is left to the query's thread and set
 * to NULL (the caller builds a new handle); RD_KAFKA_RESP_ERR__TIMED_OUT. */
static rd_kafka_resp_err_t wm_query(rd_kafka_t **rk, const char *topic, int32_t part,
		int64_t *hi)
{
	struct wm_query *q = calloc(1, sizeof(*q));
	struct timespec dl;
	pthread_t t;
	rd_kafka_resp_err_t err;
	int64_t lo = 0;

	if (!q || pthread_mutex_init(&q->mu, NULL) != 0) {
		free(q);
		return rd_kafka_query_watermark_offsets(*rk, topic, part, &lo, hi, 1000);
	}
	pthread_cond_init(&q->cv, NULL);
	q->rk = *rk;
	snprintf(q->topic, sizeof(q->topic), "%s", topic);
	q->part = part;
	if (pthread_create(&t, NULL, wm_query_main, q) != 0) {
		wm_query_free(q);
		return rd_kafka_query_watermark_offsets(*rk, topic, part, &lo, hi, 1000);
	}
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WM_QUERY_DEADLINE_MS / 1000;
	pthread_mutex_lock(&q->mu);
	while (!q->done)
		if (pthread_cond_timedwait(&q->cv, &q->mu, &dl) != 0)
			break;
	if (!q->done) {
		q->abandoned = true;
		pthread_mutex_unlock(&q->mu);
		pthread_detach(t);
		*rk = NULL;
		pin_log(PIN_LOG_WARN, "consumer lag: a watermark query hangs, its handle left behind",
				"topic", topic, NULL);
		return RD_KAFKA_RESP_ERR__TIMED_OUT;
	}
	pthread_mutex_unlock(&q->mu);
	pthread_join(t, NULL);
	*hi = q->hi;
	err = q->err;
	wm_query_free(q);
	return err;
}

void *cons_wm_main(void *arg)
{
	struct cons *c = arg;
	rd_kafka_t *rk = NULL;
	char *boot = NULL;
	int64_t next = 0;
	unsigned gen0;
	bool failed;

	while (!cons_stopping()) {
		int64_t now = pin_clock_now_us();
		size_t n;

		if (now < next && !__atomic_exchange_n(&c->wm_new, 0, __ATOMIC_ACQ_REL)) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };

			nanosleep(&ts, NULL);
			continue;
		}
		next = now + pin_config_int("consumer_lag_interval_ms") * 1000;
		{
			char *b = pin_kafka_bootstrap();

			if (rk && (!b || !boot || strcmp(b, boot) != 0)) {
				rd_kafka_destroy(rk);
				rk = NULL;
			}
			free(boot);
			boot = b;
		}
		if (!rk) {
			char err[512];
			rd_kafka_conf_t *conf = pin_kafka_conf_new("lag", err, sizeof(err));

			if (!conf)
				continue;
			if (rd_kafka_conf_set(conf, "socket.timeout.ms", WM_SOCKET_TIMEOUT_MS, err,
					sizeof(err)) != RD_KAFKA_CONF_OK)
				pin_log(PIN_LOG_WARN, "consumer lag: socket.timeout.ms not set",
						"error", err, NULL);
			rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
			if (!rk) {
				rd_kafka_conf_destroy(conf);
				continue;
			}
		}
		pthread_mutex_lock(&c->wm_mu);
		n = c->nwm;
		gen0 = c->wm_gen;
		pthread_mutex_unlock(&c->wm_mu);
		failed = false;
		for (size_t i = 0; i < n && !cons_stopping(); i++) {
			char topic[200];
			int32_t part;
			int64_t hi = -1;
			unsigned gen;

			pthread_mutex_lock(&c->wm_mu);
			memcpy(topic, c->wm[i].topic, sizeof(topic));
			part = c->wm[i].part;
			gen = c->wm_gen;
			pthread_mutex_unlock(&c->wm_mu);
			if (gen != gen0)
				break;      /* the broker moved: the handle first */
			if (wm_query(&rk, topic, part, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR) {
				failed = true;
				if (!rk)
					break;      /* a new handle first */
				continue;   /* broker away: keep the last value */
			}
			pthread_mutex_lock(&c->wm_mu);
			if (gen == c->wm_gen)   /* else asked of the cluster that left */
				c->wm[i].hi = hi;
			pthread_mutex_unlock(&c->wm_mu);
		}
		/* a partition not answered (a new handle still learning the
		 * cluster after a move, a leader away) is asked again within
		 * WM_RETRY_MS, not a whole interval later: until then its lag is
		 * the consumer's cached value, which a held partition never moves */
		if (failed && next > pin_clock_now_us() + WM_RETRY_MS * 1000)
			next = pin_clock_now_us() + WM_RETRY_MS * 1000;
	}
	if (rk)
		rd_kafka_destroy(rk);
	free(boot);
	return NULL;
}

/* The broker moved (a new cluster): the sampled watermarks were the old
 * cluster's, and an answer still in flight from it is dropped (wm_gen).
 * Until the sampler asks the new one, lag_sample uses the consumer's own. */
void cons_wm_forget(struct cons *c)
{
	if (!c->wm_started)
		return;
	pthread_mutex_lock(&c->wm_mu);
	for (size_t i = 0; i < c->nwm; i++)
		c->wm[i].hi = -1;
	c->wm_gen++;
	pthread_mutex_unlock(&c->wm_mu);
	__atomic_store_n(&c->wm_new, 1, __ATOMIC_RELEASE);
}

/* the sampled high watermark of a partition (-1 if none yet); registers
 * the partition for the sampler */
static int64_t wm_hi(struct cons *c, const char *topic, int32_t part)
{
	int64_t hi = -1;
	struct wmp *n;

	pthread_mutex_lock(&c->wm_mu);
	for (size_t i = 0; i < c->nwm; i++)
		if (c->wm[i].part == part && !strcmp(c->wm[i].topic, topic)) {
			hi = c->wm[i].hi;
			goto out;
		}
	n = realloc(c->wm, (c->nwm + 1) * sizeof(*n));
	if (!n)
		goto out;
	c->wm = n;
	n = &c->wm[c->nwm++];
	memset(n, 0, sizeof(*n));
	snprintf(n->topic, sizeof(n->topic), "%s", topic);
	n->part = part;
	n->hi = -1;
	__atomic_store_n(&c->wm_new, 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&c->wm_mu);
	return hi;
}

/*
 * The seed's lag (pin_consumer.lag_metric, ABI 1.8; seed 001
 * notifications_consumer_lag_seconds, seed 004
 * calendar_crm_booking_sync_lag_seconds): the age of the oldest message of
 * the group not yet handled, worked out when /metrics is scraped (so it
 * grows while the consumer thread is stuck in a handler, where no sample
 * runs), as the larger of
 *   now - the Kafka timestamp of the oldest message polled and not yet
 *         handled (the batch in hand, a held message; resolution: one
 *         batch -- the batch's oldest counts until the batch is done), and
 *   now - when a partition with lag > 0 was first seen with the committed
 *         offset it still has one lag sample later (messages waiting that
 *         the consumer does not even fetch: a broker fault, a stuck
 *         commit; a lower bound, late by up to consumer_lag_interval_ms);
 * 0 once a poll finds nothing new and no partition is held: caught up.
 * A host that is down has no series (its scrape fails: PinHostDown).
 */
/* m's Kafka timestamp on the host clock (now = pin_clock_now_us(), which
 * carries the configured clock offset; the broker's is the real time) */
static int64_t msg_ts_us(const rd_kafka_message_t *m, int64_t now)
{
	rd_kafka_timestamp_type_t tt;
	int64_t ts = rd_kafka_message_timestamp(m, &tt);
	struct timespec real;

	if (ts <= 0)
		return now;
	clock_gettime(CLOCK_REALTIME, &real);
	return ts * 1000 + (now - ((int64_t)real.tv_sec * 1000000 + real.tv_nsec / 1000));
}

void cons_lag_pending(struct cons *c, rd_kafka_message_t *const *m, size_t n)
{
	int64_t now = pin_clock_now_us(), oldest = 0;

	for (size_t i = 0; i < c->nheld; i++) {
		int64_t t = msg_ts_us(c->held[i].m, now);

		if (!oldest || t < oldest)
			oldest = t;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t t = msg_ts_us(m[i], now);

		if (!oldest || t < oldest)
			oldest = t;
	}
	__atomic_store_n(&c->pend_ts_us, oldest, __ATOMIC_RELEASE);
}

static double lag_of(struct cons *c, int64_t now)
{
	int64_t p = __atomic_load_n(&c->pend_ts_us, __ATOMIC_ACQUIRE);
	int64_t s = __atomic_load_n(&c->stall_us, __ATOMIC_ACQUIRE);
	double age = 0;

	if (p && now > p)
		age = (double)(now - p) / 1e6;
	if (s && now > s && (double)(now - s) / 1e6 > age)
		age = (double)(now - s) / 1e6;
	return age;
}

void cons_lag_collect(struct cons *cs, size_t n)
{
	int64_t now = pin_clock_now_us();

	/* pin_consumer_oldest_unprocessed_age_seconds{group} (PinConsumerLag):
	 * the last sample's value grown by the time since, or the oldest
	 * message in hand if older -- the sampler runs on the consumer thread,
	 * so without this a handler stuck on a lock froze the alert's input */
	for (size_t i = 0; i < n; i++) {
		int64_t from = __atomic_load_n(&cs[i].age_from_us, __ATOMIC_ACQUIRE);
		double age = lag_of(&cs[i], now);

		if (!cs[i].started)
			continue;
		if (from && now > from && (double)(now - from) / 1e6 > age)
			age = (double)(now - from) / 1e6;
		pin_metric_set("pin_consumer_oldest_unprocessed_age_seconds", cs[i].labels, age);
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = cs[i].e->c.lag_metric;
		double age = 0;
		bool first = true;

		if (!name)
			continue;
		for (size_t j = 0; j < n && first; j++)
			if (j < i && cs[j].e->c.lag_metric && !strcmp(cs[j].e->c.lag_metric, name))
				first = false;   /* done with i's first group */
		if (!first)
			continue;
		for (size_t j = i; j < n; j++)      /* groups sharing a name: the oldest */
			if (cs[j].e->c.lag_metric && !strcmp(cs[j].e->c.lag_metric, name)) {
				double a = lag_of(&cs[j], now);

				if (a > age)
					age = a;
			}
		pin_metric_set(name, NULL, age);
	}
}

/* Samples the real lag of the assigned partitions (see the head comment). */
void cons_lag_sample(struct cons *c)
{
	rd_kafka_topic_partition_list_t *l = NULL;
	int64_t now = pin_clock_now_us();
	double oldest = 0;
	char lab[400];
	int unknown = 0;
	int64_t stall = 0;

	if (now < c->next_lag_us)
		return;
	c->next_lag_us = now + pin_config_int("consumer_lag_interval_ms") * 1000;
	if (rd_kafka_assignment(c->rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR || !l)
		return;
	if (l->cnt == 0) {
		/* no partition (all revoked): nothing of ours waits here */
		__atomic_store_n(&c->stall_us, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&c->age_from_us, 0, __ATOMIC_RELEASE);
		goto out;
	}
	if (rd_kafka_committed(c->rk, l, 1000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		c->next_lag_us = now + 10000000;   /* broker away: do not block the loop */
		goto out;
	}
	for (int i = 0; i < l->cnt; i++) {
		rd_kafka_topic_partition_t *p = &l->elems[i];
		int64_t lo = 0, hi = 0, lag, com = p->offset;
		struct lagp *s;
		struct held *h;

		/* the cached watermarks (fetch responses): never blocks.
		 * rd_kafka_query_watermark_offsets ignored its timeout in
		 * 2.0.2 when the broker went away for good (dev broker moved)
		 * and hung the consumer thread */
		int64_t q = c->wm_started ? wm_hi(c, p->topic, p->partition) : -1;

		if (rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition,
				&lo, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR)
			lo = hi = -1;
		if (q > hi)
			hi = q;     /* the sampler's: a held partition is not fetched */
		if (hi < 0) {
			/* no watermark for this partition yet (not fetched, not yet
			 * answered to the sampler): keep its last value.  Before
			 * 2026-12-03 this ended the whole sample and waited 10 s,
			 * so one such partition froze the lag of every other one
			 * for 10 s -- as long as obs/lag's wait, a candidate cause
			 * of its rare "lag did not grow: 2 then 2" under ASan */
			unknown++;
			continue;
		}
		if (com < 0)
			com = lo < 0 ? 0 : lo;
		lag = hi > com ? hi - com : 0;
		snprintf(lab, sizeof(lab), "%s,topic=\"%s\",partition=\"%d\"", c->labels,
				p->topic, (int)p->partition);
		pin_metric_set("pin_consumer_lag_messages", lab, (double)lag);
		if (!(s = lagp_get(c, p->topic, p->partition)))
			continue;
		if (lag == 0 || s->committed != com || !s->since_us)
			s->since_us = now;
		else if (!stall || s->since_us < stall)
			stall = s->since_us;    /* put since an earlier sample */
		s->committed = com;
		h = cons_held_find(c, p->topic, p->partition);
		if (h) {
			int64_t ts = msg_ts_us(h->m, now);

			if ((double)(now - ts) / 1e6 > oldest)
				oldest = (double)(now - ts) / 1e6;
		}
		if (lag > 0 && (double)(now - s->since_us) / 1e6 > oldest)
			oldest = (double)(now - s->since_us) / 1e6;
	}
	if (unknown == l->cnt) {
		/* no partition has a watermark: the broker is away; keep the
		 * last values, try in 10 s */
		c->next_lag_us = now + 10000000;
		goto out;
	}
	pin_metric_set("pin_consumer_oldest_unprocessed_age_seconds", c->labels, oldest);
	__atomic_store_n(&c->stall_us, stall, __ATOMIC_RELEASE);
	__atomic_store_n(&c->age_from_us, oldest > 0 ? now - (int64_t)(oldest * 1e6) : 0,
			__ATOMIC_RELEASE);
out:
	rd_kafka_topic_partition_list_destroy(l);
}
