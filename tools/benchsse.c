/* benchsse.c -- pin-benchsse: N EventSource subscribers of the in-app
 * notification stream, the way a browser opens one (doc/api.md "Real-time
 * notification stream"), for `./dev bench realtime` (tests/bench/realtime.sh).
 *
 *   pin-benchsse BASE_URL TOKENS_FILE OUT_FILE [--reconnect-every K] [--gap-ms MS]
 *
 * TOKENS_FILE: lines "userId jwt" (tests/bench/mint.py).  For each line, in
 * one libcurl multi (one thread, non-blocking): POST
 * /api/v1/me/notifications/stream-ticket with the JWT, then GET the answer's
 * streamUrl with Accept: text/event-stream through nginx, and keep it open.
 * At most 32 requests are in flight before their answer's headers (the
 * tickets and the stream auth go through the API host).  When every stream
 * answered (200, or refused) it prints "ready OPEN of N" on stdout.
 *
 * Every event (SSE lines id: / data: ended by a blank line) is recorded as
 *   <subscriber index> <arrival, unix us> <notification id> <resumed 0/1>
 * (arrival: CLOCK_REALTIME when libcurl handed over the bytes that ended
 * the event; resumed: arrived on a reopened stream).
 *
 * SIGUSR1: the reconnect step: every K-th subscriber (default 10: 100 of
 * 1000) closes its stream, and after MS (3000) opens the same streamUrl
 * again with the header Last-Event-ID: <the last id it saw>, as EventSource
 * does after a dropped connection.  Their close and reopen times go to
 * OUT_FILE.gaps as "<index> <closed us> <reopened us>".  A stream the server
 * ends is reopened the same way at once and counted as a drop.
 * SIGTERM / SIGINT: write OUT_FILE and a summary on stderr (events,
 * drops, the process's CPU seconds against the wall seconds: the client is
 * not the bottleneck while that share stays well below one core). */
#include "config.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <curl/curl.h>
#include "benchtool.h"

#define MAX_CONNECTING 32
#define LINE_MAX_LEN 8192

/* need a ticket, asking for one, ticket in hand, stream (opening or open),
 * closed for the reconnect step, refused */
enum phase { P_NEED_TICKET, P_TICKET, P_NEED_STREAM, P_STREAM, P_CLOSED, P_FAILED };

struct sub {
	CURL *e;
	int idx;
	enum phase ph;
	char user[40];
	char *jwt;
	char *url;              /* the stream URL (base + streamUrl) */
	char *body;             /* the ticket answer */
	size_t blen;
	char line[LINE_MAX_LEN];
	size_t llen;
	char cur_id[128];       /* SSE id of the event being read */
	char cur_ntf[40];       /* its notification id (from data:) */
	char last_id[128];      /* the last complete event's id */
	int open;               /* 200 received on the current stream */
	int resumed;            /* current stream was opened with Last-Event-ID */
	int in_gap;
	long long closed_us, reopen_us;
	struct curl_slist *hdr;
};

struct rec {
	int idx;
	long long at_us;
	char ntf[37];
	char resumed;
};

static struct sub *subs;
static int nsubs, connecting, nopen, drops, bad_status;
static struct rec *recs;
static size_t nrecs, caprecs;
static const char *base;
static CURLM *multi;
static volatile sig_atomic_t want_reconnect, want_stop;

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void on_sig(int s)
{
	if (s == SIGUSR1)
		want_reconnect = 1;
	else
		want_stop = 1;
}

static void record(struct sub *s, long long at)
{
	if (!s->cur_ntf[0])
		return;
	if (nrecs == caprecs) {
		caprecs = caprecs ? caprecs * 2 : 65536;
		recs = realloc(recs, caprecs * sizeof(*recs));
		if (!recs) {
			fprintf(stderr, "benchsse: out of memory\n");
			exit(1);
		}
	}
	recs[nrecs].idx = s->idx;
	recs[nrecs].at_us = at;
	memcpy(recs[nrecs].ntf, s->cur_ntf, 37);
	recs[nrecs].resumed = (char)s->resumed;
	nrecs++;
}

/* one SSE line (no newline) */
static void sse_line(struct sub *s, char *l, size_t n, long long at)
{
	l[n] = '\0';
	if (n && l[n - 1] == '\r')
		l[--n] = '\0';
	if (n == 0) {           /* end of an event */
		if (s->cur_ntf[0]) {
			record(s, at);
			if (s->cur_id[0])
				snprintf(s->last_id, sizeof(s->last_id), "%s", s->cur_id);
		}
		s->cur_id[0] = s->cur_ntf[0] = '\0';
		return;
	}
	if (strncmp(l, "id:", 3) == 0) {
		const char *v = l + 3 + (l[3] == ' ');

		snprintf(s->cur_id, sizeof(s->cur_id), "%s", v);
	} else if (strncmp(l, "data:", 5) == 0) {
		const char *p = strstr(l, "\"id\":\"");

		if (p && strlen(p + 6) >= 36) {
			memcpy(s->cur_ntf, p + 6, 36);
			s->cur_ntf[36] = '\0';
		}
	}
}

static size_t on_stream(char *d, size_t sz, size_t nm, void *ud)
{
	struct sub *s = ud;
	size_t n = sz * nm;
	long long at = now_us();

	for (size_t i = 0; i < n; i++) {
		if (d[i] == '\n') {
			sse_line(s, s->line, s->llen, at);
			s->llen = 0;
		} else if (s->llen < LINE_MAX_LEN - 1) {
			s->line[s->llen++] = d[i];
		}
	}
	return n;
}

static size_t on_ticket(char *d, size_t sz, size_t nm, void *ud)
{
	struct sub *s = ud;
	size_t n = sz * nm;
	char *b = realloc(s->body, s->blen + n + 1);

	if (!b)
		return 0;
	memcpy(b + s->blen, d, n);
	s->blen += n;
	b[s->blen] = '\0';
	s->body = b;
	return n;
}

/* the end of the stream's headers: 200 means open */
static size_t on_header(char *d, size_t sz, size_t nm, void *ud)
{
	struct sub *s = ud;
	size_t n = sz * nm;
	long code = 0;

	if (s->ph == P_STREAM && !s->open && (n == 2 || n == 1) && (d[0] == '\r' || d[0] == '\n')) {
		curl_easy_getinfo(s->e, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200) {
			s->open = 1;
			nopen++;
			connecting--;
		}
	}
	return n;
}

static void start_ticket(struct sub *s)
{
	char auth[4096];

	curl_easy_reset(s->e);
	curl_easy_setopt(s->e, CURLOPT_PRIVATE, s);
	snprintf(auth, sizeof(auth), "%s/api/v1/me/notifications/stream-ticket", base);
	curl_easy_setopt(s->e, CURLOPT_URL, auth);
	curl_easy_setopt(s->e, CURLOPT_POST, 1L);
	curl_easy_setopt(s->e, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(s->e, CURLOPT_POSTFIELDSIZE, 0L);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", s->jwt);
	curl_slist_free_all(s->hdr);
	s->hdr = curl_slist_append(NULL, auth);
	curl_easy_setopt(s->e, CURLOPT_HTTPHEADER, s->hdr);
	curl_easy_setopt(s->e, CURLOPT_WRITEFUNCTION, on_ticket);
	curl_easy_setopt(s->e, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->e, CURLOPT_TIMEOUT_MS, 30000L);
	s->ph = P_TICKET;
	connecting++;
	curl_multi_add_handle(multi, s->e);
}

static void start_stream(struct sub *s, int resume)
{
	char h[256];

	curl_easy_reset(s->e);
	curl_easy_setopt(s->e, CURLOPT_PRIVATE, s);
	curl_easy_setopt(s->e, CURLOPT_URL, s->url);
	curl_slist_free_all(s->hdr);
	s->hdr = curl_slist_append(NULL, "Accept: text/event-stream");
	/* as EventSource: the header only once an event had an id (without
	 * it nchan starts from the oldest message of the channel's buffer) */
	s->resumed = resume;
	if (resume && s->last_id[0]) {
		snprintf(h, sizeof(h), "Last-Event-ID: %s", s->last_id);
		s->hdr = curl_slist_append(s->hdr, h);
	}
	curl_easy_setopt(s->e, CURLOPT_HTTPHEADER, s->hdr);
	curl_easy_setopt(s->e, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(s->e, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(s->e, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(s->e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->e, CURLOPT_TCP_KEEPALIVE, 1L);
	s->ph = P_STREAM;
	s->open = 0;
	s->llen = 0;
	s->cur_id[0] = s->cur_ntf[0] = '\0';
	connecting++;
	curl_multi_add_handle(multi, s->e);
}

/* the streamUrl of the ticket answer, or -1 */
static int take_url(struct sub *s)
{
	const char *p = s->body ? strstr(s->body, "\"streamUrl\":\"") : NULL;
	const char *q;
	size_t bl = strlen(base), n;

	if (!p)
		return -1;
	p += 13;
	if (!(q = strchr(p, '"')))
		return -1;
	n = (size_t)(q - p);
	free(s->url);
	s->url = malloc(bl + n + 1);
	if (!s->url)
		return -1;
	memcpy(s->url, base, bl);
	memcpy(s->url + bl, p, n);
	s->url[bl + n] = '\0';
	return 0;
}

static void done(struct sub *s, CURLcode rc)
{
	long code = 0;

	curl_easy_getinfo(s->e, CURLINFO_RESPONSE_CODE, &code);
	curl_multi_remove_handle(multi, s->e);
	if (s->ph == P_TICKET) {
		connecting--;
		if (rc != CURLE_OK || code != 200 || take_url(s) < 0) {
			fprintf(stderr, "benchsse: ticket of subscriber %d: %s, status %ld\n",
				s->idx, curl_easy_strerror(rc), code);
			bad_status++;
			s->ph = P_FAILED;
			return;
		}
		s->ph = P_NEED_STREAM;  /* opened by the loop, within the limit */
		s->blen = 0;
		s->last_id[0] = '\0';
		return;
	}
	if (s->ph == P_STREAM) {
		if (s->open)
			nopen--;
		else
			connecting--;
		if (!s->open && code != 200) {
			fprintf(stderr, "benchsse: stream of subscriber %d: %s, status %ld\n",
				s->idx, curl_easy_strerror(rc), code);
			bad_status++;
			s->ph = P_FAILED;
			return;
		}
		/* the server ended an open stream: EventSource reopens it */
		drops++;
		start_stream(s, 1);
	}
}

static void close_for_gap(struct sub *s, long long at)
{
	if (s->ph != P_STREAM)
		return;
	curl_multi_remove_handle(multi, s->e);
	if (s->open)
		nopen--;
	else
		connecting--;
	s->open = 0;
	s->ph = P_CLOSED;
	s->in_gap = 1;
	s->closed_us = at;
}

int main(int argc, char **argv)
{
	const char *tokf, *outf;
	int every = 10, ready = 0, reopen_pending = 0;
	long gap_ms = 3000;
	long long gap_at = 0;
	double cpu0, wall0;
	struct rlimit rl;
	char line[8192];
	FILE *f;

	if (argc < 4) {
		fprintf(stderr, "usage: pin-benchsse BASE_URL TOKENS_FILE OUT_FILE "
			"[--reconnect-every K] [--gap-ms MS]\n");
		return 2;
	}
	base = argv[1];
	tokf = argv[2];
	outf = argv[3];
	for (int i = 4; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--reconnect-every") == 0)
			every = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--gap-ms") == 0)
			gap_ms = atol(argv[i + 1]);
	}
	if (every < 1)
		every = 1;
	/* one descriptor per stream */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!(f = fopen(tokf, "r"))) {
		fprintf(stderr, "benchsse: %s: %s\n", tokf, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');
		struct sub *s;

		if (!sp)
			continue;
		line[strcspn(line, "\r\n")] = '\0';
		*sp = '\0';
		if (strlen(line) >= sizeof(subs[0].user))
			continue;
		subs = realloc(subs, (size_t)(nsubs + 1) * sizeof(*subs));
		if (!subs)
			return 1;
		s = &subs[nsubs];
		memset(s, 0, sizeof(*s));
		s->idx = nsubs++;
		memcpy(s->user, line, strlen(line) + 1);
		s->jwt = strdup(sp + 1);
		s->e = curl_easy_init();
		s->ph = P_NEED_TICKET;
	}
	fclose(f);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(multi = curl_multi_init()))
		return 1;
	signal(SIGUSR1, on_sig);
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	signal(SIGPIPE, SIG_IGN);
	cpu0 = bt_run_s(0);
	wall0 = bt_mono();
	while (!want_stop) {
		int running, q;
		CURLMsg *m;
		long long t = now_us();

		/* start what waits, within the limit of requests in flight */
		for (int i = 0; i < nsubs && connecting < MAX_CONNECTING; i++) {
			struct sub *s = &subs[i];

			if (s->ph == P_NEED_TICKET)
				start_ticket(s);
			else if (s->ph == P_NEED_STREAM)
				start_stream(s, 0);
		}
		if (!ready && nopen + bad_status >= nsubs) {
			ready = 1;
			printf("ready %d of %d\n", nopen, nsubs);
			fflush(stdout);
		}
		if (want_reconnect) {
			want_reconnect = 0;
			for (int i = 0; i < nsubs; i += every)
				close_for_gap(&subs[i], t);
			gap_at = t + gap_ms * 1000;
			reopen_pending = 1;
		}
		if (reopen_pending && t >= gap_at) {
			reopen_pending = 0;
			for (int i = 0; i < nsubs; i++)
				if (subs[i].ph == P_CLOSED) {
					subs[i].reopen_us = now_us();
					start_stream(&subs[i], 1);
				}
		}
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &q)))
			if (m->msg == CURLMSG_DONE) {
				struct sub *s;

				curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
				done(s, m->data.result);
			}
		curl_multi_poll(multi, NULL, 0, 50, NULL);
	}
	{
		double cpu = bt_run_s(0) - cpu0, wall = bt_mono() - wall0;
		char gp[4096];
		FILE *o = fopen(outf, "w"), *g;
		int ng = 0;

		if (!o) {
			fprintf(stderr, "benchsse: %s: %s\n", outf, strerror(errno));
			return 1;
		}
		for (size_t i = 0; i < nrecs; i++)
			fprintf(o, "%d\t%s\t%lld\t%s\t%d\n", recs[i].idx, subs[recs[i].idx].user,
				recs[i].at_us, recs[i].ntf, recs[i].resumed);
		fclose(o);
		snprintf(gp, sizeof(gp), "%s.gaps", outf);
		if ((g = fopen(gp, "w"))) {
			for (int i = 0; i < nsubs; i++)
				if (subs[i].in_gap) {
					fprintf(g, "%d\t%s\t%lld\t%lld\n", i, subs[i].user,
						subs[i].closed_us, subs[i].reopen_us);
					ng++;
				}
			fclose(g);
		}
		fprintf(stderr, "benchsse: subscribers %d open %d events %zu drops %d "
			"refused %d reconnected %d cpu %.2f s wall %.2f s\n",
			nsubs, nopen, nrecs, drops, bad_status, ng, cpu, wall);
	}
	for (int i = 0; i < nsubs; i++) {
		if (subs[i].ph == P_STREAM || subs[i].ph == P_TICKET)
			curl_multi_remove_handle(multi, subs[i].e);
		curl_easy_cleanup(subs[i].e);
		curl_slist_free_all(subs[i].hdr);
	}
	curl_multi_cleanup(multi);
	return bad_status ? 1 : 0;
}
