/* utf8.c -- strict text checks before anything reaches PostgreSQL.
 *
 * json-c's JSON_TOKENER_VALIDATE_UTF8 accepts code points above U+10FFFF
 * (F4 90 80 80), encoded surrogates (ED A0 80) and overlong forms (C0 AF);
 * PostgreSQL refuses them (SQLSTATE 22021).  A JSON "\u0000" becomes a NUL
 * that truncates every C string silently.  Both are caught here, once, for
 * HTTP bodies (fcgi.c) and Kafka envelopes (envelope.c). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "core.h"

/* RFC 3629 section 4 (the UTF8-octets grammar) plus: no U+0000, which no
 * PostgreSQL text value can hold.  Table 3-7 of the Unicode standard:
 *   00..7F | C2..DF 80..BF | E0 A0..BF 80..BF | E1..EC 80..BF 80..BF
 *   | ED 80..9F 80..BF | EE..EF 80..BF 80..BF | F0 90..BF 80..BF 80..BF
 *   | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF */
bool pin_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		unsigned char lo = 0x80, hi = 0xBF;
		size_t n;

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			n = 1;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 2;
			if (c == 0xE0)
				lo = 0xA0;          /* overlong */
			else if (c == 0xED)
				hi = 0x9F;          /* surrogates D800..DFFF */
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 3;
			if (c == 0xF0)
				lo = 0x90;          /* overlong */
			else if (c == 0xF4)
				hi = 0x8F;          /* above U+10FFFF */
		} else {
			return false;           /* 80..C1 (continuation, overlong), F5..FF */
		}
		if (len - i - 1 < n)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t k = 2; k <= n; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xBF)
				return false;
		i += n + 1;
	}
	return true;
}

static void path_index(char *out, size_t outlen, const char *base, size_t i)
{
	snprintf(out, outlen, "%s[%zu]", base, i);
}

static void path_key(char *out, size_t outlen, const char *base, const char *key)
{
	snprintf(out, outlen, "%s%s%s", base, *base ? "." : "", key);
}

static int check(json_object *o, const char *path, char *where, size_t wlen,
		int depth)
{
	char sub[256];
	int rc = 0;

	if (depth > 64)
		return 0;                   /* pin_json_parse caps depth at 32 */
	switch (json_object_get_type(o)) {
	case json_type_string: {
		const char *s = json_object_get_string(o);
		size_t n = (size_t)json_object_get_string_len(o);

		if (strlen(s) != n)
			rc = PIN_UTF8_NUL;
		else if (!pin_utf8_valid(s, n))
			rc = PIN_UTF8_INVALID;
		break;
	}
	case json_type_array:
		for (size_t i = 0; !rc && i < json_object_array_length(o); i++) {
			path_index(sub, sizeof sub, path, i);
			rc = check(json_object_array_get_idx(o, i), sub, where, wlen,
				depth + 1);
			if (rc)
				return rc;
		}
		break;
	case json_type_object: {
		json_object_object_foreach(o, k, v) {
			path_key(sub, sizeof sub, path, k);
			if (!pin_utf8_valid(k, strlen(k))) {
				snprintf(where, wlen, "%s", path);
				return PIN_UTF8_INVALID;
			}
			rc = check(v, sub, where, wlen, depth + 1);
			if (rc)
				return rc;
		}
		break;
	}
	default:
		break;
	}
	if (rc && where && wlen)
		snprintf(where, wlen, "%s", path);
	return rc;
}

int pin_utf8_check_json(json_object *o, char *where, size_t wlen)
{
	if (where && wlen)
		where[0] = '\0';
	return check(o, "", where, wlen, 0);
}
