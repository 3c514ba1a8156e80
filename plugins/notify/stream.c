/* stream.c -- real-time in-app notifications, the subscriber side (issue 10
 * item 4).  nginx's nchan module holds the long-lived connections; pin-host
 * only issues and checks stream tickets:
 *
 *   POST /api/v1/me/notifications/stream-ticket   (JWT, any actor)
 *        -> {"ticket", "expiresAt", "channel", "streamUrl"}
 *   GET  /_pin/notifications/stream-auth?ticket=  (no JWT; nginx's internal
 *        nchan_authorize_request subrequest) -> 204 admits, 403 refuses
 *
 * A browser's EventSource cannot send an Authorization header, so the JWT is
 * traded for a short-lived ticket that travels in the query string:
 *
 *   ticket  = <userId> "." <tenantId | "-"> "." <exp unix s> "." <sig>
 *   sig     = base64url(HMAC-SHA256(key, "pin-ntf-stream.v1|" userId "|"
 *                                         tenant "|" exp))
 *   channel = "ntf." <userId>
 *
 * nginx derives the channel id from the ticket's first field (a map on
 * $arg_ticket) and hands it to the auth route in X-Pin-Ntf-Channel; the route
 * admits only when the ticket verifies, has not expired, and names exactly
 * that channel.  So a client can only ever subscribe to the channel of the
 * user a valid ticket was issued to; no client parameter chooses a channel.
 *
 * Key: config ntf_stream_secret (>= 32 bytes) or ntf_stream_secret_file; else
 * derived from jwt_hs256_secret (HMAC(jwt secret, "pin-ntf-stream-ticket-v1")).
 * Every API host must share it.  Without any key the ticket route answers 503
 * NTF_STREAM_UNAVAILABLE and the auth route refuses everything. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "sdk/sdk.h"
#include "notify.h"

#define TICKET_CTX "pin-ntf-stream.v1|"
#define KEY_DERIVE_CTX "pin-ntf-stream-ticket-v1"
#define SIG_LEN 43              /* base64url of 32 bytes, no padding */
#define DEFAULT_TTL_S 60

/* Set once in init (main thread), read-only afterwards. */
static unsigned char key[64];
static size_t key_len;
static long long ttl_s = DEFAULT_TTL_S;

static void b64url(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = tab[v >> 6 & 63];
		out[o++] = tab[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)in[i] << 16;
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
	} else if (n - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = tab[v >> 6 & 63];
	}
	out[o] = '\0';
}

/* sig (SIG_LEN + 1 bytes) over user, tenant ("-" when none), exp. */
static int sign(const char *user, const char *tenant, long long exp, char *sig)
{
	char msg[160];
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mlen = 0;
	int n;

	n = snprintf(msg, sizeof(msg), TICKET_CTX "%s|%s|%lld", user, tenant, exp);
	if (n < 0 || (size_t)n >= sizeof(msg) || !key_len)
		return -1;
	if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg,
			(size_t)n, mac, &mlen) || mlen != 32)
		return -1;
	b64url(mac, mlen, sig);
	return 0;
}

static int is_digits(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n <= max && strspn(s, "0123456789") == n;
}

/*
 * Verifies ticket at now_s; on success writes the user id (37 bytes) and
 * returns 0.  -1 for anything else (malformed, bad signature, expired, too
 * far in the future for the configured TTL).  Lower-case ids only: the
 * signature covers the exact text, and nginx derives the channel from it.
 */
int ntf_stream_ticket_verify(const char *ticket, long long now_s, char user[37])
{
	char buf[200], *f[4], *p, *dot, sig[SIG_LEN + 1];
	size_t i;
	long long exp;

	if (!ticket || strlen(ticket) >= sizeof(buf) || !key_len)
		return -1;
	strcpy(buf, ticket);
	p = buf;
	for (i = 0; i < 4; i++) {
		f[i] = p;
		dot = strchr(p, '.');
		if (i < 3) {
			if (!dot)
				return -1;
			*dot = '\0';
			p = dot + 1;
		} else if (dot) {
			return -1;
		}
	}
	if (strlen(f[0]) != 36 || !pc_api->is_uuid(f[0]) ||
	    strspn(f[0], "0123456789abcdef-") != 36)
		return -1;
	if (strcmp(f[1], "-") != 0 && (strlen(f[1]) != 36 || !pc_api->is_uuid(f[1]) ||
	    strspn(f[1], "0123456789abcdef-") != 36))
		return -1;
	if (!is_digits(f[2], 12) || strlen(f[3]) != SIG_LEN)
		return -1;
	exp = atoll(f[2]);
	if (sign(f[0], f[1], exp, sig) < 0 || CRYPTO_memcmp(sig, f[3], SIG_LEN) != 0)
		return -1;
	if (exp <= now_s || exp > now_s + ttl_s + 60)
		return -1;
	memcpy(user, f[0], 37);
	return 0;
}

/* POST /api/v1/me/notifications/stream-ticket */
static int h_ticket(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	const char *tenant;
	char sig[SIG_LEN + 1], when[48], user[37];
	long long exp;
	char *ticket;
	json_object *o;
	size_t i;

	(void)ud;
	if (pc_body_none(r) < 0)
		return PIN_OK;
	if (!key_len)
		return pc_api->respond_problem(r, 503, "NTF_STREAM_UNAVAILABLE",
			"real-time notifications are not configured on this host", NULL);
	/* canonical lower case: the ticket text is what nginx maps to a channel */
	if (!me->sub || strlen(me->sub) != 36 || !pc_api->is_uuid(me->sub))
		return pc_api->respond_problem(r, 403, "FORBIDDEN",
			"token subject is not a user id", NULL);
	for (i = 0; i < 37; i++)
		user[i] = (char)(me->sub[i] >= 'A' && me->sub[i] <= 'F' ?
			me->sub[i] + ('a' - 'A') : me->sub[i]);
	tenant = me->tenant_id ? pc_api->strdup(me->tenant_id) : "-";
	if (me->tenant_id)
		for (char *t = (char *)tenant; *t; t++)
			if (*t >= 'A' && *t <= 'F')
				*t = (char)(*t + ('a' - 'A'));
	exp = pc_api->now_us() / 1000000 + ttl_s;
	if (sign(user, tenant, exp, sig) < 0)
		return PIN_ERR;
	ticket = pc_api->sprintf("%s.%s.%lld.%s", user, tenant, exp, sig);
	o = json_object_new_object();
	json_object_object_add(o, "ticket", json_object_new_string(ticket));
	json_object_object_add(o, "expiresAt", json_object_new_string(
		pc_api->fmt_time(exp * 1000000LL, when, sizeof(when))));
	json_object_object_add(o, "channel", json_object_new_string(
		pc_api->sprintf("ntf.%s", user)));
	json_object_object_add(o, "streamUrl", json_object_new_string(pc_api->sprintf(
		"/api/v1/me/notifications/stream?ticket=%s", ticket)));
	pc_api->set_header(r, "Cache-Control", "no-store");
	pc_api->metric_add("notifications_stream_tickets_total", NULL, 1);
	return pc_api->respond_json(r, 200, o);
}

/* GET /_pin/notifications/stream-auth (nchan_authorize_request) */
static int h_auth(struct pin_req *r, void *ud)
{
	const char *ticket = pc_api->req_query(r, "ticket");
	const char *chan = pc_api->req_header(r, "X-Pin-Ntf-Channel");
	char user[37];
	int ok;

	(void)ud;
	ok = ntf_stream_ticket_verify(ticket, pc_api->now_us() / 1000000, user) == 0 &&
		chan && strncmp(chan, "ntf.", 4) == 0 && strcmp(chan + 4, user) == 0;
	pc_api->metric_add("notifications_stream_auth_total",
		ok ? "result=\"admitted\"" : "result=\"refused\"", 1);
	if (!ok)
		return pc_api->respond_problem(r, 403, "NTF_STREAM_FORBIDDEN",
			"missing, invalid or expired stream ticket", NULL);
	return pc_api->respond_json(r, 204, NULL);
}

static const struct pin_route routes[] = {
	{ "POST", "/api/v1/me/notifications/stream-ticket", PIN_ACTOR_ANY, NULL, 0,
		h_ticket, NULL, NULL },
	/* public for the host: only nginx's internal location reaches it (the
	 * public server answers 404 for /_pin/) */
	{ "GET", "/_pin/notifications/stream-auth", PIN_ACTOR_PUBLIC, NULL, 0,
		h_auth, NULL, NULL },
};

static int load_key(char *err, size_t errlen)
{
	const char *s = pc_api->config_str("ntf_stream_secret");
	const char *file = pc_api->config_str("ntf_stream_secret_file");
	const char *jwt = pc_api->config_str("jwt_hs256_secret");
	char fbuf[512];
	unsigned int mlen = 0;

	if ((!s || !*s) && file && *file) {
		FILE *fp = fopen(file, "r");
		size_t n;

		if (!fp) {
			snprintf(err, errlen, "ntf_stream_secret_file: cannot open %s", file);
			return -1;
		}
		n = fread(fbuf, 1, sizeof(fbuf) - 1, fp);
		fclose(fp);
		while (n && (fbuf[n - 1] == '\n' || fbuf[n - 1] == '\r' || fbuf[n - 1] == ' '))
			n--;
		fbuf[n] = '\0';
		s = fbuf;
	}
	if (s && *s) {
		if (strlen(s) < 32) {
			snprintf(err, errlen, "ntf_stream_secret must be at least 32 bytes");
			return -1;
		}
		/* HMAC keys longer than the block are hashed anyway: hash to 32 */
		if (!HMAC(EVP_sha256(), s, (int)strlen(s),
				(const unsigned char *)KEY_DERIVE_CTX, strlen(KEY_DERIVE_CTX),
				key, &mlen))
			return -1;
		key_len = mlen;
	} else if (jwt && *jwt) {
		if (!HMAC(EVP_sha256(), jwt, (int)strlen(jwt),
				(const unsigned char *)KEY_DERIVE_CTX, strlen(KEY_DERIVE_CTX),
				key, &mlen))
			return -1;
		key_len = mlen;
	} else {
		key_len = 0;
		pc_api->log(PIN_LOG_WARN, "stream tickets disabled: no ntf_stream_secret "
			"and no jwt_hs256_secret", NULL);
	}
	OPENSSL_cleanse(fbuf, sizeof(fbuf));
	return 0;
}

int ntf_stream_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	/* 5..3600: checked by the host against the declaration (keys.c) */
	ttl_s = pc_api->config_num("ntf_stream_ticket_ttl_s");
	if (load_key(err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (reg->route(reg, &routes[i]) < 0) {
			snprintf(err, errlen, "notify: cannot register %s %s",
				routes[i].method, routes[i].pattern);
			return -1;
		}
	return 0;
}
