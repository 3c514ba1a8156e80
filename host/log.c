/* log.c -- one JSON object per line on stderr (with the trace id of
 * trace.c). */
#include "config.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "host.h"

static int min_level = PIN_LOG_INFO;
static const char *level_name[] = { "debug", "info", "warn", "error" };

void pin_log_set_level(int level)
{
	min_level = level;
}

void pin_logv(int level, const char *msg, va_list ap)
{
	char ts[40];
	json_object *o;
	const char *k, *v, *trace;

	if (level < min_level)
		return;
	if (level < PIN_LOG_DEBUG || level > PIN_LOG_ERROR)
		level = PIN_LOG_ERROR;
	o = json_object_new_object();
	json_object_object_add(o, "ts",
		json_object_new_string(pin_clock_fmt(pin_clock_now_us(), ts, sizeof ts)));
	json_object_object_add(o, "level", json_object_new_string(level_name[level]));
	json_object_object_add(o, "msg", json_object_new_string(msg ? msg : ""));
	trace = pin_trace_get();
	if (trace)
		json_object_object_add(o, "traceId", json_object_new_string(trace));
	while ((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
	}
	flockfile(stderr);
	fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE), stderr);
	fputc('\n', stderr);
	fflush(stderr);
	funlockfile(stderr);
	json_object_put(o);
}

void pin_log(int level, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	pin_logv(level, msg, ap);
	va_end(ap);
}
