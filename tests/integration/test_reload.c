/*
 * test_reload.c -- SIGHUP (systemctl reload) on a running API host: an
 * identity provider's key rotation done the way providers do it (the next
 * key published ahead, the old one retired), with keys made by the openssl
 * command; a bad file refused with the running configuration kept; a key
 * that needs a restart named and kept; and requests answered throughout.
 *
 * The host is the stack's API host configuration plus a file of its own
 * (include = the stack's file, then the keys under test), on its own socket.
 */
#include "config.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "harness.h"
#include "../common/jose.h"

static pid_t host_pid = -1;

static const char *dir(void)
{
	return h_sprintf("%s/reload-test", h_env("PIN_DEV_DIR"));
}

static const char *sock_path(void)
{
	return h_sprintf("%s/reload-test.sock", h_env("PIN_DEV_DIR"));
}

static const char *conf_path(void)
{
	return h_sprintf("%s/api.conf", dir());
}

static const char *jwks_path(void)
{
	return h_sprintf("%s/jwks.json", dir());
}

/* writes text to path through a temporary file and rename (what an operator's
 * fetch-then-mv does), so a reload never reads half a file */
static void put_file(const char *path, const char *text)
{
	const char *tmp = h_sprintf("%s.new", path);
	FILE *f = fopen(tmp, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, path), 0);
}

static void write_conf(const char *extra)
{
	put_file(conf_path(), h_sprintf(
		"include = %s\n"
		"jwt_jwks_file = %s\n"
		"%s", h_env("PIN_CONFIG"), jwks_path(), extra ? extra : ""));
}

/* a key made by the openssl command, read back */
static EVP_PKEY *openssl_key(const char *name, const char *genpkey_args)
{
	const char *pem = h_sprintf("%s/%s.pem", dir(), name);
	EVP_PKEY *k;
	FILE *f;

	ck_assert_int_eq(system(h_sprintf("openssl genpkey %s -out %s 2>/dev/null",
			genpkey_args, pem)), 0);
	f = fopen(pem, "r");
	ck_assert_ptr_nonnull(f);
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	ck_assert_ptr_nonnull(k);
	return k;
}

/* the public JWK of k (copied into the test's arena) */
static char *jwk(EVP_PKEY *k, const char *kid)
{
	char *j = jose_jwk(k, kid, NULL), *out = h_strdup(j);

	free(j);
	return out;
}

/* an agent's token for the stack's issuer and audience, signed with k */
static char *token(EVP_PKEY *k, const char *kid)
{
	int ec = EVP_PKEY_get_base_id(k) == EVP_PKEY_EC;
	const char *hdr = h_sprintf("{\"alg\":\"%s\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
		ec ? "ES256" : "RS256", kid);
	const char *pl = h_sprintf("{\"iss\":\"pin-dev\",\"aud\":\"pin-calendar\","
		"\"sub\":\"%s\",\"tenant_id\":\"%s\",\"actor\":\"agent\","
		"\"permissions\":[\"calendar.events.view\"],\"exp\":%lld}",
		h_uuid(), h_uuid(), (long long)time(NULL) + 600);
	char *t = jose_sign(k, hdr, pl), *out = h_strdup(t);

	free(t);
	return out;
}

static const char *events_uri(void)
{
	return "/api/v1/agent/calendar/events?from=2026-12-01T00:00:00Z"
		"&to=2027-01-01T00:00:00Z";
}

/* the status the host gives this token */
static long status_of(const char *tok)
{
	struct h_resp *r = h_fcgi(sock_path(), "GET", events_uri(), tok, NULL);

	if (r->status != 200)
		printf("reload: %ld %s (%s)\n", r->status, r->body ? r->body : "",
			h_header(r, "WWW-Authenticate") ? h_header(r, "WWW-Authenticate") : "");
	return r->status;
}

static double metric(const char *series)
{
	return h_fcgi_metric(sock_path(), series);
}

/* SIGHUP, then waits for the outcome: the generation (ok) or the refused
 * counter to move; returns true when the reload was taken; every request
 * sent meanwhile (the agent's list with tok) must be answered 200 */
static bool hup(const char *tok, int *sent)
{
	double gen = metric("pin_config_generation");
	double refused = metric("pin_config_reloads_total{result=\"refused\"}");
	int64_t until = h_now_ms() + 20000;

	ck_assert_int_eq(kill(host_pid, SIGHUP), 0);
	for (;;) {
		long st = status_of(tok);

		ck_assert_msg(st == 200, "a request during a reload got %ld", st);
		(*sent)++;
		/* the outcome, then half a second more of the load client's
		 * requests on what the reload left */
		if (metric("pin_config_generation") > gen) {
			h_sleep_ms(500);
			return true;
		}
		if (metric("pin_config_reloads_total{result=\"refused\"}") > refused) {
			h_sleep_ms(500);
			return false;
		}
		ck_assert_msg(h_now_ms() < until, "the reload had no outcome in 20 s");
	}
}

/* A second client beside the test's own: a child process sending the
 * agent's list with tok on a connection of its own each time, as fast as it
 * can, until load_stop; what it counted comes back through a file. */
static pid_t load_pid = -1;

static const char *load_file(const char *what)
{
	return h_sprintf("%s/load.%s", dir(), what);
}

static void load_start(const char *tok)
{
	unlink(load_file("stop"));
	unlink(load_file("out"));
	load_pid = fork();
	ck_assert_int_ge(load_pid, 0);
	if (load_pid == 0) {
		long sent = 0, failed = 0;
		int64_t worst = 0;
		FILE *f;

		while (access(load_file("stop"), F_OK) != 0) {
			int64_t t0 = h_now_ms();
			struct h_resp *r = h_fcgi(sock_path(), "GET", events_uri(), tok, NULL);

			if (h_now_ms() - t0 > worst)
				worst = h_now_ms() - t0;
			sent++;
			if (r->status != 200) {
				failed++;
				fprintf(stderr, "load client: status %ld %s\n", r->status,
					r->body ? r->body : "");
			}
			h_resp_free(r);
		}
		f = fopen(load_file("out"), "w");
		if (f) {
			fprintf(f, "%ld %ld %lld\n", sent, failed, (long long)worst);
			fclose(f);
		}
		_exit(0);
	}
}

static long load_worst_ms;       /* the slowest answer the client had */

static void load_stop(long *sent, long *failed)
{
	FILE *f;
	int status;

	f = fopen(load_file("stop"), "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(waitpid(load_pid, &status, 0), load_pid);
	load_pid = -1;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"the load client died (status %d)", status);
	f = fopen(load_file("out"), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%ld %ld %ld", sent, failed, &load_worst_ms), 3);
	fclose(f);
}

static const char *pid_path(void)
{
	return h_sprintf("%s/host.pid", dir());
}

static pid_t successor = -1;     /* a host started by a handover (not our child) */

static void host_start(void)
{
	const char *args[] = { "--config", conf_path(), "--pid-file", pid_path(), NULL };

	host_pid = h_fcgi_host_start(sock_path(), "api-reload", args);
}

static long pid_in_file(void)
{
	FILE *f = fopen(pid_path(), "r");
	long pid = 0;

	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	return pid;
}

static void host_stop(void)
{
	int status;

	if (host_pid > 0) {
		kill(host_pid, SIGTERM);
		waitpid(host_pid, &status, 0);
	}
	host_pid = -1;
	if (successor > 0) {
		kill(successor, SIGTERM);
		H_WAIT_UNTIL(kill(successor, 0) != 0, 20000);
		if (kill(successor, 0) == 0)
			kill(successor, SIGKILL);
	}
	successor = -1;
	unlink(sock_path());
}

/* SIGUSR2 to the host running as pid: waits until the successor named in the
 * pid file serves and pid is gone; returns the successor */
static pid_t handover(pid_t pid, bool our_child)
{
	int status = 0;
	long next;

	ck_assert_int_eq(kill(pid, SIGUSR2), 0);
	if (our_child) {
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"the predecessor did not stop cleanly (status %d)", status);
		host_pid = -1;
	} else {
		ck_assert_msg(H_WAIT_UNTIL(kill(pid, 0) != 0, 30000),
			"the predecessor %ld did not stop", (long)pid);
	}
	next = pid_in_file();
	ck_assert_msg(next > 0 && next != (long)pid && kill((pid_t)next, 0) == 0,
		"no successor in the pid file (%ld)", next);
	return (pid_t)next;
}

START_TEST(key_rotation_by_reload)
{
	EVP_PKEY *a, *b;
	const char *ta, *tb;
	int sent = 0;

	ck_assert_int_eq(system(h_sprintf("rm -rf %s && mkdir -p %s", dir(), dir())), 0);
	a = openssl_key("a", "-algorithm RSA -pkeyopt rsa_keygen_bits:2048");
	b = openssl_key("b", "-algorithm EC -pkeyopt ec_paramgen_curve:P-256");
	ta = token(a, "key-a");
	tb = token(b, "key-b");

	/* the provider signs with a */
	put_file(jwks_path(), h_sprintf("{\"keys\":[%s]}", jwk(a, "key-a")));
	write_conf(NULL);
	host_start();
	ck_assert_double_eq(metric("pin_config_generation"), 1);
	ck_assert_int_eq(status_of(ta), 200);
	ck_assert_int_eq(status_of(tb), 401);

	/* it publishes b ahead of signing with it: both are good */
	put_file(jwks_path(), h_sprintf("{\"keys\":[%s,%s]}", jwk(a, "key-a"),
		jwk(b, "key-b")));
	ck_assert(hup(ta, &sent));
	ck_assert_double_eq(metric("pin_config_generation"), 2);
	ck_assert_int_eq(status_of(ta), 200);
	ck_assert_int_eq(status_of(tb), 200);
	/* from here on b's tokens stay good, and a second client sends them
	 * all along the next four reloads */
	load_start(tb);

	/* it retires a: a's tokens are refused from this reload on */
	put_file(jwks_path(), h_sprintf("{\"keys\":[%s]}", jwk(b, "key-b")));
	ck_assert(hup(tb, &sent));
	ck_assert_int_eq(status_of(ta), 401);
	ck_assert_int_eq(status_of(tb), 200);

	/* a broken key set: refused, the running keys stay */
	put_file(jwks_path(), "{\"keys\":[");
	ck_assert(!hup(tb, &sent));
	ck_assert_double_eq(metric("pin_config_generation"), 3);
	ck_assert_int_eq(status_of(tb), 200);
	put_file(jwks_path(), h_sprintf("{\"keys\":[%s]}", jwk(b, "key-b")));

	/* a typo in the file: refused whole, even the good key beside it */
	write_conf("log_level = debug\napi_read_timeout_mss = 5\n");
	ck_assert(!hup(tb, &sent));
	ck_assert_double_eq(metric("pin_config_generation"), 3);

	/* a key that needs a restart: named, kept; the reloadable one applied */
	write_conf("log_level = debug\nthreads = 3\n");
	ck_assert(hup(tb, &sent));
	ck_assert_double_eq(metric("pin_config_keys_needing_restart"), 1);
	ck_assert_double_eq(metric("pin_config_reloads_total{result=\"ok\"}"), 3);
	ck_assert_double_eq(metric("pin_config_reloads_total{result=\"refused\"}"), 2);
	ck_assert_int_eq(status_of(tb), 200);
	{
		char *log = h_slurp(h_sprintf("%s/logs/worker-once.log",
			h_env("PIN_DEV_DIR")));

		ck_assert_ptr_nonnull(log);
		ck_assert_msg(strstr(log, "key needs a restart") &&
			strstr(log, "\"key\":\"threads\""), "restart-only key not named");
		ck_assert_msg(strstr(log, "unknown key") &&
			strstr(log, "api_read_timeout_mss"), "the typo not named");
		ck_assert_msg(strstr(log, "\"msg\":\"configuration: key reloaded\","
			"\"key\":\"log_level\""), "log_level = debug not applied");
	}
	{
		long lsent = 0, lfailed = 0;

		load_stop(&lsent, &lfailed);
		printf("reload: 5 reloads; the test's own requests %d, the load "
			"client's %ld through the last four, %ld not 200\n", sent,
			lsent, lfailed);
		ck_assert_int_gt(sent, 0);
		ck_assert_int_gt(lsent, 50);
		ck_assert_int_eq(lfailed, 0);
	}
	host_stop();
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
}
END_TEST

/* A restart that drops nothing: the host hands its listening socket to a
 * new process (SIGUSR2, the way ./dev restart api does it; systemd's socket
 * unit gives the same fd 3 to the next process) while a client sends
 * requests all along: every one is answered 200. */
START_TEST(restart_drops_nothing)
{
	EVP_PKEY *b;
	const char *tb;
	long sent = 0, failed = 0;
	pid_t first;

	ck_assert_int_eq(system(h_sprintf("rm -rf %s && mkdir -p %s", dir(), dir())), 0);
	b = openssl_key("b", "-algorithm EC -pkeyopt ec_paramgen_curve:P-256");
	tb = token(b, "key-b");
	put_file(jwks_path(), h_sprintf("{\"keys\":[%s]}", jwk(b, "key-b")));
	write_conf(NULL);
	host_start();
	first = host_pid;
	ck_assert_int_eq(pid_in_file(), first);
	ck_assert_int_eq(status_of(tb), 200);

	load_start(tb);
	h_sleep_ms(500);
	successor = handover(first, true);
	h_sleep_ms(500);
	/* the successor is the binary on disk, its configuration read anew;
	 * and it hands over in turn */
	ck_assert_double_eq(metric("pin_config_generation"), 1);
	successor = handover(successor, false);
	h_sleep_ms(500);
	load_stop(&sent, &failed);
	printf("restart: 2 handovers under load: %ld requests, %ld failed, the "
		"slowest answer %ld ms\n", sent, failed, load_worst_ms);
	ck_assert_int_gt(sent, 50);
	ck_assert_int_eq(failed, 0);
	ck_assert_int_eq(status_of(tb), 200);
	ck_assert_msg(access(sock_path(), F_OK) == 0, "the socket file was removed");
	host_stop();
	/* the last one stopped without a successor: its pid file is gone */
	ck_assert_int_eq(pid_in_file(), 0);
	EVP_PKEY_free(b);
}
END_TEST

static void teardown(void)
{
	if (load_pid > 0) {
		kill(load_pid, SIGKILL);
		waitpid(load_pid, NULL, 0);
		load_pid = -1;
	}
	host_stop();
}

Suite *make_reload_suite(void)
{
	Suite *s = suite_create("reload");
	TCase *tc = h_tcase("reload", 120);

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, key_rotation_by_reload);
	tcase_add_test(tc, restart_drops_nothing);
	suite_add_tcase(s, tc);
	return s;
}
