/* harness.c -- helpers for the integration suites; see harness.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* asprintf, strndup */
#endif
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <curl/curl.h>
#include <librdkafka/rdkafka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "harness.h"

/* ------------------------------------------------------------ tracking */

struct h_owned {
	void *p;
	void (*fn)(void *);
};

static struct h_owned *owned;
static size_t nowned, capowned;
static PGconn *pg;

static void *track(void *p, void (*fn)(void *))
{
	if (!p)
		return NULL;
	if (nowned == capowned) {
		size_t cap = capowned ? capowned * 2 : 64;
		struct h_owned *n = realloc(owned, cap * sizeof(*n));

		ck_assert_msg(n != NULL, "out of memory");
		owned = n;
		capowned = cap;
	}
	owned[nowned].p = p;
	owned[nowned].fn = fn;
	nowned++;
	return p;
}

/* Forgets p without freeing it (it was freed by the caller). */
static void untrack(void *p)
{
	for (size_t i = nowned; i-- > 0;)
		if (owned[i].p == p) {
			owned[i] = owned[--nowned];
			return;
		}
}

void h_cleanup(void)
{
	while (nowned > 0) {
		struct h_owned o = owned[--nowned];

		o.fn(o.p);
	}
	free(owned);
	owned = NULL;
	capowned = 0;
	if (pg) {
		PQfinish(pg);
		pg = NULL;
	}
}

static void reap_left_hosts(void);

/* Before each case: the extra hosts a failed case left running (a failed
 * ck_assert ends the case's process before its teardown). */
static void h_setup(void)
{
	reap_left_hosts();
}

TCase *h_tcase(const char *name, int timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, h_setup, h_cleanup);
	tcase_set_timeout(tc, timeout_s > 0 ? timeout_s : 60);
	return tc;
}

/* ------------------------------------------------------------ env, strings */

const char *h_env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "environment variable %s is not set (run ./dev test)", name);
	return v;
}

const char *h_env_opt(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

char *h_strdup(const char *s)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	ck_assert_msg(d != NULL, "out of memory");
	return track(d, free);
}

char *h_sprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	ck_assert_msg(n >= 0, "out of memory");
	return track(s, free);
}

char *h_uuid(void)
{
	unsigned char b[16];

	ck_assert(RAND_bytes(b, sizeof(b)) == 1);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	return h_sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			"%02x%02x%02x%02x%02x%02x",
			b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
			b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

char *h_iso_in(int64_t offset_s)
{
	time_t t = time(NULL) + (time_t)offset_s;
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return h_strdup(buf);
}

char *h_date_in(int days)
{
	char *s = h_iso_in((int64_t)days * 86400);

	s[10] = '\0';                   /* YYYY-MM-DD */
	return s;
}

void h_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int64_t h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ HTTP */

size_t h_curl_write(char *data, size_t size, size_t nmemb, void *ud)
{
	struct h_buf *b = ud;
	size_t len = size * nmemb;
	char *n = realloc(b->p, b->n + len + 1);

	if (!n)
		return 0;
	memcpy(n + b->n, data, len);
	b->n += len;
	n[b->n] = '\0';
	b->p = n;
	return len;
}

static char *header_value(const char *line, size_t len, const char *name)
{
	size_t nl = strlen(name);
	const char *v, *end = line + len;

	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return NULL;
	v = line + nl + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	return strndup(v, (size_t)(end - v));
}

const char *h_header(const struct h_resp *r, const char *name)
{
	size_t nl = strlen(name);

	for (const char *l = r->headers; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
		if (!strncasecmp(l, name, nl) && l[nl] == ':') {
			const char *v = l + nl + 1, *e = strchr(v, '\n');

			while (*v == ' ' || *v == '\t')
				v++;
			char *c = strndup(v, e ? (size_t)(e - v) : strlen(v)), *h;

			ck_assert_msg(c != NULL, "out of memory");
			h = h_strdup(c);
			free(c);
			return h;
		}
	}
	return NULL;
}

static void set_hdr(char **slot, char *v)
{
	if (!v)
		return;
	free(*slot);
	*slot = v;
}

/* Every header of the final response: "name: value" lines (name as sent)
 * kept in r->headers; a status line (an interim 1xx or a redirect's answer
 * before the final one) starts the list again. */
static void keep_header(struct h_resp *r, const char *ptr, size_t len)
{
	size_t n = len, have = r->headers ? strlen(r->headers) : 0;
	char *p;

	while (n && (ptr[n - 1] == '\r' || ptr[n - 1] == '\n'))
		n--;
	if (n >= 5 && !strncmp(ptr, "HTTP/", 5)) {
		free(r->headers);
		r->headers = NULL;
		return;
	}
	if (n == 0 || !memchr(ptr, ':', n))
		return;
	p = realloc(r->headers, have + n + 2);
	if (!p)
		return;
	memcpy(p + have, ptr, n);
	p[have + n] = '\n';
	p[have + n + 1] = '\0';
	r->headers = p;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct h_resp *r = ud;
	size_t len = size * nmemb;

	keep_header(r, ptr, len);
	set_hdr(&r->content_type, header_value(ptr, len, "Content-Type"));
	set_hdr(&r->location, header_value(ptr, len, "Location"));
	set_hdr(&r->etag, header_value(ptr, len, "ETag"));
	set_hdr(&r->retry_after, header_value(ptr, len, "Retry-After"));
	return len;
}

static void resp_destroy(void *p)
{
	struct h_resp *r = p;

	if (!r)
		return;
	free(r->body);
	if (r->json)
		json_object_put(r->json);
	free(r->content_type);
	free(r->location);
	free(r->etag);
	free(r->retry_after);
	free(r->headers);
	free(r);
}

void h_resp_free(struct h_resp *r)
{
	if (!r)
		return;
	untrack(r);
	resp_destroy(r);
}

struct h_resp *h_resp_json(long status, json_object *json)
{
	struct h_resp *r = calloc(1, sizeof(*r));

	ck_assert_msg(r != NULL, "out of memory");
	r->status = status;
	r->json = json;
	r->body = strdup(json ? json_object_to_json_string_ext(json,
			JSON_C_TO_STRING_PLAIN) : "");
	ck_assert_msg(r->body != NULL, "out of memory");
	r->body_len = strlen(r->body);
	return track(r, resp_destroy);
}

/* ---------------------------------------------------- contract recording */
/* PIN_CONTRACT_RECORD_DIR set (./dev test): every HTTP response and every
 * Kafka message the suites see is appended as one JSON line to http.jsonl /
 * kafka.jsonl there; tests/contract/check.mjs validates them against
 * api/openapi.yaml and api/asyncapi.yaml after the run. */
static void contract_record(const char *file, json_object *o)
{
	const char *dir = getenv("PIN_CONTRACT_RECORD_DIR");
	char *path = NULL;
	const char *line;
	int fd;

	if (dir && *dir && asprintf(&path, "%s/%s", dir, file) >= 0) {
		line = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			char *l = NULL;

			if (asprintf(&l, "%s\n", line) >= 0 &&
			    write(fd, l, strlen(l)) < 0)
				fprintf(stderr, "contract record %s: %s\n", path, strerror(errno));
			free(l);
			close(fd);
		}
	}
	free(path);
	json_object_put(o);
}

/* The "name: value" lines of a response as {lower-case name: value}; a
 * name sent twice has its values joined with ", " (RFC 9110 5.3). */
static json_object *headers_json(const char *lines)
{
	json_object *o = json_object_new_object(), *had;
	const char *l = lines, *nl, *colon, *v;

	for (; l && *l; l = nl ? nl + 1 : l + strlen(l)) {
		char name[128];
		size_t i, nlen, vlen;

		nl = strchr(l, '\n');
		colon = memchr(l, ':', nl ? (size_t)(nl - l) : strlen(l));
		if (!colon || (nlen = (size_t)(colon - l)) == 0 || nlen >= sizeof name)
			continue;
		for (i = 0; i < nlen; i++)
			name[i] = (char)tolower((unsigned char)l[i]);
		name[nlen] = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		vlen = nl ? (size_t)(nl - v) : strlen(v);
		while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			vlen--;
		if (json_object_object_get_ex(o, name, &had)) {
			char *j = NULL;

			if (asprintf(&j, "%s, %.*s", json_object_get_string(had), (int)vlen, v) >= 0)
				json_object_object_add(o, name, json_object_new_string(j));
			free(j);
		} else {
			json_object_object_add(o, name, json_object_new_string_len(v, (int)vlen));
		}
	}
	return o;
}

static void contract_record_http(const char *method, const char *path,
		const struct h_resp *r)
{
	json_object *o;

	if (!getenv("PIN_CONTRACT_RECORD_DIR"))
		return;
	o = json_object_new_object();
	json_object_object_add(o, "method", json_object_new_string(method));
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "status", json_object_new_int((int)r->status));
	json_object_object_add(o, "contentType",
		r->content_type ? json_object_new_string(r->content_type) : NULL);
	json_object_object_add(o, "body", json_object_new_string_len(r->body, (int)r->body_len));
	json_object_object_add(o, "headers", headers_json(r->headers));
	contract_record("http.jsonl", o);
}

/* value: the message's exact bytes (len of them; may hold NULs or invalid
 * UTF-8), NULL for a message without a value (a Kafka null value) */
static void contract_record_kafka(const char *source, const char *topic,
		int32_t partition, int64_t offset, const char *key, const void *value,
		size_t len)
{
	json_object *o;

	if (!getenv("PIN_CONTRACT_RECORD_DIR"))
		return;
	o = json_object_new_object();
	json_object_object_add(o, "source", json_object_new_string(source));
	json_object_object_add(o, "topic", json_object_new_string(topic));
	json_object_object_add(o, "partition", json_object_new_int(partition));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "key", key ? json_object_new_string(key) : NULL);
	json_object_object_add(o, "value",
		value ? json_object_new_string_len(value, (int)len) : NULL);
	contract_record("kafka.jsonl", o);
}

char *h_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = '\0';
	fclose(f);
	{
		char *h = h_strdup(buf);

		free(buf);
		return h;
	}
}

char *h_http_raw(const char *request)
{
	const char *base = h_env("PIN_BASE_URL"), *colon = strrchr(base, ':');
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 5 };
	char buf[8192];
	size_t got = 0;
	ssize_t n;
	int fd;

	ck_assert_msg(colon && !strncmp(base, "http://127.0.0.1:", 17), "base %s", base);
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect %s", base);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	ck_assert(write(fd, request, strlen(request)) == (ssize_t)strlen(request));
	while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	return h_strdup(buf);
}

struct h_resp *h_request_opts(const char *method, const char *path,
		const char *token, const struct h_req_opts *o)
{
	static const struct h_req_opts none;
	struct h_resp *r = calloc(1, sizeof(*r));
	struct curl_slist *hl = NULL;
	struct h_buf body = { NULL, 0 };
	char *url = NULL, *auth = NULL, *ct = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *c = curl_easy_init();
	CURLcode rc;

	if (!o)
		o = &none;
	ck_assert_msg(r && c, "out of memory");
	if (asprintf(&url, "%s%s", h_env("PIN_BASE_URL"), path) < 0)
		url = NULL;
	ck_assert(url != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (o->source_ip)
		curl_easy_setopt(c, CURLOPT_INTERFACE, o->source_ip);
	if (token) {
		if (asprintf(&auth, "Authorization: Bearer %s", token) < 0)
			auth = NULL;
		ck_assert(auth != NULL);
		hl = curl_slist_append(hl, auth);
	}
	if (o->body) {
		size_t n = o->body_len ? o->body_len : strlen(o->body);

		if (asprintf(&ct, "Content-Type: %s",
				o->content_type ? o->content_type : "application/json") < 0)
			ct = NULL;
		ck_assert(ct != NULL);
		hl = curl_slist_append(hl, ct);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, o->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
		/* no "Expect: 100-continue" round trip for big bodies */
		hl = curl_slist_append(hl, "Expect:");
	}
	hl = curl_slist_append(hl, "Accept: application/json");
	for (size_t i = 0; o->headers && o->headers[i]; i++)
		hl = curl_slist_append(hl, o->headers[i]);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);

	rc = curl_easy_perform(c);
	ck_assert_msg(rc == CURLE_OK, "%s %s: %s", method, path,
			errbuf[0] ? errbuf : curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	r->body = body.p ? body.p : strdup("");
	r->body_len = body.n;
	if (r->body_len > 0)
		r->json = json_tokener_parse(r->body);
	contract_record_http(method, path, r);

	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(url);
	free(auth);
	free(ct);
	return track(r, resp_destroy);
}

struct h_resp **h_post_all(const char *path, int n, char *const *bodies,
		char *const *tokens, const char *source_ip)
{
	char *url = h_sprintf("%s%s", h_env("PIN_BASE_URL"), path);
	struct h_resp **out = track(calloc((size_t)n, sizeof(*out)), free);
	struct curl_slist **hdr = calloc((size_t)n, sizeof(*hdr));
	struct h_buf *body = calloc((size_t)n, sizeof(*body));
	CURL **eh = calloc((size_t)n, sizeof(*eh));
	CURLM *mh = curl_multi_init();
	int i, running = 0;

	ck_assert_msg(out && hdr && body && eh && mh, "out of memory");
	for (i = 0; i < n; i++) {
		out[i] = calloc(1, sizeof(**out));
		ck_assert(out[i] != NULL);
		hdr[i] = curl_slist_append(NULL, "Content-Type: application/json");
		hdr[i] = curl_slist_append(hdr[i], "Accept: application/json");
		hdr[i] = curl_slist_append(hdr[i], "Expect:");
		if (tokens[i])
			hdr[i] = curl_slist_append(hdr[i],
					h_sprintf("Authorization: Bearer %s", tokens[i]));
		eh[i] = curl_easy_init();
		ck_assert(eh[i] != NULL);
		curl_easy_setopt(eh[i], CURLOPT_URL, url);
		curl_easy_setopt(eh[i], CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(eh[i], CURLOPT_POSTFIELDS, bodies[i]);
		curl_easy_setopt(eh[i], CURLOPT_HTTPHEADER, hdr[i]);
		curl_easy_setopt(eh[i], CURLOPT_WRITEFUNCTION, h_curl_write);
		curl_easy_setopt(eh[i], CURLOPT_WRITEDATA, &body[i]);
		curl_easy_setopt(eh[i], CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(eh[i], CURLOPT_HEADERDATA, out[i]);
		if (source_ip)
			curl_easy_setopt(eh[i], CURLOPT_INTERFACE, source_ip);
		curl_easy_setopt(eh[i], CURLOPT_TIMEOUT, 60L);
		curl_easy_setopt(eh[i], CURLOPT_FORBID_REUSE, 1L);
		curl_multi_add_handle(mh, eh[i]);
	}
	do {
		curl_multi_perform(mh, &running);
		if (running)
			curl_multi_poll(mh, NULL, 0, 1000, NULL);
	} while (running);
	for (i = 0; i < n; i++) {
		struct h_resp *r = out[i];

		curl_easy_getinfo(eh[i], CURLINFO_RESPONSE_CODE, &r->status);
		r->body = body[i].p ? body[i].p : strdup("");
		r->body_len = body[i].n;
		if (r->body_len > 0)
			r->json = json_tokener_parse(r->body);
		contract_record_http("POST", path, r);
		track(r, resp_destroy);
		curl_multi_remove_handle(mh, eh[i]);
		curl_easy_cleanup(eh[i]);
		curl_slist_free_all(hdr[i]);
	}
	curl_multi_cleanup(mh);
	free(eh);
	free(body);
	free(hdr);
	return out;
}

/* Copies the const char * arguments of ap up to the NULL into out (at most
 * max of them) and ends out with NULL (out holds max + 1). */
static void va_strings(const char **out, size_t max, va_list ap)
{
	size_t n = 0;
	const char *s;

	while ((s = va_arg(ap, const char *)) != NULL && n < max)
		out[n++] = s;
	out[n] = NULL;
}

struct h_resp *h_request_(const char *method, const char *path, const char *token,
		const char *json_body, ...)
{
	const char *hdrs[33];
	struct h_req_opts o = { 0 };
	va_list ap;

	va_start(ap, json_body);
	va_strings(hdrs, 32, ap);
	va_end(ap);
	o.body = json_body;
	o.headers = hdrs;
	return h_request_opts(method, path, token, &o);
}

json_object *h_jget(json_object *o, const char *key)
{
	json_object *v = NULL;

	if (!o || !json_object_is_type(o, json_type_object))
		return NULL;
	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

const char *h_jstr(json_object *o, const char *key)
{
	json_object *v = h_jget(o, key);

	return v && json_object_is_type(v, json_type_string) ?
		json_object_get_string(v) : NULL;
}

void h_assert_problem(const struct h_resp *r, long status, const char *code)
{
	const char *got;

	ck_assert_msg(r->status == status, "status %ld, want %ld; body: %.300s",
			r->status, status, r->body);
	ck_assert_msg(r->content_type &&
			!strncmp(r->content_type, "application/problem+json", 24),
			"content type %s, want application/problem+json",
			r->content_type ? r->content_type : "(none)");
	ck_assert_msg(r->json != NULL, "body is not JSON: %.300s", r->body);
	got = h_jstr(r->json, "code");
	ck_assert_msg(got && !strcmp(got, code), "code %s, want %s; body: %.300s",
			got ? got : "(none)", code, r->body);
}

void h_assert_error_fields_(const struct h_resp *r, ...)
{
	json_object *errs = h_jget(r->json, "errors");
	size_t n = errs ? json_object_array_length(errs) : 0, want = 0;
	const char *f;
	va_list ap;

	ck_assert_msg(errs && json_object_is_type(errs, json_type_array) && n > 0,
			"no errors[]: %.300s", r->body);
	va_start(ap, r);
	while ((f = va_arg(ap, const char *)) != NULL) {
		int found = 0;

		for (size_t i = 0; i < n; i++) {
			const char *g = h_jstr(json_object_array_get_idx(errs, i), "field");

			found |= g && !strcmp(g, f);
		}
		ck_assert_msg(found, "no error on %s: %.300s", f, r->body);
		want++;
	}
	va_end(ap);
	ck_assert_msg(n == want, "%zu errors, want %zu: %.300s", n, want, r->body);
}

/* ------------------------------------------------------------ JWT */

static char *b64url(const unsigned char *in, size_t n)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *out = malloc(n * 4 / 3 + 4), *p = out;
	size_t i;

	ck_assert(out != NULL);
	for (i = 0; i + 2 < n; i += 3) {
		*p++ = tbl[in[i] >> 2];
		*p++ = tbl[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		*p++ = tbl[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
		*p++ = tbl[in[i + 2] & 63];
	}
	if (n - i == 1) {
		*p++ = tbl[in[i] >> 2];
		*p++ = tbl[(in[i] & 3) << 4];
	} else if (n - i == 2) {
		*p++ = tbl[in[i] >> 2];
		*p++ = tbl[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		*p++ = tbl[(in[i + 1] & 15) << 2];
	}
	*p = '\0';
	return out;
}

/* Reads the secret file (trailing whitespace stripped); harness-owned. */
static char *read_secret(void)
{
	const char *path = h_env("PIN_JWT_SECRET_FILE");
	char buf[4096];
	size_t n;
	FILE *f = fopen(path, "r");

	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
			buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	return h_strdup(buf);
}

struct h_agent h_agent_new(const char *tenant, const char *extra_perm)
{
	struct h_agent a;

	a.id = h_uuid();
	a.tenant = tenant ? h_strdup(tenant) : h_uuid();
	a.token = h_token("agent", a.id, a.tenant, "calendar.slots.manage",
			"calendar.appointments.view", "calendar.appointments.decide",
			extra_perm);
	return a;
}

char *h_token_opts(const struct h_token_opts *o)
{
	json_object *hdr = json_object_new_object();
	json_object *pl = json_object_new_object();
	json_object *perms = json_object_new_array();
	const char *secret = o->secret ? o->secret : read_secret();
	int64_t now = (int64_t)time(NULL);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	char *h64, *p64, *s64, *signing, *tok;
	const char *js;

	json_object_object_add(hdr, "alg", json_object_new_string("HS256"));
	json_object_object_add(hdr, "typ", json_object_new_string("JWT"));
	json_object_object_add(pl, "iss", json_object_new_string(o->iss ? o->iss : "pin-dev"));
	json_object_object_add(pl, "aud", json_object_new_string(o->aud ? o->aud : "pin-calendar"));
	if (o->sub)
		json_object_object_add(pl, "sub", json_object_new_string(o->sub));
	if (o->actor)
		json_object_object_add(pl, "actor", json_object_new_string(o->actor));
	if (o->tenant)
		json_object_object_add(pl, "tenant_id", json_object_new_string(o->tenant));
	for (size_t i = 0; o->perms && o->perms[i]; i++)
		json_object_array_add(perms, json_object_new_string(o->perms[i]));
	json_object_object_add(pl, "permissions", perms);
	json_object_object_add(pl, "iat", json_object_new_int64(now));
	if (!o->no_exp)
		json_object_object_add(pl, "exp",
				json_object_new_int64(now + (o->exp_in_s ? o->exp_in_s : 3600)));
	if (o->nbf_in_s)
		json_object_object_add(pl, "nbf", json_object_new_int64(now + o->nbf_in_s));

	js = json_object_to_json_string_ext(hdr, JSON_C_TO_STRING_PLAIN);
	h64 = b64url((const unsigned char *)js, strlen(js));
	js = json_object_to_json_string_ext(pl, JSON_C_TO_STRING_PLAIN);
	p64 = b64url((const unsigned char *)js, strlen(js));
	ck_assert(asprintf(&signing, "%s.%s", h64, p64) > 0);
	ck_assert(HMAC(EVP_sha256(), secret, (int)strlen(secret),
			(const unsigned char *)signing, strlen(signing), mac, &maclen) != NULL);
	s64 = b64url(mac, maclen);
	tok = h_sprintf("%s.%s", signing, s64);

	free(h64);
	free(p64);
	free(s64);
	free(signing);
	json_object_put(hdr);
	json_object_put(pl);
	return tok;
}

char *h_token_(const char *actor, const char *sub, const char *tenant, ...)
{
	const char *perms[65];
	struct h_token_opts o = { 0 };
	va_list ap;

	va_start(ap, tenant);
	va_strings(perms, 64, ap);
	va_end(ap);
	o.actor = actor;
	o.sub = sub;
	o.tenant = tenant;
	o.perms = perms;
	return h_token_opts(&o);
}

/* ------------------------------------------------------------ PostgreSQL */

static void pg_quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;      /* NOTICEs ("... already exists, skipping") are noise */
}

PGconn *h_pg(void)
{
	if (pg && PQstatus(pg) != CONNECTION_OK) {
		PQfinish(pg);
		pg = NULL;
	}
	if (!pg) {
		pg = PQconnectdb(h_env("PIN_PG_DSN"));
		ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "PostgreSQL: %s",
				PQerrorMessage(pg));
		PQsetNoticeProcessor(pg, pg_quiet, NULL);
	}
	return pg;
}

static void pq_clear(void *p)
{
	PQclear(p);
}

static PGresult *sql_v(const char *sql, va_list ap)
{
	const char *params[32];
	int n = 0;
	const char *p;
	PGresult *res;
	ExecStatusType st;

	while ((p = va_arg(ap, const char *)) != NULL && n < 32)
		params[n++] = p;
	res = PQexecParams(h_pg(), sql, n, NULL, params, NULL, NULL, 0);
	st = PQresultStatus(res);
	ck_assert_msg(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK,
			"SQL failed: %s\n  %s", PQresultErrorMessage(res), sql);
	return track(res, pq_clear);
}

PGresult *h_sql_(const char *sql, ...)
{
	va_list ap;
	PGresult *res;

	va_start(ap, sql);
	res = sql_v(sql, ap);
	va_end(ap);
	return res;
}

/* The first column of the first row, NULL when there is none or it is NULL. */
static const char *first_value(const PGresult *res)
{
	if (PQntuples(res) < 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0))
		return NULL;
	return PQgetvalue(res, 0, 0);
}

char *h_sql_scalar_(const char *sql, ...)
{
	va_list ap;
	PGresult *res;

	const char *v;

	va_start(ap, sql);
	res = sql_v(sql, ap);
	va_end(ap);
	v = first_value(res);
	return v ? h_strdup(v) : NULL;
}

long long h_sql_int_(const char *sql, ...)
{
	va_list ap;
	PGresult *res;

	const char *v;

	va_start(ap, sql);
	res = sql_v(sql, ap);
	va_end(ap);
	v = first_value(res);
	return v ? strtoll(v, NULL, 10) : -1;
}

/* ------------------------------------------------------------ time zones */

int h_tz_next_change(const char *zone, const char *from, const char *to, int dir,
		struct h_tz_change *out)
{
	char d[8];
	PGresult *res;

	snprintf(d, sizeof(d), "%d", dir);
	/* offsets of local noon, day by day; a change between the noons of
	 * d - 1 and d is the one of the night of d (changes happen at night) */
	res = h_sql(
		"WITH days AS ("
		"  SELECT g::date AS d, g::timestamp + time '12:00' - "
		"         (((g::timestamp + time '12:00') AT TIME ZONE $1) AT TIME ZONE 'UTC') AS off"
		"    FROM generate_series(($2::date - 1)::timestamp, $3::date::timestamp,"
		"                         interval '1 day') AS g"
		"), ch AS ("
		"  SELECT d, lag(off) OVER (ORDER BY d) AS before, off AS after FROM days"
		"), pick AS ("
		"  SELECT d, before, after FROM ch"
		"   WHERE before <> after"
		"     AND ($4::int = 0 OR sign(extract(epoch FROM after - before)) = $4::int)"
		"   ORDER BY d LIMIT 1"
		"), inst AS ("
		"  SELECT p.*, (SELECT min(t) FROM generate_series("
		"           ((p.d - 1) + time '12:00') AT TIME ZONE $1,"
		"           (p.d + time '12:00') AT TIME ZONE $1, interval '1 minute') AS t"
		"          WHERE (t AT TIME ZONE $1) - (t AT TIME ZONE 'UTC') = p.after) AS t"
		"    FROM pick p"
		")"
		"SELECT ((t AT TIME ZONE 'UTC') + before)::date::text,"
		"       to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
		"       extract(epoch FROM t)::bigint,"
		"       (extract(epoch FROM before) / 60)::int, (extract(epoch FROM after) / 60)::int"
		"  FROM inst WHERE t IS NOT NULL",
		zone, from, to, d);
	if (PQntuples(res) != 1)
		return -1;
	memset(out, 0, sizeof(*out));
	snprintf(out->date, sizeof(out->date), "%s", PQgetvalue(res, 0, 0));
	snprintf(out->at, sizeof(out->at), "%s", PQgetvalue(res, 0, 1));
	out->at_s = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
	out->before_min = atoi(PQgetvalue(res, 0, 3));
	out->after_min = atoi(PQgetvalue(res, 0, 4));
	return 0;
}

/* ------------------------------------------------------------ Kafka */

char *h_kafka_bootstrap(void)
{
	const char *path = h_env_opt("PIN_KAFKA_BOOTSTRAP_FILE", NULL);
	char buf[1024];
	size_t n;
	FILE *f;

	if (path && (f = fopen(path, "r")) != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
			n--;
		buf[n] = '\0';
		if (n > 0)
			return h_strdup(buf);
	}
	return h_strdup(h_env("PIN_KAFKA_BOOTSTRAP"));
}

static void kmsgs_destroy(void *p)
{
	struct h_kmsgs *l = p;

	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].topic);
		free(l->v[i].key);
		free(l->v[i].value);
		if (l->v[i].json)
			json_object_put(l->v[i].json);
		for (size_t j = 0; j < l->v[i].nheaders; j++) {
			free(l->v[i].headers[j].name);
			free(l->v[i].headers[j].value);
		}
		free(l->v[i].headers);
	}
	free(l->v);
	free(l);
}

static rd_kafka_conf_t *kconf(void)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	char err[256];

	ck_assert(rd_kafka_conf_set(c, "bootstrap.servers", h_kafka_bootstrap(),
			err, sizeof(err)) == RD_KAFKA_CONF_OK);
	rd_kafka_conf_set(c, "log_level", "3", err, sizeof(err));
	return c;
}

static void kmsg_add_headers(struct h_kmsg *k, const rd_kafka_message_t *m)
{
	rd_kafka_headers_t *h = NULL;
	const char *name;
	const void *v;
	size_t len;

	if (rd_kafka_message_headers(m, &h) || !h || !rd_kafka_header_cnt(h))
		return;
	k->headers = calloc(rd_kafka_header_cnt(h), sizeof(*k->headers));
	ck_assert(k->headers != NULL);
	for (size_t i = 0; !rd_kafka_header_get_all(h, i, &name, &v, &len); i++) {
		struct h_kheader *kh = &k->headers[k->nheaders++];

		kh->name = strdup(name);
		ck_assert(kh->name != NULL);
		if (v) {
			kh->value = strndup(v, len);
			ck_assert(kh->value != NULL);
		}
	}
}

static void kmsg_add(struct h_kmsgs *l, const rd_kafka_message_t *m)
{
	struct h_kmsg *n = realloc(l->v, (l->n + 1) * sizeof(*n));
	struct h_kmsg *k;
	rd_kafka_timestamp_type_t tt;

	ck_assert(n != NULL);
	l->v = n;
	k = &l->v[l->n++];
	memset(k, 0, sizeof(*k));
	k->topic = strdup(rd_kafka_topic_name(m->rkt));
	k->partition = m->partition;
	k->offset = m->offset;
	if (m->key)
		k->key = strndup(m->key, m->key_len);
	k->value = malloc(m->len + 1);
	ck_assert(k->value != NULL);
	if (m->len)
		memcpy(k->value, m->payload, m->len);
	k->value[m->len] = '\0';
	k->value_len = m->len;
	k->json = json_tokener_parse(k->value);
	k->ts_ms = rd_kafka_message_timestamp(m, &tt);
	kmsg_add_headers(k, m);
	contract_record_kafka("broker", k->topic, k->partition, k->offset, k->key,
			m->payload ? k->value : NULL, k->value_len);
}

const char *h_kmsg_header(const struct h_kmsg *m, const char *name)
{
	for (size_t i = m->nheaders; i > 0; i--)
		if (!strcmp(m->headers[i - 1].name, name))
			return m->headers[i - 1].value;
	return NULL;
}

struct h_kmsgs *h_kafka_read_all(const char *topic, int timeout_ms)
{
	struct h_kmsgs *l = calloc(1, sizeof(*l));
	rd_kafka_conf_t *c = kconf();
	rd_kafka_t *rk;
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_t *rkt;
	rd_kafka_topic_partition_list_t *parts;
	char err[256];
	int nparts = 0, neof = 0;
	int64_t end = h_now_ms() + timeout_ms;
	rd_kafka_resp_err_t e;

	ck_assert(l != NULL);
	rd_kafka_conf_set(c, "group.id", h_uuid(), err, sizeof(err));
	rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof(err));
	rd_kafka_conf_set(c, "enable.partition.eof", "true", err, sizeof(err));
	rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof(err));
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
	ck_assert_msg(rk != NULL, "rd_kafka_new: %s", err);

	rkt = rd_kafka_topic_new(rk, topic, NULL);
	e = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms > 0 ? timeout_ms : 5000);
	if (e == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 && !md->topics[0].err)
		nparts = md->topics[0].partition_cnt;
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	ck_assert_msg(nparts > 0, "topic %s: no metadata (%s)", topic, rd_kafka_err2str(e));

	parts = rd_kafka_topic_partition_list_new(nparts);
	for (int i = 0; i < nparts; i++)
		rd_kafka_topic_partition_list_add(parts, topic, i)->offset =
			RD_KAFKA_OFFSET_BEGINNING;
	e = rd_kafka_assign(rk, parts);
	rd_kafka_topic_partition_list_destroy(parts);
	ck_assert_msg(!e, "assign %s: %s", topic, rd_kafka_err2str(e));

	while (neof < nparts && h_now_ms() < end) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);

		if (!m)
			continue;
		if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
			neof++;
		else if (!m->err)
			kmsg_add(l, m);
		rd_kafka_message_destroy(m);
	}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return track(l, kmsgs_destroy);
}

const struct h_kmsg *h_kafka_wait(const char *topic, int timeout_ms,
		bool (*match)(const struct h_kmsg *m, void *ud), void *ud)
{
	int64_t end = h_now_ms() + timeout_ms;

	for (;;) {
		struct h_kmsgs *l = h_kafka_read_all(topic, 5000);

		for (size_t i = 0; i < l->n; i++)
			if (!match || match(&l->v[i], ud))
				return &l->v[i];
		if (h_now_ms() >= end)
			return NULL;
		h_sleep_ms(200);
	}
}

static bool match_key(const struct h_kmsg *m, void *ud)
{
	return m->key && !strcmp(m->key, (const char *)ud);
}

const struct h_kmsg *h_kafka_wait_key(const char *topic, const char *key, int timeout_ms)
{
	return h_kafka_wait(topic, timeout_ms, match_key, (void *)key);
}

struct error_code_match {
	bool (*match)(const struct h_kmsg *m, void *ud);
	void *ud;
};

static bool match_error_code(const struct h_kmsg *m, void *ud)
{
	const struct error_code_match *e = ud;

	return (!e->match || e->match(m, e->ud)) && h_kmsg_header(m, "x-error-code");
}

const char *h_kafka_error_code(const char *topic, int timeout_ms,
		bool (*match)(const struct h_kmsg *m, void *ud), void *ud)
{
	struct error_code_match e = { match, ud };
	const struct h_kmsg *m = h_kafka_wait(topic, timeout_ms, match_error_code, &e);

	return m ? h_kmsg_header(m, "x-error-code") : NULL;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	*(int *)opaque = m->err ? -1 : 1;
}

int h_kafka_produce(const char *topic, const char *key, const char *value)
{
	return h_kafka_produce_raw(topic, key, value, value ? strlen(value) : 0);
}

int h_kafka_produce_raw(const char *topic, const char *key, const void *value,
		size_t len)
{
	rd_kafka_conf_t *c = kconf();
	rd_kafka_t *rk;
	char err[256];
	int done = 0;
	rd_kafka_resp_err_t e;

	rd_kafka_conf_set(c, "partitioner", "murmur2_random", err, sizeof(err));
	rd_kafka_conf_set(c, "enable.idempotence", "true", err, sizeof(err));
	rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
	rd_kafka_conf_set_opaque(c, &done);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "h_kafka_produce: %s\n", err);
		return -1;
	}
	e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
			RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
			RD_KAFKA_V_VALUE((void *)value, value ? len : 0),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	if (e) {
		fprintf(stderr, "h_kafka_produce %s: %s\n", topic, rd_kafka_err2str(e));
		rd_kafka_destroy(rk);
		return -1;
	}
	/* what was produced: a NULL value and a length cut short (truncated
	 * JSON) are recorded as such, so that check.mjs recognises the fixture */
	contract_record_kafka("test", topic, -1, -1, key, value, value ? len : 0);
	rd_kafka_flush(rk, 10000);
	rd_kafka_destroy(rk);
	if (done != 1)
		fprintf(stderr, "h_kafka_produce %s: not delivered\n", topic);
	return done == 1 ? 0 : -1;
}

static void on_delivery_count(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	if (!m->err)
		(*(int *)opaque)++;
}

int h_kafka_produce_batch(const char *topic, const char *key, const char *const *values,
		int n)
{
	return h_kafka_produce_batch_keys(topic, NULL, key, values, n);
}

int h_kafka_produce_batch_keys(const char *topic, const char *const *keys,
		const char *key, const char *const *values, int n)
{
	rd_kafka_conf_t *c = kconf();
	rd_kafka_t *rk;
	char err[256];
	int done = 0;

	rd_kafka_conf_set(c, "partitioner", "murmur2_random", err, sizeof(err));
	rd_kafka_conf_set(c, "enable.idempotence", "true", err, sizeof(err));
	rd_kafka_conf_set(c, "linger.ms", "200", err, sizeof(err));
	rd_kafka_conf_set_dr_msg_cb(c, on_delivery_count);
	rd_kafka_conf_set_opaque(c, &done);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "h_kafka_produce_batch: %s\n", err);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *k = keys ? keys[i] : key;
		rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
				RD_KAFKA_V_KEY(k, strlen(k)),
				/* several keys: all in partition 0, one record batch */
				RD_KAFKA_V_PARTITION(keys ? 0 : RD_KAFKA_PARTITION_UA),
				RD_KAFKA_V_VALUE((void *)values[i], strlen(values[i])),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);

		if (e) {
			fprintf(stderr, "h_kafka_produce_batch %s: %s\n", topic, rd_kafka_err2str(e));
			rd_kafka_destroy(rk);
			return -1;
		}
		contract_record_kafka("test", topic, -1, -1, k, values[i], strlen(values[i]));
	}
	rd_kafka_flush(rk, 10000);
	rd_kafka_destroy(rk);
	if (done != n)
		fprintf(stderr, "h_kafka_produce_batch %s: %d of %d delivered\n", topic, done, n);
	return done == n ? 0 : -1;
}

/* ------------------------------------------------------------ broker */

static char *dev_path(const char *rel)
{
	return h_sprintf("%s/%s", h_env("PIN_DEV_DIR"), rel);
}

/* alive and not a zombie */
static bool pid_alive(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	char *p;
	bool alive = false;

	if (kill(pid, 0) != 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		alive = p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return alive;
}

void h_broker_stop(void)
{
	char *pidfile = dev_path("pids/broker.pid");
	FILE *f = fopen(pidfile, "r");
	long pid = 0;
	int64_t end;

	ck_assert_msg(f != NULL, "%s: %s", pidfile, strerror(errno));
	ck_assert(fscanf(f, "%ld", &pid) == 1 && pid > 1);
	fclose(f);
	kill((pid_t)pid, SIGTERM);
	end = h_now_ms() + 15000;
	while (pid_alive((pid_t)pid) && h_now_ms() < end) {
		waitpid((pid_t)pid, NULL, WNOHANG);     /* if it is our child */
		h_sleep_ms(50);
	}
	if (pid_alive((pid_t)pid))
		kill((pid_t)pid, SIGKILL);
	waitpid((pid_t)pid, NULL, WNOHANG);
	unlink(h_env("PIN_KAFKA_BOOTSTRAP_FILE"));
}

/* In a forked child before exec: stdout/stderr appended to LOG; detached:
 * its own session and stdin from /dev/null; ASAN_OPTIONS when given. */
static void child_stdio(const char *log, bool detach, const char *asan)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	int nul = detach ? open("/dev/null", O_RDONLY) : -1;

	if (detach)
		setsid();
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (nul >= 0)
		dup2(nul, 0);
	if (asan && *asan)
		setenv("ASAN_OPTIONS", asan, 1);
}

/* Forks and execs argv[0] with stdout and stderr appended to log; detach:
 * a session of its own and stdin from /dev/null (a long-lived process);
 * asan (when not empty): its ASAN_OPTIONS.  Returns the child's pid. */
static pid_t spawn_logged(const char *const *argv, const char *log, bool detach,
		const char *asan)
{
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		child_stdio(log, detach, asan);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Writes pid to pidfile through a rename (./dev reads it). */
static void write_pidfile(const char *pidfile, pid_t pid)
{
	char *tmp = h_sprintf("%s.tmp", pidfile);
	FILE *f = fopen(tmp, "w");

	ck_assert(f != NULL);
	fprintf(f, "%ld\n", (long)pid);
	fclose(f);
	ck_assert(rename(tmp, pidfile) == 0);
}

void h_broker_start(void)
{
	const char *bin = h_env("PIN_BROKER_BIN");
	const char *bfile = h_env("PIN_KAFKA_BOOTSTRAP_FILE");
	const char *argv[] = { bin, "--bootstrap-file", bfile, NULL };
	struct stat st;

	unlink(bfile);
	write_pidfile(dev_path("pids/broker.pid"),
		spawn_logged(argv, dev_path("logs/broker.log"), true, NULL));
	ck_assert_msg(H_WAIT_UNTIL(stat(bfile, &st) == 0 && st.st_size > 0, 20000),
			"dev broker did not publish its address");
}

static long read_pid(const char *rel)
{
	FILE *f = fopen(dev_path(rel), "r");
	long pid = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &pid) != 1 || pid <= 1)
		pid = -1;
	fclose(f);
	return pid;
}

static void broker_signal(int sig)
{
	long pid = read_pid("pids/broker.pid");

	ck_assert_msg(pid > 1 && pid_alive((pid_t)pid), "the dev broker does not run");
	ck_assert_msg(kill((pid_t)pid, sig) == 0, "kill broker: %s", strerror(errno));
	h_sleep_ms(200);        /* sigwait + the mock cluster's own thread */
}

void h_broker_down(void)
{
	broker_signal(SIGUSR1);
}

void h_broker_up(void)
{
	broker_signal(SIGUSR2);
}

void h_broker_inject(int api_key, int count, int err)
{
	const char *boot = h_env("PIN_KAFKA_BOOTSTRAP_FILE");
	FILE *f = fopen(h_sprintf("%s.inject", boot), "w");

	ck_assert_msg(f, "cannot write %s.inject: %s", boot, strerror(errno));
	fprintf(f, "%d %d %d\n", api_key, count, err);
	ck_assert(fclose(f) == 0);
	broker_signal(SIGURG);
}

/* ------------------------------------------------------------ hosts */

long h_host_pid(const char *name)
{
	long pid = read_pid(h_sprintf("pids/%s.pid", name));

	return pid > 1 && pid_alive((pid_t)pid) ? pid : -1;
}

void h_worker_kill9(void)
{
	long pid = h_host_pid("worker");

	ck_assert_msg(pid > 1, "the worker host does not run");
	ck_assert(kill((pid_t)pid, SIGKILL) == 0);
	ck_assert_msg(H_WAIT_UNTIL((waitpid((pid_t)pid, NULL, WNOHANG),
			!pid_alive((pid_t)pid)), 10000), "worker %ld survived SIGKILL", pid);
}

void h_worker_start(void)
{
	char *kb = h_sprintf("@%s", h_env("PIN_KAFKA_BOOTSTRAP_FILE"));
	const char *argv[] = { h_env("PIN_HOST_BIN"), "--mode", "worker", "--config",
		h_env("PIN_CONFIG"), "--plugins", h_env_opt("PIN_WORKER_PLUGINS", ""),
		"--plugin-dir", h_env("PIN_PLUGIN_DIR"), "--pg-dsn", h_env("PIN_PG_DSN"),
		"--kafka-bootstrap", kb, NULL };
	pid_t pid;

	pid = spawn_logged(argv, dev_path("logs/worker.log"), true,
		h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL));
	write_pidfile(dev_path("pids/worker.pid"), pid);
	h_sleep_ms(300);
	ck_assert_msg(pid_alive(pid), "the worker host exited at start (logs/worker.log)");
}

int h_worker_log_lines(const char *n1, const char *n2)
{
	return h_log_lines("worker.log", n1, n2);
}

int h_log_lines(const char *name, const char *n1, const char *n2)
{
	FILE *f = fopen(dev_path(h_sprintf("logs/%s", name)), "r");
	char line[16384];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, n1) && strstr(line, n2))
			n++;
	fclose(f);
	return n;
}

/* The stack's host command line: mode, config, plugins (NULL: the worker
 * plugins), plugin dir, database, broker, clock offset.  Fills argv from 0,
 * returns the count (at most 15). */
static int host_argv(const char **argv, const char *mode, const char *plugins,
		int64_t clock_offset_s)
{
	int n = 0;

	argv[n++] = h_env("PIN_HOST_BIN");
	argv[n++] = "--mode";
	argv[n++] = mode;
	argv[n++] = "--config";
	argv[n++] = h_env("PIN_CONFIG");
	argv[n++] = "--plugins";
	argv[n++] = plugins ? plugins : h_env_opt("PIN_WORKER_PLUGINS", "");
	argv[n++] = "--plugin-dir";
	argv[n++] = h_env("PIN_PLUGIN_DIR");
	argv[n++] = "--pg-dsn";
	argv[n++] = h_env("PIN_PG_DSN");
	argv[n++] = "--kafka-bootstrap";
	argv[n++] = h_sprintf("@%s", h_env("PIN_KAFKA_BOOTSTRAP_FILE"));
	if (clock_offset_s) {
		argv[n++] = "--clock-offset-s";
		argv[n++] = h_sprintf("%lld", (long long)clock_offset_s);
	}
	return n;
}

pid_t h_spawn_host(const char *mode, const char *plugins, int64_t clock_offset_s,
		const char *const *extra_args)
{
	const char *argv[64];
	int n;

	n = host_argv(argv, mode, plugins, clock_offset_s);
	for (size_t i = 0; extra_args && extra_args[i] && n < 62; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;
	return spawn_logged(argv, dev_path("logs/worker-once.log"), false,
		h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL));
}

int h_run_host(const char *mode, const char *plugins, int64_t clock_offset_s,
		const char *const *extra_args)
{
	pid_t pid = h_spawn_host(mode, plugins, clock_offset_s, extra_args);
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool h_log_has(const char *name, const char *a, const char *b)
{
	FILE *f = fopen(h_sprintf("%s/logs/%s", h_env("PIN_DEV_DIR"), name), "r");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, a) && strstr(line, b);
	fclose(f);
	return found;
}

int h_run_worker_once(int64_t clock_offset_s)
{
	static const char *const once[] = { "--once", NULL };

	return h_run_host("worker", NULL, clock_offset_s, once);
}

/* ------------------------------------------------------ several hosts */

void h_host_stack_worker(struct h_host *h)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "worker");
	h->pid = (pid_t)h_host_pid("worker");
	snprintf(h->url, sizeof(h->url), "%s", h_env("PIN_WORKER_METRICS_URL"));
}

/* a free loopback port in 20000-32767 (below the ephemeral range), or in
 * the part of it ./dev gave this phase (PIN_PORT_LO, PIN_PORT_N: the two test
 * phases that run together take a half each) */
static int free_port(void)
{
	static bool seeded;
	static int lo = 20000, n = 12768;

	if (!seeded) {
		const char *l = getenv("PIN_PORT_LO"), *c = getenv("PIN_PORT_N");

		srand((unsigned)getpid() ^ (unsigned)h_now_ms());
		if (l && c && atoi(l) >= 1024 && atoi(c) > 0 && atoi(l) + atoi(c) <= 65536) {
			lo = atoi(l);
			n = atoi(c);
		}
		seeded = true;
	}
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM, 0), port = lo + rand() % n;
		bool ok;

		ck_assert(fd >= 0);
		a.sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return port;
	}
	ck_abort_msg("no free port");
	return -1;
}

/* The hosts h_host_start started under a name of their own ("worker-2",
 * ...: pids/worker-*.pid, not the stack's own worker.pid) that still run
 * when a case starts: a case that failed left them (its teardown did not
 * run), and they would take relay shards and partitions from the next
 * cases (a failed scale/rolling once failed faults/relayfail after it). */
static void reap_left_hosts(void)
{
	glob_t g;

	if (glob(dev_path("pids/worker-*.pid"), 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *rel = strstr(g.gl_pathv[i], "pids/");
		long left = rel ? read_pid(rel) : -1;

		if (left > 1 && pid_alive((pid_t)left)) {
			fprintf(stderr, "harness: stopping %s (pid %ld), left by a failed case\n",
				rel, left);
			kill((pid_t)left, SIGKILL);
			H_WAIT_UNTIL((waitpid((pid_t)left, NULL, WNOHANG),
				!pid_alive((pid_t)left)), 10000);
		}
		unlink(g.gl_pathv[i]);
	}
	globfree(&g);
	/* a marking case that failed left the stack without its worker */
	if (access(dev_path("pids/worker.marking"), F_OK) == 0) {
		if (h_host_pid("worker") <= 0) {
			fprintf(stderr, "harness: starting the stack's worker again, stopped by a"
				" failed marking case\n");
			h_worker_start();
		}
		unlink(dev_path("pids/worker.marking"));
	}
}

void h_host_start(struct h_host *h, const char *name, const char *mode,
		const char *plugins, int64_t clock_offset_s, const char *const *env)
{
	const char *argv[24];
	char *log = dev_path(h_sprintf("logs/%s.log", name));
	char *listen, *textfile;
	const char *asan = h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL);
	int n = 0, port = free_port();
	pid_t pid;

	long left = read_pid(h_sprintf("pids/%s.pid", name));

	/* a host of the same name left by a failed case */
	if (left > 1 && pid_alive((pid_t)left)) {
		kill((pid_t)left, SIGKILL);
		H_WAIT_UNTIL((waitpid((pid_t)left, NULL, WNOHANG), !pid_alive((pid_t)left)), 10000);
	}
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(h->url, sizeof(h->url), "http://127.0.0.1:%d/metrics", port);
	listen = h_sprintf("127.0.0.1:%d", port);
	textfile = dev_path(h_sprintf("%s.prom", name));
	n = host_argv(argv, mode, plugins, clock_offset_s);
	argv[n] = NULL;
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		child_stdio(log, true, asan);
		/* PIN_<KEY> overrides the config file (host/core/config.c) */
		setenv("PIN_METRICS_LISTEN", listen, 1);
		setenv("PIN_METRICS_TEXTFILE", textfile, 1);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	h->pid = pid;
	h->ours = true;
	write_pidfile(dev_path(h_sprintf("pids/%s.pid", name)), pid);
	ck_assert_msg(H_WAIT_UNTIL(!pid_alive(pid) || !isnan(h_host_metric(h,
			"process_start_time_seconds")), 60000),
			"host %s does not answer on %s (logs/%s.log)", name, h->url, name);
	ck_assert_msg(pid_alive(pid), "host %s exited at start (logs/%s.log)", name, name);
}

void h_host_kill9(struct h_host *h)
{
	ck_assert_msg(h->pid > 1 && pid_alive(h->pid), "host %s does not run", h->name);
	ck_assert(kill(h->pid, SIGKILL) == 0);
	ck_assert_msg(H_WAIT_UNTIL((waitpid(h->pid, NULL, WNOHANG), !pid_alive(h->pid)),
			10000), "host %s survived SIGKILL", h->name);
	h->pid = -1;
}

void h_host_stop(struct h_host *h)
{
	int64_t end = h_now_ms() + 20000;

	if (!h->ours || h->pid <= 1)
		return;
	if (pid_alive(h->pid)) {
		kill(h->pid, SIGTERM);
		while (h_now_ms() < end && (waitpid(h->pid, NULL, WNOHANG), pid_alive(h->pid)))
			h_sleep_ms(50);
		if (pid_alive(h->pid))
			kill(h->pid, SIGKILL);
	}
	waitpid(h->pid, NULL, 0);
	unlink(dev_path(h_sprintf("pids/%s.pid", h->name)));
	h->pid = -1;
}

double h_metric_in(const char *text, const char *series)
{
	size_t sl = strlen(series);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, series, sl) && l[sl] == ' ')
			return strtod(l + sl + 1, NULL);
	return NAN;
}

/* the sum of every sample of the metric name (any labels) in text; NAN
 * when none */
static double metric_sum_in(const char *text, const char *name)
{
	size_t nl = strlen(name);
	double sum = NAN;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *e = strchr(l, '\n'), *sp;

		if (strncmp(l, name, nl) || (l[nl] != '{' && l[nl] != ' '))
			continue;
		if (!e)
			e = l + strlen(l);
		for (sp = e; sp > l && sp[-1] != ' '; sp--)
			;
		sum = (isnan(sum) ? 0 : sum) + strtod(sp, NULL);
	}
	return sum;
}

static double host_metric_(const struct h_host *h, const char *series, bool sum)
{
	CURL *c = curl_easy_init();
	struct h_buf b = { 0 };
	double v = NAN;
	long code = 0;

	if (!c || !h->url[0])
		goto out;
	curl_easy_setopt(c, CURLOPT_URL, h->url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (curl_easy_perform(c) != CURLE_OK)
		goto out;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200 || !b.p)
		goto out;
	v = sum ? metric_sum_in(b.p, series) : h_metric_in(b.p, series);
out:
	free(b.p);
	if (c)
		curl_easy_cleanup(c);
	return v;
}

double h_host_metric(const struct h_host *h, const char *series)
{
	return host_metric_(h, series, false);
}

double h_host_metric_sum(const struct h_host *h, const char *name)
{
	return host_metric_(h, name, true);
}

/* ------------------------------------------------ messages and addresses */
char *h_new_mid(void)
{
	return h_sql_scalar("SELECT gen_random_uuid()::text");
}

char *h_envelope(const char *mid, const char *event_type, const char *agg_type,
		const char *agg_id, const char *created_at, const char *payload)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"%s\",\"contractVersion\":1,"
		"\"createdAt\":\"%s\",\"aggregateType\":\"%s\",\"aggregateId\":\"%s\","
		"\"correlationId\":null,\"payload\":%s}", mid, event_type, created_at,
		agg_type, agg_id, payload);
}

const char *h_src_ip(const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	if (fd < 0)
		return NULL;
	inet_pton(AF_INET, ip, &a.sin_addr);
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok ? ip : NULL;
}

void h_relay_switch_back(void)
{
	static const char *const box[] = { "calendar.outbox", "notifications.outbox" };

	/* a killed host's sessions end a moment after the process: one still
	 * running would set a cursor up again after the DELETE */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM pg_locks WHERE"
			" locktype = 'advisory' AND classid = 730153 AND objsubid = 2") == 0, 20000),
			"relay sessions still open 20 s after their hosts stopped");
	for (size_t i = 0; i < sizeof(box) / sizeof(box[0]); i++)
		h_sql(h_sprintf("UPDATE %s o SET published_at = now() WHERE published_at IS NULL"
				" AND calendar.outbox_sent(o)", box[i]));
	h_sql("DELETE FROM calendar.outbox_cursor");
}

void h_relay_marking_start(struct h_host *h)
{
	static const char *const env[] = { "PIN_RELAY_CURSOR=false", NULL };

	FILE *f = fopen(dev_path("pids/worker.marking"), "w");

	/* the mark that the next case's setup starts the stack's worker again
	 * if this case fails before h_relay_marking_stop (reap_left_hosts) */
	ck_assert_ptr_nonnull(f);
	fclose(f);
	if (h_host_pid("worker") > 0)
		h_worker_kill9();
	h_relay_switch_back();
	h_host_start(h, "worker-marking", "worker", NULL, 0, env);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric_sum(h, "pin_outbox_relay_shard_leader") >= 8,
			30000), "the marking host leads %.0f of the 8 shards (logs/worker-marking.log)",
			h_host_metric_sum(h, "pin_outbox_relay_shard_leader"));
	/* and its consumers in their groups (it replaced the stack's worker) */
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric_sum(h, "pin_consumer_rebalancing") == 0,
			30000), "the marking host's consumer groups still rebalancing after 30 s");
}

void h_relay_marking_stop(struct h_host *h)
{
	h_host_stop(h);
	if (h_host_pid("worker") <= 0)
		h_worker_start();
	unlink(dev_path("pids/worker.marking"));
}
