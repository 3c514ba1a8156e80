/* fuzz_json.c -- pin_json_parse on arbitrary bytes, read through an exact-size
 * buffer (ASan sees any read past len).  Properties: an error always comes
 * with a message; a parsed value serialises and parses back. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

#define MAX_LEN (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[160], err2[160];
	char *buf;
	json_object *o, *o2;
	const char *s;

	if (size > MAX_LEN)
		return 0;
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	err[0] = '\0';
	o = pin_json_parse(buf, size, err, sizeof err);
	if (!o) {
		FUZZ_CHECK(err[0] != '\0', "NULL without an error message");
		FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL, "unterminated err");
	} else {
		s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
		o2 = pin_json_parse(s, strlen(s), err2, sizeof err2);
		FUZZ_CHECK(o2 != NULL, "re-parse of %s failed: %s", s, err2);
		FUZZ_CHECK(json_object_equal(o, o2), "round trip changed %s", s);
		json_object_put(o2);
		json_object_put(o);
	}
	free(buf);
	return 0;
}
