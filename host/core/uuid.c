/* uuid.c -- UUIDv7 (RFC 9562) from the host clock and the OS CSPRNG, and
 * the random bytes of trace and span ids (trace.c). */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include "core.h"

/* Random bytes from a per-thread pool filled by one getrandom() per
 * RAND_POOL bytes: a request used two system calls for its trace ids
 * (doc/performance.md "A cap on concurrent database work"), and a consumer one per
 * messageId of the outbox rows it writes (since 2026-12-03: getrandom and the
 * snprintf of the text were 8.5 % of the CRM consumer thread).  The bytes
 * still come from the kernel's generator; a pool byte is used once and
 * cleared. */
#define RAND_POOL 256   /* getrandom() never returns short for <= 256 */
static __thread unsigned char rpool[RAND_POOL];
static __thread size_t rpos = RAND_POOL;

void pin_rand_bytes(unsigned char *b, size_t n)
{
	while (n > 0) {
		size_t k;

		if (rpos == RAND_POOL) {
			ssize_t got;

			/* blocks until the kernel's pool is ready, never short for
			 * 256 bytes; a signal can interrupt the wait */
			while ((got = getrandom(rpool, sizeof rpool, 0)) < 0 && errno == EINTR)
				;
			if (got != (ssize_t)sizeof rpool)
				memset(rpool, 0x5a, sizeof rpool);
			rpos = 0;
		}
		k = n < RAND_POOL - rpos ? n : RAND_POOL - rpos;
		memcpy(b, rpool + rpos, k);
		memset(rpool + rpos, 0, k);
		rpos += k;
		b += k;
		n -= k;
	}
}

void pin_uuid_v7(char out[37])
{
	static const char hx[] = "0123456789abcdef";
	unsigned char b[16];
	uint64_t ms = (uint64_t)(pin_clock_now_us() / 1000);
	char *o = out;

	pin_rand_bytes(b + 6, 10);
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)(ms >> (40 - 8 * i));
	b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
	b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		*o++ = hx[b[i] >> 4];
		*o++ = hx[b[i] & 15];
	}
	*o = '\0';
}

int pin_uuid_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char)s[i])) {
			return 0;
		}
	}
	return 1;
}
