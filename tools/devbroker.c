/*
 * pin-devbroker -- the dev/test Kafka broker: librdkafka's mock cluster
 * (rdkafka_mock.h) listening on loopback, with the PIN topics created at
 * start (3 partitions each, replication 1).
 *
 *   pin-devbroker [--bootstrap-file PATH] [--topic NAME]... [--partitions N]
 *                 [--brokers N]
 *
 * Prints "bootstrap=<host:port,...>" on stdout, writes the same address to
 * PATH (tmp file + rename, so readers never see a partial write), and runs
 * until SIGTERM/SIGINT.  The mock cluster listens on random ports (no way to
 * fix them in librdkafka 2.0), so every client reads the bootstrap file.
 * In memory only: a restart forgets every topic and message.
 *
 * Outage drills (tests/integration/test_faults.c): SIGUSR1 takes every broker
 * of the cluster down (connections closed, new ones refused), SIGUSR2 brings
 * them back -- same port, same topics, messages and committed offsets, like
 * a real broker restarted over its log.
 *
 * Error injection (tests/integration/test_obs.c): SIGURG reads
 * "<api key> <count> <error code>" from PATH.inject (next to the bootstrap
 * file) and makes the next <count> requests of that Kafka API fail with that
 * error (rd_kafka_mock_push_request_errors), e.g. "8 3 28": three
 * OffsetCommit requests answered INVALID_COMMIT_OFFSET_SIZE.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include "sdk/topics.h"

/* The contract topics, the dev and test topics and the dead-letter topic
 * of every consumer group: the one list of sdk/topics.h. */
#define TOPIC(t) t,
#define DLQ(g) PC_DLQ(g),
static const char *const default_topics[] = {
	PC_TOPICS(TOPIC)
	PC_DEV_TOPICS(TOPIC)
	PC_GROUPS(DLQ)
	PC_DEV_GROUPS(DLQ)
	NULL
};
#undef TOPIC
#undef DLQ

static void usage(FILE *f)
{
	fprintf(f, "usage: pin-devbroker [--bootstrap-file PATH] [--topic NAME]..."
			" [--partitions N] [--brokers N]\n");
}

/* Writes s + "\n" to path through path.tmp + rename.  0 / -1 (reported). */
static int write_atomic(const char *path, const char *s)
{
	char tmp[4096];
	FILE *f = NULL;
	int rc = -1;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid())
			>= (int)sizeof(tmp)) {
		fprintf(stderr, "pin-devbroker: path too long\n");
		goto out;
	}
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "pin-devbroker: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fprintf(stderr, "pin-devbroker: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (fclose(f) != 0) {
		f = NULL;
		fprintf(stderr, "pin-devbroker: %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		fprintf(stderr, "pin-devbroker: rename %s: %s\n", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

static int create_topic(rd_kafka_mock_cluster_t *mc, const char *name, int parts)
{
	rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(mc, name, parts, 1);

	if (err) {
		fprintf(stderr, "pin-devbroker: topic %s: %s\n", name,
				rd_kafka_err2str(err));
		return -1;
	}
	return 0;
}

/* SIGURG: the next requests of one API fail (see the head comment) */
static void inject(rd_kafka_mock_cluster_t *mc, const char *bootstrap_file)
{
	char path[4096];
	int key = -1, cnt = 0, err = 0;
	FILE *f;

	if (!bootstrap_file)
		return;
	snprintf(path, sizeof(path), "%s.inject", bootstrap_file);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%d %d %d", &key, &cnt, &err) != 3 || key < 0 ||
			cnt < 1 || cnt > 1000) {
		fprintf(stderr, "pin-devbroker: %s: expected \"<api key> <count>"
				" <error code>\"\n", path);
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	for (int i = 0; i < cnt; i++)
		rd_kafka_mock_push_request_errors(mc, (int16_t)key, 1,
				(rd_kafka_resp_err_t)err);
	fprintf(stderr, "pin-devbroker: the next %d requests of API %d fail with"
			" error %d\n", cnt, key, err);
}

int main(int argc, char **argv)
{
	const char *bootstrap_file = NULL;
	const char **extra = NULL;
	int nextra = 0, parts = 3, brokers = 1, sig = 0, rc = 1;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_t *rk = NULL;
	rd_kafka_mock_cluster_t *mc = NULL;
	const char *bootstraps;
	char errstr[512];
	sigset_t set;

	extra = calloc((size_t)argc, sizeof(*extra));
	if (!extra)
		goto out;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			rc = 0;
			goto out;
		} else if (!strcmp(a, "--bootstrap-file") && v) {
			bootstrap_file = v;
			i++;
		} else if (!strcmp(a, "--topic") && v) {
			extra[nextra++] = v;
			i++;
		} else if (!strcmp(a, "--partitions") && v) {
			parts = atoi(v);
			i++;
		} else if (!strcmp(a, "--brokers") && v) {
			brokers = atoi(v);
			i++;
		} else {
			usage(stderr);
			rc = 2;
			goto out;
		}
	}
	if (parts < 1 || brokers < 1) {
		usage(stderr);
		rc = 2;
		goto out;
	}

	/* Block the stop signals before librdkafka starts its threads so that
	 * only sigwait() below sees them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGURG);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "pin-devbroker: %s\n", errstr);
		goto out;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		fprintf(stderr, "pin-devbroker: rd_kafka_new: %s\n", errstr);
		goto out;
	}
	conf = NULL;    /* owned by rk now */

	mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "pin-devbroker: cannot create the mock cluster\n");
		goto out;
	}
	for (int i = 0; default_topics[i]; i++)
		if (create_topic(mc, default_topics[i], parts) != 0)
			goto out;
	for (int i = 0; i < nextra; i++)
		if (create_topic(mc, extra[i], parts) != 0)
			goto out;

	bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
	if (bootstrap_file && write_atomic(bootstrap_file, bootstraps) != 0)
		goto out;
	printf("bootstrap=%s\n", bootstraps);
	fflush(stdout);

	for (;;) {
		rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;

		if (sigwait(&set, &sig) != 0)
			goto out;
		if (sig == SIGURG) {
			inject(mc, bootstrap_file);
			continue;
		}
		if (sig != SIGUSR1 && sig != SIGUSR2)
			break;
		for (int id = 1; id <= brokers && !e; id++)
			e = sig == SIGUSR1 ? rd_kafka_mock_broker_set_down(mc, id) :
				rd_kafka_mock_broker_set_up(mc, id);
		fprintf(stderr, "pin-devbroker: brokers %s%s%s\n",
				sig == SIGUSR1 ? "down" : "up", e ? ": " : "",
				e ? rd_kafka_err2str(e) : "");
	}
	fprintf(stderr, "pin-devbroker: signal %d, stopping\n", sig);
	rc = 0;
out:
	if (mc)
		rd_kafka_mock_cluster_destroy(mc);
	if (rk)
		rd_kafka_destroy(rk);
	if (conf)
		rd_kafka_conf_destroy(conf);
	/* a stale address would send clients to a dead (or foreign) port */
	if (bootstrap_file && rc == 0)
		unlink(bootstrap_file);
	free(extra);
	return rc;
}
