/* metrics.c -- counters and gauges rendered as Prometheus text. */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "host.h"

struct series {
	char *name;
	char *labels;
	double v;
	bool gauge;
	unsigned hash;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct series *ser;
static size_t nser, capser;

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

static struct series *get(const char *name, const char *labels, bool gauge)
{
	unsigned h = hash2(name, labels);
	const char *l = labels ? labels : "";

	for (size_t i = 0; i < nser; i++)
		if (ser[i].hash == h && strcmp(ser[i].name, name) == 0 &&
		    strcmp(ser[i].labels, l) == 0)
			return &ser[i];
	if (nser == capser) {
		size_t nc = capser ? capser * 2 : 64;
		struct series *n = realloc(ser, nc * sizeof *n);
		if (!n)
			return NULL;
		ser = n;
		capser = nc;
	}
	ser[nser] = (struct series){ strdup(name), strdup(l), 0, gauge, h };
	return &ser[nser++];
}

void pin_metric_add(const char *name, const char *labels, double v)
{
	struct series *s;

	pthread_mutex_lock(&mu);
	s = get(name, labels, false);
	if (s)
		s->v += v;
	pthread_mutex_unlock(&mu);
}

void pin_metric_set(const char *name, const char *labels, double v)
{
	struct series *s;

	pthread_mutex_lock(&mu);
	s = get(name, labels, true);
	if (s)
		s->v = v;
	pthread_mutex_unlock(&mu);
}

static int by_name(const void *a, const void *b)
{
	const struct series *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->labels, y->labels);
}

char *pin_metrics_render(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct series *copy;
	size_t n;

	if (!f)
		return NULL;
	pthread_mutex_lock(&mu);
	n = nser;
	copy = malloc((n ? n : 1) * sizeof *copy);
	if (copy)
		memcpy(copy, ser, n * sizeof *copy);   /* strings are never freed while running */
	pthread_mutex_unlock(&mu);
	if (!copy) {
		fclose(f);
		free(buf);
		return NULL;
	}
	qsort(copy, n, sizeof *copy, by_name);
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(copy[i].name, copy[i - 1].name) != 0)
			fprintf(f, "# TYPE %s %s\n", copy[i].name,
				copy[i].gauge ? "gauge" : "counter");
		if (copy[i].labels[0])
			fprintf(f, "%s{%s} %.17g\n", copy[i].name, copy[i].labels, copy[i].v);
		else
			fprintf(f, "%s %.17g\n", copy[i].name, copy[i].v);
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
	}
	free(ser);
	ser = NULL;
	nser = capser = 0;
	pthread_mutex_unlock(&mu);
}
