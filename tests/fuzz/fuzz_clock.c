/* fuzz_clock.c -- pin_clock_parse on arbitrary strings.  Property: what
 * parses formats (pin_clock_fmt) to a string that parses to the same
 * instant; pin_clock_fmt of any instant never overflows its buffer. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, out[40];
	int64_t us = 0, us2 = 0;

	if (size > 256)
		return 0;
	s = fuzz_cstr(data, size);
	if (pin_clock_parse(s, &us) == 0) {
		pin_clock_fmt(us, out, sizeof out);
		FUZZ_CHECK(pin_clock_parse(out, &us2) == 0,
				"\"%s\" -> %lld -> \"%s\" does not parse", s,
				(long long)us, out);
		FUZZ_CHECK(us == us2, "\"%s\" -> %lld -> \"%s\" -> %lld", s,
				(long long)us, out, (long long)us2);
	}
	if (size == sizeof us) {
		memcpy(&us, data, sizeof us);
		pin_clock_fmt(us, out, sizeof out);
		FUZZ_CHECK(memchr(out, '\0', sizeof out) != NULL, "unterminated");
	}
	free(s);
	return 0;
}
