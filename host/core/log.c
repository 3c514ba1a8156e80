/* log.c -- one JSON object per line on stderr (with the trace id of
 * trace.c).
 *
 * The line is written as text into one buffer and leaves in ONE write(2)
 * (2026-12-03, c5c7e57).  It used to be a json-c object per line, printed with
 * fputs + fputc on the unbuffered stderr: two system calls, an allocation per
 * field and a hash table per line.  With one log line per consumed message
 * that was a fifth of the notify consumer thread's CPU (doc/performance.md
 * "Per-message text: log lines, envelopes, message ids").  The bytes are json-c's JSON_C_TO_STRING_PLAIN |
 * NOSLASHESCAPE rendering of the object the old code built, a later value of
 * a repeated key included (it replaces the earlier value in its place); the
 * unit test test_log compares the two. */
#include "config.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core.h"

static int min_level = PIN_LOG_INFO;
static const char *level_name[] = { "debug", "info", "warn", "error" };

void pin_log_set_level(int level)
{
	min_level = level;
}

#define LOG_FIELDS 32            /* fields on the stack; more go to the heap */

struct field { const char *k, *v; };    /* v NULL: null */

/* the fields of a line: ts (f[0]; own: the line's time, not replaced by a
 * field of the caller), level, msg, [traceId], the caller's */
struct fields {
	struct field *f, stack[LOG_FIELDS];
	int n, cap, own_ts, oom;
};

/* the line being built: a stack buffer, a heap one past it */
struct line {
	char *p;
	size_t len, cap;
	int oom;
	char stack[2048];
};

static char *line_room(struct line *l, size_t n)
{
	if (l->oom)
		return NULL;
	if (l->cap - l->len < n) {
		size_t cap = l->cap * 2 > l->len + n ? l->cap * 2 : l->len + n + 256;
		char *p = l->p == l->stack ? malloc(cap) : realloc(l->p, cap);

		if (!p) {
			l->oom = 1;
			return NULL;
		}
		if (l->p == l->stack)
			memcpy(p, l->stack, l->len);
		l->p = p;
		l->cap = cap;
	}
	return l->p + l->len;
}

static void line_put(struct line *l, const char *s, size_t n)
{
	char *o = line_room(l, n);

	if (o) {
		memcpy(o, s, n);
		l->len += n;
	}
}

/* s as a JSON string (pin_json_quote) */
static void line_str(struct line *l, const char *s)
{
	char *o = line_room(l, PIN_JSON_QUOTED_MAX(strlen(s)));

	if (o)
		l->len = (size_t)(pin_json_quote(o, s) - l->p);
}

/* "ts" of the line: pin_clock_fmt's text, the date and time of day formatted
 * once per second per thread */
static void line_ts(struct line *l, int64_t us)
{
	static _Thread_local int64_t cached_s = INT64_MIN;
	static _Thread_local char head[40];
	static _Thread_local size_t head_len;
	int64_t s = us / 1000000, frac = us % 1000000;
	char tail[16];

	if (frac < 0) {
		frac += 1000000;
		s -= 1;
	}
	if (s != cached_s) {
		pin_clock_fmt(s * 1000000, head, sizeof head);
		head_len = strlen(head) - 1;    /* without the Z */
		cached_s = s;
	}
	line_put(l, "\"", 1);
	line_put(l, head, head_len);
	if (frac) {
		tail[0] = '.';
		for (int i = 6; i >= 1; i--, frac /= 10)
			tail[i] = (char)('0' + frac % 10);
		tail[7] = 'Z';
		line_put(l, tail, 8);
	} else {
		line_put(l, "Z", 1);
	}
	line_put(l, "\"", 1);
}

/* (k, v) added: a repeated key takes the new value in its place, as
 * json_object_object_add does */
static void field_add(struct fields *fs, const char *k, const char *v)
{
	for (int i = 0; i < fs->n; i++)
		if (!strcmp(fs->f[i].k, k)) {
			fs->f[i].v = v;
			if (i == 0)
				fs->own_ts = 0;
			return;
		}
	if (fs->n == fs->cap) {
		struct field *g = malloc(2 * (size_t)fs->cap * sizeof *g);

		if (!g) {
			fs->oom = 1;
			return;
		}
		memcpy(g, fs->f, (size_t)fs->n * sizeof *g);
		if (fs->f != fs->stack)
			free(fs->f);
		fs->f = g;
		fs->cap *= 2;
	}
	fs->f[fs->n++] = (struct field){ k, v };
}

/* the line, retried after a signal; a line cut short by an error still gets
 * its newline, so the next line starts clean */
static void write_all(const char *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(STDERR_FILENO, p + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (done > 0 && write(STDERR_FILENO, "\n", 1) < 0)
				return;
			return;
		}
		done += (size_t)w;
	}
}

void pin_logv(int level, const char *msg, va_list ap)
{
	struct fields fs;
	struct line l;
	const char *k, *v, *trace;

	if (level < min_level)
		return;
	if (level < PIN_LOG_DEBUG || level > PIN_LOG_ERROR)
		level = PIN_LOG_ERROR;
	fs.f = fs.stack;
	fs.n = 0;
	fs.cap = LOG_FIELDS;
	fs.own_ts = 1;
	fs.oom = 0;
	field_add(&fs, "ts", NULL);     /* own_ts: written by line_ts */
	field_add(&fs, "level", level_name[level]);
	field_add(&fs, "msg", msg ? msg : "");
	trace = pin_trace_get();
	if (trace)
		field_add(&fs, "traceId", trace);
	while ((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		field_add(&fs, k, v);
	}
	l.p = l.stack;
	l.len = 0;
	l.cap = sizeof l.stack;
	l.oom = fs.oom;
	line_put(&l, "{", 1);
	for (int i = 0; i < fs.n; i++) {
		if (i)
			line_put(&l, ",", 1);
		line_str(&l, fs.f[i].k);
		line_put(&l, ":", 1);
		if (i == 0 && fs.own_ts)
			line_ts(&l, pin_clock_now_us());
		else if (fs.f[i].v)
			line_str(&l, fs.f[i].v);
		else
			line_put(&l, "null", 4);
	}
	line_put(&l, "}\n", 2);
	if (!l.oom) {
		/* one write per line: lines of concurrent threads never interleave
		 * (the lock also orders them against anything else on stderr) */
		flockfile(stderr);
		write_all(l.p, l.len);
		funlockfile(stderr);
	}
	if (l.p != l.stack)
		free(l.p);
	if (fs.f != fs.stack)
		free(fs.f);
}

void pin_log(int level, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	pin_logv(level, msg, ap);
	va_end(ap);
}
