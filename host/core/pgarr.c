/* pgarr.c -- PostgreSQL binary arrays (pgarr.h). */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "pgarr.h"

static void b_put(struct pg_barr *b, const void *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		if (!(p = realloc(b->p, cap))) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void b_i32(struct pg_barr *b, int32_t v)
{
	unsigned char q[4] = { (unsigned char)((uint32_t)v >> 24), (unsigned char)((uint32_t)v >> 16),
		(unsigned char)((uint32_t)v >> 8), (unsigned char)v };

	b_put(b, q, 4);
}

void pg_barr_begin(struct pg_barr *b, size_t n, int32_t oid)
{
	b_i32(b, 1);            /* ndim */
	b_i32(b, 0);            /* has nulls: set by pg_barr_elem */
	b_i32(b, oid);
	b_i32(b, (int32_t)n);
	b_i32(b, 1);            /* lower bound */
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int pg_barr_elem(struct pg_barr *b, const char *s, int32_t oid)
{
	if (!s) {
		b_i32(b, -1);
		if (!b->failed)
			b->p[7] = 1;    /* has nulls */
		return 0;
	}
	if (oid == PG_OID_UUID) {
		unsigned char u[16];
		int k = 0, dash = -1;

		/* 8-4-4-4-12 hex digits, each dash optional (as uuid_in, no braces) */
		for (; *s && k < 32; s++) {
			int h = hexval(*s);

			if (*s == '-' && dash != k && (k == 8 || k == 12 || k == 16 || k == 20)) {
				dash = k;
				continue;
			}
			if (h < 0)
				return -1;
			u[k / 2] = (unsigned char)(k % 2 ? u[k / 2] | h : h << 4);
			k++;
		}
		if (k != 32 || *s)
			return -1;
		b_i32(b, 16);
		b_put(b, u, 16);
		return 0;
	}
	size_t n = strlen(s);

	if (oid == PG_OID_JSONB) {
		b_i32(b, (int32_t)n + 1);
		b_put(b, "\1", 1);
	} else {
		b_i32(b, (int32_t)n);
	}
	b_put(b, s, n);
	return 0;
}

