/* pgarr.h -- one-dimensional arrays in PostgreSQL's binary format, as
 * binary query parameters (PQexecPrepared with format 1): the outbox's batch
 * insert (host/core/outbox.c) and its benchmark (tools/benchoutbox.c). */
#ifndef PIN_PGARR_H
#define PIN_PGARR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PG_OID_UUID 2950
#define PG_OID_TEXT 25
#define PG_OID_JSONB 3802

/* A one-dimensional array in PostgreSQL's binary format (array_send): ndim,
 * has-nulls, element type, length, lower bound, then each element as its
 * length and bytes (-1: NULL).  The batch's arrays go as binary parameters:
 * PostgreSQL's array_in scanned every byte of the ~1 KB envelopes twice for
 * quotes and escapes and uuid_in parsed each message id (doc/performance.md
 * "Reminder dispatch"). */
struct pg_barr {
	char *p;
	size_t len, cap;
	bool failed;
};

/* the header of an array of n elements of type oid (b zeroed first) */
void pg_barr_begin(struct pg_barr *b, size_t n, int32_t oid);
/* the next element: NULL, a uuid's 16 bytes from its text, a jsonb (version 1
 * and the text) or the text itself; -1 when a uuid's text is not one.  An
 * allocation failure sets b->failed (the bytes are then unusable). */
int pg_barr_elem(struct pg_barr *b, const char *s, int32_t oid);

#endif
