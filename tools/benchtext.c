/* benchtext.c -- pin-benchtext: CPU per call of the host's per-message text
 * writers, before (tools/textref.h: json-c objects, stdio, one
 * getrandom per uuid) and now (log.c, outbox.c's pin_envelope_text, uuid.c),
 * alternated in one process (doc/performance.md "Per-message text: log lines, envelopes, message ids").
 *
 *   pin-benchtext [-n CALLS] [-r ROUNDS] [--log-file PATH]
 *
 * Each round runs CALLS of every writer, old and new in turn; the figure is
 * the median over the rounds of the thread's CPU time per call (ns).  Log
 * lines go to --log-file (default /dev/null: the system call without the
 * file system); a consumer writes one per message it handles, the outbox one
 * envelope and one uuid per row.  The payload is an event-created payload of
 * the bench's size. */
#include "config.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core.h"
#include "textref.h"

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static const char *const log_kv[] = { "messageId", "9d156118-f1d2-4148-a5a4-3f0f76daa3c4",
	"topic", "pin.calendar.reminder-due.v1", "eventId",
	"b0000000-0000-4000-8010-00000000c351", "reason", "stale", NULL };
static const char trace_id[] = "7263ed83987447bc40d377e6109db1d6";
static json_object *payload;
static char sink[37];

/* the old logger: the line built by json-c, fputs + fputc on stderr */
static void old_log(void)
{
	char ts[40];
	char *s = ref_log_text(pin_clock_fmt(pin_clock_now_us(), ts, sizeof ts), "info",
			"notifications: skipped-stale", trace_id, log_kv);
	size_t n = strlen(s);

	flockfile(stderr);
	s[n - 1] = 0;
	fputs(s, stderr);
	fputc('\n', stderr);
	fflush(stderr);
	funlockfile(stderr);
	free(s);
}

static void new_log(void)
{
	pin_log(PIN_LOG_INFO, "notifications: skipped-stale", log_kv[0], log_kv[1], log_kv[2],
		log_kv[3], log_kv[4], log_kv[5], log_kv[6], log_kv[7], NULL);
}

static void old_env(void)
{
	free(ref_envelope("01936f3e-8d2a-7b4c-9e8f-1a2b3c4d5e6f", "2026-12-03T07:00:00.123Z",
		"pin.calendar.event-created", "CalendarEvent",
		"b0000000-0000-4000-8010-000000000001", trace_id, payload));
}

static void new_env(void)
{
	free(pin_envelope_text("01936f3e-8d2a-7b4c-9e8f-1a2b3c4d5e6f", "2026-12-03T07:00:00.123Z",
		"pin.calendar.event-created", "CalendarEvent",
		"b0000000-0000-4000-8010-000000000001", payload));
}

static void old_uuid(void)
{
	ref_uuid_v7(pin_clock_now_us() / 1000, sink);
}

static void new_uuid(void)
{
	pin_uuid_v7(sink);
}

struct writer { const char *name; void (*old_fn)(void), (*new_fn)(void); };

int main(int argc, char **argv)
{
	static const struct writer w[] = {
		{ "log line", old_log, new_log },
		{ "envelope", old_env, new_env },
		{ "uuid v7", old_uuid, new_uuid },
	};
	enum { NW = sizeof w / sizeof w[0] };
	long n = 100000, rounds = 7;
	const char *log_file = "/dev/null";
	double *t[NW][2];
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atol(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			rounds = atol(argv[++i]);
		else if (!strcmp(argv[i], "--log-file") && i + 1 < argc)
			log_file = argv[++i];
		else {
			fprintf(stderr, "usage: pin-benchtext [-n CALLS] [-r ROUNDS] [--log-file PATH]\n");
			return 2;
		}
	}
	if (n < 1 || rounds < 1)
		return 2;
	payload = json_tokener_parse("{\"eventId\":\"b0000000-0000-4000-8010-000000000001\","
		"\"tenantId\":\"b0000000-0000-4000-8000-00000000000a\",\"ownerUserId\":"
		"\"b0000000-0000-4000-8005-000000000017\",\"kind\":\"BookingDeadline\","
		"\"origin\":\"CrmBooking\",\"startAt\":\"2027-01-15T09:00:00Z\",\"endAt\":"
		"\"2027-01-15T09:30:00Z\",\"timeZone\":\"Europe/Moscow\",\"priority\":\"High\","
		"\"status\":\"Scheduled\",\"bookingId\":\"b0000000-0000-4000-8008-000000000001\","
		"\"dealId\":\"b0000000-0000-4000-8007-000000000017\",\"phase\":\"Reserve\","
		"\"reminders\":[{\"offsetMinutes\":1440},{\"offsetMinutes\":60}]}");
	fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (!payload || fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
		perror("pin-benchtext");
		return 1;
	}
	close(fd);
	pin_trace_set(trace_id);
	for (int k = 0; k < NW; k++)
		for (int v = 0; v < 2; v++)
			if (!(t[k][v] = calloc((size_t)rounds, sizeof(double))))
				return 1;
	for (long r = 0; r < rounds; r++)
		for (int k = 0; k < NW; k++)
			for (int v = 0; v < 2; v++) {
				void (*fn)(void) = v ? w[k].new_fn : w[k].old_fn;
				double t0 = cpu_ns();

				for (long i = 0; i < n; i++)
					fn();
				t[k][v][r] = (cpu_ns() - t0) / (double)n;
			}
	printf("%-10s %12s %12s %7s   (thread CPU per call, median of %ld rounds of %ld)\n",
		"writer", "before ns", "now ns", "ratio", rounds, n);
	for (int k = 0; k < NW; k++) {
		double before, now;

		qsort(t[k][0], (size_t)rounds, sizeof(double), cmp_d);
		qsort(t[k][1], (size_t)rounds, sizeof(double), cmp_d);
		before = t[k][0][rounds / 2];
		now = t[k][1][rounds / 2];
		printf("%-10s %12.0f %12.0f %7.2f\n", w[k].name, before, now, now / before);
		free(t[k][0]);
		free(t[k][1]);
	}
	json_object_put(payload);
	return 0;
}
