/*
 * fcgi_client.c -- a small FastCGI client for the suites that talk to an
 * API host's socket without nginx (replica, fcgi).  Records are written
 * exactly as asked (a test can split streams and write byte by byte).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

int h_fcgi_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert(fd >= 0);
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

bool h_fcgi_write(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		c += k;
		n -= (size_t)k;
	}
	return true;
}

static void hdr(unsigned char *h, int type, unsigned id, size_t len)
{
	h[0] = 1;                 /* FCGI_VERSION_1 */
	h[1] = (unsigned char)type;
	h[2] = (unsigned char)(id >> 8);
	h[3] = (unsigned char)id;
	h[4] = (unsigned char)(len >> 8);
	h[5] = (unsigned char)(len & 0xff);
	h[6] = 0;
	h[7] = 0;
}

size_t h_fcgi_rec_bytes(unsigned char *out, int type, unsigned id,
		const void *body, size_t len)
{
	hdr(out, type, id, len);
	if (len)
		memcpy(out + 8, body, len);
	return 8 + len;
}

bool h_fcgi_rec(int fd, int type, unsigned id, const void *body, size_t len)
{
	unsigned char h[8];

	hdr(h, type, id, len);
	return h_fcgi_write(fd, h, 8) && (!len || h_fcgi_write(fd, body, len));
}

static size_t put_len(unsigned char *p, size_t l)
{
	if (l < 128) {
		p[0] = (unsigned char)l;
		return 1;
	}
	p[0] = (unsigned char)(0x80 | (l >> 24));
	p[1] = (unsigned char)(l >> 16);
	p[2] = (unsigned char)(l >> 8);
	p[3] = (unsigned char)l;
	return 4;
}

size_t h_fcgi_param(unsigned char *buf, size_t at, size_t cap, const char *k,
		const char *v)
{
	size_t kl = strlen(k), vl = strlen(v);

	ck_assert(at + kl + vl + 8 < cap);
	at += put_len(buf + at, kl);
	at += put_len(buf + at, vl);
	memcpy(buf + at, k, kl);
	memcpy(buf + at + kl, v, vl);
	return at + kl + vl;
}

size_t h_fcgi_params(unsigned char *buf, size_t cap, const char *method,
		const char *uri, const char *token, const char *body)
{
	const char *q = strchr(uri, '?');
	size_t n = 0;

	n = h_fcgi_param(buf, n, cap, "REQUEST_METHOD", method);
	n = h_fcgi_param(buf, n, cap, "REQUEST_URI", uri);
	n = h_fcgi_param(buf, n, cap, "DOCUMENT_URI",
			q ? h_sprintf("%.*s", (int)(q - uri), uri) : uri);
	n = h_fcgi_param(buf, n, cap, "QUERY_STRING", q ? q + 1 : "");
	n = h_fcgi_param(buf, n, cap, "SERVER_PROTOCOL", "HTTP/1.1");
	if (token)
		n = h_fcgi_param(buf, n, cap, "HTTP_AUTHORIZATION",
				h_sprintf("Bearer %s", token));
	if (body) {
		n = h_fcgi_param(buf, n, cap, "CONTENT_TYPE", "application/json");
		n = h_fcgi_param(buf, n, cap, "CONTENT_LENGTH",
				h_sprintf("%zu", strlen(body)));
	}
	return n;
}

static bool read_all(int fd, void *p, size_t n, int timeout_ms)
{
	char *c = p;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t k;

		if (poll(&pf, 1, timeout_ms) <= 0)
			return false;
		k = read(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		c += k;
		n -= (size_t)k;
	}
	return true;
}

bool h_fcgi_read_rec(int fd, int timeout_ms, struct h_fcgi_record *r)
{
	unsigned char h[8], pad[256];

	free(r->body);
	memset(r, 0, sizeof *r);
	if (!read_all(fd, h, 8, timeout_ms))
		return false;
	r->type = h[1];
	r->id = (unsigned)(h[2] << 8 | h[3]);
	r->len = (size_t)h[4] << 8 | h[5];
	r->body = malloc(r->len + 1);
	ck_assert_ptr_nonnull(r->body);
	if (r->len && !read_all(fd, r->body, r->len, timeout_ms))
		return false;
	r->body[r->len] = '\0';
	return !h[6] || read_all(fd, pad, h[6], timeout_ms);
}

struct h_resp *h_fcgi_response(int fd, unsigned id, int *nstdout, int *proto)
{
	struct h_resp *r = h_resp_json(0, NULL);
	struct h_fcgi_record rec = { 0 };
	char *out = NULL, *p;
	size_t outn = 0;

	*nstdout = 0;
	*proto = -1;
	while (h_fcgi_read_rec(fd, 30000, &rec)) {
		ck_assert_msg(rec.id == id, "a record of request %u, not %u", rec.id, id);
		if (rec.type == 6 && rec.len) {            /* FCGI_STDOUT */
			out = realloc(out, outn + rec.len + 1);
			ck_assert_ptr_nonnull(out);
			memcpy(out + outn, rec.body, rec.len);
			outn += rec.len;
			out[outn] = '\0';
			(*nstdout)++;
		}
		if (rec.type == 3) {                       /* FCGI_END_REQUEST */
			*proto = rec.len >= 5 ? (unsigned char)rec.body[4] : -1;
			break;
		}
	}
	free(rec.body);
	if (out && !strncmp(out, "Status: ", 8) && (p = strstr(out, "\r\n\r\n"))) {
		r->status = strtol(out + 8, NULL, 10);
		free(r->body);
		r->body = strdup(p + 4);
		ck_assert_ptr_nonnull(r->body);
		r->body_len = strlen(r->body);
		r->json = json_tokener_parse(r->body);
		*p = '\0';
		if ((p = strstr(out, "Content-Type: ")))
			r->content_type = strndup(p + 14, strcspn(p + 14, "\r"));
	}
	free(out);
	return r;
}

bool h_fcgi_send(int fd, unsigned id, bool keep, const char *method,
		const char *uri, const char *token, const char *body)
{
	unsigned char begin[8] = { 0, 1, keep ? 1 : 0, 0, 0, 0, 0, 0 };
	unsigned char params[8192], *req;
	size_t n = h_fcgi_params(params, sizeof params, method, uri, token, body);
	size_t blen = body ? strlen(body) : 0, at = 0;
	bool sent;

	/* in one write, as nginx sends a request (a STDIN record holds at
	 * most 65535 bytes: the bodies here are smaller) */
	ck_assert(blen <= 65535);
	req = malloc(5 * 8 + 8 + n + blen);
	ck_assert_ptr_nonnull(req);
	at += h_fcgi_rec_bytes(req + at, 1, id, begin, 8);
	at += h_fcgi_rec_bytes(req + at, 4, id, params, n);
	at += h_fcgi_rec_bytes(req + at, 4, id, NULL, 0);
	if (blen)
		at += h_fcgi_rec_bytes(req + at, 5, id, body, blen);
	at += h_fcgi_rec_bytes(req + at, 5, id, NULL, 0);
	sent = h_fcgi_write(fd, req, at);
	free(req);
	return sent;
}

struct h_resp *h_fcgi_on(int fd, unsigned id, bool keep, const char *method,
		const char *uri, const char *token, const char *body)
{
	int nout, proto;

	if (!h_fcgi_send(fd, id, keep, method, uri, token, body))
		return h_resp_json(0, NULL);
	return h_fcgi_response(fd, id, &nout, &proto);
}

struct h_resp *h_fcgi(const char *sock, const char *method, const char *uri,
		const char *token, const char *body)
{
	int fd = h_fcgi_connect(sock);
	struct h_resp *r;

	if (fd < 0)
		return h_resp_json(0, NULL);
	r = h_fcgi_on(fd, 1, false, method, uri, token, body);
	close(fd);
	return r;
}

static bool probe_listening(const char *sock)
{
	int fd = h_fcgi_connect(sock);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

pid_t h_fcgi_host_start(const char *sock, const char *name, const char *const *extra)
{
	const char *args[16] = { "--listen", h_sprintf("unix:%s", sock) };
	char *pidf = h_sprintf("%s/pids/%s.pid", h_env("PIN_DEV_DIR"), name);
	struct stat st;
	pid_t pid;
	size_t n = 2;
	FILE *f;

	for (; extra && *extra; extra++) {
		ck_assert(n + 1 < sizeof args / sizeof *args);
		args[n++] = *extra;
	}
	args[n] = NULL;
	unlink(sock);
	pid = h_spawn_host("api", h_env("PIN_API_PLUGINS"), 0, args);
	/* ./dev's stack stop ends it if the test dies half-way */
	f = fopen(pidf, "w");
	if (f) {
		fprintf(f, "%ld\n", (long)pid);
		fclose(f);
	}
	ck_assert_msg(H_WAIT_UNTIL(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode), 30000),
			"API host %s did not open its socket", name);
	/* the socket file exists from bind(); connections are taken from
	 * listen() on: wait for that too (a loaded machine shows the gap) */
	ck_assert_msg(H_WAIT_UNTIL(probe_listening(sock), 10000),
			"API host %s does not accept on its socket", name);
	return pid;
}

double h_fcgi_metric(const char *sock, const char *series)
{
	struct h_resp *r = h_fcgi(sock, "GET", "/metrics", NULL, NULL);

	ck_assert_int_eq(r->status, 200);
	return h_metric_in(r->body, series);
}
