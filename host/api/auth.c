/*
 * auth.c -- JWT (RFC 7519) verification of "Authorization: Bearer <jwt>".
 *
 * Accepted: HS256 (HMAC-SHA256 with config jwt_hs256_secret), RS256
 * (RSASSA-PKCS1-v1_5 SHA-256) and ES256 (ECDSA P-256 SHA-256).  The public
 * keys come from a JSON Web Key Set (RFC 7517) in jwt_jwks_file, chosen by
 * the token's "kid", and/or from one RSA PEM in jwt_rs256_public_key_file.
 * A token is verified only with a key of the algorithm its header names, and
 * only if such a key is configured, so an HS256 token can never be checked
 * against a public key (algorithm confusion); "none" and every other alg are
 * refused.  Key selection:
 *   - a token with a kid, when a key set is configured: the set's key of that
 *     kid and alg, nothing else ("unknown key id" otherwise: a key that left
 *     the set is refused from the moment the set is re-read);
 *   - a token without a kid: the set's only key of its alg, else the PEM key
 *     (RS256), else refused ("missing kid").
 *   - with no key set configured the kid is not looked at (the PEM key).
 *
 * All crypto and base64 is OpenSSL's.  The key material, issuer and audience
 * form one immutable key set, built by pin_auth_init() and swapped in whole:
 * calling it again (a reload) builds the new set from the configuration now
 * loaded and, only if that succeeds, replaces the live one, so a bad file
 * leaves the running keys in place.  pin_auth_verify() holds a reference to
 * the set it started with, so a reload never pulls a key out from under a
 * verification in flight; it is thread-safe.  Error strings never contain the
 * token.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include "api.h"

#define AUTH_MAX_TOKEN     8192      /* bytes of the compact JWT */
#define AUTH_LEEWAY_S      60        /* exp / nbf clock skew */
#define AUTH_MAX_PERMS     256
#define AUTH_MAX_JWKS      (1 << 20) /* bytes of the key set file */
#define AUTH_MAX_KEYS      64        /* keys kept from one set */

enum jwk_alg { JWK_RS256, JWK_ES256 };

struct jwk {
	char *kid;                       /* NULL: the key has none */
	enum jwk_alg alg;
	EVP_PKEY *key;
};

struct keyset {
	int refs;                        /* under ks_mu */
	unsigned char *hs_secret;        /* NULL: HS256 not configured */
	size_t hs_len;
	EVP_PKEY *rs_key;                /* NULL: no PEM key */
	struct jwk *jwk;                 /* the key set's usable keys */
	size_t n_jwk;
	char *issuer;                    /* NULL: not checked */
	char *audience;                  /* NULL: not checked */
};

static pthread_mutex_t ks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct keyset *live;          /* NULL: not initialised */
static unsigned long generation;     /* pin_auth_init successes */

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

static void ks_free(struct keyset *ks)
{
	size_t i;

	if (!ks)
		return;
	if (ks->hs_secret) {
		OPENSSL_cleanse(ks->hs_secret, ks->hs_len);
		free(ks->hs_secret);
	}
	EVP_PKEY_free(ks->rs_key);
	for (i = 0; i < ks->n_jwk; i++) {
		free(ks->jwk[i].kid);
		EVP_PKEY_free(ks->jwk[i].key);
	}
	free(ks->jwk);
	free(ks->issuer);
	free(ks->audience);
	free(ks);
}

static struct keyset *ks_get(void)
{
	struct keyset *ks;

	pthread_mutex_lock(&ks_mu);
	ks = live;
	if (ks)
		ks->refs++;
	pthread_mutex_unlock(&ks_mu);
	return ks;
}

static void ks_put(struct keyset *ks)
{
	int last;

	if (!ks)
		return;
	pthread_mutex_lock(&ks_mu);
	last = --ks->refs == 0;
	pthread_mutex_unlock(&ks_mu);
	if (last)
		ks_free(ks);
}

/* replaces the live set by ks (NULL: none); the old one goes with its last
 * reader */
static void ks_swap(struct keyset *ks)
{
	struct keyset *old;

	pthread_mutex_lock(&ks_mu);
	old = live;
	live = ks;
	if (ks)
		generation++;
	pthread_mutex_unlock(&ks_mu);
	ks_put(old);
}

void pin_auth_fini(void)
{
	ks_swap(NULL);
}

unsigned long pin_auth_generation(void)
{
	unsigned long g;

	pthread_mutex_lock(&ks_mu);
	g = generation;
	pthread_mutex_unlock(&ks_mu);
	return g;
}

static int load_rsa_key(struct keyset *ks, const char *path)
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
	ks->rs_key = k;
	k = NULL;
	ret = 0;
out:
	EVP_PKEY_free(k);
	if (f)
		fclose(f);
	return ret;
}

static long b64url_decode(const char *src, size_t n, unsigned char **out);
static json_object *parse_object(const unsigned char *buf, long n);

/* ---- JSON Web Key Set (RFC 7517, keys of RFC 7518 6.2 / 6.3) ------------- */

/* a JWK member's base64url value decoded; -1 absent or invalid */
static long jwk_bytes(json_object *o, const char *name, unsigned char **out)
{
	json_object *v;
	const char *s;

	*out = NULL;
	if (!json_object_object_get_ex(o, name, &v) ||
			!json_object_is_type(v, json_type_string))
		return -1;
	s = json_object_get_string(v);
	return b64url_decode(s, strlen(s), out);
}

static const char *jwk_str(json_object *o, const char *name)
{
	json_object *v;

	if (!json_object_object_get_ex(o, name, &v) ||
			!json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY_CTX *chk = NULL;
	EVP_PKEY *k = NULL;

	if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
			EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params) != 1)
		goto out;
	/* the point is on the curve / the modulus is sane */
	chk = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
	if (!chk || EVP_PKEY_public_check(chk) != 1) {
		EVP_PKEY_free(k);
		k = NULL;
	}
out:
	EVP_PKEY_CTX_free(chk);
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	return k;
}

/* RSA public key from n, e; NULL with *why set */
static EVP_PKEY *jwk_rsa(json_object *o, const char **why)
{
	unsigned char *n = NULL, *e = NULL;
	long nn = jwk_bytes(o, "n", &n), en = jwk_bytes(o, "e", &e);
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *k = NULL;

	*why = "invalid RSA key (n, e)";
	if (nn <= 0 || en <= 0 || en > 8)
		goto out;
	bn = BN_bin2bn(n, (int)nn, NULL);
	be = BN_bin2bn(e, (int)en, NULL);
	bld = OSSL_PARAM_BLD_new();
	if (!bn || !be || !bld ||
			!OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) ||
			!OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
		goto out;
	k = pkey_fromdata("RSA", bld);
	if (k && EVP_PKEY_get_bits(k) < 2048) {
		*why = "RSA key shorter than 2048 bits";
		EVP_PKEY_free(k);
		k = NULL;
	}
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	free(n);
	free(e);
	return k;
}

/* P-256 public key from x, y; NULL with *why set */
static EVP_PKEY *jwk_ec(json_object *o, const char **why)
{
	unsigned char *x = NULL, *y = NULL, pub[65];
	long xn = jwk_bytes(o, "x", &x), yn = jwk_bytes(o, "y", &y);
	const char *crv = jwk_str(o, "crv");
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *k = NULL;

	*why = "invalid EC key (x, y)";
	if (!crv || strcmp(crv, "P-256") != 0) {
		*why = "EC curve other than P-256";
		goto out;
	}
	if (xn != 32 || yn != 32)
		goto out;
	pub[0] = 0x04;               /* uncompressed point (SEC 1 2.3.3) */
	memcpy(pub + 1, x, 32);
	memcpy(pub + 33, y, 32);
	bld = OSSL_PARAM_BLD_new();
	if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME,
				"prime256v1", 0) ||
			!OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY,
				pub, sizeof(pub)))
		goto out;
	k = pkey_fromdata("EC", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return k;
}

static void jwk_skip(const char *path, size_t i, const char *kid, const char *why)
{
	char idx[24];

	snprintf(idx, sizeof(idx), "%zu", i);
	pin_log(PIN_LOG_WARN, "jwt_jwks_file: key not used", "path", path,
			"index", idx, "kid", kid ? kid : "", "reason", why, NULL);
}

/*
 * Reads the key set at path into ks.  A key the set may legitimately hold
 * but this host cannot use (another use, alg or curve) is skipped with a
 * warning, as a provider's set often carries such keys; a file that is not
 * a key set, holds private key material, repeats a kid or leaves no usable
 * key is refused.
 */
static int load_jwks(struct keyset *ks, const char *path)
{
	static const char *const private_members[] = { "d", "p", "q", "dp", "dq",
		"qi", "oth", "k" };
	unsigned char *buf = NULL;
	json_object *doc = NULL, *keys, *o;
	FILE *f = NULL;
	struct stat st;
	size_t i, j, n, got;
	int ret = -1;

	f = fopen(path, "r");
	if (!f || fstat(fileno(f), &st) < 0) {
		pin_log(PIN_LOG_ERROR, "cannot open jwt_jwks_file", "path", path,
				"error", strerror(errno), NULL);
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > AUTH_MAX_JWKS) {
		pin_log(PIN_LOG_ERROR, "jwt_jwks_file: empty or larger than 1 MiB",
				"path", path, NULL);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf)
		goto out;
	got = fread(buf, 1, (size_t)st.st_size, f);
	doc = parse_object(buf, (long)got);
	if (!doc || !json_object_object_get_ex(doc, "keys", &keys) ||
			!json_object_is_type(keys, json_type_array)) {
		pin_log(PIN_LOG_ERROR, "jwt_jwks_file is not a JSON Web Key Set "
				"(an object with a \"keys\" array)", "path", path, NULL);
		goto out;
	}
	n = json_object_array_length(keys);
	ks->jwk = calloc(n < AUTH_MAX_KEYS ? n + 1 : AUTH_MAX_KEYS, sizeof(*ks->jwk));
	if (!ks->jwk)
		goto out;
	for (i = 0; i < n; i++) {
		const char *kty, *use, *alg, *kid, *why = NULL;
		enum jwk_alg a;
		EVP_PKEY *k;

		o = json_object_array_get_idx(keys, i);
		if (!json_object_is_type(o, json_type_object)) {
			pin_log(PIN_LOG_ERROR, "jwt_jwks_file: a key is not an object",
					"path", path, NULL);
			goto out;
		}
		for (j = 0; j < sizeof(private_members) / sizeof(*private_members); j++)
			if (json_object_object_get_ex(o, private_members[j], NULL)) {
				pin_log(PIN_LOG_ERROR, "jwt_jwks_file holds private or "
						"symmetric key material: publish public keys only",
						"path", path, "member", private_members[j], NULL);
				goto out;
			}
		kty = jwk_str(o, "kty");
		use = jwk_str(o, "use");
		alg = jwk_str(o, "alg");
		kid = jwk_str(o, "kid");
		if (use && strcmp(use, "sig") != 0) {
			jwk_skip(path, i, kid, "use is not sig");
			continue;
		}
		if (kty && strcmp(kty, "RSA") == 0 && (!alg || !strcmp(alg, "RS256"))) {
			a = JWK_RS256;
			k = jwk_rsa(o, &why);
		} else if (kty && strcmp(kty, "EC") == 0 && (!alg || !strcmp(alg, "ES256"))) {
			a = JWK_ES256;
			k = jwk_ec(o, &why);
		} else {
			jwk_skip(path, i, kid, "kty/alg other than RSA/RS256 or EC/ES256");
			continue;
		}
		if (!k) {
			jwk_skip(path, i, kid, why);
			continue;
		}
		for (j = 0; kid && j < ks->n_jwk; j++)
			if (ks->jwk[j].kid && !strcmp(ks->jwk[j].kid, kid) &&
					ks->jwk[j].alg == a) {
				EVP_PKEY_free(k);
				pin_log(PIN_LOG_ERROR, "jwt_jwks_file: two keys with one kid",
						"path", path, "kid", kid, NULL);
				goto out;
			}
		if (ks->n_jwk == AUTH_MAX_KEYS) {
			EVP_PKEY_free(k);
			jwk_skip(path, i, kid, "more than 64 usable keys");
			continue;
		}
		ks->jwk[ks->n_jwk].alg = a;
		ks->jwk[ks->n_jwk].key = k;
		if (kid && !(ks->jwk[ks->n_jwk].kid = strdup(kid))) {
			EVP_PKEY_free(k);
			goto out;
		}
		ks->n_jwk++;
	}
	if (!ks->n_jwk) {
		pin_log(PIN_LOG_ERROR, "jwt_jwks_file has no usable key "
				"(RSA >= 2048 bits for RS256, EC P-256 for ES256)",
				"path", path, NULL);
		goto out;
	}
	ret = 0;
out:
	json_object_put(doc);
	free(buf);
	if (f)
		fclose(f);
	return ret;
}

int pin_auth_init(void)
{
	struct keyset *ks = calloc(1, sizeof(*ks));
	const char *v;
	char nkeys[24];

	if (!ks)
		return -1;
	ks->refs = 1;
	v = cfg("jwt_hs256_secret");
	if (v) {
		ks->hs_len = strlen(v);
		ks->hs_secret = malloc(ks->hs_len);
		if (!ks->hs_secret)
			goto fail;
		memcpy(ks->hs_secret, v, ks->hs_len);
		if (ks->hs_len < 32)
			pin_log(PIN_LOG_WARN, "jwt_hs256_secret is shorter than 32 bytes", NULL);
	}
	v = cfg("jwt_rs256_public_key_file");
	if (v && load_rsa_key(ks, v) < 0)
		goto fail;
	v = cfg("jwt_jwks_file");
	if (v && load_jwks(ks, v) < 0)
		goto fail;
	v = cfg("jwt_issuer");
	if (v && !(ks->issuer = strdup(v)))
		goto fail;
	v = cfg("jwt_audience");
	if (v && !(ks->audience = strdup(v)))
		goto fail;
	/* a key set is an identity provider's, which signs tokens for other
	 * services too: without iss and aud one of theirs would be ours
	 * (RFC 8725 3.9) */
	if (ks->n_jwk && (!ks->issuer || !ks->audience)) {
		pin_log(PIN_LOG_ERROR, "jwt_jwks_file needs jwt_issuer and jwt_audience",
				NULL);
		goto fail;
	}
	if (!ks->hs_secret && !ks->rs_key && !ks->n_jwk)
		pin_log(PIN_LOG_WARN, "no JWT key configured (jwt_hs256_secret, "
				"jwt_jwks_file, jwt_rs256_public_key_file): every token "
				"is refused", NULL);
	snprintf(nkeys, sizeof(nkeys), "%zu", ks->n_jwk);
	ks_swap(ks);
	pin_log(PIN_LOG_INFO, "jwt keys loaded", "key_set_keys", nkeys, NULL);
	return 0;
fail:
	ks_free(ks);
	return -1;
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

static int verify_hs256(const struct keyset *ks, const char *input, size_t inlen,
		const unsigned char *sig, long siglen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ret = -1;

	if (!HMAC(EVP_sha256(), ks->hs_secret, (int)ks->hs_len,
			(const unsigned char *)input, inlen, md, &mdlen))
		goto out;
	if (siglen != (long)mdlen || CRYPTO_memcmp(md, sig, mdlen) != 0)
		goto out;
	ret = 0;
out:
	OPENSSL_cleanse(md, sizeof(md));
	return ret;
}

/* SHA-256 signature sig over input with key: RS256 as is; ES256 is JOSE's
 * r || s (RFC 7518 3.4), which OpenSSL takes as a DER ECDSA-Sig-Value */
static int verify_pk(EVP_PKEY *key, enum jwk_alg alg, const char *input,
		size_t inlen, const unsigned char *sig, long siglen)
{
	EVP_MD_CTX *ctx = NULL;
	ECDSA_SIG *es = NULL;
	BIGNUM *r = NULL, *s = NULL;
	unsigned char *der = NULL;
	const unsigned char *v = sig;
	size_t vlen = (size_t)siglen;
	int dlen, ret = -1;

	if (alg == JWK_RS256) {
		if (siglen <= 0 || siglen != EVP_PKEY_get_size(key))
			goto out;
	} else {
		if (siglen != 64)
			goto out;
		es = ECDSA_SIG_new();
		r = BN_bin2bn(sig, 32, NULL);
		s = BN_bin2bn(sig + 32, 32, NULL);
		if (!es || !r || !s || ECDSA_SIG_set0(es, r, s) != 1)
			goto out;
		r = s = NULL;
		dlen = i2d_ECDSA_SIG(es, &der);
		if (dlen <= 0)
			goto out;
		v = der;
		vlen = (size_t)dlen;
	}
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		goto out;
	if (EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) != 1)
		goto out;
	if (EVP_DigestVerify(ctx, v, vlen, (const unsigned char *)input, inlen) != 1)
		goto out;
	ret = 0;
out:
	EVP_MD_CTX_free(ctx);
	ECDSA_SIG_free(es);
	BN_free(r);
	BN_free(s);
	OPENSSL_free(der);
	return ret;
}

/*
 * The public key a token of alg (RS256/ES256) and kid (NULL: none) is
 * checked with, by the rules at the top of this file; NULL with *why set.
 */
static EVP_PKEY *pick_key(const struct keyset *ks, enum jwk_alg alg,
		const char *kid, const char **why)
{
	EVP_PKEY *only = NULL;
	size_t i, n = 0;

	if (ks->n_jwk && kid) {
		for (i = 0; i < ks->n_jwk; i++)
			if (ks->jwk[i].alg == alg && ks->jwk[i].kid &&
					strcmp(ks->jwk[i].kid, kid) == 0)
				return ks->jwk[i].key;
		*why = "unknown key id";
		return NULL;
	}
	for (i = 0; i < ks->n_jwk; i++)
		if (ks->jwk[i].alg == alg) {
			only = ks->jwk[i].key;
			n++;
		}
	if (n == 1)
		return only;
	if (alg == JWK_RS256 && ks->rs_key)
		return ks->rs_key;
	*why = n ? "missing kid" : "unsupported alg";
	return NULL;
}

static int aud_matches(const struct keyset *ks, json_object *payload)
{
	json_object *v, *e;
	size_t i, n;

	if (!json_object_object_get_ex(payload, "aud", &v))
		return 0;
	if (json_object_is_type(v, json_type_string))
		return strcmp(json_object_get_string(v), ks->audience) == 0;
	if (!json_object_is_type(v, json_type_array))
		return 0;
	n = json_object_array_length(v);
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(v, i);
		if (json_object_is_type(e, json_type_string) &&
				strcmp(json_object_get_string(e), ks->audience) == 0)
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
	const char *tok, *dot1, *dot2, *end, *alg, *typ, *kid, *why = NULL;
	struct keyset *ks = ks_get();
	unsigned char *hdr_raw = NULL, *pl_raw = NULL, *sig = NULL;
	EVP_PKEY *pk;
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
	kid = get_string(hdr, "kid", &present);
	if (present && !kid) {
		seterr(err, errlen, "invalid kid");
		goto out;
	}
	if (!ks) {
		seterr(err, errlen, "unsupported alg");
		goto out;
	}

	/* signature, with a key of the named alg only */
	if (strcmp(alg, "HS256") == 0 && ks->hs_secret) {
		r = verify_hs256(ks, tok, (size_t)(dot2 - tok), sig, sig_n);
	} else if (strcmp(alg, "RS256") == 0 || strcmp(alg, "ES256") == 0) {
		enum jwk_alg a = alg[0] == 'R' ? JWK_RS256 : JWK_ES256;

		pk = pick_key(ks, a, kid, &why);
		if (!pk) {
			seterr(err, errlen, why);
			goto out;
		}
		r = verify_pk(pk, a, tok, (size_t)(dot2 - tok), sig, sig_n);
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
	if (ks->issuer) {
		const char *iss = get_string(payload, "iss", &present);

		if (!iss || strcmp(iss, ks->issuer) != 0) {
			seterr(err, errlen, "wrong issuer");
			goto out;
		}
	}
	if (ks->audience && !aud_matches(ks, payload)) {
		seterr(err, errlen, "wrong audience");
		goto out;
	}
	if (fill_principal(payload, out, err, errlen) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0)
		pin_auth_principal_clear(out);
	ks_put(ks);
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
