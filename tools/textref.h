/* textref.h -- the host's text writers as they were before 2026-12-03 (8aaefb7, caaf548), built
 * on json-c objects and stdio: the reference the unit tests compare the
 * direct writers with (test_log, test_text) and the "before" side of
 * pin-benchtext.  Not linked into the host. */
#ifndef PIN_TEXTREF_H
#define PIN_TEXTREF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <json-c/json.h>

#define REF_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* the log line (with its newline) of log.c before 8aaefb7: a json-c
 * object {ts, level, msg, [traceId], kv...}; kv NULL-terminated pairs, a NULL
 * value is null; ts NULL: null.  malloc'd. */
static inline char *ref_log_text(const char *ts, const char *level, const char *msg,
		const char *trace, const char *const *kv)
{
	json_object *o = json_object_new_object();
	const char *t;
	char *s;
	size_t n;

	json_object_object_add(o, "ts", ts ? json_object_new_string(ts) : NULL);
	json_object_object_add(o, "level", json_object_new_string(level));
	json_object_object_add(o, "msg", json_object_new_string(msg));
	if (trace)
		json_object_object_add(o, "traceId", json_object_new_string(trace));
	for (; *kv; kv += 2)
		json_object_object_add(o, kv[0], kv[1] ? json_object_new_string(kv[1]) : NULL);
	t = json_object_to_json_string_ext(o, REF_FLAGS);
	n = strlen(t);
	if ((s = malloc(n + 2))) {
		memcpy(s, t, n);
		s[n] = '\n';
		s[n + 1] = 0;
	}
	json_object_put(o);
	return s;
}

/* the envelope of outbox.c before caaf548: a json-c object around the
 * payload (borrowed), printed.  malloc'd. */
static inline char *ref_envelope(const char *mid, const char *ts, const char *et,
		const char *at, const char *aid, const char *trace, json_object *payload)
{
	json_object *env = json_object_new_object();
	char *s;

	json_object_object_add(env, "messageId", json_object_new_string(mid));
	json_object_object_add(env, "eventType", json_object_new_string(et));
	json_object_object_add(env, "contractVersion", json_object_new_int(1));
	json_object_object_add(env, "createdAt", json_object_new_string(ts));
	json_object_object_add(env, "aggregateType", at ? json_object_new_string(at) : NULL);
	json_object_object_add(env, "aggregateId", aid ? json_object_new_string(aid) : NULL);
	json_object_object_add(env, "correlationId", trace ? json_object_new_string(trace) : NULL);
	json_object_object_add(env, "payload", json_object_get(payload));
	s = strdup(json_object_to_json_string_ext(env, REF_FLAGS));
	json_object_put(env);
	return s;
}

/* uuid.c's UUIDv7 text before caaf548: one getrandom() and a snprintf */
static inline void ref_uuid_v7(long long ms, char out[37])
{
	unsigned char b[16];

	if (getrandom(b + 6, 10, 0) != 10)
		memset(b + 6, 0, 10);
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)((unsigned long long)ms >> (40 - 8 * i));
	b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
	b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
	snprintf(out, 37,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		b[11], b[12], b[13], b[14], b[15]);
}

#endif
