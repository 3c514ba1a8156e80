/* arena.c -- per-invocation memory (one request, job pass, message).
 * Chunks of 16 KiB (bigger allocations get their own chunk), plus lists of
 * PGresults and json objects released at reset. */
#include "config.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

#define CHUNK 16384
/* Chunks a reset keeps for the next invocation, at most (512 KiB).  A
 * consumer batch of 500 messages copies ~300 KB of values into its arena:
 * freeing its chunks at every reset made glibc coalesce them and
 * consolidate its fastbins each time (malloc_consolidate, ~8 % of an
 * identity consumer thread, 2026-12-06). */
#define SPARE_MAX 32

struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct ptrlist {
	void **v;
	size_t n, cap;
};

struct pin_arena {
	struct chunk *head;
	struct chunk *spare;        /* CHUNK-sized, kept by reset */
	size_t nspare;
	struct ptrlist results;
	struct ptrlist jsons;
	struct ptrlist frees;
};

static __thread struct pin_arena *current;

struct pin_arena *pin_arena_new(void)
{
	return calloc(1, sizeof(struct pin_arena));
}

static int push(struct ptrlist *l, void *p)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		void **nv = realloc(l->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = p;
	return 0;
}

void pin_arena_reset(struct pin_arena *a)
{
	struct chunk *c, *next;

	if (!a)
		return;
	for (size_t i = 0; i < a->results.n; i++)
		PQclear(a->results.v[i]);
	a->results.n = 0;
	for (size_t i = 0; i < a->jsons.n; i++)
		json_object_put(a->jsons.v[i]);
	a->jsons.n = 0;
	for (size_t i = 0; i < a->frees.n; i++)
		free(a->frees.v[i]);
	a->frees.n = 0;
	/* keep the CHUNK-sized ones for reuse, up to SPARE_MAX */
	for (c = a->head; c; c = next) {
		next = c->next;
		if (c->cap == CHUNK && a->nspare < SPARE_MAX) {
			c->next = a->spare;
			a->spare = c;
			a->nspare++;
		} else {
			free(c);
		}
	}
	a->head = NULL;
}

void pin_arena_free(struct pin_arena *a)
{
	struct chunk *c, *next;

	if (!a)
		return;
	pin_arena_reset(a);
	for (c = a->spare; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a->results.v);
	free(a->jsons.v);
	free(a->frees.v);
	if (current == a)
		current = NULL;
	free(a);
}

void pin_arena_set_current(struct pin_arena *a)
{
	current = a;
}

struct pin_arena *pin_arena_current(void)
{
	return current;
}

void *pin_arena_alloc(size_t n)
{
	struct pin_arena *a = current;
	struct chunk *c;
	size_t need = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	void *p;

	if (!a)
		return NULL;
	if (need == 0)
		need = sizeof(max_align_t);
	c = a->head;
	if (!c || c->cap - c->used < need) {
		size_t cap = need > CHUNK ? need : CHUNK;

		if (cap == CHUNK && a->spare) {
			c = a->spare;
			a->spare = c->next;
			a->nspare--;
		} else if (!(c = malloc(sizeof *c + cap))) {
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		/* big one-off chunks go behind the head so the head keeps filling */
		if (cap > CHUNK && a->head) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = (char *)c->data + c->used;
	c->used += need;
	memset(p, 0, n);
	return p;
}

char *pin_arena_strdup(const char *s)
{
	size_t n;
	char *p;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	p = pin_arena_alloc(n);
	if (p)
		memcpy(p, s, n);
	return p;
}

char *pin_arena_sprintf(const char *fmt, ...)
{
	va_list ap, ap2;
	int n;
	char *p;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		va_end(ap2);
		return NULL;
	}
	p = pin_arena_alloc((size_t)n + 1);
	if (p)
		vsnprintf(p, (size_t)n + 1, fmt, ap2);
	va_end(ap2);
	return p;
}

void pin_arena_track_result(PGresult *res)
{
	if (!res)
		return;
	/* without an arena the caller owns it (host-internal use only) */
	if (current)
		push(&current->results, res);
}

void pin_arena_track_json(json_object *o)
{
	if (!o)
		return;
	if (current)
		push(&current->jsons, o);
}

int pin_arena_track_free(void *p)
{
	if (!p)
		return 0;
	if (!current || push(&current->frees, p) < 0)
		return -1;
	return 0;
}
