/* links.c -- the investors' manage links in the messages (issue 32 item
 * 3): {{manageUrl}} of an investor's e-mail or SMS about an appointment is
 * notify.public_base_url + "/manage/" + a token (sdk/manage.h) that lets
 * them cancel it without a login (appointments.so serves the page);
 * {{rescheduleUrl}} the same with a token of the reschedule purpose (the
 * page offers the agent's free times).
 *
 * The token is signed with the first key of manage_link_key_file (the file
 * appointments.so verifies with), for one purpose, the appointment
 * and its investor, the recipient's locale (the page speaks the language of
 * the message), a random jti, and expires at the appointment's start
 * (nothing can be cancelled after it; the slot's cutoff ends it earlier).
 * Without a key file or a base URL there is no link: a template line that
 * holds {{manageUrl}} or {{rescheduleUrl}} is left out of the text
 * (ntf_drop_lines). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include "sdk/sdk.h"
#include "notify.h"

static struct pc_manage_keys keys;
static char base_url[1024];             /* without a trailing '/'; "": off */

int ntf_links_init(char *err, size_t errlen)
{
	const char *file = pc_api->config_str("manage_link_key_file");
	const char *base = pc_api->config_str("notify.public_base_url");
	char why[256];
	size_t n;

	memset(&keys, 0, sizeof keys);
	base_url[0] = '\0';
	if (!file || !*file || !base || !*base)
		return 0;
	if (pc_manage_keys_load(file, &keys, why, sizeof why) < 0) {
		snprintf(err, errlen, "manage_link_key_file: %s", why);
		return -1;
	}
	n = strlen(base);
	while (n && base[n - 1] == '/')
		n--;
	if (n >= sizeof base_url) {
		snprintf(err, errlen, "notify.public_base_url is longer than %zu bytes",
				sizeof base_url - 1);
		return -1;
	}
	memcpy(base_url, base, n);
	base_url[n] = '\0';
	return 0;
}

const char *ntf_manage_url(int purpose, const char *appointment_id,
		const char *investor_id, int64_t start_us, const char *locale)
{
	struct pc_manage_claims c;
	char tok[PC_MANAGE_TOKEN_LEN + 1];

	if (!base_url[0] || keys.n == 0 || !appointment_id || !investor_id)
		return NULL;
	memset(&c, 0, sizeof c);
	c.purpose = purpose;
	snprintf(c.appointment_id, sizeof c.appointment_id, "%s", appointment_id);
	snprintf(c.investor_id, sizeof c.investor_id, "%s", investor_id);
	c.expires_s = start_us / 1000000;
	c.locale = locale && !strncmp(locale, "en", 2) ? PC_MANAGE_EN : PC_MANAGE_RU;
	if (RAND_bytes((unsigned char *)&c.jti, sizeof c.jti) != 1 ||
	    pc_manage_sign(&keys, &c, tok, sizeof tok) < 0)
		return NULL;
	return pc_api->sprintf("%s/manage/%s", base_url, tok);
}

char *ntf_drop_lines(const char *tmpl, const char *needle)
{
	size_t len = strlen(tmpl), o = 0;
	char *out = pc_api->alloc(len + 1);
	const char *s = tmpl;

	if (!out)
		return NULL;
	while (*s) {
		const char *eol = strchr(s, '\n');
		size_t l = eol ? (size_t)(eol - s) + 1 : strlen(s);
		const char *h = strstr(s, needle);

		if (!h || h >= s + l) {
			memcpy(out + o, s, l);
			o += l;
		}
		s += l;
	}
	/* no blank lines left hanging at the end */
	while (o && (out[o - 1] == '\n' || out[o - 1] == ' '))
		o--;
	out[o] = '\0';
	return out;
}
