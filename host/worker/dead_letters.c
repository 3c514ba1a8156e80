/*
 * dead_letters.c -- the record of the dead letters (issue 30): a row in
 * <schema>.dead_letters per message a consumer group sends to its DLQ topic
 * (sql/calendar/0690_dead_letters.sql; <schema> is the schema of the
 * group's inbox table), and the gauge pin_dlq_pending{group} of the rows
 * not yet handled (pin-host --dlq replay|ack handles them, dlq_tool.c).
 *
 * The row is written before the DLQ produce and the offset commit, as one
 * statement idempotent per (group, topic, partition, offset): a crash
 * between the row and the commit redelivers the message, which is
 * dead-lettered again onto the same row.  A message dead-lettered again after
 * an operator handled it (offsets reset) is pending again.  A topic deleted
 * and created again starts its offsets at 0, so another message can die at
 * the coordinates of a recorded one: the row then takes the new message
 * (key, headers, payload, error, dead_at now) and is pending, so the tool
 * replays what is in the topic today.  When the row it replaces was still
 * pending, that older dead letter leaves the table (it is still in the
 * group's DLQ topic) and the host logs a warning with the row's id: the
 * pending count stays where it was.  (Before, the row kept the older
 * payload under the new error, and nothing was said.)  A failed write
 * is an infrastructure failure: the message is held and retried, so every
 * dead letter has its row.  Handled rows are deleted after
 * dlq_handled_retention_days (90).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

/* how often the consumer thread counts its group's pending dead letters */
#define PENDING_EVERY_US 5000000

/* <schema>.dead_letters from the inbox table's schema */
void cons_dead_letters_init(struct cons *c, const char *inbox)
{
	const char *dot = strchr(inbox, '.');
	int n = dot ? (int)(dot - inbox) : (int)strlen("calendar");

	snprintf(c->dl_table, sizeof(c->dl_table), "%.*s.dead_letters", n,
			dot ? inbox : "calendar");
	pin_metric_set("pin_dlq_pending", c->labels, 0);
}

static char hexd(unsigned v)
{
	return "0123456789abcdef"[v & 15];
}

/* the message's headers as the JSON array of the table (malloc'd) */
static char *headers_json(const rd_kafka_message_t *m)
{
	rd_kafka_headers_t *hdrs = NULL;
	json_object *a = json_object_new_array();
	const char *name;
	const void *val;
	size_t len;
	char *out;

	if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
		for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val, &len) ==
				RD_KAFKA_RESP_ERR_NO_ERROR; i++) {
			json_object *h = json_object_new_object();

			json_object_object_add(h, "name", json_object_new_string(name));
			if (val && pin_utf8_valid(val, len) && !memchr(val, 0, len)) {
				json_object_object_add(h, "value",
						json_object_new_string_len(val, (int)len));
			} else if (val) {
				char *x = malloc(len * 2 + 1);

				for (size_t k = 0; x && k < len; k++) {
					x[2 * k] = hexd(((const unsigned char *)val)[k] >> 4);
					x[2 * k + 1] = hexd(((const unsigned char *)val)[k]);
				}
				if (x) {
					x[len * 2] = '\0';
					json_object_object_add(h, "hex", json_object_new_string(x));
				}
				free(x);
			}
			json_object_array_add(a, h);
		}
	out = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
	json_object_put(a);
	return out;
}

int cons_dead_letter_record(struct cons *c, const rd_kafka_message_t *m,
		const char *code, const char *detail)
{
	char sql[2048], part[16], off[24];
	char *hj = headers_json(m);
	const char *p[9];
	int lens[9] = { 0 }, fmts[9] = { 0 };
	PGresult *r;
	int rc;

	if (!hj)
		return -1;
	snprintf(sql, sizeof(sql),
			"WITH old AS (SELECT id, handled_at IS NULL AND (payload IS DISTINCT FROM"
			" $7::bytea OR msg_key IS DISTINCT FROM $5::bytea) AS replaced FROM %s"
			" WHERE consumer_group = $1 AND topic = $2 AND kafka_partition = $3::int"
			" AND kafka_offset = $4::bigint) "
			"INSERT INTO %s AS d (consumer_group, topic, kafka_partition,"
			" kafka_offset, msg_key, headers, payload, error_code, error_detail,"
			" dead_at) VALUES ($1, $2, $3::int, $4::bigint, $5::bytea, $6::jsonb,"
			" $7::bytea, $8, $9, now())"
			" ON CONFLICT (consumer_group, topic, kafka_partition, kafka_offset)"
			" DO UPDATE SET msg_key = excluded.msg_key, headers = excluded.headers,"
			" payload = excluded.payload, error_code = excluded.error_code,"
			" error_detail = excluded.error_detail, dead_at = CASE WHEN"
			" d.handled_at IS NULL AND d.payload IS NOT DISTINCT FROM excluded.payload"
			" AND d.msg_key IS NOT DISTINCT FROM excluded.msg_key"
			" THEN d.dead_at ELSE excluded.dead_at END,"
			" handled_at = NULL, handled_how = NULL, handled_note = NULL"
			" RETURNING (SELECT o.id FROM old o WHERE o.replaced)",
			c->dl_table, c->dl_table);
	snprintf(part, sizeof(part), "%" PRId32, m->partition);
	snprintf(off, sizeof(off), "%" PRId64, m->offset);
	p[0] = c->e->c.group;
	p[1] = rd_kafka_topic_name(m->rkt);
	p[2] = part;
	p[3] = off;
	p[4] = m->key;
	lens[4] = (int)m->key_len;
	fmts[4] = 1;
	p[5] = hj;
	p[6] = m->payload ? m->payload : "";
	lens[6] = (int)m->len;
	fmts[6] = 1;
	p[7] = code;
	p[8] = detail ? detail : "";
	if (!m->payload)
		p[6] = NULL;
	r = pin_db_exec_prepared_fmt("pin_dead_letter", sql, 9, p, lens, fmts);
	rc = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? 0 : -1;
	if (!rc && !PQgetisnull(r, 0, 0))
		pin_log(PIN_LOG_WARN, "consumer: a pending dead letter was replaced by another"
				" message dead at its offset (the topic created again?); the older"
				" one is still in the DLQ topic", "group", c->e->c.group, "topic", p[1],
				"partition", part, "offset", off, "id", PQgetvalue(r, 0, 0), NULL);
	if (rc)
		pin_log(PIN_LOG_ERROR, "consumer: cannot record the dead letter",
				"group", c->e->c.group, "table", c->dl_table, "sqlstate",
				pin_db_sqlstate(r), NULL);
	free(hj);
	return rc;
}

/* the bound of the table: the group's rows handled more than
 * dlq_handled_retention_days ago (0: kept), with the count (an index probe of
 * dead_letters_handled; dead letters are rare) */
static void purge_handled(struct cons *c)
{
	char sql[256], days[24];
	const char *p[2] = { c->e->c.group, days };
	long long d = pin_config_int("dlq_handled_retention_days");
	PGresult *r;

	if (d <= 0)
		return;
	snprintf(days, sizeof(days), "%lld", d);
	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE consumer_group = $1 AND"
			" handled_at < now() - make_interval(days => $2::int)", c->dl_table);
	r = pin_db_exec_prepared("pin_dead_letters_purge", sql, 2, p);
	if (r && PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdTuples(r), "0"))
		pin_log(PIN_LOG_INFO, "consumer: handled dead letters purged", "group",
				c->e->c.group, "rows", PQcmdTuples(r), "days", days, NULL);
}

/* pin_dlq_pending{group}: its rows without handled_at, counted every 5 s
 * (and at once after a dead letter) on the consumer's own connection */
void cons_dead_letters_sample(struct cons *c, bool now)
{
	char sql[256];
	PGresult *r;
	const char *p[1] = { c->e->c.group };
	int64_t t = pin_clock_now_us();

	if (!now && t < c->next_pending_us)
		return;
	c->next_pending_us = t + PENDING_EVERY_US;
	if (pin_db_in_tx())
		return;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE consumer_group = $1"
			" AND handled_at IS NULL", c->dl_table);
	r = pin_db_exec_prepared("pin_dead_letters_pending", sql, 1, p);
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		pin_metric_set("pin_dlq_pending", c->labels,
				strtod(PQgetvalue(r, 0, 0), NULL));
	if (!now)
		purge_handled(c);
}
