/* fake_host.h -- what the SDK's unit tests hand a plugin as its host, shared:
 * a bump arena (alloc; FAKE_ARENA_SIZE bytes, emptied by fake_arena_reset)
 * and a fixed clock (now_us, fmt_time).  Each test file that includes it
 * gets its own copy; a test sets the members of its pin_host_api itself. */
#ifndef FAKE_HOST_H
#define FAKE_HOST_H

#include <check.h>
#include <stdint.h>
#include <string.h>
#include "sdk/sdk.h"

#ifndef FAKE_ARENA_SIZE
#define FAKE_ARENA_SIZE (1 << 20)
#endif

static char fake_arena[FAKE_ARENA_SIZE];
static size_t fake_arena_used;

__attribute__((unused)) static void fake_arena_reset(void)
{
	fake_arena_used = 0;
}

/* api->alloc: zeroed, 16-byte aligned, from the arena */
__attribute__((unused)) static void *t_alloc(size_t n)
{
	void *p = fake_arena + fake_arena_used;

	n = (n + 15) & ~(size_t)15;
	ck_assert_uint_le(fake_arena_used + n, sizeof(fake_arena));
	fake_arena_used += n;
	memset(p, 0, n);
	return p;
}

/* api->now_us: 2025-12-02T00:00:00Z */
__attribute__((unused)) static int64_t t_now(void)
{
	return 1764633600000000LL;
}

__attribute__((unused)) static char *t_fmt_time(int64_t us, char *out, size_t outlen)
{
	pc_time_fmt(us, out, outlen);
	return out;
}

#endif
