/* fcgi_loop.c -- API mode: the event-loop FastCGI server (api_server = loop,
 * the default).
 *
 * One I/O thread owns the listening socket and every idle nginx connection
 * (epoll; each connection armed EPOLLONESHOT).  It reads FastCGI records
 * until a request is complete (BEGIN_REQUEST, the PARAMS stream, the STDIN
 * stream) and puts the connection on a FIFO.  `workers` threads take from
 * the FIFO, run the request pipeline (the caller's handle: fcgi.c's
 * pin_fcgi_handle), write the
 * response records themselves and give the connection back: re-armed, or
 * closed when nginx did not ask for FCGI_KEEP_CONN.  A connection is owned
 * by exactly one thread at a time (armed: epoll's; fired: the I/O thread;
 * queued or running: one worker), so nothing else locks it.
 *
 * Why (doc/performance.md "The FastCGI server"): libfcgi's threaded server binds a
 * thread to each kept-alive nginx connection; with 64 of them and a gate of
 * 4 database slots a request cost 3.5-3.9 context switches in the host (read
 * wake-up, the gate, the database round trip).  Here a loaded worker finds
 * the next request waiting and sleeps only for its database round trip.
 *
 * Protocol (FastCGI 1.0): one request at a time per connection (nginx never
 * multiplexes; a second BEGIN_REQUEST gets FCGI_CANT_MPX_CONN), responder
 * role only (others get FCGI_UNKNOWN_ROLE), FCGI_GET_VALUES answered,
 * FCGI_ABORT_REQUEST of a request still being read ends it, other
 * management records get FCGI_UNKNOWN_TYPE.  These replies are written
 * without waiting (a peer that does not read them is disconnected): the I/O
 * thread never blocks on a socket.  STDIN past PIN_MAX_BODY + 1 bytes is read
 * and dropped, PIN_API_DRAIN_MAX bytes at the most: the pipeline answers 413 (the
 * body never reaches a handler), and a connection whose STDIN goes on past
 * the drain bound is closed after that answer; PARAMS past 64 KiB close the
 * connection.  A response is written by its worker within 30 s in all, or
 * the connection is dropped.
 *
 * Hostile or broken peers (the socket is nginx's; a TCP listen is for a
 * trusted network only): a request must be whole within api_read_timeout_ms
 * of its first byte, and a kept-alive connection with no request may stay
 * idle api_idle_timeout_ms (longer than nginx's upstream keepalive_timeout,
 * so nginx closes first); past either the I/O thread closes it (checked
 * once a second).  At most api_max_connections are open: the next one is
 * accepted and closed at once.  Each is counted in
 * pin_api_connections_closed_total{reason} / pin_api_connections_refused_total.
 *
 * SIGTERM: no new connections; whole requests (queued or running) are
 * answered and their connections then closed; the I/O thread keeps reading
 * for up to 3 s so that a request nginx has already sent is not lost,
 * whether it is half read or its connection was accepted just before the
 * stop with nothing read yet; idle kept-alive connections and requests
 * still incomplete after that are closed. */
#include "config.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include "api.h"

enum {
	FC_BEGIN = 1, FC_ABORT = 2, FC_END = 3, FC_PARAMS = 4, FC_STDIN = 5,
	FC_STDOUT = 6, FC_GET_VALUES = 9, FC_GET_VALUES_RESULT = 10,
	FC_UNKNOWN_TYPE = 11
};
#define FC_KEEP_CONN 1
#define FC_RESPONDER 1
#define FC_REQUEST_COMPLETE 0
#define FC_CANT_MPX_CONN 1
#define FC_UNKNOWN_ROLE 3

#define FC_REC_MAX 65535                  /* content bytes of one record */
#define FC_IN_MAX (8 + FC_REC_MAX + 255)  /* one whole record */
#define FC_IN_START 8192                  /* nginx's requests fit; grows */
#define FC_PARAMS_MAX (64 * 1024)         /* nginx's headers: 32 KiB at most */
#define FC_STDIN_MAX (PIN_MAX_BODY + 1)   /* more: 413 by Content-Length */
#define FC_KEEP_MAX (64 * 1024)           /* buffers kept between requests */
#define FC_WRITE_TIMEOUT_MS 30000         /* nginx's fastcgi_read_timeout */
#define FC_GRACE_MS 3000                  /* SIGTERM: in-flight requests */
#define FC_SWEEP_MS 1000                  /* deadlines checked this often */

struct fc_conn {
	int fd;
	unsigned char *in;                /* unparsed bytes */
	size_t in_len, in_cap;
	/* the request being read (id 0: none) */
	unsigned req_id;
	bool keep, params_done, stdin_done, stdin_over, dead;
	bool served;                      /* a request was answered on it (atomic) */
	size_t dropped;                   /* STDIN bytes past FC_STDIN_MAX */
	/* deadlines (the I/O thread's sweep): armed_ms, when the connection
	 * was last handed to epoll (0: a thread holds it; atomic: a worker
	 * re-arms under all_mu); req_t0, the first byte of the request being
	 * read (0: none, the connection is idle) */
	int64_t armed_ms;
	double req_t0;
	double t_ready;                   /* the request was whole (enqueue) */
	char *params;                     /* the raw PARAMS stream */
	size_t params_len, params_cap;
	char *names;                      /* decoded: "name\0value\0..." */
	size_t names_cap;
	const char **kv;                  /* kv[2i] name, kv[2i+1] value */
	int nkv, kv_cap;
	char *body;
	size_t body_len, body_cap, body_off;
	struct fc_conn *qnext;            /* the FIFO */
	struct fc_conn *prev, *next;      /* every connection (shutdown) */
};

static int ep = -1, stop_ev = -1, lfd = -1;
static const bool *listen_shared;          /* the socket is another process's too */
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_conn *q_head, *q_tail;
static bool q_closed;
/* Idle workers, the one that became idle last on top: a request goes to
 * it (its CPU caches and its PostgreSQL backend are the warmest).  A
 * condition variable woke the longest idle one instead: on this 2-core VM
 * that cost a sequential request 0.12-0.25 ms (doc/performance.md
 * "The FastCGI server").  Each waits on its own semaphore, posted after q_mu is
 * released (the gate in fcgi.c does the same). */
struct fc_idle {
	sem_t go;
	struct fc_conn *c;                /* handed over; NULL: leave */
	struct fc_idle *next;
};
static struct fc_idle *idle_top;
static int busy;                          /* queued or in a worker (atomic) */
static bool io_stopping;                  /* SIGTERM: close, do not re-arm */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_conn *all;
static const char STOP_TAG;               /* epoll tag of the stop eventfd */
static void (*handle_fn)(const struct pin_fcgi_io *io);
/* api_read_timeout_ms, api_idle_timeout_ms, api_max_connections */
static int64_t read_timeout_ms, idle_timeout_ms;
static int max_conns, nconns;             /* nconns: the I/O thread's */

/* ---- connections ---------------------------------------------------------- */

static void conn_free(struct fc_conn *c)
{
	pthread_mutex_lock(&all_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		all = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&all_mu);
	close(c->fd);                     /* also leaves the epoll set */
	__atomic_sub_fetch(&nconns, 1, __ATOMIC_RELAXED);
	free(c->in);
	free(c->params);
	free(c->names);
	free(c->kv);
	free(c->body);
	free(c);
}

/* a buffer that grew past FC_KEEP_MAX for one request is not kept for
 * the connection's next ones */
static void shrink(char **buf, size_t *cap)
{
	if (*cap > FC_KEEP_MAX) {
		free(*buf);
		*buf = NULL;
		*cap = 0;
	}
}

static void req_reset(struct fc_conn *c)
{
	c->req_id = 0;
	c->keep = c->params_done = c->stdin_done = c->stdin_over = false;
	c->dropped = 0;
	c->req_t0 = 0;
	c->params_len = 0;
	c->nkv = 0;
	c->body_len = c->body_off = 0;
	shrink(&c->params, &c->params_cap);
	shrink(&c->names, &c->names_cap);
	shrink(&c->body, &c->body_cap);
	if (c->kv_cap > 256) {
		free(c->kv);
		c->kv = NULL;
		c->kv_cap = 0;
	}
}

static bool arm(struct fc_conn *c)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
		.data.ptr = c };

	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e) == 0;
}

static double now_ms(void)
{
	return pin_metrics_mono_s() * 1e3;
}

/* A worker writes every byte of iov (a blocking write on a non-blocking
 * socket: the connection belongs to it), within FC_WRITE_TIMEOUT_MS in all.
 * false: the peer is gone or too slow. */
static bool write_all(int fd, struct iovec *iov, int n)
{
	double deadline = now_ms() + FC_WRITE_TIMEOUT_MS;

	while (n > 0) {
		struct msghdr m = { .msg_iov = iov,
			.msg_iovlen = (size_t)(n < IOV_MAX ? n : IOV_MAX) };
		ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (k < 0) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			double left = deadline - now_ms();

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return false;
			if (left < 1 || poll(&p, 1, (int)left) <= 0)
				return false;
			continue;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return true;
}

/* A short reply from record() (management records, refusals, the end of an
 * aborted request): written now or not at all -- the I/O thread must not
 * wait on a peer that does not read.  false: close the connection. */
static bool write_now(int fd, const void *buf, size_t n)
{
	ssize_t k;

	do
		k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)n;
}

static void rec_head(unsigned char *h, int type, unsigned id, size_t len)
{
	h[0] = 1;
	h[1] = (unsigned char)type;
	h[2] = (unsigned char)(id >> 8);
	h[3] = (unsigned char)id;
	h[4] = (unsigned char)(len >> 8);
	h[5] = (unsigned char)len;
	h[6] = 0;
	h[7] = 0;
}

/* END_REQUEST record (with the empty STDOUT that closes the stream first
 * when with_stdout) */
static bool send_end(struct fc_conn *c, unsigned id, int proto, bool with_stdout)
{
	unsigned char b[24] = { 0 };
	size_t off = 0;

	if (with_stdout) {
		rec_head(b, FC_STDOUT, id, 0);
		off = 8;
	}
	rec_head(b + off, FC_END, id, 8);
	b[off + 8 + 4] = (unsigned char)proto;     /* appStatus 0 */
	return write_now(c->fd, b, off + 16);
}

/* ---- the request, as fcgi.c sees it -------------------------------------- */

static const char *io_param(void *h, const char *name)
{
	struct fc_conn *c = h;

	for (int i = 0; i < c->nkv; i++)
		if (!strcmp(c->kv[2 * i], name))
			return c->kv[2 * i + 1];
	return NULL;
}

static int io_read(void *h, char *buf, int n)
{
	struct fc_conn *c = h;
	size_t k = c->body_len - c->body_off;

	if (n <= 0 || k == 0)
		return 0;
	if (k > (size_t)n)
		k = (size_t)n;
	memcpy(buf, c->body + c->body_off, k);
	c->body_off += k;
	return (int)k;
}

/* head + body as STDOUT records, the stream's end, END_REQUEST: one sendmsg
 * for a response of up to 64 KiB */
static void io_write(void *h, const char *head, size_t hlen, const char *body,
		size_t blen)
{
	struct fc_conn *c = h;
	size_t total = hlen + blen, nrec = (total + FC_REC_MAX - 1) / FC_REC_MAX;
	size_t niov = nrec * 3 + 1, done = 0;
	unsigned char hd_small[4][8], (*hd)[8] = hd_small;
	struct iovec iov_small[4 * 3 + 1], *iov = iov_small;
	unsigned char end[24] = { 0 };
	int n = 0;

	if (nrec > 4) {                   /* over 256 KiB: rare */
		hd = malloc(nrec * sizeof *hd);
		iov = malloc(niov * sizeof *iov);
		if (!hd || !iov) {
			free(hd);
			free(iov);
			c->dead = true;
			return;
		}
	}
	for (size_t r = 0; r < nrec; r++) {
		size_t len = total - done < FC_REC_MAX ? total - done : FC_REC_MAX;

		rec_head(hd[r], FC_STDOUT, c->req_id, len);
		iov[n].iov_base = hd[r];
		iov[n++].iov_len = 8;
		/* the record's bytes: what is left of head, then of body */
		if (done < hlen) {
			size_t k = hlen - done < len ? hlen - done : len;

			iov[n].iov_base = (char *)head + done;
			iov[n++].iov_len = k;
			if (k < len) {
				iov[n].iov_base = (char *)body;
				iov[n++].iov_len = len - k;
			}
		} else {
			iov[n].iov_base = (char *)body + (done - hlen);
			iov[n++].iov_len = len;
		}
		done += len;
	}
	rec_head(end, FC_STDOUT, c->req_id, 0);
	rec_head(end + 8, FC_END, c->req_id, 8);
	iov[n].iov_base = end;
	iov[n++].iov_len = 24;
	if (!write_all(c->fd, iov, n))
		c->dead = true;
	if (hd != hd_small) {
		free(hd);
		free(iov);
	}
}

/* ---- reading records ------------------------------------------------------ */

static bool append(char **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		size_t nc = *cap ? *cap : 4096;
		char *b;

		while (nc < *len + n)
			nc *= 2;
		if (!(b = realloc(*buf, nc)))
			return false;
		*buf = b;
		*cap = nc;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	return true;
}

static size_t nv_len(const unsigned char *p, size_t avail, size_t *used)
{
	if (avail >= 1 && !(p[0] & 0x80)) {
		*used = 1;
		return p[0];
	}
	if (avail < 4) {
		*used = 0;
		return 0;
	}
	*used = 4;
	return ((size_t)(p[0] & 0x7f) << 24) | ((size_t)p[1] << 16) |
		((size_t)p[2] << 8) | p[3];
}

/* The PARAMS stream is complete: decode its name-value pairs into
 * c->names ("name\0value\0...") with kv[] pointing into it.  The buffers
 * stay with the connection for its next request. */
static bool params_decode(struct fc_conn *c)
{
	const unsigned char *p = (const unsigned char *)c->params;
	size_t left = c->params_len, need = c->params_len * 2 + 2;
	char *o;
	int n = 0;

	if (need > c->names_cap) {
		char *b = realloc(c->names, need);

		if (!b)
			return false;
		c->names = b;
		c->names_cap = need;
	}
	o = c->names;
	while (left > 0) {
		size_t u1, u2, nl, vl;

		nl = nv_len(p, left, &u1);
		if (!u1)
			return false;
		p += u1;
		left -= u1;
		vl = nv_len(p, left, &u2);
		if (!u2)
			return false;
		p += u2;
		left -= u2;
		if (nl > left || vl > left - nl)
			return false;
		if (n + 1 > c->kv_cap) {
			int cap = c->kv_cap ? c->kv_cap * 2 : 32;
			const char **k = realloc(c->kv, (size_t)cap * 2 * sizeof *k);

			if (!k)
				return false;
			c->kv = k;
			c->kv_cap = cap;
		}
		/* each pair takes nl + vl + 2 bytes of names and at least
		 * u1 + u2 + nl + vl >= 2 of the stream: need is enough */
		c->kv[2 * n] = o;
		memcpy(o, p, nl);
		o += nl;
		*o++ = '\0';
		c->kv[2 * n + 1] = o;
		memcpy(o, p + nl, vl);
		o += vl;
		*o++ = '\0';
		p += nl + vl;
		left -= nl + vl;
		n++;
	}
	c->nkv = n;
	return true;
}

/* A management record (request id 0). */
static bool management(struct fc_conn *c, int type, const unsigned char *body,
		size_t len)
{
	unsigned char b[8 + 64];

	if (type == FC_GET_VALUES) {
		/* FCGI_MPXS_CONNS is all nginx could ask; "0": one at a time */
		static const char kv[] = "\x0f\x01" "FCGI_MPXS_CONNS" "0";
		bool asked = false;

		for (size_t i = 0; i + 15 <= len && !asked; i++)
			asked = !memcmp(body + i, "FCGI_MPXS_CONNS", 15);
		size_t n = asked ? sizeof kv - 1 : 0;

		rec_head(b, FC_GET_VALUES_RESULT, 0, n);
		memcpy(b + 8, kv, n);
		return write_now(c->fd, b, 8 + n);
	}
	rec_head(b, FC_UNKNOWN_TYPE, 0, 8);
	memset(b + 8, 0, 8);
	b[8] = (unsigned char)type;
	return write_now(c->fd, b, 16);
}

/* One record.  1: the request is complete, 0: go on, -1: close the
 * connection. */
static int record(struct fc_conn *c, int type, unsigned id,
		const unsigned char *body, size_t len)
{
	if (id == 0)
		return management(c, type, body, len) ? 0 : -1;
	switch (type) {
	case FC_BEGIN:
		if (len < 8)
			return -1;
		if (c->req_id)
			return send_end(c, id, FC_CANT_MPX_CONN, false) ? 0 : -1;
		if ((body[0] << 8 | body[1]) != FC_RESPONDER)   /* then closes
								  * unless kept */
			return send_end(c, id, FC_UNKNOWN_ROLE, false) &&
				(body[2] & FC_KEEP_CONN) ? 0 : -1;
		req_reset(c);
		c->req_id = id;
		c->keep = body[2] & FC_KEEP_CONN;
		return 0;
	case FC_ABORT:
		if (id != c->req_id)
			return 0;
		{
			bool keep = c->keep;

			req_reset(c);
			if (!send_end(c, id, FC_REQUEST_COMPLETE, true))
				return -1;
			return keep ? 0 : -1;
		}
	case FC_PARAMS:
		if (id != c->req_id || c->params_done)
			return 0;
		if (len == 0) {
			c->params_done = true;
			if (!params_decode(c))
				return -1;
		} else if (c->params_len + len > FC_PARAMS_MAX ||
			   !append(&c->params, &c->params_len, &c->params_cap, body, len)) {
			return -1;
		}
		break;
	case FC_STDIN:
		if (id != c->req_id || c->stdin_done)
			return 0;
		/* past FC_STDIN_MAX: this record and every later one read and
		 * dropped (the pipeline sees a short body: 413 by
		 * Content-Length, else 400 "truncated body") */
		if (len == 0)
			c->stdin_done = true;
		else if (c->stdin_over || c->body_len + len > FC_STDIN_MAX) {
			c->stdin_over = true;
			c->dropped += len;
			if (c->dropped > PIN_API_DRAIN_MAX) {
				/* enough: answer now (413), then close
				 * without reading the rest */
				c->stdin_done = true;
				c->keep = false;
				pin_metric_add("pin_api_connections_closed_total",
					"reason=\"body_too_large\"", 1);
			}
		} else if (!append(&c->body, &c->body_len, &c->body_cap, body, len))
			return -1;
		break;
	default:
		return 0;
	}
	return c->req_id && c->params_done && c->stdin_done ? 1 : 0;
}

/* Parses the records in c->in.  1: a request is complete (the bytes after
 * it stay buffered), 0: more input needed, -1: close. */
static int parse(struct fc_conn *c)
{
	size_t pos = 0;
	int rc = 0;

	while (c->in_len - pos >= 8) {
		const unsigned char *h = c->in + pos;
		size_t clen = (size_t)h[4] << 8 | h[5], rlen = 8 + clen + h[6];

		if (h[0] != 1) {
			rc = -1;
			break;
		}
		if (c->in_len - pos < rlen)
			break;
		rc = record(c, h[1], (unsigned)(h[2] << 8 | h[3]), h + 8, clen);
		pos += rlen;
		if (rc != 0)
			break;
	}
	if (rc >= 0 && pos > 0) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	return rc;
}

/* ---- the FIFO and the workers --------------------------------------------- */

static void enqueue(struct fc_conn *c)
{
	struct fc_idle *w;

	__atomic_add_fetch(&busy, 1, __ATOMIC_ACQ_REL);
	c->t_ready = pin_metrics_mono_s();
	c->qnext = NULL;
	pthread_mutex_lock(&q_mu);
	w = idle_top;
	if (w) {
		idle_top = w->next;
		w->c = c;
	} else {
		if (q_tail)
			q_tail->qnext = c;
		else
			q_head = c;
		q_tail = c;
	}
	pthread_mutex_unlock(&q_mu);
	if (w)
		sem_post(&w->go);       /* w may be gone once this returns */
}

/* The I/O thread's part for a readable connection it now holds: read what
 * is there, parse; a complete request goes to the FIFO, else re-arm. */
static void readable(struct fc_conn *c)
{
	for (;;) {
		ssize_t k;
		int rc = parse(c);

		if (rc > 0) {
			enqueue(c);
			return;
		}
		if (rc < 0)
			break;
		if (c->in_cap == c->in_len) {
			/* a record longer than the buffer (a big PARAMS or
			 * STDIN record): grow up to one whole record */
			size_t nc = c->in_cap * 2 > FC_IN_MAX ? FC_IN_MAX : c->in_cap * 2;
			unsigned char *b = nc > c->in_cap ? realloc(c->in, nc) : NULL;

			if (!b)
				break;      /* cannot be: parse takes every whole record */
			c->in = b;
			c->in_cap = nc;
		}
		k = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (k > 0) {
			c->in_len += (size_t)k;
			if (c->req_t0 == 0)
				c->req_t0 = now_ms();
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			__atomic_store_n(&c->armed_ms, (int64_t)now_ms(), __ATOMIC_RELAXED);
			if (arm(c))
				return;
			__atomic_store_n(&c->armed_ms, 0, __ATOMIC_RELAXED);
		}
		break;                      /* EOF, an error, or arm failed */
	}
	conn_free(c);
}

/* A worker is done with c's request. */
static void finished(struct fc_conn *c)
{
	int rc;

	__atomic_store_n(&c->served, true, __ATOMIC_RELAXED);
	if (c->dead || !c->keep ||
	    __atomic_load_n(&io_stopping, __ATOMIC_ACQUIRE)) {
		conn_free(c);
	} else {
		req_reset(c);
		/* bytes of a next request already read (nginx does not send
		 * them before our END_REQUEST, but the protocol allows it) */
		rc = c->in_len ? parse(c) : 0;
		if (rc > 0) {
			__atomic_sub_fetch(&busy, 1, __ATOMIC_ACQ_REL);
			enqueue(c);
			return;
		}
		if (c->in_len)
			c->req_t0 = now_ms();
		bool armed = false;
		if (rc == 0) {
			/* under all_mu: the sweep never sees it armed but not
			 * yet in epoll's hands */
			pthread_mutex_lock(&all_mu);
			__atomic_store_n(&c->armed_ms, (int64_t)now_ms(), __ATOMIC_RELAXED);
			armed = arm(c);
			if (!armed)
				__atomic_store_n(&c->armed_ms, 0, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&all_mu);
		}
		if (!armed)
			conn_free(c);
	}
	__atomic_sub_fetch(&busy, 1, __ATOMIC_ACQ_REL);
}

static void *worker(void *arg)
{
	struct pin_arena *a = pin_arena_new();

	(void)arg;
	pin_arena_set_current(a);
	for (;;) {
		struct fc_conn *c;
		struct pin_fcgi_io io = { io_param, io_read, io_write, NULL, 0, false };
		struct fc_idle self;

		pthread_mutex_lock(&q_mu);
		c = q_head;
		if (c) {
			q_head = c->qnext;
			if (!q_head)
				q_tail = NULL;
			pthread_mutex_unlock(&q_mu);
		} else if (q_closed) {
			pthread_mutex_unlock(&q_mu);
			break;                  /* closed and empty */
		} else {
			sem_init(&self.go, 0, 0);
			self.c = NULL;
			self.next = idle_top;
			idle_top = &self;
			pthread_mutex_unlock(&q_mu);
			while (sem_wait(&self.go) != 0)
				;               /* EINTR */
			sem_destroy(&self.go);
			c = self.c;
			if (!c)
				break;          /* closed */
		}
		io.h = c;
		io.t_ready = c->t_ready;
		io.body_over = c->stdin_over;
		handle_fn(&io);
		pin_arena_reset(a);
		finished(c);
	}
	pin_db_close_thread();
	pin_arena_free(a);
	return NULL;
}

/* /metrics: open FastCGI connections and whole requests waiting for a
 * worker (their wait also counts in pin_http_request_duration_seconds),
 * counted at scrape time from the lists themselves: nothing per request */
static void collect(void)
{
	int nopen = 0, nqueued = 0;

	pthread_mutex_lock(&all_mu);
	for (struct fc_conn *c = all; c; c = c->next)
		nopen++;
	pthread_mutex_unlock(&all_mu);
	pthread_mutex_lock(&q_mu);
	for (struct fc_conn *c = q_head; c; c = c->qnext)
		nqueued++;
	pthread_mutex_unlock(&q_mu);
	pin_metric_set("pin_api_connections", NULL, nopen);
	pin_metric_set("pin_api_requests_queued", NULL, nqueued);
}

/* ---- the I/O thread ------------------------------------------------------- */

#define FC_ACCEPT_PAUSE_MS 100
static double accept_paused_at, accept_logged_at;   /* the I/O thread's */

/* Out of descriptors or memory: the listening socket leaves the epoll set
 * for FC_ACCEPT_PAUSE_MS (it stays readable: level-triggered, it would
 * wake the loop at once, again and again).  Logged once per 10 s. */
static void accept_pause(int err)
{
	double now = now_ms();

	pin_metric_add("pin_api_accept_errors_total", NULL, 1);
	if (now - accept_logged_at > 10000 || accept_logged_at == 0) {
		pin_log(PIN_LOG_WARN, "api: cannot accept, pausing", "error",
			strerror(err), NULL);
		accept_logged_at = now;
	}
	epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
	accept_paused_at = now;
}

/* api_max_connections reached: the connection was closed at once */
static double refused_logged_at;

static void refused(void)
{
	double now = now_ms();

	pin_metric_add("pin_api_connections_refused_total", NULL, 1);
	if (refused_logged_at == 0 || now - refused_logged_at > 10000) {
		char n[16];

		snprintf(n, sizeof n, "%d", max_conns);
		pin_log(PIN_LOG_WARN, "api: connection limit reached, refusing",
			"api_max_connections", n, NULL);
		refused_logged_at = now;
	}
}

/* Closes the connections epoll holds past their deadline: a request not
 * whole api_read_timeout_ms after its first byte, an idle kept-alive
 * connection after api_idle_timeout_ms.  The I/O thread's: no worker holds
 * an armed connection, and only this thread takes one back from epoll. */
static void sweep(void)
{
	int64_t now = (int64_t)now_ms();
	struct fc_conn *expired = NULL, *c, *next;
	int nread = 0, nidle = 0;

	pthread_mutex_lock(&all_mu);
	for (c = all; c; c = c->next) {
		int64_t armed = __atomic_load_n(&c->armed_ms, __ATOMIC_RELAXED);

		if (!armed)
			continue;
		if (c->req_t0 ? now - (int64_t)c->req_t0 > read_timeout_ms :
				now - armed > idle_timeout_ms) {
			c->qnext = expired;
			expired = c;
		}
	}
	pthread_mutex_unlock(&all_mu);
	for (c = expired; c; c = next) {
		next = c->qnext;
		if (c->req_t0)
			nread++;
		else
			nidle++;
		conn_free(c);
	}
	if (nread)
		pin_metric_add("pin_api_connections_closed_total",
			"reason=\"read_timeout\"", nread);
	if (nidle)
		pin_metric_add("pin_api_connections_closed_total",
			"reason=\"idle_timeout\"", nidle);
}

/* SIGTERM: a connection in epoll's hands that is reading a request, or that
 * no request was answered on yet (accepted just before the stop, its
 * request not yet here: the client is about to send it), is waited for
 * (FC_GRACE_MS at most); an idle kept-alive one is not (nginx retries a
 * request on a cached connection that closes) */
static bool conns_to_wait_for(void)
{
	bool any = false;

	pthread_mutex_lock(&all_mu);
	for (struct fc_conn *c = all; c && !any; c = c->next)
		any = __atomic_load_n(&c->armed_ms, __ATOMIC_RELAXED) &&
			(c->req_t0 || !__atomic_load_n(&c->served, __ATOMIC_RELAXED));
	pthread_mutex_unlock(&all_mu);
	return any;
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct fc_conn *c;
		struct epoll_event e;

		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				accept_pause(errno);
				return;
			}
			continue;   /* EINTR, ECONNABORTED, a pending network
				     * error of that connection (accept(2)) */
		}
		if (__atomic_load_n(&nconns, __ATOMIC_RELAXED) >= max_conns) {
			close(fd);
			refused();
			continue;
		}
		c = calloc(1, sizeof *c);
		if (c)
			c->in = malloc(FC_IN_START);
		if (!c || !c->in) {
			free(c);
			close(fd);
			accept_pause(ENOMEM);
			return;
		}
		c->fd = fd;
		c->in_cap = FC_IN_START;
		c->armed_ms = (int64_t)now_ms();
		__atomic_add_fetch(&nconns, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&all_mu);
		c->next = all;
		if (all)
			all->prev = c;
		all = c;
		pthread_mutex_unlock(&all_mu);
		e.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
		e.data.ptr = c;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0)
			conn_free(c);
	}
}

static void *io_thread(void *arg)
{
	struct epoll_event ev[64];
	double stop_at = 0, swept_at = now_ms();

	(void)arg;
	for (;;) {
		int n = epoll_wait(ep, ev, 64, stop_at ? 50 :
				accept_paused_at ? FC_ACCEPT_PAUSE_MS : FC_SWEEP_MS);

		if (n < 0 && errno != EINTR) {
			pin_log(PIN_LOG_ERROR, "api: epoll_wait failed, stopping",
				"error", strerror(errno), NULL);
			pin_request_stop();
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &lfd) {
				accept_all();
			} else if (p == &STOP_TAG) {
				/* SIGTERM: no new connections; what nginx has
				 * sent is read for up to FC_GRACE_MS */
				epoll_ctl(ep, EPOLL_CTL_DEL, stop_ev, NULL);
				epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
				/* a shared socket's queue is the next process's */
				if (!__atomic_load_n(listen_shared, __ATOMIC_ACQUIRE))
					shutdown(lfd, SHUT_RDWR);
				stop_at = now_ms();
				accept_paused_at = 0;
			} else {
				__atomic_store_n(&((struct fc_conn *)p)->armed_ms, 0,
						__ATOMIC_RELAXED);
				readable(p);
			}
		}
		if (!stop_at && now_ms() - swept_at >= FC_SWEEP_MS) {
			sweep();
			swept_at = now_ms();
		}
		if (stop_at && ((__atomic_load_n(&busy, __ATOMIC_ACQUIRE) == 0 &&
				!conns_to_wait_for()) ||
				now_ms() - stop_at > FC_GRACE_MS))
			break;
		if (accept_paused_at && now_ms() - accept_paused_at >= FC_ACCEPT_PAUSE_MS) {
			struct epoll_event e = { .events = EPOLLIN, .data.ptr = &lfd };

			accept_paused_at = 0;
			if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) != 0)
				accept_pause(errno);
		}
	}
	return NULL;
}

/* the workers finish what they hold and what is queued, then leave */
static void workers_stop(pthread_t *tids, int n)
{
	struct fc_idle *w, *next;

	pthread_mutex_lock(&q_mu);
	q_closed = true;
	w = idle_top;
	idle_top = NULL;
	pthread_mutex_unlock(&q_mu);
	/* the idle ones leave now (c NULL); the busy ones take what is
	 * queued first */
	for (; w; w = next) {
		next = w->next;         /* read before the post: w goes with it */
		sem_post(&w->go);
	}
	for (int i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	free(tids);
}

int pin_fcgi_loop_run(int sock, const bool *shared, int workers,
		void (*handle)(const struct pin_fcgi_io *io))
{
	pthread_t io, *tids;
	struct epoll_event e = { .events = EPOLLIN };
	uint64_t one = 1;
	int started = 0;

	lfd = sock;
	listen_shared = shared;
	handle_fn = handle;
	read_timeout_ms = pin_config_int("api_read_timeout_ms");
	idle_timeout_ms = pin_config_int("api_idle_timeout_ms");
	max_conns = (int)pin_config_int("api_max_connections");
	if (read_timeout_ms < 100 || idle_timeout_ms < 100 || max_conns < 1) {
		pin_log(PIN_LOG_ERROR, "api_read_timeout_ms and api_idle_timeout_ms "
			"must be >= 100, api_max_connections >= 1", NULL);
		return -1;
	}
	if (fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) < 0 ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (stop_ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		pin_log(PIN_LOG_ERROR, "api: event loop setup failed", "error",
			strerror(errno), NULL);
		goto fail;
	}
	e.data.ptr = &lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) != 0)
		goto fail;
	e.data.ptr = (void *)&STOP_TAG;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, stop_ev, &e) != 0)
		goto fail;
	tids = calloc((size_t)workers, sizeof *tids);
	if (!tids)
		goto fail;
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&tids[i], NULL, worker, NULL) != 0)
			break;
		started++;
	}
	if (started == 0 || pthread_create(&io, NULL, io_thread, NULL) != 0) {
		pin_log(PIN_LOG_ERROR, "no FastCGI thread could be started", NULL);
		workers_stop(tids, started);
		goto fail;
	}
	{
		char n[16];

		snprintf(n, sizeof n, "%d", started);
		pin_log(PIN_LOG_INFO, "api host listening", "server", "loop",
			"workers", n, NULL);
	}
	pin_metric_set("pin_api_threads", NULL, started);
	/* 0 from the start: PinApiAcceptErrors' increase() sees the first one
	 * (a series born at 1 has no increase; tests/integration/test_metrics.c) */
	pin_metric_add("pin_api_accept_errors_total", NULL, 0);
	pin_metrics_collector(collect);
	pin_wait_stop();
	pin_metrics_collector(NULL);
	__atomic_store_n(&io_stopping, true, __ATOMIC_RELEASE);
	if (write(stop_ev, &one, sizeof one) < 0)
		pin_log(PIN_LOG_WARN, "api: stop event lost", NULL);
	pthread_join(io, NULL);
	workers_stop(tids, started);
	while (all)
		conn_free(all);         /* idle kept-alive connections */
	close(stop_ev);
	close(ep);
	ep = stop_ev = -1;
	return 0;
fail:
	if (stop_ev >= 0)
		close(stop_ev);
	if (ep >= 0)
		close(ep);
	ep = stop_ev = -1;
	return -1;
}
