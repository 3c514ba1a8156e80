/*
 * pin-benchpq -- the cost of one statement on one connection (doc/performance.md
 * "The read paths' SQL"): prepares SQL, runs it 200 times to warm
 * up (past the five custom plans), then N times, and prints the CPU the
 * connection's backend and this client spent per execution, read from
 * /proc/<pid>/schedstat (nanoseconds on the CPU).  /proc/<pid>/stat's tick
 * counters undercount such short bursts several times over on a VM.
 *
 *   pin-benchpq --pg-dsn DSN --sql-file FILE [-n N] [--binary] [--utc]
 *               [--] PARAM...            ("NULL" passes SQL NULL)
 *
 * --binary asks for binary results (as api->db_exec_prepared_bin), --utc
 * sets the session time zone as the host's connections do; the client's
 * malloc keeps freed memory as the host's does.  The backend must
 * run on this machine.  Prints one line: "rows=R backend_us=B client_us=C
 * wall_us=W" (per execution).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <unistd.h>
#include <libpq-fe.h>
#include "benchtool.h"

#define MAX_PARAMS 32

static int run(PGconn *c, int np, const char *const *vals, int fmt, int *rows)
{
	PGresult *r = PQexecPrepared(c, "s", np, vals, NULL, NULL, fmt);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, "pin-benchpq: %s", PQerrorMessage(c));
	*rows = PQntuples(r);
	PQclear(r);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *dsn = NULL, *file = NULL, *vals[MAX_PARAMS];
	static char sql[65536];
	int n = 2000, fmt = 0, utc = 0, np = 0, rows = 0, rc = 1, i;
	double b0, c0, w0, b1, c1, w1;
	PGconn *c = NULL;
	PGresult *r;
	size_t len;
	FILE *f;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pg-dsn") && i + 1 < argc)
			dsn = argv[++i];
		else if (!strcmp(argv[i], "--sql-file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--binary"))
			fmt = 1;
		else if (!strcmp(argv[i], "--utc"))
			utc = 1;
		else if (!strcmp(argv[i], "--"))
			continue;
		else if (np < MAX_PARAMS)
			vals[np++] = strcmp(argv[i], "NULL") ? argv[i] : NULL;
	}
	if (!dsn || !file || n <= 0) {
		fprintf(stderr, "usage: pin-benchpq --pg-dsn DSN --sql-file FILE "
			"[-n N] [--binary] [--utc] [--] PARAM...\n");
		return 2;
	}
	if (!(f = fopen(file, "r"))) {
		perror(file);
		return 1;
	}
	/* as pin-host (host/main.c): freed memory stays in the process.  With
	 * glibc's defaults a 1 MB result set costs this client 8.5 ms a run
	 * instead of 1.2, in page faults on the heap it gave back */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	len = fread(sql, 1, sizeof(sql) - 1, f);
	fclose(f);
	sql[len] = '\0';
	c = PQconnectdb(dsn);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pin-benchpq: %s", PQerrorMessage(c));
		goto out;
	}
	if (utc)
		PQclear(PQexec(c, "SET TIME ZONE 'UTC'"));
	r = PQprepare(c, "s", sql, np, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "pin-benchpq: %s", PQerrorMessage(c));
		PQclear(r);
		goto out;
	}
	PQclear(r);
	for (i = 0; i < 200; i++)
		if (run(c, np, vals, fmt, &rows) < 0)
			goto out;
	b0 = bt_run_s(PQbackendPID(c));
	c0 = bt_run_s(0);
	w0 = bt_mono();
	for (i = 0; i < n; i++)
		if (run(c, np, vals, fmt, &rows) < 0)
			goto out;
	b1 = bt_run_s(PQbackendPID(c));
	c1 = bt_run_s(0);
	w1 = bt_mono();
	if (b0 < 0 || b1 < 0) {
		fprintf(stderr, "pin-benchpq: cannot read the backend's schedstat "
			"(is the server on this machine?)\n");
		goto out;
	}
	printf("rows=%d backend_us=%.1f client_us=%.1f wall_us=%.1f\n", rows,
		(b1 - b0) / n * 1e6, (c1 - c0) / n * 1e6, (w1 - w0) / n * 1e6);
	rc = 0;
out:
	PQfinish(c);
	return rc;
}
