/* outbox.c -- the transactional outbox writer.  The row keeps the W3C
 * traceparent of the request / job / message that wrote it (the relay
 * sends it as a Kafka header); one INFO line per row with its traceId. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "host.h"

int pin_outbox_put(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id,
		json_object *payload)
{
	return pin_outbox_put_to(NULL, topic, key, event_type, aggregate_type,
			aggregate_id, payload);
}

int pin_outbox_put_to(const char *table, const char *topic, const char *key,
		const char *event_type, const char *aggregate_type,
		const char *aggregate_id, json_object *payload)
{
	char sql[256], stmt[160];
	char mid[37], ts[40];
	json_object *env;
	const char *vals[6];
	PGresult *res;
	int rc = 0;
	int64_t now = pin_clock_now_us();

	if (!topic || !key || !event_type || !payload)
		return PIN_ERR;
	if (!table)
		table = PIN_OUTBOX_DEFAULT;
	if (!pin_outbox_known(table)) {
		pin_log(PIN_LOG_ERROR, "outbox: table not registered", "table", table, NULL);
		return PIN_ERR;
	}
	/* the name is checked at registration ([a-z0-9_.]) */
	snprintf(sql, sizeof sql, "INSERT INTO %s (message_id, topic, key, envelope,"
			" created_at, traceparent) VALUES ($1, $2, $3, $4::jsonb, $5, $6)", table);
	snprintf(stmt, sizeof stmt, "pin_outbox_put:%s", table);
	pin_uuid_v7(mid);
	/* createdAt with millisecond precision, as events.md shows */
	now -= now % 1000;
	pin_clock_fmt(now, ts, sizeof ts);
	if (strlen(ts) == 27)   /* "...SS.mmm000Z" -> "...SS.mmmZ" */
		memmove(ts + 23, ts + 26, 2);
	env = json_object_new_object();
	json_object_object_add(env, "messageId", json_object_new_string(mid));
	json_object_object_add(env, "eventType", json_object_new_string(event_type));
	json_object_object_add(env, "contractVersion", json_object_new_int(1));
	json_object_object_add(env, "createdAt", json_object_new_string(ts));
	json_object_object_add(env, "aggregateType",
		aggregate_type ? json_object_new_string(aggregate_type) : NULL);
	json_object_object_add(env, "aggregateId",
		aggregate_id ? json_object_new_string(aggregate_id) : NULL);
	json_object_object_add(env, "correlationId",
		pin_trace_get() ? json_object_new_string(pin_trace_get()) : NULL);
	json_object_object_add(env, "payload", json_object_get(payload));
	vals[0] = mid;
	vals[1] = topic;
	vals[2] = key;
	vals[3] = json_object_to_json_string_ext(env, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE);
	vals[4] = ts;
	vals[5] = pin_traceparent_get();
	res = pin_db_exec_prepared(stmt, sql, 6, vals);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = PIN_ERR_DB;
	} else {
		pin_metric_add("pin_outbox_written_total", NULL, 1);
		pin_log(PIN_LOG_INFO, "outbox: event recorded", "messageId", mid,
				"topic", topic, "eventType", event_type, NULL);
	}
	json_object_put(env);
	return rc;
}
