/* sdk/manage.h -- the investors' manage links (issue 32 item 3): a signed,
 * expiring token bound to one appointment, one investor and one purpose.
 * notify.so signs it into the e-mails and SMS, appointments.so verifies it
 * on /manage/<token>; both read the same key file (manage_link_key_file).
 * Pure functions (no host calls): unit-tested in tests/unit/test_manage.c.
 *
 * The token is base64url (no padding) of 63 bytes:
 *   version (1, = 1) | purpose (1) | appointmentId (16) | investorUserId (16)
 *   | expiry (4, unix seconds, big-endian) | jti (8, random) | locale (1)
 *   | HMAC-SHA256 over the 47 bytes before it, first 16 bytes
 * = 84 characters (short enough for an SMS).  The MAC key is
 * HMAC-SHA256(line of the key file, "pin-manage-link-v1").  The key file
 * holds one secret per line (>= 32 bytes each): the first signs, every line
 * verifies (rotation: put the new line first, drop the old one after the
 * longest link lifetime).
 */
#ifndef PIN_SDK_MANAGE_H
#define PIN_SDK_MANAGE_H

#include <stddef.h>
#include <stdint.h>

#define PC_MANAGE_TOKEN_LEN 84          /* characters, without the NUL */
#define PC_MANAGE_KEYS_MAX 4            /* lines of the key file read */
#define PC_MANAGE_SECRET_MIN 32         /* bytes of one line */

enum pc_manage_purpose {
	PC_MANAGE_CANCEL = 1,
	PC_MANAGE_RESCHEDULE = 2            /* the page offers the agent's free times */
};

enum pc_manage_locale { PC_MANAGE_RU = 0, PC_MANAGE_EN = 1 };

/* what a token says */
struct pc_manage_claims {
	int purpose;                        /* enum pc_manage_purpose */
	char appointment_id[37];            /* canonical UUID text */
	char investor_id[37];
	int64_t expires_s;                  /* unix seconds */
	uint64_t jti;                       /* random, unique per link */
	int locale;                         /* enum pc_manage_locale */
};

/* the derived MAC keys: [0] signs, all verify */
struct pc_manage_keys {
	unsigned char k[PC_MANAGE_KEYS_MAX][32];
	int n;
};

/* verification results (0 = valid) */
#define PC_MANAGE_E_MALFORMED (-1)      /* not a token of ours (length, base64, version) */
#define PC_MANAGE_E_SIGNATURE (-2)      /* no key's MAC matches: tampered or foreign */
#define PC_MANAGE_E_EXPIRED   (-3)
#define PC_MANAGE_E_PURPOSE   (-4)      /* valid, but for another purpose */

/* Derives the key of one secret (>= PC_MANAGE_SECRET_MIN bytes) into
 * keys (appended): 0, or -1 (too short, or PC_MANAGE_KEYS_MAX already). */
int pc_manage_key_add(struct pc_manage_keys *keys, const char *secret, size_t len);
/* Reads the key file (one secret per line, blank lines and '#' lines
 * skipped, at most PC_MANAGE_KEYS_MAX): 0, or -1 with err (cannot open, no
 * line, a line shorter than PC_MANAGE_SECRET_MIN). */
int pc_manage_keys_load(const char *path, struct pc_manage_keys *keys,
		char *err, size_t errlen);

/* The token of c signed with keys->k[0] into out (>= PC_MANAGE_TOKEN_LEN + 1):
 * 0, or -1 (no key, ids not UUIDs, purpose or locale out of range, expiry
 * outside 0 .. 2^32-1). */
int pc_manage_sign(const struct pc_manage_keys *keys, const struct pc_manage_claims *c,
		char *out, size_t outlen);
/* Checks token against every key, then the expiry at now_s and the purpose
 * (0: any): 0 and *c, or a PC_MANAGE_E_*.  *c is filled for
 * PC_MANAGE_E_EXPIRED and PC_MANAGE_E_PURPOSE too (the signature held).
 * The comparison of MACs takes constant time. */
int pc_manage_verify(const struct pc_manage_keys *keys, const char *token, int64_t now_s,
		int purpose, struct pc_manage_claims *c);

#endif
