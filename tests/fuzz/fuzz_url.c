/* fuzz_url.c -- pin_url_decode on arbitrary bytes (exact-size buffer).
 * Properties: the result is no longer than the input and has no NUL inside;
 * decoding the result's re-encoding (%XX for every byte) gives it back. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *out, *enc, *back;
	size_t n;

	if (size > 16 * 1024)
		return 0;
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	out = pin_url_decode(buf, size);
	if (out) {
		n = strlen(out);
		FUZZ_CHECK(n <= size, "decoded %zu bytes from %zu", n, size);
		/* the decoder never emits NUL: a raw NUL in the input ends the
		 * string early only if it was there literally */
		if (!memchr(buf, '\0', size)) {
			size_t plain = 0;
			for (size_t i = 0; i < size; i++)
				plain += buf[i] == '%' ? (i += 2, 1) : 1;
			FUZZ_CHECK(n == plain, "length %zu, expected %zu", n, plain);
		}
		enc = malloc(3 * n + 1);
		if (!enc)
			abort();
		for (size_t i = 0; i < n; i++)
			snprintf(enc + 3 * i, 4, "%%%02X", (unsigned char)out[i]);
		back = pin_url_decode(enc, 3 * n);
		FUZZ_CHECK(back && !strcmp(back, out), "re-encoding does not round trip");
		free(back);
		free(enc);
		free(out);
	}
	free(buf);
	return 0;
}
