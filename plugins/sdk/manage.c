/* manage.c -- the investors' manage-link tokens (sdk/manage.h). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "sdk/manage.h"

#define BODY_LEN 47                     /* bytes signed */
#define MAC_LEN 16                      /* bytes of the MAC kept */
#define RAW_LEN (BODY_LEN + MAC_LEN)    /* 63 -> 84 base64url characters */
#define DERIVE_CTX "pin-manage-link-v1"

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int pc_manage_key_add(struct pc_manage_keys *keys, const char *secret, size_t len)
{
	unsigned int mlen = 0;

	if (len < PC_MANAGE_SECRET_MIN || keys->n >= PC_MANAGE_KEYS_MAX)
		return -1;
	if (!HMAC(EVP_sha256(), secret, (int)len, (const unsigned char *)DERIVE_CTX,
			strlen(DERIVE_CTX), keys->k[keys->n], &mlen) || mlen != 32)
		return -1;
	keys->n++;
	return 0;
}

int pc_manage_keys_load(const char *path, struct pc_manage_keys *keys,
		char *err, size_t errlen)
{
	char line[1024];
	FILE *fp;
	int lineno = 0, rc = 0;

	memset(keys, 0, sizeof(*keys));
	if (!(fp = fopen(path, "r"))) {
		snprintf(err, errlen, "cannot open %s", path);
		return -1;
	}
	while (keys->n < PC_MANAGE_KEYS_MAX && fgets(line, sizeof line, fp)) {
		size_t n = strlen(line);

		lineno++;
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
			n--;
		if (n == 0 || line[0] == '#')
			continue;
		if (pc_manage_key_add(keys, line, n) < 0) {
			snprintf(err, errlen, "%s line %d: a key needs at least %d bytes",
					path, lineno, PC_MANAGE_SECRET_MIN);
			rc = -1;
			break;
		}
	}
	OPENSSL_cleanse(line, sizeof line);
	fclose(fp);
	if (rc == 0 && keys->n == 0) {
		snprintf(err, errlen, "%s holds no key", path);
		rc = -1;
	}
	if (rc < 0)
		OPENSSL_cleanse(keys, sizeof(*keys));
	return rc;
}

static int hexval(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* canonical UUID text -> 16 bytes: 0 or -1 */
static int uuid_pack(const char *s, unsigned char *out)
{
	int k = 0;

	if (!s || strlen(s) != 36)
		return -1;
	for (int i = 0; i < 36; i++) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -1;
			continue;
		}
		if ((hi = hexval((unsigned char)s[i])) < 0 ||
		    (lo = hexval((unsigned char)s[i + 1])) < 0)
			return -1;
		out[k++] = (unsigned char)(hi << 4 | lo);
		i++;
	}
	return 0;
}

static void uuid_unpack(const unsigned char *in, char out[37])
{
	static const char hx[] = "0123456789abcdef";
	int k = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hx[in[i] >> 4];
		out[k++] = hx[in[i] & 15];
	}
	out[k] = '\0';
}

static void mac(const unsigned char *key, const unsigned char *body, unsigned char out[32])
{
	unsigned int mlen = 0;

	if (!HMAC(EVP_sha256(), key, 32, body, BODY_LEN, out, &mlen))
		memset(out, 0, 32);
}

int pc_manage_sign(const struct pc_manage_keys *keys, const struct pc_manage_claims *c,
		char *out, size_t outlen)
{
	unsigned char raw[RAW_LEN], m[32];
	size_t o = 0;
	int i;

	if (!keys || keys->n < 1 || outlen < PC_MANAGE_TOKEN_LEN + 1 ||
	    (c->purpose != PC_MANAGE_CANCEL && c->purpose != PC_MANAGE_RESCHEDULE) ||
	    (c->locale != PC_MANAGE_RU && c->locale != PC_MANAGE_EN) ||
	    c->expires_s < 0 || c->expires_s > 0xffffffffLL)
		return -1;
	raw[0] = 1;
	raw[1] = (unsigned char)c->purpose;
	if (uuid_pack(c->appointment_id, raw + 2) < 0 || uuid_pack(c->investor_id, raw + 18) < 0)
		return -1;
	for (i = 0; i < 4; i++)
		raw[34 + i] = (unsigned char)((uint64_t)c->expires_s >> (24 - 8 * i));
	for (i = 0; i < 8; i++)
		raw[38 + i] = (unsigned char)(c->jti >> (56 - 8 * i));
	raw[46] = (unsigned char)c->locale;
	mac(keys->k[0], raw, m);
	memcpy(raw + BODY_LEN, m, MAC_LEN);
	for (i = 0; i < RAW_LEN; i += 3) {          /* 63 = 21 x 3: no padding */
		uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];

		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = b64[v >> 6 & 63];
		out[o++] = b64[v & 63];
	}
	out[o] = '\0';
	return 0;
}

static int b64val(int ch)
{
	const char *p = ch ? strchr(b64, ch) : NULL;

	return p ? (int)(p - b64) : -1;
}

int pc_manage_verify(const struct pc_manage_keys *keys, const char *token, int64_t now_s,
		int purpose, struct pc_manage_claims *c)
{
	unsigned char raw[RAW_LEN], m[32];
	int i, ok = 0;

	if (!token || strlen(token) != PC_MANAGE_TOKEN_LEN)
		return PC_MANAGE_E_MALFORMED;
	for (i = 0; i < PC_MANAGE_TOKEN_LEN; i += 4) {
		int a = b64val(token[i]), b = b64val(token[i + 1]),
		    d = b64val(token[i + 2]), e = b64val(token[i + 3]);
		uint32_t v;

		if (a < 0 || b < 0 || d < 0 || e < 0)
			return PC_MANAGE_E_MALFORMED;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)d << 6 | (uint32_t)e;
		raw[i / 4 * 3] = (unsigned char)(v >> 16);
		raw[i / 4 * 3 + 1] = (unsigned char)(v >> 8);
		raw[i / 4 * 3 + 2] = (unsigned char)v;
	}
	if (raw[0] != 1)
		return PC_MANAGE_E_MALFORMED;
	for (i = 0; keys && i < keys->n; i++) {
		mac(keys->k[i], raw, m);
		if (CRYPTO_memcmp(m, raw + BODY_LEN, MAC_LEN) == 0)
			ok = 1;
	}
	if (!ok)
		return PC_MANAGE_E_SIGNATURE;
	memset(c, 0, sizeof(*c));
	c->purpose = raw[1];
	uuid_unpack(raw + 2, c->appointment_id);
	uuid_unpack(raw + 18, c->investor_id);
	for (i = 0; i < 4; i++)
		c->expires_s = c->expires_s << 8 | raw[34 + i];
	for (i = 0; i < 8; i++)
		c->jti = c->jti << 8 | raw[38 + i];
	c->locale = raw[46] == PC_MANAGE_EN ? PC_MANAGE_EN : PC_MANAGE_RU;
	if (now_s >= c->expires_s)
		return PC_MANAGE_E_EXPIRED;
	if (purpose && c->purpose != purpose)
		return PC_MANAGE_E_PURPOSE;
	return 0;
}
