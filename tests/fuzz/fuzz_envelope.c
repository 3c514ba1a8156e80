/* fuzz_envelope.c -- pin_envelope_parse (the consumer's decode + validate
 * step) on arbitrary bytes.  Properties: it never crashes or leaks; on
 * success the raw value is strict UTF-8, every string of the tree is strict
 * UTF-8 without U+0000, messageId is a uuid and payload an object; on
 * failure the code is INVALID_ENVELOPE or INVALID_PAYLOAD. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pin_msg msg;
	json_object *env = NULL;
	char code[64] = "", detail[256] = "", where[128];
	char *buf;
	int rc;

	if (size > 16 * 1024)
		return 0;
	buf = fuzz_cstr(data, size);
	memset(&msg, 0, sizeof msg);
	rc = pin_envelope_parse(buf, size, &msg, &env, code, sizeof code, detail,
		sizeof detail);
	if (rc == 0) {
		FUZZ_CHECK(env && msg.envelope == env, "no envelope on success");
		FUZZ_CHECK(pin_utf8_valid(buf, size), "accepted bytes that are not UTF-8");
		FUZZ_CHECK(pin_utf8_check_json(env, where, sizeof where) == 0,
			"accepted a bad string at %s", where);
		FUZZ_CHECK(msg.message_id && pin_uuid_valid(msg.message_id),
			"messageId not a uuid");
		FUZZ_CHECK(msg.payload && json_object_is_type(msg.payload, json_type_object),
			"payload not an object");
	} else {
		FUZZ_CHECK(!strcmp(code, "INVALID_ENVELOPE") ||
			!strcmp(code, "INVALID_PAYLOAD"), "code %s", code);
		FUZZ_CHECK(detail[0], "no detail");
	}
	json_object_put(env);
	free(buf);
	return 0;
}
