/*
 * pin-benchconsume -- the Kafka side of the consumer benchmarks
 * (tests/bench/consumers.sh): a producer of prepared messages and the
 * anchor, a raw librdkafka consumer.
 *
 *   pin-benchconsume produce BOOTSTRAP TOPIC < lines
 *       every stdin line "key<TAB>value" becomes one message (murmur2_random
 *       partitioner like the relay, so keys spread over the partitions as
 *       Java clients put them); prints "produced N"
 *   pin-benchconsume consume BOOTSTRAP TOPIC [MAX]
 *       reads every partition of TOPIC from its low watermark up to the high
 *       watermark asked at start (at most MAX messages, default all), the
 *       way the host's consumer does (rd_kafka_consumer_poll, one message at
 *       a time, the payload touched), no offset commits; prints
 *       "consumed N in S s: R msgs/s" (timed from the first message)
 *
 * BOOTSTRAP is "host:port,..." or "@FILE" (the dev broker's bootstrap file).
 * Exit 0 ok, 1 failure.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <librdkafka/rdkafka.h>
#include "benchtool.h"

static rd_kafka_conf_t *conf_new(const char *boot)
{
	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();

	if (rd_kafka_conf_set(conf, "bootstrap.servers", boot, err, sizeof(err)) !=
			RD_KAFKA_CONF_OK) {
		fprintf(stderr, "pin-benchconsume: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	return conf;
}

static int set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[512];

	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "pin-benchconsume: %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

static int produce(const char *boot, const char *topic)
{
	char err[512], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long n = 0;
	int rc = 1;
	rd_kafka_t *rk;
	rd_kafka_conf_t *conf = conf_new(boot);

	if (!conf)
		return 1;
	if (set(conf, "partitioner", "murmur2_random") || set(conf, "linger.ms", "5") ||
			set(conf, "queue.buffering.max.messages", "1000000")) {
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "pin-benchconsume: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	while ((len = getline(&line, &cap, stdin)) > 0) {
		char *tab = memchr(line, '\t', (size_t)len);
		rd_kafka_resp_err_t e;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (!tab)
			continue;
		do {
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
					RD_KAFKA_V_KEY(line, (size_t)(tab - line)),
					RD_KAFKA_V_VALUE(tab + 1, (size_t)(line + len - tab - 1)),
					RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 10);
		} while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		if (e) {
			fprintf(stderr, "pin-benchconsume: produce: %s\n", rd_kafka_err2str(e));
			goto out;
		}
		n++;
		rd_kafka_poll(rk, 0);
	}
	if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		fprintf(stderr, "pin-benchconsume: flush timed out\n");
		goto out;
	}
	printf("produced %ld\n", n);
	rc = 0;
out:
	free(line);
	rd_kafka_destroy(rk);
	return rc;
}

static int consume(const char *boot, const char *topic, long max)
{
	char err[512];
	rd_kafka_t *rk;
	rd_kafka_conf_t *conf = conf_new(boot);
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_partition_list_t *parts;
	int64_t *hi = NULL;
	long want = 0, n = 0;
	unsigned long sum = 0;
	double t0 = 0, t1 = 0, deadline;
	int np = 0, rc = 1;

	if (!conf)
		return 1;
	if (set(conf, "group.id", "pin-benchconsume") ||
			set(conf, "enable.auto.commit", "false") ||
			set(conf, "enable.partition.eof", "false")) {
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "pin-benchconsume: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	rd_kafka_poll_set_consumer(rk);
	{
		rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
		rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t, &md, 10000);

		rd_kafka_topic_destroy(t);
		if (e || md->topic_cnt != 1 || md->topics[0].err) {
			fprintf(stderr, "pin-benchconsume: metadata of %s: %s\n", topic,
					rd_kafka_err2str(e ? e : md->topics[0].err));
			goto out;
		}
	}
	np = md->topics[0].partition_cnt;
	hi = calloc((size_t)np, sizeof(*hi));
	parts = rd_kafka_topic_partition_list_new(np);
	for (int i = 0; i < np; i++) {
		int32_t p = md->topics[0].partitions[i].id;
		int64_t lo = 0, h = 0;

		if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &h, 10000)) {
			fprintf(stderr, "pin-benchconsume: watermarks of %s/%d\n", topic, (int)p);
			rd_kafka_topic_partition_list_destroy(parts);
			goto out;
		}
		hi[i] = h;
		want += (long)(h - lo);
		rd_kafka_topic_partition_list_add(parts, topic, p)->offset = lo;
	}
	if (max > 0 && want > max)
		want = max;
	rd_kafka_assign(rk, parts);
	rd_kafka_topic_partition_list_destroy(parts);
	deadline = bt_mono() + 120;
	while (n < want && bt_mono() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);

		if (!m)
			continue;
		if (!m->err) {
			if (!n)
				t0 = bt_mono();
			for (size_t i = 0; i < m->len; i += 64)     /* touch the bytes */
				sum += ((const unsigned char *)m->payload)[i];
			n++;
			t1 = bt_mono();
		}
		rd_kafka_message_destroy(m);
	}
	if (n < want) {
		fprintf(stderr, "pin-benchconsume: read %ld of %ld messages\n", n, want);
		goto out;
	}
	printf("consumed %ld in %.3f s: %.0f msgs/s (checksum %lu)\n", n, t1 - t0,
			t1 > t0 ? (double)(n - 1) / (t1 - t0) : 0.0, sum);
	rc = 0;
out:
	free(hi);
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}

int main(int argc, char **argv)
{
	char *boot;
	int rc;

	if (argc < 4 || (strcmp(argv[1], "produce") && strcmp(argv[1], "consume"))) {
		fprintf(stderr, "usage: pin-benchconsume produce|consume BOOTSTRAP TOPIC [MAX]\n");
		return 1;
	}
	boot = bt_bootstrap(argv[2]);
	if (!boot) {
		fprintf(stderr, "pin-benchconsume: cannot read %s\n", argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "produce"))
		rc = produce(boot, argv[3]);
	else
		rc = consume(boot, argv[3], argc > 4 ? atol(argv[4]) : 0);
	free(boot);
	return rc;
}
