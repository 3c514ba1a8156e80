/* pin-benchsend -- the raw senders of `./dev bench burst` (tests/bench/burst.sh):
 * N messages to the dev SMTP server or the dev SMS sink over C connections,
 * with libcurl, the client library notify.so's dispatcher uses, and nothing
 * else: no database, no rendering, no outcome transaction.  What it reaches is
 * what the server (and libcurl) allow over that many connections, the anchor
 * the dispatcher's rate is divided by.
 *
 *   pin-benchsend smtp URL N CONNS BYTES   e.g. smtp://127.0.0.1:12525
 *   pin-benchsend sms  URL N CONNS BYTES TOKEN_FILE   e.g. http://127.0.0.1:12526/sms
 *
 * C threads, each with its own easy handle (one kept connection, as the
 * dispatcher's per-channel handle), send N / C messages one after the other.
 * smtp: MAIL FROM bench-raw@bench.example, RCPT TO raw-<i>@bench-raw.example,
 * a text/plain base64 message of about BYTES bytes (headers included);
 * sms: POST {"to", "text", "idempotencyKey"} of about BYTES bytes with
 * "Authorization: Bearer <token file>", 2xx expected.
 * Prints one line: "sent S failed F seconds T rate R". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "benchtool.h"

struct job {
	int smtp, first, count, bytes, sent, failed;
	const char *url, *auth;
	pthread_t t;
};

struct rd { const char *p; size_t left; };

static size_t reader(char *buf, size_t size, size_t n, void *ud)
{
	struct rd *r = ud;
	size_t k = size * n < r->left ? size * n : r->left;

	memcpy(buf, r->p, k);
	r->p += k;
	r->left -= k;
	return k;
}

static size_t discard(char *d, size_t s, size_t n, void *ud)
{
	(void)d;
	(void)ud;
	return s * n;
}

/* the message of number i, about bytes long (malloc'd) */
static char *message(const struct job *j, int i, size_t *len)
{
	size_t cap = (size_t)j->bytes + 512, o;
	char *m = malloc(cap);

	if (!m)
		return NULL;
	if (j->smtp)
		o = (size_t)snprintf(m, cap, "From: bench-raw@bench.example\r\n"
			"To: raw-%d@bench-raw.example\r\nSubject: raw %d\r\n"
			"Message-ID: <raw-%d@bench.example>\r\nMIME-Version: 1.0\r\n"
			"Content-Type: text/plain; charset=utf-8\r\n"
			"Content-Transfer-Encoding: base64\r\n\r\n", i, i, i);
	else
		o = (size_t)snprintf(m, cap, "{\"to\":\"+7998%07d\",\"idempotencyKey\":"
			"\"raw-%d\",\"text\":\"", i, i);
	/* the body: 76-character lines of base64 letters up to the size */
	while (o + 4 < (size_t)j->bytes) {
		m[o] = (char)('A' + o % 26);
		o++;
		if (j->smtp && o % 78 == 76) {
			m[o++] = '\r';
			m[o++] = '\n';
		}
	}
	o += (size_t)snprintf(m + o, cap - o, j->smtp ? "\r\n" : "\"}");
	*len = o;
	return m;
}

static void *run(void *ud)
{
	struct job *j = ud;
	struct curl_slist *hdr = NULL;
	CURL *c = curl_easy_init();

	if (!c) {
		j->failed = j->count;
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_URL, j->url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	if (j->smtp) {
		curl_easy_setopt(c, CURLOPT_MAIL_FROM, "<bench-raw@bench.example>");
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, reader);
	} else {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		hdr = curl_slist_append(hdr, j->auth);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	}
	for (int i = j->first; i < j->first + j->count; i++) {
		struct curl_slist *rcpt = NULL;
		struct rd r;
		size_t len;
		char *m = message(j, i, &len), to[64];
		long code = 0;
		CURLcode rc;

		if (!m) {
			j->failed++;
			continue;
		}
		if (j->smtp) {
			snprintf(to, sizeof(to), "<raw-%d@bench-raw.example>", i);
			rcpt = curl_slist_append(NULL, to);
			curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
			r.p = m;
			r.left = len;
			curl_easy_setopt(c, CURLOPT_READDATA, &r);
			curl_easy_setopt(c, CURLOPT_INFILESIZE, (long)len);
		} else {
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, m);
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
		}
		rc = curl_easy_perform(c);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		if (rc == CURLE_OK && code / 100 == 2)
			j->sent++;
		else
			j->failed++;
		curl_slist_free_all(rcpt);
		free(m);
	}
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	return NULL;
}

int main(int argc, char **argv)
{
	struct job *jobs;
	int n, conns, bytes, smtp, sent = 0, failed = 0;
	char auth[512] = "Authorization: Bearer ";
	double t0, t;

	if (argc < 6 || (strcmp(argv[1], "smtp") && strcmp(argv[1], "sms")) ||
			(!strcmp(argv[1], "sms") && argc < 7)) {
		fprintf(stderr, "usage: pin-benchsend smtp URL N CONNS BYTES\n"
				"       pin-benchsend sms URL N CONNS BYTES TOKEN_FILE\n");
		return 2;
	}
	smtp = !strcmp(argv[1], "smtp");
	n = atoi(argv[3]);
	conns = atoi(argv[4]);
	bytes = atoi(argv[5]);
	if (n < 1 || conns < 1 || conns > 256 || bytes < 64 || bytes > 1000000) {
		fprintf(stderr, "pin-benchsend: N >= 1, 1 <= CONNS <= 256, 64 <= BYTES <= 1000000\n");
		return 2;
	}
	if (!smtp) {
		FILE *f = fopen(argv[6], "r");
		size_t l = strlen(auth);

		if (!f || !fgets(auth + l, (int)(sizeof(auth) - l), f)) {
			fprintf(stderr, "pin-benchsend: cannot read %s\n", argv[6]);
			return 2;
		}
		fclose(f);
		auth[strcspn(auth, "\r\n")] = '\0';
	}
	curl_global_init(CURL_GLOBAL_ALL);
	if (!(jobs = calloc((size_t)conns, sizeof(*jobs))))
		return 1;
	t0 = bt_mono();
	for (int k = 0, first = 0; k < conns; k++) {
		jobs[k] = (struct job){ .smtp = smtp, .first = first,
			.count = n / conns + (k < n % conns), .bytes = bytes,
			.url = argv[2], .auth = auth };
		first += jobs[k].count;
		if (pthread_create(&jobs[k].t, NULL, run, &jobs[k]) != 0) {
			fprintf(stderr, "pin-benchsend: pthread_create failed\n");
			return 1;
		}
	}
	for (int k = 0; k < conns; k++) {
		pthread_join(jobs[k].t, NULL);
		sent += jobs[k].sent;
		failed += jobs[k].failed;
	}
	t = bt_mono() - t0;
	printf("sent %d failed %d seconds %.3f rate %.1f\n", sent, failed, t, t > 0 ? sent / t : 0);
	free(jobs);
	curl_global_cleanup();
	return failed ? 1 : 0;
}
