/*
 * metrics.c -- counters, gauges and histograms rendered as Prometheus text
 * (exposition format 0.0.4, valid for `promtool check metrics`), the
 * process_* basics and pin_build_info, and the worker host's tiny HTTP
 * listener (metrics_listen: GET /metrics and /healthz, plain HTTP, one
 * thread; the API host serves /metrics through FastCGI).
 */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "core.h"
#include "pin/plugin.h"

enum kind { K_COUNTER, K_GAUGE, K_HIST };

/* seconds: 1 ms .. 60 s */
static const double hbuckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define NB (sizeof hbuckets / sizeof hbuckets[0])
/* the same bounds in milliseconds, for a histogram whose name ends in
 * "_ms" (the seeds' notifications_enqueue_duration_ms,
 * calendar_crm_booking_sync_consume_duration_ms; ABI 1.8) */
static const double hbuckets_ms[NB] = { 1, 2.5, 5, 10, 25, 50, 100, 250, 500,
	1000, 2500, 5000, 10000, 30000, 60000 };

static bool name_is_ms(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && !strcmp(name + n - 3, "_ms");
}

struct series {
	char *name;
	char *labels;
	double v;               /* counter/gauge value; histogram sum */
	enum kind kind;
	unsigned hash;
	uint64_t *counts;       /* histogram: NB bucket counts (not cumulative) */
	uint64_t n;             /* histogram: count */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct series *ser;
static size_t nser, capser;
static double start_time;

static unsigned hash2(const char *a, const char *b)
{
	unsigned h = 2166136261u;
	for (; *a; a++)
		h = (h ^ (unsigned char)*a) * 16777619u;
	h = (h ^ '|') * 16777619u;
	for (; b && *b; b++)
		h = (h ^ (unsigned char)*b) * 16777619u;
	return h;
}

static struct series *get(const char *name, const char *labels, enum kind k)
{
	unsigned h = hash2(name, labels);
	const char *l = labels ? labels : "";
	struct series s = { 0 };

	for (size_t i = 0; i < nser; i++)
		if (ser[i].hash == h && strcmp(ser[i].name, name) == 0 &&
		    strcmp(ser[i].labels, l) == 0)
			return ser[i].kind == k ? &ser[i] : NULL;
	if (nser == capser) {
		size_t nc = capser ? capser * 2 : 64;
		struct series *n = realloc(ser, nc * sizeof *n);
		if (!n)
			return NULL;
		ser = n;
		capser = nc;
	}
	s.name = strdup(name);
	s.labels = strdup(l);
	s.kind = k;
	s.hash = h;
	if (k == K_HIST)
		s.counts = calloc(NB, sizeof *s.counts);
	if (!s.name || !s.labels || (k == K_HIST && !s.counts)) {
		free(s.name);
		free(s.labels);
		free(s.counts);
		return NULL;
	}
	ser[nser] = s;
	return &ser[nser++];
}

void pin_metric_add(const char *name, const char *labels, double v)
{
	struct series *s;

	pthread_mutex_lock(&mu);
	s = get(name, labels, K_COUNTER);
	if (s)
		s->v += v;
	pthread_mutex_unlock(&mu);
}

void pin_metric_set(const char *name, const char *labels, double v)
{
	struct series *s;

	pthread_mutex_lock(&mu);
	s = get(name, labels, K_GAUGE);
	if (s)
		s->v = v;
	pthread_mutex_unlock(&mu);
}

void pin_metric_observe(const char *name, const char *labels, double v)
{
	struct series *s;

	pthread_mutex_lock(&mu);
	s = get(name, labels, K_HIST);
	if (s) {
		const double *b = name_is_ms(name) ? hbuckets_ms : hbuckets;

		for (size_t i = 0; i < NB; i++)
			if (v <= b[i]) {
				s->counts[i]++;
				break;
			}
		s->n++;
		s->v += v;
	}
	pthread_mutex_unlock(&mu);
}

void pin_metric_hist_declare(const char *name, const char *labels)
{
	pthread_mutex_lock(&mu);
	get(name, labels, K_HIST);
	pthread_mutex_unlock(&mu);
}

static int by_name(const void *a, const void *b)
{
	const struct series *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->labels, y->labels);
}

static void hist_line(FILE *f, const struct series *s, const char *le, uint64_t v)
{
	fprintf(f, "%s_bucket{%s%sle=\"%s\"} %llu\n", s->name, s->labels,
		s->labels[0] ? "," : "", le, (unsigned long long)v);
}

static void render_hist(FILE *f, const struct series *s)
{
	uint64_t cum = 0;
	char le[32];
	const double *b = name_is_ms(s->name) ? hbuckets_ms : hbuckets;

	for (size_t i = 0; i < NB; i++) {
		cum += s->counts[i];
		snprintf(le, sizeof le, "%g", b[i]);
		hist_line(f, s, le, cum);
	}
	hist_line(f, s, "+Inf", s->n);
	if (s->labels[0]) {
		fprintf(f, "%s_sum{%s} %.17g\n", s->name, s->labels, s->v);
		fprintf(f, "%s_count{%s} %llu\n", s->name, s->labels,
			(unsigned long long)s->n);
	} else {
		fprintf(f, "%s_sum %.17g\n", s->name, s->v);
		fprintf(f, "%s_count %llu\n", s->name, (unsigned long long)s->n);
	}
}

/* -------------------------------------------------------- process basics */

double pin_metrics_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void pin_metrics_init(void)
{
	if (start_time == 0)
		start_time = (double)pin_clock_now_us() / 1e6;
}

static double proc_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, rss = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static double proc_cpu(void)
{
	FILE *f = fopen("/proc/self/stat", "r");
	char buf[1024], *p;
	unsigned long ut = 0, st = 0;
	double r = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
		   &ut, &st) == 2)
		r = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	fclose(f);
	return r;
}

static int proc_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the directory's own fd */
}

static void render_process(FILE *f)
{
	fprintf(f, "# HELP pin_build_info Build of this host: version and plugin ABI.\n"
		"# TYPE pin_build_info gauge\n"
		"pin_build_info{version=\"%s\",abi=\"%d.%d\"} 1\n",
		PACKAGE_VERSION, PIN_ABI_MAJOR, PIN_ABI_MINOR);
	fprintf(f, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
		"# TYPE process_cpu_seconds_total counter\n"
		"process_cpu_seconds_total %.17g\n", proc_cpu());
	fprintf(f, "# HELP process_open_fds Number of open file descriptors.\n"
		"# TYPE process_open_fds gauge\n"
		"process_open_fds %d\n", proc_fds());
	fprintf(f, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
		"# TYPE process_resident_memory_bytes gauge\n"
		"process_resident_memory_bytes %.17g\n", proc_rss());
	fprintf(f, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
		"# TYPE process_start_time_seconds gauge\n"
		"process_start_time_seconds %.17g\n", start_time);
}

static const char *kind_name(enum kind k)
{
	return k == K_GAUGE ? "gauge" : k == K_HIST ? "histogram" : "counter";
}

static void (*collector)(void);

void pin_metrics_collector(void (*fn)(void))
{
	__atomic_store_n(&collector, fn, __ATOMIC_RELEASE);
}

char *pin_metrics_render(void)
{
	void (*collect)(void) = __atomic_load_n(&collector, __ATOMIC_ACQUIRE);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct series *copy;
	size_t n;

	if (!f)
		return NULL;
	if (collect)
		collect();
	render_process(f);
	pthread_mutex_lock(&mu);
	n = nser;
	copy = malloc((n ? n : 1) * sizeof *copy);
	if (copy) {
		memcpy(copy, ser, n * sizeof *copy);   /* names are never freed while running */
		for (size_t i = 0; i < n; i++)
			if (copy[i].kind == K_HIST) {   /* a snapshot of the counts */
				uint64_t *c = malloc(NB * sizeof *c);
				if (c)
					memcpy(c, ser[i].counts, NB * sizeof *c);
				else
					copy[i].kind = K_GAUGE;   /* rendered below as skipped */
				copy[i].counts = c;
			}
	}
	pthread_mutex_unlock(&mu);
	if (!copy) {
		fclose(f);
		free(buf);
		return NULL;
	}
	qsort(copy, n, sizeof *copy, by_name);
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(copy[i].name, copy[i - 1].name) != 0)
			fprintf(f, "# HELP %s PIN metric %s.\n# TYPE %s %s\n",
				copy[i].name, copy[i].name, copy[i].name,
				kind_name(copy[i].kind));
		if (copy[i].kind == K_HIST)
			render_hist(f, &copy[i]);
		else if (copy[i].labels[0])
			fprintf(f, "%s{%s} %.17g\n", copy[i].name, copy[i].labels, copy[i].v);
		else
			fprintf(f, "%s %.17g\n", copy[i].name, copy[i].v);
		if (copy[i].kind == K_HIST)
			free(copy[i].counts);
	}
	free(copy);
	fclose(f);
	return buf;
}

void pin_metrics_free(void)
{
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nser; i++) {
		free(ser[i].name);
		free(ser[i].labels);
		free(ser[i].counts);
	}
	free(ser);
	ser = NULL;
	nser = capser = 0;
	pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------ worker HTTP listener */

static int lfd = -1;
static int wake[2] = { -1, -1 };
static pthread_t ltid;
static bool lrunning;

static void http_answer(int fd, int status, const char *ctype, const char *body)
{
	char head[256];
	size_t blen = strlen(body), off = 0;
	int hl = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		"Content-Length: %zu\r\nConnection: close\r\n\r\n", status,
		status == 200 ? "OK" : status == 404 ? "Not Found" : "Method Not Allowed",
		ctype, blen);

	if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) != hl)
		return;
	while (off < blen) {
		ssize_t w = send(fd, body + off, blen - off, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static void serve(int fd)
{
	char req[4096], *sp, *q;
	size_t got = 0;
	struct timeval tv = { 2, 0 };
	bool head;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	while (got < sizeof req - 1) {
		ssize_t r = recv(fd, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[got] = '\0';
	head = !strncmp(req, "HEAD ", 5);
	if (strncmp(req, "GET ", 4) && !head) {
		http_answer(fd, 405, "text/plain", "method not allowed\n");
		return;
	}
	sp = req + (head ? 5 : 4);
	q = sp + strcspn(sp, " ?\r\n");
	*q = '\0';
	if (!strcmp(sp, "/metrics")) {
		char *m = pin_metrics_render();
		http_answer(fd, 200, "text/plain; version=0.0.4; charset=utf-8",
			    head ? "" : m ? m : "");
		free(m);
	} else if (!strcmp(sp, "/healthz")) {
		http_answer(fd, 200, "application/json", head ? "" : "{\"status\":\"ok\"}");
	} else {
		http_answer(fd, 404, "text/plain", "not found\n");
	}
}

static void *listen_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = { { lfd, POLLIN, 0 }, { wake[0], POLLIN, 0 } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				poll(NULL, 0, 100);   /* do not spin while out of fds */
			continue;
		}
		serve(fd);
		close(fd);
	}
	return NULL;
}

/* "host:port" or "[v6]:port".  0 ok (or addr empty: off), -1 refused. */
int pin_metrics_listen_start(const char *addr)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char host[256];
	const char *colon, *port;
	int one = 1, rc = -1, e;

	if (!addr || !*addr)
		return 0;
	colon = strrchr(addr, ':');
	if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host ||
	    !colon[1]) {
		pin_log(PIN_LOG_ERROR, "metrics_listen is not host:port", "value", addr, NULL);
		return -1;
	}
	port = colon + 1;
	if (addr[0] == '[' && colon[-1] == ']') {
		memcpy(host, addr + 1, (size_t)(colon - addr) - 2);
		host[colon - addr - 2] = '\0';
	} else {
		memcpy(host, addr, (size_t)(colon - addr));
		host[colon - addr] = '\0';
	}
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((e = getaddrinfo(host, port, &hints, &ai)) != 0) {
		pin_log(PIN_LOG_ERROR, "metrics_listen: cannot resolve", "value", addr,
			"error", gai_strerror(e), NULL);
		return -1;
	}
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		goto out;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 16) < 0) {
		pin_log(PIN_LOG_ERROR, "metrics_listen: cannot listen", "value", addr,
			"error", strerror(errno), NULL);
		goto out;
	}
	if (pipe2(wake, O_CLOEXEC) < 0)
		goto out;
	if (pthread_create(&ltid, NULL, listen_main, NULL) != 0)
		goto out;
	lrunning = true;
	pin_log(PIN_LOG_INFO, "metrics listener started", "listen", addr, NULL);
	rc = 0;
out:
	freeaddrinfo(ai);
	if (rc < 0)
		pin_metrics_listen_stop();
	return rc;
}

void pin_metrics_listen_stop(void)
{
	if (lrunning) {
		ssize_t w = write(wake[1], "x", 1);
		(void)w;
		pthread_join(ltid, NULL);
		lrunning = false;
	}
	for (int i = 0; i < 2; i++)
		if (wake[i] >= 0) {
			close(wake[i]);
			wake[i] = -1;
		}
	if (lfd >= 0) {
		close(lfd);
		lfd = -1;
	}
}
