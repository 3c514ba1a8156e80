/* json.c -- JSON parsing, JSON string quoting, problem+json bodies, URL
 * decoding. */
#include "config.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

#define MAX_DEPTH 32

/* NaN and Infinity are not JSON (json-c takes them even in strict mode),
 * nor is 1e999 a number a handler can use */
static bool finite_numbers(json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_double:
		return isfinite(json_object_get_double(o));
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (!finite_numbers(json_object_array_get_idx(o, i)))
				return false;
		return true;
	case json_type_object: {
		json_object_object_foreach(o, k, v) {
			(void)k;
			if (!finite_numbers(v))
				return false;
		}
		return true;
	}
	default:
		return true;
	}
}

/* s as a JSON string, escaped as json-c's json_escape_str with
 * JSON_C_TO_STRING_NOSLASHESCAPE (the flags of every text the host writes):
 * " \ and \b \f \n \r \t by name, the other bytes below 0x20 as \u00xx
 * (lower-case hex), every other byte as it is.  o has room for
 * PIN_JSON_QUOTED_MAX(strlen(s)) bytes; returns the end (not terminated). */
char *pin_json_quote(char *o, const char *s)
{
	static const char hx[] = "0123456789abcdef";

	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e;

		switch (*p) {
		case '"': e = '"'; break;
		case '\\': e = '\\'; break;
		case '\b': e = 'b'; break;
		case '\f': e = 'f'; break;
		case '\n': e = 'n'; break;
		case '\r': e = 'r'; break;
		case '\t': e = 't'; break;
		default:
			if (*p >= 0x20) {
				*o++ = (char)*p;
				continue;
			}
			memcpy(o, "\\u00", 4);
			o[4] = hx[*p >> 4];
			o[5] = hx[*p & 15];
			o += 6;
			continue;
		}
		*o++ = '\\';
		*o++ = e;
	}
	*o++ = '"';
	return o;
}

static int hexval(int c);

/* the value of 4 hex digits at buf[i], -1 if they are not 4 hex digits */
static long u4(const char *buf, size_t len, size_t i)
{
	long v = 0;

	if (i + 4 > len)
		return -1;
	for (size_t k = i; k < i + 4; k++) {
		int h = hexval((unsigned char)buf[k]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

json_object *pin_json_parse(const char *buf, size_t len, char *err, size_t errlen)
{
	struct json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
	json_object *o = NULL;
	enum json_tokener_error e;
	size_t end;

	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	/* What json-c 0.16 accepts even in strict mode: 'single quoted' strings,
	 * raw control characters inside strings (RFC 8259 wants them escaped),
	 * and unpaired UTF-16 surrogate escapes (silently made U+FFFD). */
	for (size_t i = 0, in = 0; i < len; i++) {
		if (in) {
			if ((unsigned char)buf[i] < 0x20) {
				snprintf(err, errlen, "invalid JSON: a control character in a string");
				goto out;
			} else if (buf[i] == '\\' && i + 1 < len && buf[i + 1] == 'u') {
				long u = u4(buf, len, i + 2);

				if (u >= 0xDC00 && u <= 0xDFFF) {
					snprintf(err, errlen, "invalid JSON: an unpaired surrogate escape");
					goto out;
				}
				if (u >= 0xD800 && u <= 0xDBFF) {
					long lo = i + 7 < len && buf[i + 6] == '\\' && buf[i + 7] == 'u'
						? u4(buf, len, i + 8) : -1;

					if (lo < 0xDC00 || lo > 0xDFFF) {
						snprintf(err, errlen, "invalid JSON: an unpaired surrogate escape");
						goto out;
					}
					i += 6;   /* the low half is checked here */
				}
				i += u < 0 ? 1 : 5;   /* past u and the 4 digits (bad ones: json-c says) */
			} else if (buf[i] == '\\') {
				i++;
			} else if (buf[i] == '"') {
				in = 0;
			}
		} else if (buf[i] == '"') {
			in = 1;
		} else if (buf[i] == '\'') {
			snprintf(err, errlen, "invalid JSON: single-quoted string");
			goto out;
		}
	}
	if (len > (size_t)INT32_MAX) {
		snprintf(err, errlen, "body too large");
		goto out;
	}
	o = json_tokener_parse_ex(tok, buf, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (!o && e == json_tokener_continue) {
		/* a number at the very end ("1", "[1]1" is not) completes only
		 * at a terminator: tell the tokener the input ended */
		o = json_tokener_parse_ex(tok, "", 1);
		e = json_tokener_get_error(tok);
		end = len;
	}
	if (!o || e != json_tokener_success) {
		if (!o && e == json_tokener_success)
			snprintf(err, errlen, "invalid JSON: the body is null");
		else if (e == json_tokener_continue)
			snprintf(err, errlen, "truncated JSON");
		else
			snprintf(err, errlen, "invalid JSON: %s",
				json_tokener_error_desc(e));
		json_object_put(o);
		o = NULL;
		goto out;
	}
	/* only whitespace may follow the value */
	for (size_t i = end; i < len; i++)
		if (!isspace((unsigned char)buf[i])) {
			snprintf(err, errlen, "invalid JSON: trailing characters");
			json_object_put(o);
			o = NULL;
			goto out;
		}
	if (!finite_numbers(o)) {
		snprintf(err, errlen, "invalid JSON: NaN, Infinity or a number out of range");
		json_object_put(o);
		o = NULL;
	}
out:
	json_tokener_free(tok);
	return o;
}

const char *pin_status_title(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default:  return status < 400 ? "OK" : status < 500 ? "Client Error" :
			"Server Error";
	}
}

char *pin_problem_body(int status, const char *code, const char *detail,
		const char *trace_id, json_object *errors)
{
	json_object *o = json_object_new_object();
	char type[160];
	char *s;

	snprintf(type, sizeof type, "https://pin.example/problems/%s", code ? code : "ERROR");
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "title", json_object_new_string(pin_status_title(status)));
	json_object_object_add(o, "status", json_object_new_int(status));
	json_object_object_add(o, "detail", json_object_new_string(detail ? detail : ""));
	json_object_object_add(o, "code", json_object_new_string(code ? code : "ERROR"));
	json_object_object_add(o, "traceId",
		trace_id ? json_object_new_string(trace_id) : NULL);
	if (errors)
		json_object_object_add(o, "errors", json_object_get(errors));
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static char *url_decode(const char *src, size_t len, bool plus_is_space)
{
	char *out = malloc(len + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '%') {
			int h, l;
			if (i + 2 >= len)
				goto bad;
			h = hexval((unsigned char)src[i + 1]);
			l = hexval((unsigned char)src[i + 2]);
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				goto bad;
			*o++ = (char)(h * 16 + l);
			i += 2;
		} else if (src[i] == '+' && plus_is_space) {
			*o++ = ' ';
		} else {
			*o++ = src[i];
		}
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

char *pin_url_decode(const char *src, size_t len)
{
	return url_decode(src, len, true);
}

char *pin_url_decode_path(const char *src, size_t len)
{
	return url_decode(src, len, false);
}
