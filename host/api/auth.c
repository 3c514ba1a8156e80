/*
 * auth.c -- JWT (RFC 7519) verification of "Authorization: Bearer <jwt>".
 *
 * Accepted: HS256 (HMAC-SHA256 with config jwt_hs256_secret) and RS256
 * (RSASSA-PKCS1-v1_5 SHA-256 with the PEM public key in
 * jwt_rs256_public_key_file).  A token is verified only with the key of the
 * algorithm its header names, and only if that key is configured, so an HS256
 * token can never be checked against the RSA public key (algorithm
 * confusion); "none" and every other alg are refused.
 *
 * All crypto and base64 is OpenSSL's.  The key material is read once by
 * pin_auth_init() (main thread, before any request); pin_auth_verify() only
 * reads it and is thread-safe.  Error strings never contain the token.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "api.h"

#define AUTH_MAX_TOKEN     8192      /* bytes of the compact JWT */
#define AUTH_LEEWAY_S      60        /* exp / nbf clock skew */
#define AUTH_MAX_PERMS     256

static struct {
	unsigned char *hs_secret;        /* NULL: HS256 not configured */
	size_t hs_len;
	EVP_PKEY *rs_key;                /* NULL: RS256 not configured */
	char *issuer;                    /* NULL: not checked */
	char *audience;                  /* NULL: not checked */
} auth;

static const struct {
	const char *name;
	unsigned bit;
} actors[] = {
	{ "agent",       PIN_ACTOR_AGENT },
	{ "consultant",  PIN_ACTOR_CONSULTANT },
	{ "agency_head", PIN_ACTOR_AGENCY_HEAD },
	{ "pin_manager", PIN_ACTOR_PIN_MANAGER },
	{ "investor",    PIN_ACTOR_INVESTOR },
};

unsigned pin_actor_bit(const char *actor)
{
	size_t i;

	if (!actor)
		return 0;
	for (i = 0; i < sizeof(actors) / sizeof(actors[0]); i++)
		if (strcmp(actor, actors[i].name) == 0)
			return actors[i].bit;
	return 0;
}

/* a declared key's value, or NULL when unset or empty */
static const char *cfg(const char *key)
{
	const char *v = pin_config_str(key);

	return *v ? v : NULL;
}

void pin_auth_fini(void)
{
	if (auth.hs_secret) {
		OPENSSL_cleanse(auth.hs_secret, auth.hs_len);
		free(auth.hs_secret);
	}
	EVP_PKEY_free(auth.rs_key);
	free(auth.issuer);
	free(auth.audience);
	memset(&auth, 0, sizeof(auth));
}

static int load_rsa_key(const char *path)
{
	FILE *f = NULL;
	EVP_PKEY *k = NULL;
	int ret = -1;

	f = fopen(path, "r");
	if (!f) {
		pin_log(PIN_LOG_ERROR, "cannot open jwt_rs256_public_key_file",
				"path", path, "error", strerror(errno), NULL);
		goto out;
	}
	k = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	if (!k) {
		pin_log(PIN_LOG_ERROR, "jwt_rs256_public_key_file is not a PEM public key",
				"path", path, NULL);
		goto out;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA) {
		pin_log(PIN_LOG_ERROR, "jwt_rs256_public_key_file is not an RSA key",
				"path", path, NULL);
		goto out;
	}
	if (EVP_PKEY_get_bits(k) < 2048) {
		pin_log(PIN_LOG_ERROR, "jwt_rs256_public_key_file: RSA key shorter than 2048 bits",
				"path", path, NULL);
		goto out;
	}
	auth.rs_key = k;
	k = NULL;
	ret = 0;
out:
	EVP_PKEY_free(k);
	if (f)
		fclose(f);
	return ret;
}

int pin_auth_init(void)
{
	const char *v;
	int ret = -1;

	pin_auth_fini();

	v = cfg("jwt_hs256_secret");
	if (v) {
		auth.hs_len = strlen(v);
		auth.hs_secret = malloc(auth.hs_len);
		if (!auth.hs_secret)
			goto out;
		memcpy(auth.hs_secret, v, auth.hs_len);
		if (auth.hs_len < 32)
			pin_log(PIN_LOG_WARN, "jwt_hs256_secret is shorter than 32 bytes", NULL);
	}
	v = cfg("jwt_rs256_public_key_file");
	if (v && load_rsa_key(v) < 0)
		goto out;
	v = cfg("jwt_issuer");
	if (v && !(auth.issuer = strdup(v)))
		goto out;
	v = cfg("jwt_audience");
	if (v && !(auth.audience = strdup(v)))
		goto out;
	if (!auth.hs_secret && !auth.rs_key)
		pin_log(PIN_LOG_WARN, "no JWT key configured (jwt_hs256_secret, "
				"jwt_rs256_public_key_file): every token is refused", NULL);
	ret = 0;
out:
	if (ret < 0)
		pin_auth_fini();
	return ret;
}

void pin_auth_principal_clear(struct pin_auth_principal *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n_permissions; i++)
		free(p->permissions[i]);
	free(p->permissions);
	memset(p, 0, sizeof(*p));
}

/* ---- helpers -------------------------------------------------------------- */

static void seterr(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
}

/* value of a base64url character, -1 if it is none */
static int b64url_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/*
 * Decodes base64url (no padding) src[0..n) into a malloc'd buffer (NUL
 * terminated for convenience).  Returns the decoded length, -1 if invalid.
 */
static long b64url_decode(const char *src, size_t n, unsigned char **out)
{
	unsigned char *tmp = NULL, *dec = NULL;
	size_t i, padded, pad;
	int len;
	long ret = -1;

	*out = NULL;
	if (n == 0 || n % 4 == 1)
		goto out;
	pad = (4 - n % 4) % 4;
	padded = n + pad;
	tmp = malloc(padded + 1);
	dec = malloc(padded / 4 * 3 + 1);
	if (!tmp || !dec)
		goto out;
	for (i = 0; i < n; i++) {
		if (b64url_val((unsigned char)src[i]) < 0)
			goto out;
		tmp[i] = src[i] == '-' ? '+' : src[i] == '_' ? '/' : src[i];
	}
	/* canonical only: the bits of the last character past the data are
	 * zero, else several strings decode to one signature (a changed token
	 * would verify) */
	if (pad && (b64url_val((unsigned char)src[n - 1]) & (pad == 2 ? 0x0f : 0x03)))
		goto out;
	memset(tmp + n, '=', pad);
	tmp[padded] = 0;
	len = EVP_DecodeBlock(dec, tmp, (int)padded);
	/* EVP_DecodeBlock counts the bytes the '=' pad stands for as zeros */
	if (len < 0 || (size_t)len != padded / 4 * 3)
		goto out;
	len -= (int)pad;
	dec[len] = 0;
	*out = dec;
	dec = NULL;
	ret = len;
out:
	free(tmp);
	free(dec);
	return ret;
}

/* Parses exactly one JSON object from buf[0..n); NULL otherwise. */
static json_object *parse_object(const unsigned char *buf, long n)
{
	json_tokener *tok;
	json_object *o = NULL;

	if (n <= 0 || memchr(buf, 0, (size_t)n))
		return NULL;
	tok = json_tokener_new_ex(16);
	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, (const char *)buf, (int)n);
	if (json_tokener_get_error(tok) != json_tokener_success ||
			json_tokener_get_parse_end(tok) != (size_t)n ||
			!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static const char *get_string(json_object *obj, const char *key, int *present)
{
	json_object *v;

	*present = json_object_object_get_ex(obj, key, &v) &&
		!json_object_is_type(v, json_type_null);
	if (!*present || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* NumericDate claim: 0 ok (value in *t), 1 absent, -1 not a number */
static int get_numeric_date(json_object *obj, const char *key, double *t)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v))
		return 1;
	if (!json_object_is_type(v, json_type_int) &&
			!json_object_is_type(v, json_type_double))
		return -1;
	*t = json_object_get_double(v);
	return 0;
}

static int verify_hs256(const char *input, size_t inlen,
		const unsigned char *sig, long siglen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ret = -1;

	if (!HMAC(EVP_sha256(), auth.hs_secret, (int)auth.hs_len,
			(const unsigned char *)input, inlen, md, &mdlen))
		goto out;
	if (siglen != (long)mdlen || CRYPTO_memcmp(md, sig, mdlen) != 0)
		goto out;
	ret = 0;
out:
	OPENSSL_cleanse(md, sizeof(md));
	return ret;
}

static int verify_rs256(const char *input, size_t inlen,
		const unsigned char *sig, long siglen)
{
	EVP_MD_CTX *ctx = NULL;
	int ret = -1;

	if (siglen <= 0 || siglen != EVP_PKEY_get_size(auth.rs_key))
		goto out;
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		goto out;
	if (EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, auth.rs_key) != 1)
		goto out;
	if (EVP_DigestVerify(ctx, sig, (size_t)siglen,
			(const unsigned char *)input, inlen) != 1)
		goto out;
	ret = 0;
out:
	EVP_MD_CTX_free(ctx);
	return ret;
}

static int aud_matches(json_object *payload)
{
	json_object *v, *e;
	size_t i, n;

	if (!json_object_object_get_ex(payload, "aud", &v))
		return 0;
	if (json_object_is_type(v, json_type_string))
		return strcmp(json_object_get_string(v), auth.audience) == 0;
	if (!json_object_is_type(v, json_type_array))
		return 0;
	n = json_object_array_length(v);
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(v, i);
		if (json_object_is_type(e, json_type_string) &&
				strcmp(json_object_get_string(e), auth.audience) == 0)
			return 1;
	}
	return 0;
}

static int copy_str(char *dst, size_t dstlen, const char *src)
{
	size_t n = strlen(src);

	if (n >= dstlen)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

static int fill_principal(json_object *payload, struct pin_auth_principal *out,
		char *err, size_t errlen)
{
	json_object *perms, *e;
	const char *s;
	size_t i, n;
	int present, ret = -1;

	s = get_string(payload, "sub", &present);
	if (!s || !pin_uuid_valid(s) || copy_str(out->sub, sizeof(out->sub), s) < 0) {
		seterr(err, errlen, present ? "invalid sub claim" : "missing sub claim");
		goto out;
	}
	s = get_string(payload, "tenant_id", &present);
	if (present && (!s || !pin_uuid_valid(s) ||
			copy_str(out->tenant_id, sizeof(out->tenant_id), s) < 0)) {
		seterr(err, errlen, "invalid tenant_id claim");
		goto out;
	}
	s = get_string(payload, "actor", &present);
	if (!s || !pin_actor_bit(s) || copy_str(out->actor, sizeof(out->actor), s) < 0) {
		seterr(err, errlen, present ? "invalid actor claim" : "missing actor claim");
		goto out;
	}
	out->actor_bit = pin_actor_bit(s);

	if (json_object_object_get_ex(payload, "permissions", &perms) &&
			!json_object_is_type(perms, json_type_null)) {
		if (!json_object_is_type(perms, json_type_array) ||
				json_object_array_length(perms) > AUTH_MAX_PERMS) {
			seterr(err, errlen, "invalid permissions claim");
			goto out;
		}
		n = json_object_array_length(perms);
		out->permissions = calloc(n ? n : 1, sizeof(char *));
		if (!out->permissions) {
			seterr(err, errlen, "out of memory");
			goto out;
		}
		for (i = 0; i < n; i++) {
			e = json_object_array_get_idx(perms, i);
			if (!json_object_is_type(e, json_type_string)) {
				seterr(err, errlen, "invalid permissions claim");
				goto out;
			}
			out->permissions[i] = strdup(json_object_get_string(e));
			if (!out->permissions[i]) {
				seterr(err, errlen, "out of memory");
				goto out;
			}
			out->n_permissions++;
		}
	}
	ret = 0;
out:
	return ret;
}

/* ---- verify ------------------------------------------------------------- */

int pin_auth_verify(const char *authorization, struct pin_auth_principal *out,
		char *err, size_t errlen)
{
	const char *tok, *dot1, *dot2, *end, *alg, *typ;
	unsigned char *hdr_raw = NULL, *pl_raw = NULL, *sig = NULL;
	json_object *hdr = NULL, *payload = NULL, *v;
	long hdr_n, pl_n, sig_n;
	size_t toklen;
	double exp_s = 0, nbf_s = 0, now_s;
	int present, r, ret = -1;

	memset(out, 0, sizeof(*out));

	if (!authorization || !*authorization) {
		seterr(err, errlen, "missing bearer token");
		goto out;
	}
	if (strncasecmp(authorization, "Bearer ", 7) != 0) {
		seterr(err, errlen, "authorization scheme must be Bearer");
		goto out;
	}
	tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	toklen = strnlen(tok, AUTH_MAX_TOKEN + 1);
	if (toklen > AUTH_MAX_TOKEN) {
		seterr(err, errlen, "token too long");
		goto out;
	}
	end = tok + toklen;
	while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == tok) {
		seterr(err, errlen, "missing bearer token");
		goto out;
	}

	/* header.payload.signature: exactly two dots, three non-empty parts */
	dot1 = memchr(tok, '.', (size_t)(end - tok));
	dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
	if (!dot1 || !dot2 || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1))) {
		seterr(err, errlen, "malformed token");
		goto out;
	}
	hdr_n = b64url_decode(tok, (size_t)(dot1 - tok), &hdr_raw);
	pl_n = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &pl_raw);
	sig_n = b64url_decode(dot2 + 1, (size_t)(end - dot2 - 1), &sig);
	if (hdr_n < 0 || pl_n < 0 || sig_n < 0) {
		seterr(err, errlen, "malformed token (base64url)");
		goto out;
	}
	hdr = parse_object(hdr_raw, hdr_n);
	if (!hdr) {
		seterr(err, errlen, "malformed token header");
		goto out;
	}

	/* header checks */
	alg = get_string(hdr, "alg", &present);
	if (!alg) {
		seterr(err, errlen, "missing alg");
		goto out;
	}
	typ = get_string(hdr, "typ", &present);
	if (present && (!typ || strcasecmp(typ, "JWT") != 0)) {
		seterr(err, errlen, "unsupported typ");
		goto out;
	}
	if (json_object_object_get_ex(hdr, "crit", &v)) {
		seterr(err, errlen, "unsupported crit header");
		goto out;
	}

	/* signature, with the key of the named alg only */
	if (strcmp(alg, "HS256") == 0 && auth.hs_secret) {
		r = verify_hs256(tok, (size_t)(dot2 - tok), sig, sig_n);
	} else if (strcmp(alg, "RS256") == 0 && auth.rs_key) {
		r = verify_rs256(tok, (size_t)(dot2 - tok), sig, sig_n);
	} else {
		seterr(err, errlen, "unsupported alg");
		goto out;
	}
	if (r < 0) {
		seterr(err, errlen, "bad signature");
		goto out;
	}

	/* claims */
	payload = parse_object(pl_raw, pl_n);
	if (!payload) {
		seterr(err, errlen, "malformed token payload");
		goto out;
	}
	now_s = (double)pin_clock_now_us() / 1e6;
	r = get_numeric_date(payload, "exp", &exp_s);
	if (r != 0) {
		seterr(err, errlen, r > 0 ? "missing exp claim" : "invalid exp claim");
		goto out;
	}
	if (now_s > exp_s + AUTH_LEEWAY_S) {
		seterr(err, errlen, "token expired");
		goto out;
	}
	r = get_numeric_date(payload, "nbf", &nbf_s);
	if (r < 0) {
		seterr(err, errlen, "invalid nbf claim");
		goto out;
	}
	if (r == 0 && now_s + AUTH_LEEWAY_S < nbf_s) {
		seterr(err, errlen, "token not yet valid");
		goto out;
	}
	if (auth.issuer) {
		const char *iss = get_string(payload, "iss", &present);

		if (!iss || strcmp(iss, auth.issuer) != 0) {
			seterr(err, errlen, "wrong issuer");
			goto out;
		}
	}
	if (auth.audience && !aud_matches(payload)) {
		seterr(err, errlen, "wrong audience");
		goto out;
	}
	if (fill_principal(payload, out, err, errlen) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0)
		pin_auth_principal_clear(out);
	json_object_put(hdr);
	json_object_put(payload);
	free(hdr_raw);
	free(pl_raw);
	free(sig);
	return ret;
}

/* ---- challenge ---------------------------------------------------------- */

/*
 * RFC 6750 section 3: every 401 names the scheme and realm; a request that
 * sent no bearer credentials (no Authorization header, or another scheme)
 * gets no error attribute, an empty bearer token is error="invalid_request",
 * any other refused token error="invalid_token" with the reason of
 * pin_auth_verify as error_description (its reasons are fixed texts; a
 * character outside the attribute's set, RFC 6750 3: %x20-21 / %x23-5B /
 * %x5D-7E, is replaced by a space).
 */
void pin_auth_challenge(const char *authorization, const char *err, char *out,
		size_t outlen)
{
	const char *tok, *error;
	char desc[160];
	size_t i;

	if (!outlen)
		return;
	if (!authorization || strncasecmp(authorization, "Bearer", 6) != 0 ||
	    (authorization[6] != ' ' && authorization[6] != '\0')) {
		snprintf(out, outlen, "Bearer realm=\"%s\"", PIN_AUTH_REALM);
		return;
	}
	tok = authorization + 6;
	while (*tok == ' ' || *tok == '\t')
		tok++;
	error = *tok ? "invalid_token" : "invalid_request";
	for (i = 0; err && err[i] && i < sizeof desc - 1; i++)
		desc[i] = (err[i] < 0x20 || err[i] > 0x7e || err[i] == '"' ||
			err[i] == '\\') ? ' ' : err[i];
	desc[i] = '\0';
	if (desc[0])
		snprintf(out, outlen, "Bearer realm=\"%s\", error=\"%s\", "
			"error_description=\"%s\"", PIN_AUTH_REALM, error, desc);
	else
		snprintf(out, outlen, "Bearer realm=\"%s\", error=\"%s\"",
			PIN_AUTH_REALM, error);
}
