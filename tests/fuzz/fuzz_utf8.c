/* fuzz_utf8.c -- pin_utf8_valid on arbitrary bytes, against a reference that
 * decodes code points the long way (RFC 3629 section 3: lead byte -> length,
 * continuation bytes, then the shortest-form, surrogate and U+10FFFF checks;
 * NUL refused as PostgreSQL does).  Property: both give the same verdict,
 * and a valid input re-encodes from its code points to the same bytes.
 * The PostgreSQL side of the differential is the integration test
 * input/utf8_validator_agrees_with_postgresql. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

static size_t encode(uint32_t cp, unsigned char *o)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xC0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xE0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		o[2] = (unsigned char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (unsigned char)(0xF0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
	o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
	o[3] = (unsigned char)(0x80 | (cp & 0x3F));
	return 4;
}

/* 1 valid, 0 not; *re gets the re-encoding of what was decoded */
static int reference(const uint8_t *s, size_t n, unsigned char *re, size_t *relen)
{
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t i = 0;

	*relen = 0;
	while (i < n) {
		uint32_t cp;
		size_t len;

		if (s[i] < 0x80)
			len = 1, cp = s[i];
		else if ((s[i] & 0xE0) == 0xC0)
			len = 2, cp = s[i] & 0x1F;
		else if ((s[i] & 0xF0) == 0xE0)
			len = 3, cp = s[i] & 0x0F;
		else if ((s[i] & 0xF8) == 0xF0)
			len = 4, cp = s[i] & 0x07;
		else
			return 0;
		if (n - i < len)
			return 0;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
				cp == 0)
			return 0;
		*relen += encode(cp, re + *relen);
		i += len;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *re;
	size_t relen;
	int ours, ref;

	if (size > 16 * 1024)
		return 0;
	re = malloc(size + 4);
	if (!re)
		abort();
	ours = pin_utf8_valid((const char *)data, size);
	ref = reference(data, size, re, &relen);
	FUZZ_CHECK(ours == ref, "pin_utf8_valid %d, reference %d (%zu bytes)", ours, ref,
		size);
	if (ref)
		FUZZ_CHECK(relen == size && !memcmp(re, data, size),
			"valid input does not re-encode to itself");
	free(re);
	return 0;
}
