/*
 * cdp.c -- headless Chromium for the suites that look at a page the way a
 * user's browser does (stream, manage).  The driver is tests/integration/
 * cdp.mjs under node, one JSON command a line on its stdin, one JSON answer
 * a line on its stdout; one driver at a time per process.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static pid_t cdp_pid = -1;
static int cdp_in = -1, cdp_out = -1;
static char cdp_buf[65536];
static size_t cdp_len;

/* Next line from the driver within ms; harness string or NULL. */
static char *cdp_line(int ms)
{
	int64_t end = h_now_ms() + ms;

	for (;;) {
		char *nl = memchr(cdp_buf, '\n', cdp_len);
		struct pollfd p = { cdp_out, POLLIN, 0 };
		ssize_t n;
		int left;

		if (nl) {
			char *line;

			*nl = '\0';
			line = h_strdup(cdp_buf);
			cdp_len -= (size_t)(nl + 1 - cdp_buf);
			memmove(cdp_buf, nl + 1, cdp_len);
			return line;
		}
		left = (int)(end - h_now_ms());
		if (left <= 0 || cdp_len == sizeof(cdp_buf))
			return NULL;
		if (poll(&p, 1, left) <= 0)
			continue;
		n = read(cdp_out, cdp_buf + cdp_len, sizeof(cdp_buf) - cdp_len);
		if (n <= 0)
			return NULL;
		cdp_len += (size_t)n;
	}
}

void h_cdp_start(void)
{
	int in[2], out[2];
	char *script = h_sprintf("%s/tests/integration/cdp.mjs", h_env("PIN_SOURCE_DIR"));
	char *line;
	json_object *j;

	ck_assert(pipe(in) == 0 && pipe(out) == 0);
	cdp_pid = fork();
	ck_assert(cdp_pid >= 0);
	if (cdp_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		/* chromium is not instrumented: no sanitizer runtime options */
		unsetenv("ASAN_OPTIONS");
		unsetenv("UBSAN_OPTIONS");
		execlp("node", "node", "--experimental-websocket", "--no-warnings", script,
			h_env_opt("PIN_CHROMIUM", "chromium"), (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	cdp_in = in[1];
	cdp_out = out[0];
	cdp_len = 0;
	line = cdp_line(60000);
	ck_assert_msg(line != NULL, "cdp driver did not start");
	j = json_tokener_parse(line);
	ck_assert_msg(j && json_object_get_boolean(h_jget(j, "ready")), "cdp: %s", line);
	json_object_put(j);
}

void h_cdp_stop(void)
{
	int st, i;

	if (cdp_pid <= 0)
		return;
	close(cdp_in);
	for (i = 0; i < 100; i++) {
		if (waitpid(cdp_pid, &st, WNOHANG) == cdp_pid)
			break;
		h_sleep_ms(100);
	}
	if (i == 100) {
		kill(cdp_pid, SIGKILL);
		waitpid(cdp_pid, &st, 0);
	}
	close(cdp_out);
	cdp_pid = -1;
}

char *h_cdp(const char *cmd)
{
	char *line, *s = h_sprintf("%s\n", cmd), *v;
	json_object *j;

	ck_assert((size_t)write(cdp_in, s, strlen(s)) == strlen(s));
	line = cdp_line(30000);
	ck_assert_msg(line != NULL, "cdp: no answer to %s", cmd);
	j = json_tokener_parse(line);
	ck_assert_msg(j && json_object_get_boolean(h_jget(j, "ok")), "cdp %s: %s", cmd, line);
	v = h_strdup(json_object_to_json_string_ext(h_jget(j, "value"), JSON_C_TO_STRING_PLAIN));
	json_object_put(j);
	return v;
}

char *h_cdp_op(const char *op, const char *key, const char *arg)
{
	json_object *c = json_object_new_object();
	char *cmd;

	json_object_object_add(c, "op", json_object_new_string(op));
	json_object_object_add(c, key, json_object_new_string(arg));
	cmd = h_strdup(json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN));
	json_object_put(c);
	return h_cdp(cmd);
}
