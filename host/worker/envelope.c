/* envelope.c -- decoding and validating the events.md envelope of a consumed
 * message, before any handler or database sees it (no Kafka, no database:
 * the fuzz harness links it alone).
 *
 *   INVALID_ENVELOPE  the value is not strict UTF-8 (utf8.c), not a JSON
 *                     object, has no uuid messageId or no payload object;
 *   INVALID_PAYLOAD   a string anywhere in the envelope holds U+0000 (json-c
 *                     would hand the handler a silently truncated string).
 * Both go to the DLQ at once. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "worker.h"

static const char *jstr(json_object *o, const char *k)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* One tokener per thread, reset before each value: a new one per message
 * (its state stack and buffer allocated and freed each time) was ~15 % of
 * the parse of an identity envelope (2.14 against 1.77 us, 2026-12-06).
 * Freed when its thread ends (the consumer threads at a stop). */
static pthread_key_t tok_key;
static pthread_once_t tok_once = PTHREAD_ONCE_INIT;
static bool tok_key_ok;

static void tok_free(void *tok)
{
	json_tokener_free(tok);
}

static void tok_key_init(void)
{
	tok_key_ok = pthread_key_create(&tok_key, tok_free) == 0;
}

/* the thread's tokener, reset; a new one when it has none */
static json_tokener *tok_get(void)
{
	json_tokener *tok = NULL;

	pthread_once(&tok_once, tok_key_init);
	if (tok_key_ok && (tok = pthread_getspecific(tok_key)))
		json_tokener_reset(tok);
	return tok ? tok : json_tokener_new();
}

/* After a value: the tokener stays the thread's only if the value parsed.
 * One that did not may keep state json_tokener_reset() does not clear
 * (json-c 0.16: a pending high surrogate, which would turn the next
 * message's first \u escape into U+FFFD): it goes, the next value gets a
 * new one. */
static void tok_done(json_tokener *tok, bool parsed)
{
	if (tok_key_ok) {
		if (parsed && pthread_setspecific(tok_key, tok) == 0)
			return;
		pthread_setspecific(tok_key, NULL);
	}
	json_tokener_free(tok);
}

static json_object *decode(const char *value, size_t len)
{
	json_tokener *tok;
	json_object *env = NULL;

	if (!len || len > INT32_MAX || !pin_utf8_valid(value, len))
		return NULL;
	tok = tok_get();
	if (!tok)
		return NULL;
	env = json_tokener_parse_ex(tok, value, (int)len);
	if (env && (json_tokener_get_error(tok) != json_tokener_success ||
			!json_object_is_type(env, json_type_object))) {
		json_object_put(env);
		env = NULL;
	}
	tok_done(tok, env != NULL);
	return env;
}

int pin_envelope_parse(const char *value, size_t len, struct pin_msg *msg,
		json_object **env, char *code, size_t codelen, char *detail,
		size_t detlen)
{
	char where[128];
	json_object *v;
	int rc;

	*env = decode(value, len);
	if (!*env) {
		snprintf(detail, detlen, "value is not a UTF-8 JSON object");
		goto invalid;
	}
	/* The strings of the tree come from the value's bytes (strict UTF-8
	 * without U+0000: decode checked them) and its escapes; only a \u
	 * escape can make a U+0000 or a lone surrogate.  Without one the walk
	 * over the tree (a snprintf of the path per key, every string checked
	 * again) cannot find anything. */
	rc = memmem(value, len, "\\u", 2) ? pin_utf8_check_json(*env, where, sizeof where) : 0;
	if (rc == PIN_UTF8_NUL) {
		snprintf(code, codelen, "INVALID_PAYLOAD");
		snprintf(detail, detlen, "U+0000 in a string (%s)", where);
		return -1;
	}
	if (rc) {
		snprintf(detail, detlen, "invalid UTF-8 in a string (%s)", where);
		goto invalid;
	}
	msg->envelope = *env;
	msg->message_id = jstr(*env, "messageId");
	if (!msg->message_id || !pin_uuid_valid(msg->message_id)) {
		msg->message_id = NULL;
		snprintf(detail, detlen, "messageId missing or not a uuid");
		goto invalid;
	}
	if (!json_object_object_get_ex(*env, "payload", &v) ||
			!json_object_is_type(v, json_type_object)) {
		snprintf(detail, detlen, "payload missing or not an object");
		goto invalid;
	}
	msg->payload = v;
	msg->event_type = jstr(*env, "eventType");
	msg->contract_version = 0;
	if (json_object_object_get_ex(*env, "contractVersion", &v) &&
			json_object_is_type(v, json_type_int))
		msg->contract_version = json_object_get_int(v);
	{
		const char *ca = jstr(*env, "createdAt");

		if (!ca || pin_clock_parse(ca, &msg->created_at_us) != 0)
			msg->created_at_us = 0;
	}
	return 0;
invalid:
	snprintf(code, codelen, "INVALID_ENVELOPE");
	return -1;
}
