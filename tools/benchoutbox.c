/*
 * pin-benchoutbox -- the outbox's batch insert with its arrays as text
 * literals (before 2026-12-03) and in PostgreSQL's binary format (host/core/pgarr.c,
 * what host/core/outbox.c sends now): doc/performance.md "Reminder dispatch".
 *
 *   pin-benchoutbox --pg-dsn DSN [-n ROWS] [-r ROUNDS]
 *
 * Takes ROWS (2000, the reminder dispatcher's batch) rows of calendar.outbox
 * as they are (topic, key, envelope; fresh message ids), then ROUNDS times
 * (10) each form in turn: BEGIN, the INSERT .. SELECT FROM unnest(..) of the
 * host, ROLLBACK; and prints the CPU the connection's backend spent per row
 * (/proc/<pid>/schedstat; the backend must run on this machine), the first
 * round of each left out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>
#include "benchtool.h"
#include "pgarr.h"

#define INSERT_SQL "INSERT INTO calendar.outbox (message_id, topic, key, envelope, " \
	"created_at, traceparent) SELECT u.*, $5::timestamptz, $6::text FROM " \
	"unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) AS u"

/* a growing text buffer: the array literal "{\"..\",..}" */
struct tbuf {
	char *p;
	size_t len, cap;
};

static void t_put(struct tbuf *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		if (!(t->p = realloc(t->p, t->cap))) {
			perror("pin-benchoutbox");
			exit(1);
		}
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

/* one element as host/core/outbox.c wrote it before: "..." with " and \ escaped */
static void t_elem(struct tbuf *t, const char *s, int first)
{
	t_put(t, first ? "\"" : ",\"", first ? 1 : 2);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			t_put(t, "\\", 1);
		t_put(t, s, 1);
	}
	t_put(t, "\"", 1);
}

static double round_us(PGconn *c, int pid, const char *const *vals, const int *lens,
		const int *fmts)
{
	PGresult *r;
	double a, b;

	PQclear(PQexec(c, "BEGIN"));
	a = bt_run_s(pid);
	r = PQexecPrepared(c, "ins", 6, vals, lens, fmts, 0);
	b = bt_run_s(pid);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "pin-benchoutbox: %s", PQerrorMessage(c));
		exit(1);
	}
	PQclear(r);
	PQclear(PQexec(c, "ROLLBACK"));
	return (b - a) * 1e6;
}

int main(int argc, char **argv)
{
	static const int32_t oids[4] = { PG_OID_UUID, PG_OID_TEXT, PG_OID_TEXT, PG_OID_JSONB };
	const char *dsn = NULL, *tv[6], *bv[6];
	int n = 2000, rounds = 10, pid, got, bl[6] = { 0 }, bf[6] = { 1, 1, 1, 1, 0, 0 };
	struct tbuf t[4] = { { 0 } };
	struct pg_barr b[4];
	double sum[2] = { 0, 0 };
	char q[200];
	PGresult *res;
	PGconn *c;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pg-dsn") && i + 1 < argc)
			dsn = argv[++i];
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else
			dsn = NULL, i = argc;
	}
	if (!dsn || n < 1 || rounds < 2) {
		fprintf(stderr, "usage: pin-benchoutbox --pg-dsn DSN [-n ROWS] [-r ROUNDS >= 2]\n");
		return 2;
	}
	c = PQconnectdb(dsn);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pin-benchoutbox: %s", PQerrorMessage(c));
		return 1;
	}
	res = PQexec(c, "SELECT pg_backend_pid()");
	pid = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	snprintf(q, sizeof(q), "SELECT gen_random_uuid()::text, topic, key, envelope::text "
		"FROM calendar.outbox ORDER BY id LIMIT %d", n);
	res = PQexec(c, q);
	got = PQntuples(res);
	if (got < 1) {
		fprintf(stderr, "pin-benchoutbox: calendar.outbox is empty (run ./dev bench reminders first)\n");
		return 1;
	}
	memset(b, 0, sizeof(b));
	for (int k = 0; k < 4; k++) {
		t_put(&t[k], "{", 1);
		pg_barr_begin(&b[k], (size_t)got, oids[k]);
	}
	for (int i = 0; i < got; i++)
		for (int k = 0; k < 4; k++) {
			t_elem(&t[k], PQgetvalue(res, i, k), i == 0);
			if (pg_barr_elem(&b[k], PQgetvalue(res, i, k), oids[k]) < 0) {
				fprintf(stderr, "pin-benchoutbox: not a uuid\n");
				return 1;
			}
		}
	for (int k = 0; k < 4; k++) {
		t_put(&t[k], "}", 1);
		tv[k] = t[k].p;
		bv[k] = b[k].p;
		bl[k] = (int)b[k].len;
	}
	tv[4] = bv[4] = "2026-12-03T04:00:00.000Z";
	tv[5] = bv[5] = NULL;
	PQclear(res);
	res = PQprepare(c, "ins", INSERT_SQL, 6, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "pin-benchoutbox: %s", PQerrorMessage(c));
		return 1;
	}
	PQclear(res);
	for (int r = 0; r < rounds; r++)
		for (int bin = 0; bin < 2; bin++) {
			double us = bin ? round_us(c, pid, bv, bl, bf) : round_us(c, pid, tv, NULL, NULL);

			if (r > 0)
				sum[bin] += us;
		}
	printf("rows=%d rounds=%d text_arrays_us_per_row=%.2f binary_arrays_us_per_row=%.2f\n",
		got, rounds - 1, sum[0] / (rounds - 1) / got, sum[1] / (rounds - 1) / got);
	for (int k = 0; k < 4; k++) {
		free(t[k].p);
		free(b[k].p);
	}
	PQfinish(c);
	return 0;
}
