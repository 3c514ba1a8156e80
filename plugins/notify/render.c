/* render.c -- {{placeholder}} templates and small text helpers (pure but
 * for the arena copy of the result). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"

struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t len)
{
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *np;

		while (cap < b->n + len + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np)
			return;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = '\0';
}

char *ntf_render(const char *tmpl, const struct ntf_var *vars, size_t n)
{
	struct buf b = { NULL, 0, 0 };
	const char *s = tmpl, *open, *close;
	char *out;
	size_t i;

	put(&b, "", 0);
	while ((open = strstr(s, "{{")) && (close = strstr(open + 2, "}}"))) {
		size_t nl = (size_t)(close - open - 2);

		put(&b, s, (size_t)(open - s));
		for (i = 0; i < n; i++)
			if (strlen(vars[i].name) == nl && !strncmp(vars[i].name, open + 2, nl)) {
				if (vars[i].value)
					put(&b, vars[i].value, strlen(vars[i].value));
				break;
			}
		s = close + 2;
	}
	put(&b, s, strlen(s));
	out = pc_api->strdup(b.p ? b.p : "");
	free(b.p);
	return out;
}

void ntf_offset_text(int minutes, const char *locale, char *buf, size_t len)
{
	int ru = !locale || !strncmp(locale, "ru", 2);

	if (minutes > 0 && minutes % 1440 == 0)
		snprintf(buf, len, ru ? "%d дн." : "%d d", minutes / 1440);
	else if (minutes > 0 && minutes % 60 == 0)
		snprintf(buf, len, ru ? "%d ч" : "%d h", minutes / 60);
	else
		snprintf(buf, len, ru ? "%d мин" : "%d min", minutes);
}
