/* workers.c -- workers.so: polling jobs and CRM/identity consumers. */
#include "config.h"
#include <stdio.h>
#include "common.h"
#include "workers.h"

const struct pin_host_api *wrk_api;

/* ----------------------------------------------------------- consumer helpers */

const char *wrk_jstr(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int wrk_opt_uuid(json_object *o, const char *key, const char **out)
{
	json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	*out = wrk_jstr(o, key);
	return *out && wrk_api->is_uuid(*out) ? 0 : -1;
}

enum pin_consume_status wrk_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg)
{
	snprintf(res->code, sizeof(res->code), "%s", code);
	snprintf(res->detail, sizeof(res->detail), "%s", detail);
	if (log_msg)
		wrk_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
				"topic", msg->topic, "code", res->code, "detail", res->detail,
				NULL);
	return st;
}

void wrk_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric)
{
	if (msg->contract_version == 1)
		return;
	wrk_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
			"topic", msg->topic, NULL);
	wrk_api->metric_add(metric, NULL, 1);
}

/* ---------------------------------------------------------------- batch jobs */

int wrk_batch_size(const char *key, int def)
{
	long long batch = wrk_api->config_int(key, def);

	return batch < 1 || batch > 10000 ? def : (int)batch;
}

int wrk_batch_loop(wrk_batch_fn fn, int64_t now_us, int batch, int max_batches)
{
	int total = 0, n, k;

	for (k = 0; k < max_batches; k++) {
		n = fn(now_us, batch);
		if (n < 0)
			return n;
		total += n;
		if (n < batch)
			break;
	}
	return total;
}

void wrk_set_lag(const char *stmt, const char *sql, int64_t now_us,
		const char *metric, const char *labels)
{
	const char *p[1] = { pc_time_param(now_us) };
	PGresult *res = wrk_api->db_exec_prepared(stmt, sql, 1, p);
	double lag = 0;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
			!PQgetisnull(res, 0, 0))
		lag = (double)(now_us - pc_col_us(res, 0, 0)) / 1e6;
	wrk_api->metric_set(metric, labels, lag);
}

/* ---------------------------------------------------------------------- init */

static int wrk_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	wrk_api = api;
	if (wrk_reminders_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_slots_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_identity_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_appointments_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_crm_booking_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_housekeeping_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_crm_deal_register(reg, err, errlen) < 0)
		return -1;
	return 0;
}

PIN_PLUGIN_DEFINE("workers", PACKAGE_VERSION, wrk_init, NULL)
