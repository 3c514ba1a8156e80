/* test_jwks.c -- pin_auth_verify() against a JSON Web Key Set (RFC 7517):
 * RS256 and ES256 keys made here with OpenSSL, chosen by kid, rotated by
 * re-running pin_auth_init() (what a reload does). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "core.h"
#include "api.h"
#include "suites.h"
#include "../common/jose.h"

#define SUB     "0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b"
#define ISS     "https://id.pin.example"
#define AUD     "pin-calendar"

static EVP_PKEY *rsa_a, *rsa_c, *ec_b, *rsa_weak;
static char jwks_path[64];

/* one JWK of k as JSON text (malloc'd); extra members appended verbatim */
static char *jwk_of(EVP_PKEY *k, const char *kid, const char *extra)
{
	return jose_jwk(k, kid, extra);
}

/* writes {"keys":[...]} with the given JWK texts (freed) to jwks_path */
static void write_set(int n, ...)
{
	FILE *f = fopen(jwks_path, "w");
	va_list ap;
	int i;

	ck_assert_ptr_nonnull(f);
	fputs("{\"keys\":[", f);
	va_start(ap, n);
	for (i = 0; i < n; i++) {
		char *j = va_arg(ap, char *);

		fprintf(f, "%s%s", i ? "," : "", j);
		free(j);
	}
	va_end(ap);
	fputs("]}\n", f);
	fclose(f);
}

static void write_text(const char *text)
{
	FILE *f = fopen(jwks_path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static int load(const char *iss, const char *aud)
{
	pin_config_free();
	ck_assert_int_eq(pin_config_set("jwt_jwks_file", jwks_path), 0);
	if (iss)
		ck_assert_int_eq(pin_config_set("jwt_issuer", iss), 0);
	if (aud)
		ck_assert_int_eq(pin_config_set("jwt_audience", aud), 0);
	return pin_auth_init();
}

/* "Bearer <jwt>" signed with k (RS256 or ES256 by its type); kid NULL: none */
static char *token(EVP_PKEY *k, const char *kid)
{
	int ec = EVP_PKEY_get_base_id(k) == EVP_PKEY_EC;
	char hdr[160], pl[512], *jwt, *out;
	long long now = (long long)(pin_clock_now_us() / 1000000);
	size_t n;

	snprintf(hdr, sizeof(hdr), "{\"alg\":\"%s\",\"typ\":\"JWT\"%s%s%s}",
		ec ? "ES256" : "RS256", kid ? ",\"kid\":\"" : "", kid ? kid : "",
		kid ? "\"" : "");
	snprintf(pl, sizeof(pl), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"actor\":\"agent\",\"exp\":%lld}", now + 600);
	jwt = jose_sign(k, hdr, pl);
	n = strlen(jwt) + 8;
	out = malloc(n);
	ck_assert_ptr_nonnull(out);
	snprintf(out, n, "Bearer %s", jwt);
	free(jwt);
	return out;
}

static void expect(EVP_PKEY *k, const char *kid, const char *want_err)
{
	struct pin_auth_principal pr;
	char err[256] = "", *t = token(k, kid);
	int r = pin_auth_verify(t, &pr, err, sizeof(err));

	if (!want_err) {
		ck_assert_msg(r == 0, "kid %s refused: %s", kid ? kid : "-", err);
		ck_assert_str_eq(pr.sub, SUB);
	} else {
		ck_assert_msg(r == -1, "kid %s accepted, expected '%s'",
				kid ? kid : "-", want_err);
		ck_assert_msg(strstr(err, want_err), "err '%s' lacks '%s'", err, want_err);
	}
	pin_auth_principal_clear(&pr);
	free(t);
}

static void keys_setup(void)
{
	int fd;

	rsa_a = EVP_RSA_gen(2048);
	rsa_c = EVP_RSA_gen(2048);
	rsa_weak = EVP_RSA_gen(1024);
	ec_b = EVP_EC_gen("P-256");
	ck_assert_ptr_nonnull(rsa_a);
	ck_assert_ptr_nonnull(rsa_c);
	ck_assert_ptr_nonnull(rsa_weak);
	ck_assert_ptr_nonnull(ec_b);
	snprintf(jwks_path, sizeof(jwks_path), "/tmp/pin-jwks-XXXXXX");
	fd = mkstemp(jwks_path);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void keys_teardown(void)
{
	unlink(jwks_path);
	EVP_PKEY_free(rsa_a);
	EVP_PKEY_free(rsa_c);
	EVP_PKEY_free(rsa_weak);
	EVP_PKEY_free(ec_b);
}

static void setup(void)
{
	pin_clock_set_offset_s(0);
	pin_auth_fini();
}

static void teardown(void)
{
	pin_auth_fini();
	pin_config_free();
}

START_TEST(test_jwks_by_kid)
{
	write_set(2, jwk_of(rsa_a, "a", NULL), jwk_of(ec_b, "b", NULL));
	ck_assert_int_eq(load(ISS, AUD), 0);
	expect(rsa_a, "a", NULL);                   /* RS256 */
	expect(ec_b, "b", NULL);                    /* ES256 */
	expect(rsa_c, "c", "unknown key id");       /* not in the set */
	expect(rsa_c, "a", "bad signature");        /* a's kid, another key */
	expect(rsa_a, "b", "unknown key id");       /* b is not an RSA key */
	/* no kid: the set's only key of the token's alg */
	expect(rsa_a, NULL, NULL);
	expect(ec_b, NULL, NULL);
}
END_TEST

START_TEST(test_jwks_rotation)
{
	unsigned long g0;

	/* the provider signs with a; publishes c ahead of time; then retires a */
	write_set(1, jwk_of(rsa_a, "a", NULL));
	ck_assert_int_eq(load(ISS, AUD), 0);
	g0 = pin_auth_generation();
	expect(rsa_a, "a", NULL);
	expect(rsa_c, "c", "unknown key id");

	write_set(2, jwk_of(rsa_a, "a", NULL), jwk_of(rsa_c, "c", NULL));
	ck_assert_int_eq(pin_auth_init(), 0);
	ck_assert_uint_eq(pin_auth_generation(), g0 + 1);
	expect(rsa_a, "a", NULL);
	expect(rsa_c, "c", NULL);
	/* two RSA keys: a token must say which */
	expect(rsa_c, NULL, "missing kid");

	write_set(1, jwk_of(rsa_c, "c", NULL));
	ck_assert_int_eq(pin_auth_init(), 0);
	expect(rsa_a, "a", "unknown key id");       /* retired: refused at once */
	expect(rsa_c, "c", NULL);

	/* a broken file on reload: refused, the running set stays */
	write_text("{\"keys\":[");
	ck_assert_int_eq(pin_auth_init(), -1);
	ck_assert_uint_eq(pin_auth_generation(), g0 + 2);
	expect(rsa_c, "c", NULL);
}
END_TEST

START_TEST(test_jwks_skips_unusable_keys)
{
	/* a provider's set may carry encryption keys, other algs and curves */
	char *enc = jwk_of(rsa_a, "enc", NULL);

	memcpy(strstr(enc, "\"sig\""), "\"enc\"", 5);
	write_set(5, enc,
		jwk_of(rsa_weak, "weak", NULL), jwk_of(ec_b, "b", NULL),
		strdup("{\"kty\":\"EC\",\"crv\":\"P-384\",\"kid\":\"p384\",\"x\":\"AA\",\"y\":\"AA\"}"),
		strdup("{\"kty\":\"RSA\",\"alg\":\"PS256\",\"kid\":\"ps\",\"n\":\"AQAB\",\"e\":\"AQAB\"}"));
	ck_assert_int_eq(load(ISS, AUD), 0);
	expect(ec_b, "b", NULL);
	expect(rsa_weak, "weak", "unknown key id");
	expect(rsa_a, "enc", "unknown key id");
}
END_TEST

START_TEST(test_jwks_refused_files)
{
	/* no iss/aud with a provider's key set */
	write_set(1, jwk_of(rsa_a, "a", NULL));
	ck_assert_int_eq(load(NULL, AUD), -1);
	ck_assert_int_eq(load(ISS, NULL), -1);
	/* private key material */
	write_set(1, jwk_of(rsa_a, "a", "\"d\":\"AQAB\""));
	ck_assert_int_eq(load(ISS, AUD), -1);
	/* one kid twice */
	write_set(2, jwk_of(rsa_a, "a", NULL), jwk_of(rsa_c, "a", NULL));
	ck_assert_int_eq(load(ISS, AUD), -1);
	/* nothing usable */
	write_set(1, jwk_of(rsa_weak, "weak", NULL));
	ck_assert_int_eq(load(ISS, AUD), -1);
	/* not a key set */
	write_text("[]");
	ck_assert_int_eq(load(ISS, AUD), -1);
	write_text("{\"keys\":{}}");
	ck_assert_int_eq(load(ISS, AUD), -1);
	/* an EC point not on the curve */
	write_text("{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"x\","
		"\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\","
		"\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}]}");
	ck_assert_int_eq(load(ISS, AUD), -1);
	/* none of them went live */
	expect(rsa_a, "a", "unsupported alg");
}
END_TEST

START_TEST(test_jwks_es256_signature_shape)
{
	struct pin_auth_principal pr;
	char err[256], *t, *dot;

	write_set(1, jwk_of(ec_b, "b", NULL));
	ck_assert_int_eq(load(ISS, AUD), 0);
	/* a DER signature where r || s belongs is refused, not parsed */
	t = token(ec_b, "b");
	dot = strrchr(t, '.');
	dot[1] = dot[1] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(pin_auth_verify(t, &pr, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "signature"));
	dot[12] = 0;                                /* 64 bytes -> 7 */
	ck_assert_int_eq(pin_auth_verify(t, &pr, err, sizeof(err)), -1);
	free(t);
}
END_TEST

Suite *make_jwks_suite(void)
{
	Suite *s = suite_create("jwks");
	TCase *tc = tcase_create("keyset");

	tcase_add_unchecked_fixture(tc, keys_setup, keys_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_jwks_by_kid);
	tcase_add_test(tc, test_jwks_rotation);
	tcase_add_test(tc, test_jwks_skips_unusable_keys);
	tcase_add_test(tc, test_jwks_refused_files);
	tcase_add_test(tc, test_jwks_es256_signature_shape);
	suite_add_tcase(s, tc);
	return s;
}
