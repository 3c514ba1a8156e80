/* test_log.c -- host/core/log.c: the log line a log collector reads.
 *
 * Expectations:
 *  - every line is json-c's JSON_C_TO_STRING_PLAIN | NOSLASHESCAPE rendering
 *    of the object {ts, level, msg, [traceId], fields...} (the writer before
 *    2026-12-03, 8aaefb7, built that object; tools/textref.h still does), whatever
 *    bytes the strings hold, null values and repeated keys (the later value
 *    in the earlier place) included;
 *  - ts is the host clock's text (pin_clock_fmt), parsable back;
 *  - a line longer than the writer's stack buffer is whole;
 *  - lines of concurrent threads never interleave;
 *  - below the level nothing is written.
 */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"
#include "textref.h"

/* stderr goes to a temporary file while a case logs */
static int saved_fd = -1;
static FILE *cap;

static void capture_start(void)
{
	cap = tmpfile();
	ck_assert_ptr_nonnull(cap);
	fflush(stderr);
	saved_fd = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_fd, 0);
	ck_assert_int_ge(dup2(fileno(cap), STDERR_FILENO), 0);
}

/* the captured text (malloc'd); stderr restored */
static char *capture_end(void)
{
	long n;
	char *s;

	fflush(stderr);
	dup2(saved_fd, STDERR_FILENO);
	close(saved_fd);
	/* the fd's own offset: stdio's cached one never saw the writes */
	n = lseek(fileno(cap), 0, SEEK_END);
	ck_assert_int_ge(n, 0);
	s = malloc((size_t)n + 1);
	ck_assert_int_eq(pread(fileno(cap), s, (size_t)n, 0), n);
	s[n] = 0;
	fclose(cap);
	return s;
}

/* the ts value of a line: "ts":"..." first; unless a field replaced it
 * (own 0), parsable, and pin_clock_fmt's text of what it parses to */
static char *line_ts(const char *line, int own)
{
	static char ts[64];
	const char *p = line + strlen("{\"ts\":\""), *q;
	int64_t us;
	char again[64];

	ck_assert_msg(!strncmp(line, "{\"ts\":\"", 7), "line: %s", line);
	q = strchr(p, '"');
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_lt((size_t)(q - p), sizeof ts);
	memcpy(ts, p, (size_t)(q - p));
	ts[q - p] = 0;
	if (!own)
		return ts;
	ck_assert_msg(pin_clock_parse(ts, &us) == 0, "ts %s", ts);
	ck_assert_str_eq(pin_clock_fmt(us, again, sizeof again), ts);
	return ts;
}

/* the captured line against the reference; got is freed */
static void check_got(char *got, const char *lname, const char *msg, const char *trace,
		const char *const *kv)
{
	char *want;
	int own = 1;

	for (const char *const *k = kv; *k; k += 2)
		own &= strcmp(*k, "ts") != 0;
	pin_trace_set(NULL);
	want = ref_log_text(line_ts(got, own), lname, msg ? msg : "", trace, kv);
	ck_assert_ptr_nonnull(want);
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
}

/* logs (level, msg, key, value, ..., NULL) and checks the line */
#define CHECK_LINE(level, lname, msg, trace, ...) do { \
		const char *kv_[] = { __VA_ARGS__ }; \
		pin_trace_set(trace); \
		capture_start(); \
		pin_log(level, msg, __VA_ARGS__); \
		check_got(capture_end(), lname, msg, trace, kv_); \
	} while (0)

START_TEST(log_as_json_c)
{
	char every[256], high[129], *big;

	for (int i = 1; i < 128; i++)
		every[i - 1] = (char)i;
	every[127] = 0;
	for (int i = 0; i < 128; i++)
		high[i] = (char)(128 + i);
	high[128] = 0;
	char *got;

	CHECK_LINE(PIN_LOG_INFO, "info", "outbox relay: published", NULL,
		"messageId", "0b3f1c8e-2d4a-4c6b-9e8f-1a2b3c4d5e6f",
		"topic", "pin.calendar.reminder-due.v1", NULL);
	CHECK_LINE(PIN_LOG_WARN, "warn", "", NULL, NULL);
	CHECK_LINE(PIN_LOG_ERROR, "error", NULL, NULL, NULL);
	/* every byte, in a value, a key and the message; a path with '/' */
	CHECK_LINE(PIN_LOG_INFO, "info", every, NULL, "v", every, every, "k", "h", high,
		"path", "/api/v1/agent/calendar/events?x=a/b", NULL);
	/* null values, repeated keys (msg and ts too), a trace id */
	CHECK_LINE(PIN_LOG_WARN, "warn", "first", "4bf92f3577b34da6a3ce929d0e0e4736",
		"a", NULL, "b", "1", "a", "2", "msg", "m2", "ts", "t2", "b", NULL, NULL);
	/* ts replaced by null: the line has no time (as json-c had it) */
	pin_trace_set("4bf92f3577b34da6a3ce929d0e0e4736");
	capture_start();
	pin_log(PIN_LOG_INFO, "x", "traceId", "mine", "ts", NULL, NULL);
	got = capture_end();
	pin_trace_set(NULL);
	ck_assert_str_eq(got, "{\"ts\":null,\"level\":\"info\",\"msg\":\"x\",\"traceId\":\"mine\"}\n");
	free(got);
	/* a line far past the stack buffer */
	big = malloc(20001);
	for (int i = 0; i < 20000; i++)
		big[i] = "a\"\\\n\x01/"[i % 6];
	big[20000] = 0;
	CHECK_LINE(PIN_LOG_INFO, "info", "big", NULL, "big", big, "after", "y", NULL);
	free(big);
	/* more fields than the writer keeps on its stack (32), one repeated */
#define P5(x) x "0", "v0", x "1", "v1", x "2", NULL, x "3", "v3", x "4", "v4"
	CHECK_LINE(PIN_LOG_INFO, "info", "many", NULL, P5("a"), P5("b"), P5("c"), P5("d"),
		P5("e"), P5("f"), P5("g"), P5("h"), P5("i"), "a2", "again", NULL);
#undef P5
}
END_TEST

START_TEST(log_below_level)
{
	char *got;

	pin_log_set_level(PIN_LOG_WARN);
	capture_start();
	pin_log(PIN_LOG_INFO, "quiet", "k", "v", NULL);
	pin_log(PIN_LOG_DEBUG, "quiet", NULL);
	got = capture_end();
	pin_log_set_level(PIN_LOG_INFO);
	ck_assert_str_eq(got, "");
	free(got);
	/* and at the level, it is */
	capture_start();
	pin_log(PIN_LOG_INFO, "heard", NULL);
	got = capture_end();
	ck_assert_ptr_nonnull(strstr(got, "\"msg\":\"heard\""));
	free(got);
}
END_TEST

#define LOG_THREADS 4
#define LOG_LINES 2000

static void *log_many(void *arg)
{
	char v[600];

	memset(v, 'a' + (int)(long)arg, sizeof v - 1);
	v[sizeof v - 1] = 0;
	for (int i = 0; i < LOG_LINES; i++)
		pin_log(PIN_LOG_INFO, "line", "v", v, NULL);
	return NULL;
}

START_TEST(log_lines_whole_across_threads)
{
	pthread_t t[LOG_THREADS];
	char *got, *line, *save = NULL;
	int n = 0;

	capture_start();
	for (long i = 0; i < LOG_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, log_many, (void *)i), 0);
	for (int i = 0; i < LOG_THREADS; i++)
		pthread_join(t[i], NULL);
	got = capture_end();
	for (line = strtok_r(got, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_object *o = json_tokener_parse(line), *v;
		const char *s;

		ck_assert_msg(o != NULL, "line %d is not JSON", n);
		ck_assert(json_object_object_get_ex(o, "v", &v));
		s = json_object_get_string(v);
		ck_assert_uint_eq(strlen(s), 599);
		ck_assert_uint_eq(strspn(s, s[0] == 'a' ? "a" : s[0] == 'b' ? "b" :
				s[0] == 'c' ? "c" : "d"), 599);
		json_object_put(o);
		n++;
	}
	ck_assert_int_eq(n, LOG_THREADS * LOG_LINES);
	free(got);
}
END_TEST

/* check-all.c quiets the log unless PIN_TEST_VERBOSE: these tests read it */
static void log_on(void)
{
	pin_log_set_level(PIN_LOG_INFO);
}

static void log_restore(void)
{
	pin_log_set_level(getenv("PIN_TEST_VERBOSE") ? PIN_LOG_INFO : PIN_LOG_ERROR + 1);
}

Suite *make_log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_add_checked_fixture(tc, log_on, log_restore);

	tcase_add_test(tc, log_as_json_c);
	tcase_add_test(tc, log_below_level);
	tcase_add_test(tc, log_lines_whole_across_threads);
	suite_add_tcase(s, tc);
	return s;
}
