/*
 * pin-benchproduce -- the anchor of `./dev bench relay`: a raw
 * librdkafka producer of outbox rows, with the relay's producer settings
 * (host/worker/relay.c producer_create: idempotence, acks=all, murmur2_random,
 * linger.ms, message.timeout.ms, queue and batch sizes), no database work
 * while producing.
 *
 *   pin-benchproduce --pg-dsn DSN --bootstrap HOST:PORT|@FILE --sql SELECT
 *                    [--linger-ms 5]
 *
 * Reads every row of SELECT (columns: topic, key, value) into memory first,
 * then produces them all (no copy) and waits for every delivery report.
 * Prints one line: "rows=N failed=F seconds=S rows_per_s=R".
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include "benchtool.h"

static long delivered, failed;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err)
		failed++;
	else
		delivered++;
}

static int set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[512];

	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "pin-benchproduce: %s: %s\n", k, err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dsn = NULL, *boot_arg = NULL, *sql = NULL, *linger = "5";
	char err[512], *boot;
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	PGconn *pg;
	PGresult *res;
	double t0, t1;
	int n, rc = 1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--pg-dsn"))
			dsn = argv[i + 1];
		else if (!strcmp(argv[i], "--bootstrap"))
			boot_arg = argv[i + 1];
		else if (!strcmp(argv[i], "--sql"))
			sql = argv[i + 1];
		else if (!strcmp(argv[i], "--linger-ms"))
			linger = argv[i + 1];
	}
	if (!dsn || !boot_arg || !sql) {
		fprintf(stderr, "usage: pin-benchproduce --pg-dsn DSN --bootstrap HOST:PORT|@FILE"
				" --sql 'SELECT topic, key, value ...' [--linger-ms N]\n");
		return 2;
	}
	if (!(boot = bt_bootstrap(boot_arg))) {
		fprintf(stderr, "pin-benchproduce: no bootstrap address in %s\n", boot_arg);
		return 1;
	}
	pg = PQconnectdb(dsn);
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "pin-benchproduce: %s", PQerrorMessage(pg));
		goto out_pg;
	}
	res = PQexec(pg, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != 3) {
		fprintf(stderr, "pin-benchproduce: %s", PQerrorMessage(pg));
		goto out_res;
	}
	n = PQntuples(res);
	conf = rd_kafka_conf_new();
	if (set(conf, "bootstrap.servers", boot) || set(conf, "client.id", "pin-benchproduce") ||
			set(conf, "enable.idempotence", "true") || set(conf, "acks", "all") ||
			set(conf, "partitioner", "murmur2_random") || set(conf, "linger.ms", linger) ||
			set(conf, "message.timeout.ms", "10000") ||
			set(conf, "queue.buffering.max.messages", "1000000") ||
			set(conf, "queue.buffering.max.kbytes", "1048576") ||
			set(conf, "batch.num.messages", "10000")) {
		rd_kafka_conf_destroy(conf);
		goto out_res;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	if (!(rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err)))) {
		fprintf(stderr, "pin-benchproduce: %s\n", err);
		rd_kafka_conf_destroy(conf);
		goto out_res;
	}
	/* the connection and the metadata first, as the relay has them */
	{
		const struct rd_kafka_metadata *md;

		if (rd_kafka_metadata(rk, 1, NULL, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
			rd_kafka_metadata_destroy(md);
	}
	t0 = bt_mono();
	for (int i = 0; i < n; i++) {
		rd_kafka_resp_err_t e;

		e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(PQgetvalue(res, i, 0)),
				RD_KAFKA_V_KEY(PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1)),
				RD_KAFKA_V_VALUE(PQgetvalue(res, i, 2), (size_t)PQgetlength(res, i, 2)),
				RD_KAFKA_V_MSGFLAGS(0), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(rk, 10);
			i--;
			continue;
		}
		if (e)
			failed++;
		rd_kafka_poll(rk, 0);
	}
	while (delivered + failed < n)
		rd_kafka_poll(rk, 10);
	t1 = bt_mono();
	printf("rows=%d failed=%ld seconds=%.3f rows_per_s=%.0f\n", n, failed, t1 - t0,
			t1 > t0 ? (double)n / (t1 - t0) : 0);
	rc = failed ? 1 : 0;
	rd_kafka_destroy(rk);
out_res:
	PQclear(res);
out_pg:
	PQfinish(pg);
	free(boot);
	return rc;
}
