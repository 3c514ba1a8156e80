/* fuzz.h -- shared bits of the libFuzzer harnesses (tests/fuzz/run.sh). */
#ifndef PIN_FUZZ_H
#define PIN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property failed: say which and abort (libFuzzer saves the input). */
#define FUZZ_CHECK(cond, ...) do {                                        \
	if (!(cond)) {                                                    \
		fprintf(stderr, "fuzz property failed: %s: ", #cond);     \
		fprintf(stderr, __VA_ARGS__);                             \
		fputc('\n', stderr);                                      \
		abort();                                                  \
	}                                                                 \
} while (0)

/* malloc'd NUL-terminated copy of data[0..n) (embedded NULs kept). */
static inline char *fuzz_cstr(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = '\0';
	return s;
}

#endif
