/* router.c -- method + path pattern with {param} segments. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "core.h"

#define MAX_SEGS 32

static int split(const char *path, char **segs, int max)
{
	int n = 0;
	const char *p = path, *e;

	if (*p != '/')
		return -1;
	p++;
	if (*p == '\0')
		return 0;
	for (;;) {
		e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == 0) {
			if (!e || e[1] == '\0')   /* single trailing slash */
				break;
			goto fail;                 /* "//" */
		}
		if (n == max)
			goto fail;
		segs[n] = strndup(p, len);
		if (!segs[n])
			goto fail;
		n++;
		if (!e)
			break;
		p = e + 1;
		if (*p == '\0')
			break;
	}
	return n;
fail:
	for (int i = 0; i < n; i++)
		free(segs[i]);
	return -1;
}

int pin_route_compile(struct pin_route_entry *e)
{
	char *segs[MAX_SEGS];
	int n, nparams = 0;

	if (!e->r.pattern || !e->r.method || !e->r.fn)
		return -1;
	n = split(e->r.pattern, segs, MAX_SEGS);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		size_t l = strlen(segs[i]);
		if (segs[i][0] == '{') {
			if (l < 3 || segs[i][l - 1] != '}' || ++nparams > PIN_MAX_PARAMS)
				goto bad;
		} else if (strchr(segs[i], '{') || strchr(segs[i], '}')) {
			goto bad;
		}
	}
	e->segs = calloc((size_t)(n ? n : 1), sizeof(char *));
	if (!e->segs)
		goto bad;
	memcpy(e->segs, segs, (size_t)n * sizeof(char *));
	e->nsegs = n;
	return 0;
bad:
	for (int i = 0; i < n; i++)
		free(segs[i]);
	return -1;
}

void pin_route_entry_clear(struct pin_route_entry *e)
{
	for (int i = 0; i < e->nsegs; i++)
		free(e->segs[i]);
	free(e->segs);
	e->segs = NULL;
	e->nsegs = 0;
}

static bool is_param(const char *s)
{
	return s[0] == '{';
}

/* specificity: the route with a literal where the other has a param, at the
 * first position where they differ, wins */
static bool more_specific(const struct pin_route_entry *a,
		const struct pin_route_entry *b)
{
	for (int i = 0; i < a->nsegs && i < b->nsegs; i++) {
		bool pa = is_param(a->segs[i]), pb = is_param(b->segs[i]);
		if (pa != pb)
			return !pa;
	}
	return false;
}

/* the pattern of e matches the split path segs[0..ns) */
static bool path_matches(const struct pin_route_entry *e, char **segs, int ns)
{
	if (e->nsegs != ns)
		return false;
	for (int j = 0; j < ns; j++)
		if (!is_param(e->segs[j]) && strcmp(e->segs[j], segs[j]) != 0)
			return false;
	return true;
}

int pin_router_match(const struct pin_route_entry *routes, size_t n,
		const char *method, const char *path, struct pin_match *m)
{
	char *segs[MAX_SEGS];
	int ns;
	const struct pin_route_entry *best = NULL;

	memset(m, 0, sizeof *m);
	ns = split(path, segs, MAX_SEGS);
	if (ns < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct pin_route_entry *e = &routes[i];
		if (!path_matches(e, segs, ns))
			continue;
		if (strcmp(e->r.method, method) != 0) {
			m->method_mismatch = true;
			continue;
		}
		if (!best || more_specific(e, best))
			best = e;
	}
	if (best) {
		m->e = best;
		m->method_mismatch = false;
		for (int j = 0; j < ns; j++) {
			if (!is_param(best->segs[j]))
				continue;
			char *v = pin_url_decode_path(segs[j], strlen(segs[j]));
			if (!v) {
				pin_match_clear(m);
				best = NULL;
				break;
			}
			m->names[m->nparams] = best->segs[j];
			m->values[m->nparams++] = v;
		}
	}
	for (int j = 0; j < ns; j++)
		free(segs[j]);
	return best ? 0 : -1;
}

/* appends ", method" (or "method" first) to out of length *len unless it is
 * there already; false when out is full */
static bool allow_add(char *out, size_t outlen, size_t *len, const char *method)
{
	size_t ml = strlen(method);
	const char *p = out;

	while ((p = strstr(p, method)) != NULL) {
		if ((p == out || p[-1] == ' ') && (p[ml] == ',' || p[ml] == '\0'))
			return true;
		p += ml;
	}
	if (*len + (*len ? 2 : 0) + ml + 1 > outlen)
		return false;
	if (*len) {
		memcpy(out + *len, ", ", 2);
		*len += 2;
	}
	memcpy(out + *len, method, ml + 1);
	*len += ml;
	return true;
}

int pin_router_allow(const struct pin_route_entry *routes, size_t n,
		const char *path, char *out, size_t outlen)
{
	/* the usual order first; a method outside it after, in table order */
	static const char *const order[] = { "GET", "HEAD", "POST", "PUT", "PATCH",
		"DELETE", "OPTIONS" };
	char *segs[MAX_SEGS];
	int ns, count = 0;
	size_t len = 0;

	if (!outlen)
		return -1;
	out[0] = '\0';
	ns = split(path, segs, MAX_SEGS);
	if (ns < 0)
		return 0;
	for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
		for (size_t i = 0; i < n; i++) {
			const char *me = routes[i].r.method;
			/* HEAD is answered by the GET route (request.c) */
			if ((!strcmp(me, order[k]) || (!strcmp(order[k], "HEAD") &&
			    !strcmp(me, "GET"))) && path_matches(&routes[i], segs, ns)) {
				if (!allow_add(out, outlen, &len, order[k]))
					count = -1;
				else if (count >= 0)
					count++;
				break;
			}
		}
	for (size_t i = 0; i < n && count >= 0; i++) {
		bool known = false;

		for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
			known = known || !strcmp(routes[i].r.method, order[k]);
		if (known || !path_matches(&routes[i], segs, ns))
			continue;
		size_t before = len;
		if (!allow_add(out, outlen, &len, routes[i].r.method))
			count = -1;
		else if (len != before)
			count++;
	}
	for (int j = 0; j < ns; j++)
		free(segs[j]);
	return count;
}

void pin_match_clear(struct pin_match *m)
{
	for (int i = 0; i < m->nparams; i++)
		free(m->values[i]);
	m->nparams = 0;
	m->e = NULL;
}
