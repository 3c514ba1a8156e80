/* benchtool.h -- the small helpers the bench tools (pin-benchproduce,
 * pin-benchconsume, pin-benchpq, pin-benchoutbox) need: a monotonic clock,
 * a process's CPU time and the broker address from "host:port" or "@file"
 * (the dev broker's bootstrap file). */
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

/* seconds pid has run on a CPU (pid 0: this process), -1 when unknown:
 * /proc/<pid>/schedstat in nanoseconds (/proc/<pid>/stat's ticks undercount
 * short bursts several times over on a VM) */
static inline double bt_run_s(int pid)
{
	char path[64];
	unsigned long long ns;
	FILE *f;
	int ok;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/schedstat");
	if (!(f = fopen(path, "r")))
		return -1;
	ok = fscanf(f, "%llu", &ns) == 1;
	fclose(f);
	return ok ? (double)ns / 1e9 : -1;
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
