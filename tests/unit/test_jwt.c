/* test_jwt.c -- pin_auth_verify(): HS256 / RS256 tokens built here with
 * OpenSSL, against the host's config and clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"
#include "../common/jose.h"

#define SECRET  "unit-test-secret-0123456789abcdef0123456789"
#define SUB     "0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b"
#define TENANT  "0190a0b0-1c2d-7e3f-8a4b-000000000001"
#define ISS     "https://id.pin.example"
#define AUD     "pin-calendar"

static EVP_PKEY *rsa_key;               /* private + public */
static char rsa_pub_path[64];
static char *rsa_pub_pem;               /* the public PEM text */

/* ---- token construction ------------------------------------------------ */

enum signer { SIGN_HS, SIGN_RS, SIGN_NONE };

/* "Bearer <b64(hdr)>.<b64(payload)>.<sig>", malloc'd.  key: HS secret. */
static char *make_token(const char *hdr, const char *payload, enum signer how,
		const char *key, size_t keylen)
{
	char *h = jose_b64url((const unsigned char *)hdr, strlen(hdr));
	char *p = jose_b64url((const unsigned char *)payload, strlen(payload));
	unsigned char sig[1024];
	size_t siglen = 0;
	unsigned int mdlen = 0;
	char *input, *s, *tok;
	size_t n;

	n = strlen(h) + strlen(p) + 2;
	input = malloc(n);
	ck_assert_ptr_nonnull(input);
	snprintf(input, n, "%s.%s", h, p);
	if (how == SIGN_HS) {
		ck_assert_ptr_nonnull(HMAC(EVP_sha256(), key, (int)keylen,
				(unsigned char *)input, strlen(input), sig, &mdlen));
		siglen = mdlen;
	} else if (how == SIGN_RS) {
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();

		siglen = sizeof(sig);
		ck_assert_int_eq(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, rsa_key), 1);
		ck_assert_int_eq(EVP_DigestSign(ctx, sig, &siglen,
				(unsigned char *)input, strlen(input)), 1);
		EVP_MD_CTX_free(ctx);
	}
	s = jose_b64url(sig, siglen);
	n = strlen("Bearer ") + strlen(input) + 1 + strlen(s) + 1;
	tok = malloc(n);
	ck_assert_ptr_nonnull(tok);
	snprintf(tok, n, "Bearer %s.%s", input, s);
	free(h);
	free(p);
	free(s);
	free(input);
	return tok;
}

static long long now_s(void)
{
	return (long long)(pin_clock_now_us() / 1000000);
}

/* a complete, valid payload with exp/nbf relative to the host clock */
static char *payload_ex(long long exp_in, long long nbf_in, const char *extra)
{
	char *buf = malloc(2048);

	ck_assert_ptr_nonnull(buf);
	snprintf(buf, 2048, "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"tenant_id\":\"" TENANT "\",\"actor\":\"agent\","
		"\"permissions\":[\"calendar.events.view\",\"calendar.events.manage\"],"
		"\"iat\":%lld,\"nbf\":%lld,\"exp\":%lld%s%s}",
		now_s(), now_s() + nbf_in, now_s() + exp_in,
		extra ? "," : "", extra ? extra : "");
	return buf;
}

static const char *HDR_HS = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
static const char *HDR_RS = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";

static char *hs_token(const char *payload)
{
	return make_token(HDR_HS, payload, SIGN_HS, SECRET, strlen(SECRET));
}

/* ---- config ------------------------------------------------------------ */

static void configure(const char *hs, const char *rsfile, const char *iss,
		const char *aud)
{
	pin_auth_fini();
	pin_config_free();
	if (hs)
		ck_assert_int_eq(pin_config_set("jwt_hs256_secret", hs), 0);
	if (rsfile)
		ck_assert_int_eq(pin_config_set("jwt_rs256_public_key_file", rsfile), 0);
	if (iss)
		ck_assert_int_eq(pin_config_set("jwt_issuer", iss), 0);
	if (aud)
		ck_assert_int_eq(pin_config_set("jwt_audience", aud), 0);
	ck_assert_int_eq(pin_auth_init(), 0);
}

static void rsa_setup(void)
{
	FILE *f;
	BIO *bio;
	char *data;
	long n;
	int fd;

	rsa_key = EVP_RSA_gen(2048);
	ck_assert_ptr_nonnull(rsa_key);
	snprintf(rsa_pub_path, sizeof(rsa_pub_path), "/tmp/pin-jwt-pub-XXXXXX");
	fd = mkstemp(rsa_pub_path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_int_eq(PEM_write_PUBKEY(f, rsa_key), 1);
	fclose(f);

	bio = BIO_new(BIO_s_mem());
	PEM_write_bio_PUBKEY(bio, rsa_key);
	n = BIO_get_mem_data(bio, &data);
	rsa_pub_pem = strndup(data, (size_t)n);
	BIO_free(bio);
}

static void rsa_teardown(void)
{
	unlink(rsa_pub_path);
	EVP_PKEY_free(rsa_key);
	rsa_key = NULL;
	free(rsa_pub_pem);
	rsa_pub_pem = NULL;
}

static void setup(void)
{
	pin_clock_set_offset_s(0);
	configure(SECRET, rsa_pub_path, ISS, AUD);
}

static void teardown(void)
{
	pin_auth_fini();
	pin_config_free();
	pin_clock_set_offset_s(0);
}

/* verify; on failure the principal must be empty and err set */
static int verify(const char *tok, struct pin_auth_principal *p, char *err, size_t errlen)
{
	int r;

	err[0] = 0;
	r = pin_auth_verify(tok, p, err, errlen);
	if (r != 0) {
		ck_assert_int_eq(r, -1);
		ck_assert_msg(err[0] != 0, "no reason given");
		ck_assert_ptr_null(p->permissions);
	}
	return r;
}

/* expects refusal with a reason containing want (if non-NULL) */
static void expect_refused(const char *tok, const char *want)
{
	struct pin_auth_principal p;
	char err[256];
	const char *dot;

	ck_assert_msg(verify(tok, &p, err, sizeof(err)) == -1,
			"token accepted, expected refusal (%s)", want ? want : "");
	if (want)
		ck_assert_msg(strstr(err, want) != NULL, "err '%s' lacks '%s'", err, want);
	/* the reason never echoes the token */
	dot = tok ? strrchr(tok, '.') : NULL;
	if (dot && strlen(dot + 1) > 8)
		ck_assert_ptr_null(strstr(err, dot + 1));
	pin_auth_principal_clear(&p);
}

static void expect_ok(const char *tok)
{
	struct pin_auth_principal p;
	char err[256];

	ck_assert_msg(verify(tok, &p, err, sizeof(err)) == 0, "refused: %s", err);
	pin_auth_principal_clear(&p);
}

/* Signs payload with the HS secret, then expect_refused(want) / expect_ok. */
static void hs_refused(const char *payload, const char *want)
{
	char *tok = hs_token(payload);

	expect_refused(tok, want);
	free(tok);
}

static void hs_ok(const char *payload)
{
	char *tok = hs_token(payload);

	expect_ok(tok);
	free(tok);
}

/* ---- tests --------------------------------------------------------------- */

START_TEST(test_hs256_valid)
{
	char *pl = payload_ex(600, -10, NULL);
	char *tok = hs_token(pl);
	struct pin_auth_principal p;
	char err[256];

	ck_assert_msg(verify(tok, &p, err, sizeof(err)) == 0, "refused: %s", err);
	ck_assert_str_eq(p.sub, SUB);
	ck_assert_str_eq(p.tenant_id, TENANT);
	ck_assert_str_eq(p.actor, "agent");
	ck_assert_uint_eq(p.actor_bit, PIN_ACTOR_AGENT);
	ck_assert_uint_eq(p.n_permissions, 2);
	ck_assert_str_eq(p.permissions[0], "calendar.events.view");
	ck_assert_str_eq(p.permissions[1], "calendar.events.manage");
	pin_auth_principal_clear(&p);
	ck_assert_uint_eq(p.n_permissions, 0);
	ck_assert_ptr_null(p.permissions);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_hs256_minimal_claims)
{
	/* no iss/aud configured: only exp, sub, actor needed; investor without
	 * tenant or permissions */
#define MINIMAL_FMT "{\"sub\":\"" SUB "\",\"actor\":\"investor\",\"exp\":%lld}"
	char pl[256], *tok;
	struct pin_auth_principal p;
	char err[256];

	configure(SECRET, NULL, NULL, NULL);
	snprintf(pl, sizeof(pl), MINIMAL_FMT, now_s() + 60);
	tok = hs_token(pl);
	ck_assert_msg(verify(tok, &p, err, sizeof(err)) == 0, "refused: %s", err);
	ck_assert_str_eq(p.tenant_id, "");
	ck_assert_str_eq(p.actor, "investor");
	ck_assert_uint_eq(p.actor_bit, PIN_ACTOR_INVESTOR);
	ck_assert_uint_eq(p.n_permissions, 0);
	pin_auth_principal_clear(&p);
	free(tok);
}
END_TEST

START_TEST(test_rs256_valid)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_RS, pl, SIGN_RS, NULL, 0);
	struct pin_auth_principal p;
	char err[256];

	configure(NULL, rsa_pub_path, ISS, AUD);
	ck_assert_msg(verify(tok, &p, err, sizeof(err)) == 0, "refused: %s", err);
	ck_assert_str_eq(p.sub, SUB);
	ck_assert_uint_eq(p.actor_bit, PIN_ACTOR_AGENT);
	pin_auth_principal_clear(&p);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_rs256_tampered)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_RS, pl, SIGN_RS, NULL, 0);
	char *pl2 = payload_ex(600, 0, "\"x\":1");
	char *tok2 = make_token(HDR_RS, pl2, SIGN_RS, NULL, 0);
	char *dot = strrchr(tok, '.'), *dot2 = strrchr(tok2, '.');
	char *mixed = malloc(strlen(tok2) + strlen(dot) + 1);

	/* payload of tok2 with the signature of tok */
	memcpy(mixed, tok2, (size_t)(dot2 - tok2));
	strcpy(mixed + (dot2 - tok2), dot);
	expect_refused(mixed, "signature");

	/* flip one signature character */
	dot[5] = dot[5] == 'A' ? 'B' : 'A';
	expect_refused(tok, "signature");
	free(mixed);
	free(tok);
	free(tok2);
	free(pl);
	free(pl2);
}
END_TEST

START_TEST(test_rs256_not_configured)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_RS, pl, SIGN_RS, NULL, 0);

	configure(SECRET, NULL, ISS, AUD);
	expect_refused(tok, NULL);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_rs256_bad_key_file)
{
	pin_auth_fini();
	pin_config_free();
	pin_config_set("jwt_rs256_public_key_file", "/nonexistent/pin/key.pem");
	ck_assert_int_eq(pin_auth_init(), -1);
	pin_config_set("jwt_rs256_public_key_file", "/etc/passwd");
	ck_assert_int_eq(pin_auth_init(), -1);
}
END_TEST

START_TEST(test_expired)
{
	char *pl = payload_ex(-120, -3600, NULL);

	hs_refused(pl, "expired");
	free(pl);
}
END_TEST

START_TEST(test_exp_within_leeway)
{
	char *pl = payload_ex(-30, -3600, NULL);

	hs_ok(pl);
	free(pl);
}
END_TEST

START_TEST(test_exp_missing)
{
	const char *pl = "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"" SUB "\","
		"\"actor\":\"agent\"}";

	hs_refused(pl, "exp");
}
END_TEST

START_TEST(test_exp_not_number)
{
	const char *pl = "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"" SUB "\","
		"\"actor\":\"agent\",\"exp\":\"9999999999\"}";

	hs_refused(pl, "exp");
}
END_TEST

START_TEST(test_nbf_future)
{
	char *pl = payload_ex(3600, 300, NULL);

	hs_refused(pl, "not yet valid");
	free(pl);
}
END_TEST

START_TEST(test_nbf_within_leeway)
{
	char *pl = payload_ex(3600, 30, NULL);

	hs_ok(pl);
	free(pl);
}
END_TEST

START_TEST(test_host_clock_offset)
{
	/* valid for 10 more minutes of wall time, but the host clock is shifted
	 * one hour ahead: expired by the host's "now" */
	char *pl = payload_ex(600, -10, NULL);
	char *tok = hs_token(pl);

	expect_ok(tok);
	pin_clock_set_offset_s(3600);
	expect_refused(tok, "expired");
	pin_clock_set_offset_s(0);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_bad_signature)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_HS, pl, SIGN_HS, "other-secret", 12);

	expect_refused(tok, "signature");
	free(tok);
	free(pl);
}
END_TEST

/* found by tests/fuzz (fuzz_auth): the unused low bits of the last base64url
 * character of the signature were ignored, so a changed token verified */
START_TEST(test_signature_noncanonical)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_HS, pl, SIGN_HS, SECRET, strlen(SECRET));
	char *last = tok + strlen(tok) - 1;
	int v = (int)(strchr(abc, *last) - abc);

	expect_ok(tok);
	*last = abc[v | 1];              /* same 2 data bits, another unused bit */
	ck_assert_int_ne(v, v | 1);
	expect_refused(tok, "malformed");
	free(tok);
	free(pl);
}
END_TEST

/* found by tests/fuzz (fuzz_clock): an instant whose offset moves it before
 * 1900 or past 9999 (UTC) parsed, but its pin_clock_fmt did not */
START_TEST(test_clock_parse_range)
{
	int64_t us;
	char out[40];

	ck_assert_int_eq(pin_clock_parse("1900-01-01T00:00+01:00", &us), -1);
	ck_assert_int_eq(pin_clock_parse("9999-12-31T23:30:00-01:00", &us), -1);
	ck_assert_int_eq(pin_clock_parse("1900-01-01T00:30-00:30", &us), 0);
	ck_assert_str_eq(pin_clock_fmt(us, out, sizeof(out)), "1900-01-01T01:00:00Z");
	ck_assert_int_eq(pin_clock_parse("9999-12-31T23:59:59.999999Z", &us), 0);
	ck_assert_str_eq(pin_clock_fmt(us, out, sizeof(out)), "9999-12-31T23:59:59.999999Z");
}
END_TEST

START_TEST(test_alg_none)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token("{\"alg\":\"none\",\"typ\":\"JWT\"}", pl, SIGN_NONE, NULL, 0);
	char *tok2 = make_token("{\"alg\":\"none\"}", pl, SIGN_HS, SECRET, strlen(SECRET));
	char *tok3 = make_token("{\"alg\":\"hs256\"}", pl, SIGN_HS, SECRET, strlen(SECRET));
	char *tok4 = make_token("{\"typ\":\"JWT\"}", pl, SIGN_HS, SECRET, strlen(SECRET));
	char *tok5 = make_token("{\"alg\":\"HS512\"}", pl, SIGN_HS, SECRET, strlen(SECRET));

	expect_refused(tok, NULL);    /* "header.payload." */
	expect_refused(tok2, "alg");
	expect_refused(tok3, "alg");
	expect_refused(tok4, "alg");
	expect_refused(tok5, "alg");
	free(tok);
	free(tok2);
	free(tok3);
	free(tok4);
	free(tok5);
	free(pl);
}
END_TEST

START_TEST(test_alg_confusion)
{
	/* HS256 token whose HMAC key is the RSA public key PEM, while only the
	 * RSA key is configured: must not be verified with the PEM as secret */
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token(HDR_HS, pl, SIGN_HS, rsa_pub_pem, strlen(rsa_pub_pem));

	configure(NULL, rsa_pub_path, ISS, AUD);
	expect_refused(tok, NULL);
	/* same with both keys configured */
	configure(SECRET, rsa_pub_path, ISS, AUD);
	expect_refused(tok, "signature");
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_no_key_configured)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = hs_token(pl);

	configure(NULL, NULL, NULL, NULL);
	expect_refused(tok, NULL);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_typ)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = make_token("{\"alg\":\"HS256\"}", pl, SIGN_HS, SECRET, strlen(SECRET));
	char *tok2 = make_token("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}", pl, SIGN_HS,
			SECRET, strlen(SECRET));

	expect_ok(tok);               /* typ is optional */
	expect_refused(tok2, "typ");
	free(tok);
	free(tok2);
	free(pl);
}
END_TEST

START_TEST(test_audience)
{
	char *pl;
#define AUD_FMT "{\"iss\":\"" ISS "\",\"aud\":%s,\"sub\":\"" SUB "\"," \
		"\"actor\":\"agent\",\"exp\":%lld}"
	char buf[512];

	snprintf(buf, sizeof(buf), AUD_FMT, "\"someone-else\"", now_s() + 600);
	hs_refused(buf, "audience");

	snprintf(buf, sizeof(buf), AUD_FMT, "[\"a\",\"" AUD "\"]", now_s() + 600);
	hs_ok(buf);

	snprintf(buf, sizeof(buf), AUD_FMT, "[\"a\",\"b\"]", now_s() + 600);
	hs_refused(buf, "audience");

	/* missing aud while configured */
	pl = payload_ex(600, 0, NULL);
	configure(SECRET, NULL, ISS, "other-audience");
	hs_refused(pl, "audience");

	/* not configured: not checked */
	configure(SECRET, NULL, NULL, NULL);
	hs_ok(pl);
	free(pl);
}
END_TEST

START_TEST(test_issuer)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "{\"iss\":\"https://evil.example\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"actor\":\"agent\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "issuer");

	snprintf(buf, sizeof(buf), "{\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"actor\":\"agent\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "issuer");
}
END_TEST

START_TEST(test_sub)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"actor\":\"agent\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "sub");

	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"user-42\",\"actor\":\"agent\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "sub");

	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":42,\"actor\":\"agent\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "sub");
}
END_TEST

START_TEST(test_tenant)
{
	const char *pl = "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"" SUB "\","
		"\"tenant_id\":\"acme\",\"actor\":\"agent\",\"exp\":9999999999}";

	hs_refused(pl, "tenant");
}
END_TEST

START_TEST(test_actor)
{
	char buf[512];
	static const char *bad[] = { "\"admin\"", "\"Agent\"", "\"\"", "1", "null" };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
			"\"sub\":\"" SUB "\",\"actor\":%s,\"exp\":%lld}", bad[i], now_s() + 600);
		hs_refused(buf, "actor");
	}
	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "actor");
}
END_TEST

START_TEST(test_permissions_invalid)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"actor\":\"agent\",\"permissions\":[\"a\",7],"
		"\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "permissions");

	snprintf(buf, sizeof(buf), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\","
		"\"sub\":\"" SUB "\",\"actor\":\"agent\",\"permissions\":\"a\","
		"\"exp\":%lld}", now_s() + 600);
	hs_refused(buf, "permissions");
}
END_TEST

START_TEST(test_malformed)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = hs_token(pl);
	char *two = strdup(tok), *four, *bad64;
	char *hdr_end = strchr(tok, '.');

	/* 2 parts */
	*strrchr(two, '.') = 0;
	expect_refused(two, "malformed");
	/* 4 parts */
	four = malloc(strlen(tok) + 8);
	ck_assert_ptr_nonnull(four);
	snprintf(four, strlen(tok) + 8, "%s.AAAA", tok);
	expect_refused(four, "malformed");
	/* bad base64url characters in the payload */
	bad64 = strdup(tok);
	bad64[hdr_end - tok + 3] = '!';
	expect_refused(bad64, "malformed");
	/* impossible base64 length (4n+1) */
	expect_refused("Bearer eyJhbGciOiJIUzI1NiJ9.A.AAAA", "malformed");
	/* empty parts */
	expect_refused("Bearer ..", "malformed");
	expect_refused("Bearer ", NULL);
	expect_refused("", NULL);
	expect_refused(NULL, NULL);
	free(two);
	free(four);
	free(bad64);
	free(tok);
	free(pl);

	/* payload that is not JSON, header that is not an object */
	hs_refused("not json", "malformed");
	tok = make_token("[\"HS256\"]", "{}", SIGN_HS, SECRET, strlen(SECRET));
	expect_refused(tok, "malformed");
	free(tok);
}
END_TEST

START_TEST(test_bearer_prefix)
{
	char *pl = payload_ex(600, 0, NULL);
	char *tok = hs_token(pl);
	const char *raw = tok + strlen("Bearer ");
	size_t blen = strlen(raw) + 8;
	char *basic = malloc(blen);

	ck_assert_ptr_nonnull(basic);
	expect_refused(raw, "Bearer");
	snprintf(basic, blen, "Basic %s", raw);
	expect_refused(basic, "Bearer");
	snprintf(basic, blen, "Bearer%s", raw);
	expect_refused(basic, NULL);
	/* the scheme is case-insensitive (RFC 9110 11.1) */
	snprintf(basic, blen, "bearer %s", raw);
	expect_ok(basic);
	free(basic);
	free(tok);
	free(pl);
}
END_TEST

START_TEST(test_too_long)
{
	/* a correctly signed token over the 8 KiB limit */
	static char pad[8801], pl[10000];

	memset(pad, 'x', sizeof(pad) - 1);
	snprintf(pl, sizeof(pl), "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"" SUB "\","
		"\"actor\":\"agent\",\"exp\":%lld,\"pad\":\"%s\"}", now_s() + 600, pad);
	hs_refused(pl, "too long");
}
END_TEST

START_TEST(test_actor_bit)
{
	ck_assert_uint_eq(pin_actor_bit("agent"), PIN_ACTOR_AGENT);
	ck_assert_uint_eq(pin_actor_bit("consultant"), PIN_ACTOR_CONSULTANT);
	ck_assert_uint_eq(pin_actor_bit("agency_head"), PIN_ACTOR_AGENCY_HEAD);
	ck_assert_uint_eq(pin_actor_bit("pin_manager"), PIN_ACTOR_PIN_MANAGER);
	ck_assert_uint_eq(pin_actor_bit("investor"), PIN_ACTOR_INVESTOR);
	ck_assert_uint_eq(pin_actor_bit("admin"), 0);
	ck_assert_uint_eq(pin_actor_bit(""), 0);
	ck_assert_uint_eq(pin_actor_bit(NULL), 0);
}
END_TEST

/* RFC 6750 3: the WWW-Authenticate value of a 401 */
START_TEST(test_challenge)
{
	char ch[256];

	pin_auth_challenge(NULL, NULL, ch, sizeof ch);
	ck_assert_str_eq(ch, "Bearer realm=\"" PIN_AUTH_REALM "\"");
	pin_auth_challenge("Basic dXNlcjpwYXNz", "authorization scheme must be Bearer",
			ch, sizeof ch);
	ck_assert_str_eq(ch, "Bearer realm=\"" PIN_AUTH_REALM "\"");
	pin_auth_challenge("Bearer ", "missing bearer token", ch, sizeof ch);
	ck_assert_str_eq(ch, "Bearer realm=\"" PIN_AUTH_REALM "\", error=\"invalid_request\", "
			"error_description=\"missing bearer token\"");
	pin_auth_challenge("bearer a.b.c", "token expired", ch, sizeof ch);
	ck_assert_str_eq(ch, "Bearer realm=\"" PIN_AUTH_REALM "\", error=\"invalid_token\", "
			"error_description=\"token expired\"");
	/* a quote or backslash never reaches the quoted attribute */
	pin_auth_challenge("Bearer x", "a \"b\\c", ch, sizeof ch);
	ck_assert_str_eq(ch, "Bearer realm=\"" PIN_AUTH_REALM "\", error=\"invalid_token\", "
			"error_description=\"a  b c\"");
	/* truncated, never overflowing */
	pin_auth_challenge("Bearer x", "token expired", ch, 10);
	ck_assert_uint_eq(strlen(ch), 9);
}
END_TEST

Suite *make_jwt_suite(void)
{
	Suite *s = suite_create("jwt");
	TCase *tc = tcase_create("verify");

	tcase_add_unchecked_fixture(tc, rsa_setup, rsa_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_hs256_valid);
	tcase_add_test(tc, test_hs256_minimal_claims);
	tcase_add_test(tc, test_rs256_valid);
	tcase_add_test(tc, test_rs256_tampered);
	tcase_add_test(tc, test_rs256_not_configured);
	tcase_add_test(tc, test_rs256_bad_key_file);
	tcase_add_test(tc, test_expired);
	tcase_add_test(tc, test_exp_within_leeway);
	tcase_add_test(tc, test_exp_missing);
	tcase_add_test(tc, test_exp_not_number);
	tcase_add_test(tc, test_nbf_future);
	tcase_add_test(tc, test_nbf_within_leeway);
	tcase_add_test(tc, test_host_clock_offset);
	tcase_add_test(tc, test_bad_signature);
	tcase_add_test(tc, test_signature_noncanonical);
	tcase_add_test(tc, test_clock_parse_range);
	tcase_add_test(tc, test_alg_none);
	tcase_add_test(tc, test_alg_confusion);
	tcase_add_test(tc, test_no_key_configured);
	tcase_add_test(tc, test_typ);
	tcase_add_test(tc, test_audience);
	tcase_add_test(tc, test_issuer);
	tcase_add_test(tc, test_sub);
	tcase_add_test(tc, test_tenant);
	tcase_add_test(tc, test_actor);
	tcase_add_test(tc, test_permissions_invalid);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_bearer_prefix);
	tcase_add_test(tc, test_too_long);
	tcase_add_test(tc, test_actor_bit);
	tcase_add_test(tc, test_challenge);
	suite_add_tcase(s, tc);
	return s;
}
