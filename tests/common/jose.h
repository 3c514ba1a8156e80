/* jose.h -- JSON Web Key and token helpers of the tests (unit jwt / jwks,
 * integration reload): real keys (OpenSSL), RFC 7515 / 7517 / 7518 shapes.
 * Every string returned is malloc'd; the caller frees it. */
#ifndef PIN_TESTS_JOSE_H
#define PIN_TESTS_JOSE_H

#include <stddef.h>
#include <openssl/evp.h>

/* base64url without padding (RFC 7515 section 2) */
char *jose_b64url(const unsigned char *in, size_t n);

/* the public JWK of k (RSA: RS256 n/e; EC P-256: ES256 x/y) with kid;
 * extra: members appended verbatim (e.g. "\"x5t\":\"...\""), or NULL */
char *jose_jwk(EVP_PKEY *k, const char *kid, const char *extra);

/* "<b64(hdr)>.<b64(payload)>.<sig>": signed with k, RS256 for an RSA key,
 * ES256 (JOSE r || s, not DER) for an EC key; hdr and payload are JSON text */
char *jose_sign(EVP_PKEY *k, const char *hdr, const char *payload);

#endif
