/* jose.c -- see jose.h */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "jose.h"

char *jose_b64url(const unsigned char *in, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	size_t len, i;

	ck_assert_ptr_nonnull(out);
	len = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = 0;
	for (i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return out;
}

static char *bn_b64(EVP_PKEY *k, const char *param)
{
	BIGNUM *bn = NULL;
	unsigned char buf[1024];
	int n;

	ck_assert_int_eq(EVP_PKEY_get_bn_param(k, param, &bn), 1);
	n = BN_bn2bin(bn, buf);
	BN_free(bn);
	return jose_b64url(buf, (size_t)n);
}

char *jose_jwk(EVP_PKEY *k, const char *kid, const char *extra)
{
	char *out = malloc(4096), *a, *b;
	unsigned char pub[65];
	size_t publen = 0;

	ck_assert_ptr_nonnull(out);
	if (EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA) {
		a = bn_b64(k, OSSL_PKEY_PARAM_RSA_N);
		b = bn_b64(k, OSSL_PKEY_PARAM_RSA_E);
		snprintf(out, 4096, "{\"kty\":\"RSA\",\"use\":\"sig\",\"alg\":\"RS256\","
			"\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s%s}", kid, a, b,
			extra ? "," : "", extra ? extra : "");
	} else {
		ck_assert_int_eq(EVP_PKEY_get_octet_string_param(k,
				OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub), &publen), 1);
		ck_assert_uint_eq(publen, 65);
		a = jose_b64url(pub + 1, 32);
		b = jose_b64url(pub + 33, 32);
		snprintf(out, 4096, "{\"kty\":\"EC\",\"use\":\"sig\",\"alg\":\"ES256\","
			"\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"%s%s}",
			kid, a, b, extra ? "," : "", extra ? extra : "");
	}
	free(a);
	free(b);
	return out;
}

char *jose_sign(EVP_PKEY *k, const char *hdr, const char *payload)
{
	int ec = EVP_PKEY_get_base_id(k) == EVP_PKEY_EC;
	char *h = jose_b64url((const unsigned char *)hdr, strlen(hdr));
	char *p = jose_b64url((const unsigned char *)payload, strlen(payload));
	unsigned char sig[1024], rs[64];
	size_t siglen = sizeof(sig), n = strlen(h) + strlen(p) + 2;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *input = malloc(n), *s, *out;

	ck_assert_ptr_nonnull(input);
	snprintf(input, n, "%s.%s", h, p);
	ck_assert_int_eq(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
	ck_assert_int_eq(EVP_DigestSign(ctx, sig, &siglen,
			(const unsigned char *)input, strlen(input)), 1);
	EVP_MD_CTX_free(ctx);
	if (ec) {
		/* DER ECDSA-Sig-Value -> JOSE r || s (RFC 7518 section 3.4) */
		const unsigned char *d = sig;
		ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &d, (long)siglen);
		const BIGNUM *r, *sv;

		ck_assert_ptr_nonnull(es);
		ECDSA_SIG_get0(es, &r, &sv);
		ck_assert_int_eq(BN_bn2binpad(r, rs, 32), 32);
		ck_assert_int_eq(BN_bn2binpad(sv, rs + 32, 32), 32);
		ECDSA_SIG_free(es);
		s = jose_b64url(rs, 64);
	} else {
		s = jose_b64url(sig, siglen);
	}
	n = strlen(input) + strlen(s) + 2;
	out = malloc(n);
	ck_assert_ptr_nonnull(out);
	snprintf(out, n, "%s.%s", input, s);
	free(h);
	free(p);
	free(s);
	free(input);
	return out;
}
