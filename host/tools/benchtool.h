/* benchtool.h -- the small helpers both bench tools (pin-benchproduce,
 * pin-benchconsume) need: a monotonic clock and the broker address from
 * "host:port" or "@file" (the dev broker's bootstrap file). */
#ifndef PIN_BENCHTOOL_H
#define PIN_BENCHTOOL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bt_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* malloc'd bootstrap servers, or NULL when the file cannot be read */
static inline char *bt_bootstrap(const char *arg)
{
	char buf[1024];
	FILE *f;

	if (arg[0] != '@')
		return strdup(arg);
	if (!(f = fopen(arg + 1, "r")) || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return NULL;
	}
	fclose(f);
	buf[strcspn(buf, "\r\n ")] = '\0';
	return strdup(buf);
}

#endif
