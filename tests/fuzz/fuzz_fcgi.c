/* fuzz_fcgi.c -- the event-loop FastCGI server's record parser
 * (host/api/fcgi_loop.c: parse, record, params_decode) fed a fuzzed byte stream
 * in fuzzed pieces, as reads from nginx's connection would deliver it.  The
 * server file is compiled into this harness (its parser is static); the
 * host functions it calls outside the parser are stubs that must not run.
 * Properties: a complete request has an id, both streams ended, every
 * name-value pair found again by io_param, a body no longer than the cap
 * read back whole by io_read; after a close (-1) nothing is parsed again;
 * the replies written (management, END_REQUEST) are whole records. */
#include "../../host/api/fcgi_loop.c"   /* first: its config.h (_GNU_SOURCE) */
#include "fuzz.h"

/* outside the parser: never reached from parse() */
void pin_db_close_thread(void) { abort(); }
void pin_wait_stop(void) { abort(); }
struct pin_arena *pin_arena_new(void) { abort(); }
void pin_arena_set_current(struct pin_arena *a) { (void)a; abort(); }
void pin_arena_reset(struct pin_arena *a) { (void)a; abort(); }
void pin_arena_free(struct pin_arena *a) { (void)a; abort(); }
void pin_metric_set(const char *name, const char *labels, double v)
{
	(void)name; (void)labels; (void)v;
	abort();
}
void pin_log(int level, const char *msg, ...) { (void)level; (void)msg; }
double pin_metrics_mono_s(void) { abort(); }
void pin_request_stop(void) { abort(); }
void pin_metric_add(const char *name, const char *labels, double v)
{
	(void)name; (void)labels; (void)v;
	abort();
}
void pin_metrics_collector(void (*fn)(void)) { (void)fn; abort(); }
long long pin_config_int(const char *key) { (void)key; abort(); }

/* the replies on the peer's end: whole records, version 1 */
static void drain_replies(int peer)
{
	static unsigned char buf[1 << 16];
	static size_t have;
	ssize_t k;

	while ((k = read(peer, buf + have, sizeof buf - have)) > 0) {
		size_t at = 0;

		have += (size_t)k;
		while (have - at >= 8) {
			size_t len = 8 + ((size_t)buf[at + 4] << 8 | buf[at + 5]) + buf[at + 6];

			FUZZ_CHECK(buf[at] == 1, "reply of version %u", buf[at]);
			FUZZ_CHECK(buf[at + 1] == FC_END || buf[at + 1] == FC_STDOUT ||
				   buf[at + 1] == FC_GET_VALUES_RESULT ||
				   buf[at + 1] == FC_UNKNOWN_TYPE, "reply type %u", buf[at + 1]);
			if (have - at < len)
				break;
			at += len;
		}
		memmove(buf, buf + at, have - at);
		have -= at;
	}
}

static void check_request(struct fc_conn *c)
{
	char b[512];
	size_t got = 0;
	int k;

	FUZZ_CHECK(c->req_id != 0 && c->params_done && c->stdin_done, "incomplete");
	FUZZ_CHECK(c->body_len <= FC_STDIN_MAX, "body %zu", c->body_len);
	for (int i = 0; i < c->nkv; i++) {
		const char *v = io_param(c, c->kv[2 * i]);

		FUZZ_CHECK(v != NULL, "pair %d not found", i);
	}
	while ((k = io_read(c, b, sizeof b)) > 0)
		got += (size_t)k;
	FUZZ_CHECK(got == c->body_len, "read %zu of %zu", got, c->body_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	struct fc_conn c = { 0 };
	size_t at = 0;

	if (size < 1 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return 0;
	c.fd = sv[0];
	c.in = malloc(FC_IN_MAX);         /* readable() grows it to this */
	c.in_cap = FC_IN_MAX;
	/* data[0] picks the piece size: 1..256 bytes per "read" */
	for (size_t piece = (size_t)data[0] + 1, pos = 1; pos < size; pos += piece) {
		size_t n = size - pos < piece ? size - pos : piece;
		int rc;

		FUZZ_CHECK(c.in_len + n <= c.in_cap, "buffer overrun");
		memcpy(c.in + c.in_len, data + pos, n);
		c.in_len += n;
		for (;;) {
			rc = parse(&c);
			drain_replies(sv[1]);
			if (rc != 1)
				break;
			check_request(&c);
			at++;
			req_reset(&c);          /* as finished() does */
		}
		if (rc < 0)
			break;                  /* the connection is closed */
	}
	(void)at;
	close(sv[0]);
	close(sv[1]);
	free(c.in);
	free(c.params);
	free(c.names);
	free(c.kv);
	free(c.body);
	return 0;
}
