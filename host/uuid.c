/* uuid.c -- UUIDv7 (RFC 9562) from the host clock and the OS CSPRNG. */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include "host.h"

void pin_uuid_v7(char out[37])
{
	unsigned char b[16];
	uint64_t ms = (uint64_t)(pin_clock_now_us() / 1000);

	if (getrandom(b + 6, 10, 0) != 10) {
		/* getrandom on Linux >= 3.17 does not fail for <= 256 bytes */
		memset(b + 6, 0, 10);
	}
	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)(ms >> (40 - 8 * i));
	b[6] = (unsigned char)(0x70 | (b[6] & 0x0f));
	b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));
	snprintf(out, 37,
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		b[11], b[12], b[13], b[14], b[15]);
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
