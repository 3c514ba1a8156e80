/* fcgi.c -- API mode: the servers that feed the request pipeline
 * (request.c).  api_server = loop (default): fcgi_loop.c, an epoll I/O
 * thread + `threads` workers.  api_server = threads: libfcgi's threaded
 * responder, FCGX_Init once; per thread FCGX_InitRequest / FCGX_Accept_r /
 * FCGX_Finish_r (fcgi2 examples/threaded.c), one thread per kept-alive
 * nginx connection.  Both listen on FCGX_OpenSocket's socket.  SIGTERM: no
 * new connections, the requests in hand finish, the threads return.
 *
 * The listening socket may outlive the process (a restart that drops
 * nothing): taken from systemd's socket unit (sd_listen_fds(3)'s LISTEN_PID
 * / LISTEN_FDS, fd 3) or handed to a successor on SIGUSR2 (pin_api_handover:
 * the binary at the same path, same arguments, fd 3, which tells this
 * process to stop once it has the socket).  A shared socket is never shut
 * down or unlinked here: the connections queued on it are the next
 * process's. */
#include "config.h"
#include <errno.h>
#include <fcgiapp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "api.h"

static int listen_fd = -1;
static bool listen_shared;       /* from systemd / a predecessor, or handed on */

bool pin_api_listen_shared(void)
{
	return __atomic_load_n(&listen_shared, __ATOMIC_ACQUIRE);
}

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

/* A kept-alive connection's next request starts where this one's STDIN
 * ends: libfcgi reads the next BEGIN_REQUEST from there.  A handler that
 * needs no body (a GET) leaves STDIN unread, and the empty record that ends
 * it may come after the response was written (a peer that writes its
 * records one by one); libfcgi would then read that record as the next
 * request's first, take it for a protocol error and close the connection.
 * So STDIN is read to its end before FCGX_Finish_r, at most
 * PIN_API_DRAIN_MAX bytes: past that the connection is closed after the
 * answer, as the loop server does.  The answer is flushed first: it does
 * not wait for that record (only END_REQUEST does). */
static void finish_stdin(FCGX_Request *fr)
{
	char buf[8192];
	size_t total = 0;
	int n;

	if (!fr->keepConnection || !fr->in)
		return;
	FCGX_FFlush(fr->out);
	while ((n = FCGX_GetStr(buf, sizeof buf, fr->in)) > 0)
		if ((total += (size_t)n) > PIN_API_DRAIN_MAX) {
			fr->keepConnection = 0;
			return;
		}
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
		finish_stdin(&fr);
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

/* sd_listen_fds(3)'s protocol without libsystemd: one listening socket on
 * fd 3 when LISTEN_PID is this process; -1 none, -2 unusable (logged) */
static int inherited_fd(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	int acc = 0;
	socklen_t len = sizeof acc;

	if (!pid || !fds || atol(pid) != (long)getpid())
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (strcmp(fds, "1") != 0) {
		pin_log(PIN_LOG_ERROR, "LISTEN_FDS: exactly one socket expected "
			"(one ListenStream= in the socket unit)", "listen_fds", fds, NULL);
		return -2;
	}
	if (getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc) {
		pin_log(PIN_LOG_ERROR, "LISTEN_FDS: fd 3 is not a listening socket", NULL);
		return -2;
	}
	fcntl(3, F_SETFD, FD_CLOEXEC);
	return 3;
}

static int listener_open(struct listener *l, const char *listen)
{
	int fd = inherited_fd();

	if (fd == -2)
		return -1;
	if (fd >= 0) {
		/* systemd (or the predecessor) made it and set its mode and group;
		 * the listen key is not used */
		l->listen = l->addr = listen;
		l->is_unix = false;
		listen_fd = fd;
		listen_shared = true;
		pin_log(PIN_LOG_INFO, "listening socket inherited (LISTEN_FDS), "
			"listen key not used", "listen", listen, NULL);
		return 0;
	}
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
	if (l->is_unix && !pin_api_listen_shared())
		unlink(l->addr);
}

/* ---- handing the socket to a successor (SIGUSR2) ---------------------------- */

static char exec_path[4096];     /* this binary's path, read at start */
static char *const *exec_argv;
static char **exec_envp;         /* environ + LISTEN_* + PIN_HANDOVER_FROM */
static char listen_pid_var[32];  /* "LISTEN_PID=<child>", filled in the child */
static char from_var[48];        /* "PIN_HANDOVER_FROM=<this pid>" */

void pin_api_set_exec(char *const argv[])
{
	ssize_t n = readlink("/proc/self/exe", exec_path, sizeof exec_path - 1);

	/* the path, not the inode: after an upgrade the successor is the new
	 * binary */
	exec_path[n > 0 ? n : 0] = '\0';
	if (n > 10 && !strcmp(exec_path + n - 10, " (deleted)"))
		exec_path[n - 10] = '\0';
	exec_argv = argv;
}

/* async-signal-safe decimal of v at the end of buf (which has room) */
static void put_long(char *buf, long v)
{
	char tmp[24];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (n)
		*buf++ = tmp[--n];
	*buf = '\0';
}

static int build_envp(void)
{
	extern char **environ;
	size_t n = 0, k = 0;

	for (char **e = environ; *e; e++)
		n++;
	free(exec_envp);
	exec_envp = calloc(n + 4, sizeof *exec_envp);
	if (!exec_envp)
		return -1;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "LISTEN_", 7) && strncmp(*e, "PIN_HANDOVER_FROM=", 18))
			exec_envp[k++] = *e;
	/* static, like the array's other own strings: the forked child
	 * execs from its copy of them; a repeated SIGUSR2 rewrites the same
	 * bytes (one pid) and allocates nothing */
	snprintf(from_var, sizeof from_var, "PIN_HANDOVER_FROM=%ld", (long)getpid());
	exec_envp[k++] = from_var;
	exec_envp[k++] = (char *)"LISTEN_FDS=1";
	exec_envp[k++] = listen_pid_var;
	exec_envp[k] = NULL;
	return 0;
}

int pin_api_handover(void)
{
	sigset_t none;
	pid_t pid;
	char num[24];

	if (listen_fd < 0 || !exec_argv || !exec_path[0] || pin_stopping) {
		pin_log(PIN_LOG_WARN, "SIGUSR2: no listening socket to hand over", NULL);
		return -1;
	}
	if (build_envp() < 0)
		return -1;
	sigemptyset(&none);
	pid = fork();
	if (pid < 0) {
		pin_log(PIN_LOG_ERROR, "SIGUSR2: fork failed", "error", strerror(errno),
			NULL);
		return -1;
	}
	if (pid == 0) {
		/* only async-signal-safe calls from here to execve */
		memcpy(listen_pid_var, "LISTEN_PID=", 11);
		put_long(listen_pid_var + 11, (long)getpid());
		if (listen_fd != 3) {
			if (dup2(listen_fd, 3) < 0)
				_exit(127);
		} else if (fcntl(3, F_SETFD, 0) < 0) {
			_exit(127);
		}
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(exec_path, exec_argv, exec_envp);
		_exit(127);
	}
	__atomic_store_n(&listen_shared, true, __ATOMIC_RELEASE);
	snprintf(num, sizeof num, "%ld", (long)pid);
	pin_log(PIN_LOG_INFO, "handover: successor started on the listening socket; "
		"this host stops when it serves", "successor_pid", num,
		"binary", exec_path, NULL);
	pin_metric_add("pin_api_handovers_total", NULL, 1);
	return 0;
}

/* the successor's side: the socket is ours, the predecessor may stop (its
 * requests in hand finish; new connections queue for us) */
static void handover_done(void)
{
	const char *from = getenv("PIN_HANDOVER_FROM");
	long pid = from ? atol(from) : 0;

	if (!from)
		return;
	unsetenv("PIN_HANDOVER_FROM");
	if (pid > 1 && pid == (long)getppid() && pin_api_listen_shared()) {
		kill((pid_t)pid, SIGTERM);
		pin_log(PIN_LOG_INFO, "handover: listening socket taken, predecessor "
			"told to stop", "predecessor_pid", from, NULL);
	}
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
	int rc = pin_fcgi_loop_run(listen_fd, &listen_shared, threads, pin_fcgi_handle);

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
	/* a shared socket stays up for the next process; threads blocked in
	 * accept() get SIGUSR1 below */
	if (!pin_api_listen_shared())
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

	/* libfcgi accepts blocking; the loop sets O_NONBLOCK.  The flag belongs
	 * to the socket, so it is shared with a predecessor or successor: a
	 * handover keeps api_server (operating.md) */
	if (pin_api_listen_shared())
		fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) & ~O_NONBLOCK);

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
	handover_done();
	if (!strcmp(server, "loop"))
		return run_loop(&l, threads);
	return run_threads(&l, threads);
}
