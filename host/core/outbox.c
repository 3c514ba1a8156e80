/* outbox.c -- the transactional outbox writer.  The row keeps the W3C
 * traceparent of the request / job / message that wrote it (the relay
 * sends it as a Kafka header).  outbox_put writes one row (one INFO line
 * with its traceId); outbox_put_many (ABI 1.4) writes a batch in ONE
 * statement and logs one line for it.  Both build the envelope with
 * pin_envelope_text() and insert with outbox_insert(), the only SQL that
 * writes outbox rows. */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"
#include "pgarr.h"

/* One outbox row, its column values as text (traceparent may be NULL). */
struct ob_row {
	const char *message_id, *topic, *key, *envelope;
};

/* createdAt of the envelope and the row: now with millisecond precision, as
 * events.md shows ("...SS.mmmZ", also on a whole second); ts >= 40 bytes */
static void created_at(char *ts, size_t len)
{
	pin_clock_fmt_ms(pin_clock_now_us(), ts, len);
}

/* The events.md envelope around payload (borrowed), messageId mid, createdAt
 * ts, correlationId the thread's trace id, as text (malloc'd; NULL when out of
 * memory).  Written directly (since 2026-12-03): the fields around the payload are
 * quoted into one buffer and the payload's own json-c text is appended --
 * the bytes json-c printed for an object of the same fields in the same order
 * with JSON_C_TO_STRING_PLAIN | NOSLASHESCAPE, without building that object
 * (eight hash-table inserts and allocations per message); test_text's
 * envelope_text_as_json_c compares the two.  Printing the payload keeps its
 * text in the payload object (json-c's own cache) until the caller frees it. */
char *pin_envelope_text(const char *mid, const char *ts, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload)
{
	const char *trace = pin_trace_get();
	const char *body = json_object_to_json_string_ext(payload, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE);
	const char *vals[6] = { mid, event_type, ts, aggregate_type, aggregate_id, trace };
	static const char *const keys[6] = { "{\"messageId\":", ",\"eventType\":",
		",\"contractVersion\":1,\"createdAt\":", ",\"aggregateType\":",
		",\"aggregateId\":", ",\"correlationId\":" };
	size_t cap;
	char *out, *o;

	if (!body)
		return NULL;
	cap = strlen(body) + 64 + sizeof ",\"payload\":}";
	for (int i = 0; i < 6; i++)
		cap += strlen(keys[i]) + (vals[i] ? PIN_JSON_QUOTED_MAX(strlen(vals[i])) : 4);
	if (!(out = malloc(cap)))
		return NULL;
	o = out;
	for (int i = 0; i < 6; i++) {
		size_t k = strlen(keys[i]);

		memcpy(o, keys[i], k);
		o += k;
		if (vals[i]) {
			o = pin_json_quote(o, vals[i]);
		} else {
			memcpy(o, "null", 4);
			o += 4;
		}
	}
	o += sprintf(o, ",\"payload\":%s}", body);
	return out;
}

/* ---- the INSERT of outbox rows ------------------------------------------ */

/*
 * THE statement that writes outbox rows: n rows into table (registered,
 * checked by the caller), in the caller's transaction.  One row: INSERT ..
 * VALUES (the statement of tests/bench/booking.sql); more: one INSERT ..
 * SELECT FROM unnest() of one array per column, so a batch is one round trip
 * whatever its size.  The column list, their casts and the order are the
 * same for both.  Every row of a call has the same created_at and
 * traceparent (ts, tp: one transaction's write): those two go as single
 * values, not as arrays of n equal strings for PostgreSQL to parse n times
 * (measured 2026-12-01: ~1.75 us per row of a reminder batch).
 * 0 / PIN_ERR_DB (PIN_ERR: out of memory).
 */
#define OB_NCOLS 6
#define OB_NARRAYS 4     /* message_id, topic, key, envelope */
static int outbox_insert(const char *table, const struct ob_row *rows, size_t n,
		const char *ts, const char *tp)
{
	static const char cols[] = "message_id, topic, key, envelope, created_at, traceparent";
	static const char *const casts[OB_NCOLS] = { "uuid", "text", "text", "jsonb",
		"timestamptz", "text" };
	static const int32_t oids[OB_NARRAYS] = { PG_OID_UUID, PG_OID_TEXT, PG_OID_TEXT,
		PG_OID_JSONB };
	char sql[512], stmt[160];
	const char *vals[OB_NCOLS];
	int lens[OB_NCOLS], fmts[OB_NCOLS];
	struct pg_barr arr[OB_NARRAYS];
	PGresult *res;
	int rc = 0;

	vals[4] = ts;
	vals[5] = tp;
	if (n == 1) {
		snprintf(sql, sizeof sql, "INSERT INTO %s (%s) VALUES ($1::%s, $2::%s, $3::%s,"
			" $4::%s, $5::%s, $6::%s)", table, cols, casts[0], casts[1], casts[2],
			casts[3], casts[4], casts[5]);
		snprintf(stmt, sizeof stmt, "pin_outbox_put:%s", table);
		vals[0] = rows[0].message_id;
		vals[1] = rows[0].topic;
		vals[2] = rows[0].key;
		vals[3] = rows[0].envelope;
		res = pin_db_exec_prepared(stmt, sql, OB_NCOLS, vals);
		return res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : PIN_ERR_DB;
	}
	snprintf(sql, sizeof sql, "INSERT INTO %s (%s) SELECT u.*, $5::%s, $6::%s FROM"
		" unnest($1::%s[], $2::%s[], $3::%s[], $4::%s[]) AS u", table, cols, casts[4],
		casts[5], casts[0], casts[1], casts[2], casts[3]);
	snprintf(stmt, sizeof stmt, "pin_outbox_put_many:%s", table);
	memset(arr, 0, sizeof(arr));
	for (int c = 0; c < OB_NARRAYS; c++)
		pg_barr_begin(&arr[c], n, oids[c]);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (pg_barr_elem(&arr[0], rows[i].message_id, PG_OID_UUID) < 0 ||
		    pg_barr_elem(&arr[1], rows[i].topic, PG_OID_TEXT) < 0 ||
		    pg_barr_elem(&arr[2], rows[i].key, PG_OID_TEXT) < 0 ||
		    pg_barr_elem(&arr[3], rows[i].envelope, PG_OID_JSONB) < 0)
			rc = PIN_ERR;   /* a message id that is not a uuid: a bug */
	for (int c = 0; c < OB_NARRAYS; c++) {
		if (arr[c].failed || arr[c].len > INT32_MAX)
			rc = PIN_ERR;
		vals[c] = arr[c].p;
		lens[c] = (int)arr[c].len;
		fmts[c] = 1;
	}
	lens[4] = lens[5] = 0;
	fmts[4] = fmts[5] = 0;
	if (rc == 0) {
		res = pin_db_exec_prepared_fmt(stmt, sql, OB_NCOLS, vals, lens, fmts);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
			rc = PIN_ERR_DB;
	}
	for (int c = 0; c < OB_NARRAYS; c++)
		free(arr[c].p);
	return rc;
}

/* ---- the ABI members ---------------------------------------------------- */

int pin_outbox_put(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id,
		json_object *payload)
{
	return pin_outbox_put_to(NULL, topic, key, event_type, aggregate_type,
			aggregate_id, payload);
}

static bool table_ok(const char **table)
{
	if (!*table)
		*table = PIN_OUTBOX_DEFAULT;
	if (!pin_outbox_known(*table)) {
		pin_log(PIN_LOG_ERROR, "outbox: table not registered", "table", *table, NULL);
		return false;
	}
	return true;   /* the name is checked at registration ([a-z0-9_.]) */
}

int pin_outbox_put_to(const char *table, const char *topic, const char *key,
		const char *event_type, const char *aggregate_type,
		const char *aggregate_id, json_object *payload)
{
	char mid[37], ts[40], *env;
	struct ob_row row;
	int rc;

	if (!topic || !key || !event_type || !payload)
		return PIN_ERR;
	if (!table_ok(&table))
		return PIN_ERR;
	pin_uuid_v7(mid);
	created_at(ts, sizeof ts);
	if (!(env = pin_envelope_text(mid, ts, event_type, aggregate_type, aggregate_id,
			payload)))
		return PIN_ERR;
	row = (struct ob_row){ mid, topic, key, env };
	rc = outbox_insert(table, &row, 1, ts, pin_traceparent_get());
	if (rc == 0) {
		pin_metric_add("pin_outbox_written_total", NULL, 1);
		pin_log(PIN_LOG_INFO, "outbox: event recorded", "messageId", mid,
				"topic", topic, "eventType", event_type, NULL);
	}
	free(env);
	return rc;
}

int pin_outbox_put_many(const char *table, const struct pin_outbox_msg *msgs,
		size_t n, size_t msg_size)
{
	char ts[40], cnt[24];
	char (*mid)[37];
	char **env;
	struct ob_row *rows;
	const char *topic, *event_type, *tp;
	int rc = 0;

	if (n == 0)
		return 0;
	if (!msgs || msg_size < sizeof(struct pin_outbox_msg) || n > (size_t)INT32_MAX)
		return PIN_ERR;
#define MSG(i) ((const struct pin_outbox_msg *)(const void *)((const char *)msgs + (i) * msg_size))
	for (size_t i = 0; i < n; i++)
		if (!MSG(i)->topic || !MSG(i)->key || !MSG(i)->event_type || !MSG(i)->payload)
			return PIN_ERR;
	if (!table_ok(&table))
		return PIN_ERR;
	mid = malloc(n * sizeof *mid);
	env = calloc(n, sizeof *env);
	rows = malloc(n * sizeof *rows);
	if (!mid || !env || !rows) {
		rc = PIN_ERR;
		goto out;
	}
	created_at(ts, sizeof ts);
	tp = pin_traceparent_get();
	topic = MSG(0)->topic;
	event_type = MSG(0)->event_type;
	for (size_t i = 0; i < n; i++) {
		const struct pin_outbox_msg *m = MSG(i);

		pin_uuid_v7(mid[i]);
		env[i] = pin_envelope_text(mid[i], ts, m->event_type, m->aggregate_type,
				m->aggregate_id, m->payload);
		if (!env[i]) {
			rc = PIN_ERR;
			goto out;
		}
		rows[i] = (struct ob_row){ mid[i], m->topic, m->key, env[i] };
		if (strcmp(m->topic, topic) != 0)
			topic = "(several)";
		if (strcmp(m->event_type, event_type) != 0)
			event_type = "(several)";
	}
#undef MSG
	rc = outbox_insert(table, rows, n, ts, tp);
	if (rc == 0) {
		pin_metric_add("pin_outbox_written_total", NULL, (double)n);
		snprintf(cnt, sizeof cnt, "%zu", n);
		pin_log(PIN_LOG_INFO, "outbox: events recorded", "count", cnt,
				"firstMessageId", mid[0], "lastMessageId", mid[n - 1],
				"topic", topic, "eventType", event_type, NULL);
	}
out:
	if (env)
		for (size_t i = 0; i < n; i++)
			free(env[i]);
	free(rows);
	free(env);
	free(mid);
	return rc;
}
