/* abi.c -- the host services table handed to plugins (the ABI's pin_host_api):
 * binds the core, the API side and the worker side into what plugins call. */
#include "config.h"
#include <stdarg.h>
#include <stdio.h>
#include "core.h"
#include "api.h"
#include "worker.h"

static void api_log(int level, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	pin_logv(level, msg, ap);
	va_end(ap);
}

static int api_config_bool(const char *key)
{
	return pin_config_bool(key) ? 1 : 0;
}

static char *api_sprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	p = pin_arena_alloc((size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

const struct pin_host_api pin_api = {
	.size = sizeof(struct pin_host_api),
	.abi_major = PIN_ABI_MAJOR,
	.abi_minor = PIN_ABI_MINOR,
	.log = api_log,
	.now_us = pin_clock_now_us,
	.fmt_time = pin_clock_fmt,
	.parse_time = pin_clock_parse,
	.uuid_v7 = pin_uuid_v7,
	.is_uuid = pin_uuid_valid,
	.config_get = pin_config_get,
	.config_int = pin_config_int_def,
	.alloc = pin_arena_alloc,
	.strdup = pin_arena_strdup,
	.sprintf = api_sprintf,
	.db = pin_db_conn,
	.db_exec = pin_db_exec,
	.db_exec_prepared = pin_db_exec_prepared,
	.db_begin = pin_db_begin,
	.db_commit = pin_db_commit,
	.db_rollback = pin_db_rollback,
	.db_sqlstate = pin_db_sqlstate,
	.db_constraint = pin_db_constraint,
	.outbox_put = pin_outbox_put,
	.req_method = pin_req_method,
	.req_path = pin_req_path,
	.req_param = pin_req_param,
	.req_query = pin_req_query,
	.req_header = pin_req_header,
	.req_body = pin_req_body,
	.req_principal = pin_req_principal,
	.req_trace_id = pin_req_trace_id,
	.respond_json = pin_respond_json,
	.set_header = pin_set_header,
	.respond_problem = pin_respond_problem,
	.metric_add = pin_metric_add,
	.metric_set = pin_metric_set,
	.outbox_put_to = pin_outbox_put_to,
	.metric_observe = pin_metric_observe,
	/* 1.4 (reminders) */
	.outbox_put_many = pin_outbox_put_many,
	/* 1.5 (reads) */
	.db_exec_prepared_bin = pin_db_exec_prepared_bin,
	/* 1.5 (reminders) */
	.run_shards = pin_jobs_run_shards,
	.respond_json_text = pin_respond_json_text,
	/* 1.7 (declared configuration) */
	.config_str = pin_config_str,
	.config_num = pin_config_int,
	.config_bool = api_config_bool,
	/* 1.9 (non-JSON responses) */
	.respond_body = pin_respond_body,
};
