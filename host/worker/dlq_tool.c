/*
 * dlq_tool.c -- pin-host --dlq list|show|replay|ack: the operator's tool for
 * the dead letters (issue 30; doc/operating.md "Dead letters (DLQ)", pin-host(8)).
 *
 * It runs with the worker host's configuration (-c FILE): the plugins it
 * loads name the consumer groups and their inbox tables, whose schema holds
 * <schema>.dead_letters (dead_letters.c writes the rows); pg_dsn and
 * kafka_bootstrap as the worker host uses them.  Nothing is started: no
 * thread, no consumer.
 *
 *   list [GROUP]          GROUP's pending dead letters (id, dead_at, age,
 *                         topic[partition]@offset, error code, headers,
 *                         detail), oldest first; without GROUP one line per
 *                         group with its pending count
 *   show GROUP ID...|all  everything of each, the key and the payload too
 *   replay GROUP ID...|all  produces each pending one again to its original
 *                         topic (key, value and headers as they came; the
 *                         murmur2 partitioner puts the key where the Java
 *                         producers do), awaits the broker's ack, marks it
 *                         handled (replayed); the group consumes it again
 *   ack GROUP ID...|all   marks each pending one handled (acked) without
 *                         replay; --reason TEXT is kept with it
 *
 * Exit 0 done, 1 a failure (each is reported on stderr; the others are
 * still done), 2 usage or an unknown group.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

static char table[160];

static void usage(void)
{
	fputs("usage: pin-host -c WORKER.conf --dlq list [GROUP]\n"
	      "       pin-host -c WORKER.conf --dlq show GROUP ID...|all\n"
	      "       pin-host -c WORKER.conf --dlq replay GROUP ID...|all\n"
	      "       pin-host -c WORKER.conf --dlq ack GROUP ID...|all [--reason TEXT]\n",
	      stderr);
}

/* the dead-letter table of group (from its inbox table); NULL unknown */
static const char *group_table(const char *group)
{
	for (size_t i = 0; i < pin_reg.nconsumers; i++) {
		const struct pin_consumer_entry *e = &pin_reg.consumers[i];
		const char *inbox, *dot;

		if (strcmp(e->c.group, group) != 0)
			continue;
		inbox = e->c.inbox_table ? e->c.inbox_table : "calendar.inbox";
		dot = strchr(inbox, '.');
		snprintf(table, sizeof(table), "%.*s.dead_letters",
				dot ? (int)(dot - inbox) : 8, dot ? inbox : "calendar");
		for (const char *p = table; *p; p++)
			if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
					*p == '_' || *p == '.'))
				return NULL;
		return table;
	}
	fprintf(stderr, "pin-host: consumer group %s is not consumed by the plugins of"
		" this configuration; groups:", group);
	for (size_t i = 0; i < pin_reg.nconsumers; i++)
		fprintf(stderr, " %s", pin_reg.consumers[i].c.group);
	fputc('\n', stderr);
	return NULL;
}

static PGresult *q(const char *sql, int n, const char *const *p)
{
	PGresult *r = pin_db_exec(sql, n, p);
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;

	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		PGconn *c = pin_db_conn();

		fprintf(stderr, "pin-host: %s\n", r ? PQresultErrorMessage(r) :
			c ? PQerrorMessage(c) : "database unreachable (pg_dsn)");
		return NULL;
	}
	return r;
}

static void age(long long s, char *out, size_t n)
{
	if (s < 120)
		snprintf(out, n, "%llds", s);
	else if (s < 7200)
		snprintf(out, n, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(out, n, "%lldh%02lldm", s / 3600, s / 60 % 60);
	else
		snprintf(out, n, "%lldd%02lldh", s / 86400, s / 3600 % 24);
}

static int list_groups(void)
{
	int rc = 0;

	printf("%-40s %s\n", "GROUP", "PENDING");
	for (size_t i = 0; i < pin_reg.nconsumers; i++) {
		const char *g = pin_reg.consumers[i].c.group;
		char sql[256];
		PGresult *r;

		if (!group_table(g))
			return 2;
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE consumer_group"
			" = $1 AND handled_at IS NULL", table);
		r = q(sql, 1, (const char *const[]){ g });
		if (!r) {
			rc = 1;
			continue;
		}
		printf("%-40s %s\n", g, PQgetvalue(r, 0, 0));
	}
	return rc;
}

static int list(const char *group)
{
	char sql[640];
	PGresult *r;

	snprintf(sql, sizeof(sql), "SELECT id, to_char(dead_at AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), extract(epoch FROM now() -"
		" dead_at)::bigint, topic, kafka_partition, kafka_offset, error_code,"
		" headers::text, error_detail FROM %s WHERE consumer_group = $1"
		" AND handled_at IS NULL ORDER BY id", table);
	if (!(r = q(sql, 1, (const char *const[]){ group })))
		return 1;
	printf("%-8s %-20s %-8s %-40s %-32s %s\n", "ID", "DEAD_AT", "AGE",
		"TOPIC[PARTITION]@OFFSET", "CODE", "HEADERS / DETAIL");
	for (int i = 0; i < PQntuples(r); i++) {
		char a[32], where[300];

		age(atoll(PQgetvalue(r, i, 2)), a, sizeof(a));
		snprintf(where, sizeof(where), "%s[%s]@%s", PQgetvalue(r, i, 3),
			PQgetvalue(r, i, 4), PQgetvalue(r, i, 5));
		printf("%-8s %-20s %-8s %-40s %-32s %s %s\n", PQgetvalue(r, i, 0),
			PQgetvalue(r, i, 1), a, where, PQgetvalue(r, i, 6),
			PQgetvalue(r, i, 7), PQgetvalue(r, i, 8));
	}
	printf("%d pending dead letter(s) of %s in %s\n", PQntuples(r), group, table);
	return 0;
}

static int hexv(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* bytea text output ("\x...") to bytes (malloc'd, NUL-terminated) */
static char *unhex(const char *s, size_t *len)
{
	size_t n;
	char *out;

	if (s[0] == '\\' && s[1] == 'x')
		s += 2;
	n = strlen(s) / 2;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int hi = hexv(s[2 * i]), lo = hexv(s[2 * i + 1]);

		out[i] = (char)(hi < 0 || lo < 0 ? 0 : hi << 4 | lo);
	}
	out[n] = '\0';
	*len = n;
	return out;
}

/* bytes as text when they are UTF-8 without NUL, else as hex */
static void print_bytes(const char *label, const char *hex, bool null)
{
	size_t n = 0;
	char *b;

	if (null) {
		printf("%-10s (null)\n", label);
		return;
	}
	b = unhex(hex, &n);
	if (b && pin_utf8_valid(b, n) && !memchr(b, 0, n))
		printf("%-10s %s\n", label, b);
	else
		printf("%-10s (not UTF-8, hex) %s\n", label, hex);
	free(b);
}

static const char *row_sql(void)
{
	static char sql[512];

	snprintf(sql, sizeof(sql), "SELECT id, topic, kafka_partition, kafka_offset,"
		" msg_key, headers::text, payload, error_code, error_detail, dead_at,"
		" handled_at, handled_how, handled_note FROM %s"
		" WHERE consumer_group = $1 AND id = $2::bigint", table);
	return sql;
}

static int show(const char *group, int n, char **ids)
{
	int rc = 0;

	for (int i = 0; i < n; i++) {
		const char *p[2] = { group, ids[i] };
		PGresult *r = q(row_sql(), 2, p);
		static const char *const names[] = { "id", "topic", "partition",
			"offset", "key", "headers", "payload", "code", "detail",
			"dead_at", "handled_at", "handled", "note" };

		if (!r) {
			rc = 1;
			continue;
		}
		if (PQntuples(r) != 1) {
			fprintf(stderr, "pin-host: no dead letter %s of %s\n", ids[i], group);
			rc = 1;
			continue;
		}
		for (int k = 0; k < 13; k++)
			if (k == 4 || k == 6)
				print_bytes(names[k], PQgetvalue(r, 0, k), PQgetisnull(r, 0, k));
			else
				printf("%-10s %s\n", names[k], PQgetisnull(r, 0, k) ? "" :
					PQgetvalue(r, 0, k));
		printf("\n");
	}
	return rc;
}

/* the pending ids of group: ids as given, or every pending one for "all" */
static char **pending_ids(const char *group, int *n, char **ids)
{
	char sql[256];
	PGresult *r;
	char **out;

	if (!(*n == 1 && !strcmp(ids[0], "all")))
		return ids;
	snprintf(sql, sizeof(sql), "SELECT id FROM %s WHERE consumer_group = $1"
		" AND handled_at IS NULL ORDER BY id", table);
	if (!(r = q(sql, 1, (const char *const[]){ group })))
		return NULL;
	out = pin_arena_alloc(((size_t)PQntuples(r) + 1) * sizeof(*out));
	for (int i = 0; i < PQntuples(r); i++)
		out[i] = PQgetvalue(r, i, 0);
	*n = PQntuples(r);
	return out;
}

static int ack(const char *group, int n, char **ids, const char *reason)
{
	char sql[320];
	int rc = 0;

	snprintf(sql, sizeof(sql), "UPDATE %s SET handled_at = now(), handled_how ="
		" 'acked', handled_note = NULLIF($3, '') WHERE consumer_group = $1"
		" AND id = $2::bigint AND handled_at IS NULL", table);
	for (int i = 0; i < n; i++) {
		const char *p[3] = { group, ids[i], reason ? reason : "" };
		PGresult *r = q(sql, 3, p);

		if (!r) {
			rc = 1;
		} else if (strcmp(PQcmdTuples(r), "1") != 0) {
			fprintf(stderr, "pin-host: %s: no pending dead letter %s\n", group, ids[i]);
			rc = 1;
		} else {
			printf("acked %s\n", ids[i]);
		}
	}
	return rc;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	int *st = m->_private;

	(void)rk;
	(void)opaque;
	if (st)
		*st = m->err ? 2 : 1;
}

static rd_kafka_t *producer(void)
{
	char err[512];
	rd_kafka_conf_t *conf = pin_kafka_conf_new("pin-dlq-replay", err, sizeof(err));
	rd_kafka_t *p;

	if (!conf || pin_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) ||
	    pin_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
	    pin_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err)) ||
	    pin_kafka_conf_set(conf, "message.timeout.ms", "15000", err, sizeof(err))) {
		if (conf)
			rd_kafka_conf_destroy(conf);
		fprintf(stderr, "pin-host: kafka: %s\n", err);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!p) {
		rd_kafka_conf_destroy(conf);
		fprintf(stderr, "pin-host: kafka: %s\n", err);
	}
	return p;
}

/* the row's headers (jsonb text) into a librdkafka header list */
static rd_kafka_headers_t *headers_of(const char *text)
{
	json_object *a = json_tokener_parse(text), *h, *v;
	rd_kafka_headers_t *hs = rd_kafka_headers_new(8);
	size_t n = a && json_object_is_type(a, json_type_array) ?
		json_object_array_length(a) : 0;

	for (size_t i = 0; i < n; i++) {
		const char *name;

		h = json_object_array_get_idx(a, i);
		if (!json_object_object_get_ex(h, "name", &v))
			continue;
		name = json_object_get_string(v);
		if (json_object_object_get_ex(h, "value", &v)) {
			rd_kafka_header_add(hs, name, -1, json_object_get_string(v),
				json_object_get_string_len(v));
		} else if (json_object_object_get_ex(h, "hex", &v)) {
			size_t len = 0;
			char *b = unhex(json_object_get_string(v), &len);

			rd_kafka_header_add(hs, name, -1, b, (ssize_t)len);
			free(b);
		} else {
			rd_kafka_header_add(hs, name, -1, NULL, 0);
		}
	}
	json_object_put(a);
	return hs;
}

/* one: lock the pending row, produce, await the ack, mark it, commit */
static int replay_one(rd_kafka_t *p, const char *group, const char *id)
{
	char sql[700];
	const char *prm[2] = { group, id };
	PGresult *r;
	volatile int st = 0;
	char *key = NULL, *val = NULL;
	size_t klen = 0, vlen = 0;
	rd_kafka_resp_err_t e;
	int rc = 1;

	if (pin_db_begin() != 0) {
		fprintf(stderr, "pin-host: database unreachable (pg_dsn)\n");
		return 1;
	}
	snprintf(sql, sizeof(sql), "%s AND handled_at IS NULL FOR UPDATE", row_sql());
	if (!(r = q(sql, 2, prm)))
		goto out;
	if (PQntuples(r) != 1) {
		fprintf(stderr, "pin-host: %s: no pending dead letter %s\n", group, id);
		goto out;
	}
	if (!PQgetisnull(r, 0, 4))
		key = unhex(PQgetvalue(r, 0, 4), &klen);
	if (!PQgetisnull(r, 0, 6))
		val = unhex(PQgetvalue(r, 0, 6), &vlen);
	e = rd_kafka_producev(p,
			RD_KAFKA_V_TOPIC(PQgetvalue(r, 0, 1)),
			RD_KAFKA_V_KEY(key, klen),
			RD_KAFKA_V_VALUE(val, vlen),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_HEADERS(headers_of(PQgetvalue(r, 0, 5))),
			RD_KAFKA_V_OPAQUE((void *)&st),
			RD_KAFKA_V_END);
	if (e) {
		fprintf(stderr, "pin-host: %s: produce %s: %s\n", group, id, rd_kafka_err2str(e));
		goto out;
	}
	rd_kafka_flush(p, 20000);
	if (st != 1) {
		fprintf(stderr, "pin-host: %s: %s not acknowledged by the broker\n", group, id);
		goto out;
	}
	snprintf(sql, sizeof(sql), "UPDATE %s SET handled_at = now(), handled_how ="
		" 'replayed' WHERE consumer_group = $1 AND id = $2::bigint", table);
	if (!q(sql, 2, prm) || pin_db_commit() != 0) {
		fprintf(stderr, "pin-host: %s: %s was replayed but could not be marked;"
			" replay it again (the inbox drops a copy that was applied)\n",
			group, id);
		goto out;
	}
	printf("replayed %s to %s\n", id, PQgetvalue(r, 0, 1));
	rc = 0;
out:
	if (pin_db_in_tx())
		pin_db_rollback();
	free(key);
	free(val);
	return rc;
}

static int replay(const char *group, int n, char **ids)
{
	rd_kafka_t *p = producer();
	int rc = 0;

	if (!p)
		return 1;
	for (int i = 0; i < n; i++)
		rc |= replay_one(p, group, ids[i]);
	rd_kafka_destroy(p);
	return rc;
}

int pin_dlq_main(const char *cmd, int argc, char **argv, const char *reason)
{
	bool need_ids = strcmp(cmd, "list") != 0;
	int n = argc - 1;
	char **ids;

	if ((strcmp(cmd, "list") && strcmp(cmd, "show") && strcmp(cmd, "replay") &&
	     strcmp(cmd, "ack")) || (need_ids && argc < 2) || (!need_ids && argc > 1)) {
		usage();
		return 2;
	}
	if (pin_plugins_load(pin_config_str("plugins"), pin_config_str("plugin_dir")) < 0)
		return 2;
	if (!strcmp(cmd, "list") && argc == 0)
		return list_groups();
	if (!group_table(argv[0]))
		return 2;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "all") && strspn(argv[i], "0123456789") != strlen(argv[i])) {
			fprintf(stderr, "pin-host: %s is no dead-letter id (list shows them)\n",
				argv[i]);
			return 2;
		}
	if (!strcmp(cmd, "list"))
		return list(argv[0]);
	if (!(ids = pending_ids(argv[0], &n, argv + 1)))
		return 1;
	if (!strcmp(cmd, "show"))
		return show(argv[0], n, ids);
	if (!strcmp(cmd, "replay"))
		return replay(argv[0], n, ids);
	return ack(argv[0], n, ids, reason);
}
