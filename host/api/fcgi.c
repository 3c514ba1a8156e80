/* fcgi.c -- API mode: the servers that feed the request pipeline
 * (request.c).  api_server = loop (default): fcgi_loop.c, an epoll I/O
 * thread + `threads` workers.  api_server = threads: libfcgi's threaded
 * responder, FCGX_Init once; per thread FCGX_InitRequest / FCGX_Accept_r /
 * FCGX_Finish_r (fcgi2 examples/threaded.c), one thread per kept-alive
 * nginx connection.  Both listen on FCGX_OpenSocket's socket.  SIGTERM: no
 * new connections, the requests in hand finish, the threads return. */
#include "config.h"
#include <errno.h>
#include <fcgiapp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>
#include "api.h"

static int listen_fd = -1;

/* ---- api_server = threads: libfcgi, one thread per nginx connection ------ */

static const char *lf_param(void *h, const char *name)
{
	return FCGX_GetParam(name, ((FCGX_Request *)h)->envp);
}

static int lf_read(void *h, char *buf, int n)
{
	return FCGX_GetStr(buf, n, ((FCGX_Request *)h)->in);
}

static void lf_write(void *h, const char *head, size_t hlen, const char *body,
		size_t blen)
{
	FCGX_Stream *out = ((FCGX_Request *)h)->out;

	FCGX_PutStr(head, (int)hlen, out);
	if (blen)
		FCGX_PutStr(body, (int)blen, out);
}

static void *worker(void *arg)
{
	FCGX_Request fr;
	struct pin_arena *a = pin_arena_new();
	const struct pin_fcgi_io io = { lf_param, lf_read, lf_write, &fr, 0, false };

	(void)arg;
	pin_arena_set_current(a);
	FCGX_InitRequest(&fr, listen_fd, FCGI_FAIL_ACCEPT_ON_INTR);
	while (!pin_stopping) {
		if (FCGX_Accept_r(&fr) < 0)
			break;
		pin_fcgi_handle(&io);
		FCGX_Finish_r(&fr);
		pin_arena_reset(a);
	}
	FCGX_Free(&fr, 1);
	pin_db_close_thread();
	pin_arena_free(a);
	return NULL;
}

/* the listening socket: listen is "unix:/path", "/path" or "host:port" */
struct listener {
	const char *listen;         /* as configured */
	const char *addr;           /* as FCGX_OpenSocket takes it */
	bool is_unix;
};

/* Opens listen_fd (a stale unix socket file is removed first) with
 * socket_mode / socket_group: nginx's workers reach it via the group. */
/* A TCP listen ("host:port", ":port") on other than a loopback address:
 * FastCGI carries no authentication and no encryption, and the host trusts
 * what nginx passes (REMOTE_ADDR, the headers), so anyone who reaches the
 * port is nginx as far as the host knows. */
static bool tcp_beyond_loopback(const char *listen)
{
	const char *colon = strrchr(listen, ':');
	size_t n = colon ? (size_t)(colon - listen) : 0;
	char host[256];

	if (!colon || n == 0 || n >= sizeof host)
		return true;              /* ":port" is every interface */
	memcpy(host, listen, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	return !(strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
		 strncmp(host, "127.", 4) == 0);
}

static int listener_open(struct listener *l, const char *listen)
{
	l->listen = l->addr = listen;
	l->is_unix = false;
	if (!strncmp(listen, "unix:", 5)) {
		l->addr = listen + 5;
		l->is_unix = true;
		unlink(l->addr);
	} else if (listen[0] == '/') {
		l->is_unix = true;
		unlink(l->addr);
	}
	if (!l->is_unix && tcp_beyond_loopback(listen) &&
	    !pin_config_bool("listen_trusted_network")) {
		pin_log(PIN_LOG_ERROR, "refusing a FastCGI listen beyond loopback: "
			"FastCGI has no authentication; set listen_trusted_network = "
			"true only on a network that nothing but nginx reaches",
			"listen", listen, NULL);
		return -1;
	}
	listen_fd = FCGX_OpenSocket(l->addr, 1024);
	if (listen_fd < 0) {
		pin_log(PIN_LOG_ERROR, "cannot listen", "listen", listen,
			"error", strerror(errno), NULL);
		return -1;
	}
	if (l->is_unix && pin_config_socket_perms(l->addr) < 0) {
		close(listen_fd);
		listen_fd = -1;
		return -1;
	}
	return 0;
}

static void listener_close(const struct listener *l)
{
	close(listen_fd);
	if (l->is_unix)
		unlink(l->addr);
}

/* The workers and the database gate (request.c): db_concurrency slots
 * (default 2 x cores); threads 0 means a worker per slot for the loop (no
 * gate), 2 x cores for libfcgi.  Returns the number of workers. */
static int size_workers(const char *server, int threads)
{
	long long cap = pin_config_int("db_concurrency");

	if (cap <= 0)
		cap = 2 * sysconf(_SC_NPROCESSORS_ONLN);
	if (threads < 1)
		threads = !strcmp(server, "loop") ? (int)cap :
			2 * (int)sysconf(_SC_NPROCESSORS_ONLN);
	pin_metric_set("pin_api_db_concurrency", NULL,
			pin_api_gate_open(cap, threads) ? cap : threads);
	return threads;
}

/* api_server = loop: fcgi_loop.c until SIGTERM */
static int run_loop(const struct listener *l, int threads)
{
	int rc = pin_fcgi_loop_run(listen_fd, threads, pin_fcgi_handle);

	listener_close(l);
	pin_api_gate_close();
	pin_log(PIN_LOG_INFO, rc == 0 ? "api host stopped" :
		"api host could not start", NULL);
	return rc;
}

/* SIGTERM came: no new connection; threads idle in accept() return at
 * once, threads parked on a kept-alive nginx connection get SIGUSR1
 * (EINTR) after a grace period that lets in-flight requests finish */
static void threads_stop(pthread_t *tids, int started)
{
	struct timespec dl;

	FCGX_ShutdownPending();
	shutdown(listen_fd, SHUT_RDWR);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 3;
	for (int i = 0; i < started; i++)
		if (pthread_timedjoin_np(tids[i], NULL, &dl) != 0) {
			pthread_kill(tids[i], SIGUSR1);
			pthread_join(tids[i], NULL);
		}
}

/* api_server = threads: libfcgi's responder threads until SIGTERM */
static int run_threads(const struct listener *l, int threads)
{
	pthread_t *tids = calloc((size_t)threads, sizeof *tids);
	int started = 0;
	char n[16];

	if (!tids) {
		pin_api_gate_close();
		return -1;
	}
	for (int i = 0; i < threads; i++) {
		if (pthread_create(&tids[i], NULL, worker, NULL) != 0)
			break;
		started++;
	}
	if (started == 0) {
		pin_log(PIN_LOG_ERROR, "no FastCGI thread could be started", NULL);
		pin_api_gate_close();
		listener_close(l);
		free(tids);
		return -1;
	}
	snprintf(n, sizeof n, "%d", started);
	pin_log(PIN_LOG_INFO, "api host listening", "listen", l->listen,
		"threads", n, NULL);
	pin_metric_set("pin_api_threads", NULL, started);
	/* main thread: wait for the signal thread to set pin_stopping */
	pin_wait_stop();
	threads_stop(tids, started);
	listener_close(l);
	free(tids);
	pin_api_gate_close();
	pin_log(PIN_LOG_INFO, "api host stopped", NULL);
	return 0;
}

int pin_api_run(const char *listen, int threads)
{
	const char *server = pin_config_str("api_server");
	struct listener l;

	if (strcmp(server, "loop") != 0 && strcmp(server, "threads") != 0) {
		pin_log(PIN_LOG_ERROR, "api_server must be loop or threads",
			"api_server", server, NULL);
		return -1;
	}
	if (FCGX_Init() != 0) {
		pin_log(PIN_LOG_ERROR, "FCGX_Init failed", NULL);
		return -1;
	}
	if (listener_open(&l, listen) < 0)
		return -1;
	threads = size_workers(server, threads);
	if (!strcmp(server, "loop"))
		return run_loop(&l, threads);
	return run_threads(&l, threads);
}
