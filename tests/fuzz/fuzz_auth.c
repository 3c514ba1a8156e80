/* fuzz_auth.c -- pin_auth_verify with HS256 configured (pin_config_set).
 *
 * First byte even: the rest is an Authorization value as sent; it must never
 * crash, and when it verifies its token (after "Bearer" and the blanks the
 * verifier skips) must be exactly the harness's valid token.
 * First byte odd: the rest is an edit script (op, position, byte) applied to
 * the valid token; the result sent as "Bearer <token>" must not verify
 * unless the edits left the token unchanged. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

#define SECRET "fuzz-secret-0123456789-0123456789-abcdef"

static char valid[1024];

static void b64url(const unsigned char *in, size_t n, char *out)
{
	int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);

	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (int i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
}

static void setup(void)
{
	static const char hdr[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	static const char pl[] = "{\"sub\":\"0193a8e2-0000-7000-8000-000000000001\","
		"\"tenant_id\":\"0193a8e2-0000-7000-8000-0000000000aa\","
		"\"actor\":\"agent\",\"permissions\":[\"calendar.events.view\"],"
		"\"exp\":4102444800}";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	struct pin_auth_principal p;
	char err[160];
	size_t n;

	pin_log_set_level(PIN_LOG_ERROR + 1);
	pin_config_set("jwt_hs256_secret", SECRET);
	if (pin_auth_init() < 0)
		abort();
	b64url((const unsigned char *)hdr, strlen(hdr), valid);
	n = strlen(valid);
	valid[n++] = '.';
	b64url((const unsigned char *)pl, strlen(pl), valid + n);
	n = strlen(valid);
	HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (unsigned char *)valid, n,
			md, &mdlen);
	valid[n++] = '.';
	b64url(md, mdlen, valid + n);
	{
		char *a = malloc(strlen(valid) + 8);
		sprintf(a, "Bearer %s", valid);
		if (pin_auth_verify(a, &p, err, sizeof err) < 0) {
			fprintf(stderr, "the harness token does not verify: %s\n", err);
			abort();
		}
		pin_auth_principal_clear(&p);
		free(a);
	}
}

/* the token part of an Authorization value, as pin_auth_verify reads it */
static char *token_of(const char *auth)
{
	const char *t = auth + 7, *e;

	while (*t == ' ')
		t++;
	e = t + strlen(t);
	while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	return strndup(t, (size_t)(e - t));
}

static int verify(const char *auth)
{
	struct pin_auth_principal p;
	char err[160];
	int rc;

	err[0] = '\0';
	rc = pin_auth_verify(auth, &p, err, sizeof err);
	if (rc == 0) {
		FUZZ_CHECK(p.sub[0] && p.actor_bit, "verified without a principal");
		pin_auth_principal_clear(&p);
	} else {
		FUZZ_CHECK(rc == -1 && err[0], "rc %d without a reason", rc);
		FUZZ_CHECK(p.permissions == NULL && p.n_permissions == 0,
				"principal not cleared on failure");
	}
	return rc;
}

/* An Authorization value that verifies carries the valid token unchanged;
 * frees auth. */
static void verify_free(char *auth)
{
	char *tok;

	if (verify(auth) == 0) {
		tok = token_of(auth);
		FUZZ_CHECK(!strcmp(tok, valid), "a changed token verified: %s", tok);
		free(tok);
	}
	free(auth);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char *s;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (size < 1 || size > 12 * 1024)
		return 0;
	if ((data[0] & 1) == 0) {
		s = fuzz_cstr(data + 1, size - 1);
		verify_free(s);
		return 0;
	}
	/* edit script on "Bearer <valid>" */
	size_t cap = 7 + strlen(valid) + size / 3 + 1, len;
	s = malloc(cap);
	if (!s)
		abort();
	len = (size_t)sprintf(s, "Bearer %s", valid);
	for (size_t i = 1; i + 2 < size; i += 3) {
		size_t pos = 7 + data[i + 1] % (len - 7 + 1);
		unsigned char b = data[i + 2];
		switch (data[i] % 3) {
		case 0:         /* replace */
			if (pos < len && b)
				s[pos] = (char)b;
			break;
		case 1:         /* insert */
			if (b) {
				memmove(s + pos + 1, s + pos, len - pos + 1);
				s[pos] = (char)b;
				len++;
			}
			break;
		default:        /* delete */
			if (pos < len) {
				memmove(s + pos, s + pos + 1, len - pos);
				len--;
			}
			break;
		}
	}
	s[len] = '\0';
	verify_free(s);
	return 0;
}
