/* smtp.c -- e-mail through libcurl's SMTP client (issue 10).
 *
 * smtp_url "smtp://host:port" (STARTTLS when the server offers it; required
 * with smtp_require_tls = true) or "smtps://host:port" (TLS from the start).
 * The message is RFC 5322 + MIME: UTF-8 Subject as RFC 2047 encoded words,
 * text/plain; charset=utf-8 in base64, Message-ID <notification-id@domain> so
 * a resend is recognisable, Date in UTC.
 *
 * An appointment e-mail with an invitation (the row's calendar, invite.c;
 * issue 32 item 2, RFC 6047 iMIP) is the structure Google Calendar's own
 * invitations have, which Gmail, Outlook, Apple Mail and Thunderbird all
 * file:
 *   multipart/mixed
 *     multipart/alternative
 *       text/plain; charset=utf-8                  the text as before
 *       text/calendar; charset=UTF-8; method=M     the VCALENDAR (RFC 6047 2.4)
 *     application/ics; name="invite.ics"           the same bytes, attached
 * (M = the calendar's METHOD, REQUEST or CANCEL); every part base64.  The
 * attachment is for the clients that file only attachments (some webmail,
 * Apple Mail's "add to calendar"); a client that files the alternative part
 * sees one invitation either way: the same UID.
 *
 * Outcome: 2xx -> sent (provider id = the Message-ID); an SMTP 5xx answer
 * (unknown mailbox, refused address) or an address we refuse (CR/LF, <>, no
 * @) -> permanent; everything else (connection refused, timeouts, 4xx) ->
 * retry. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>

#include "send.h"

static const struct pin_host_api *api;

void ntf_smtp_init(const struct pin_host_api *a)
{
	api = a;
}

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 of n bytes of s appended to out (which has room: 4 * (n + 2) / 3 + 1). */
static size_t b64_enc(const unsigned char *s, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

static int ascii_plain(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}

/* Subject: plain ASCII as is, else RFC 2047 "=?UTF-8?B?...?=" words of at
 * most 45 input bytes (<= 72 chars), split on UTF-8 character boundaries,
 * folded with CRLF SP. */
static void put_subject(FILE *f, const char *subj)
{
	size_t len = strlen(subj), i = 0;
	char word[80];

	if (ascii_plain(subj) && len < 900) {
		fprintf(f, "Subject: %s\r\n", subj);
		return;
	}
	fputs("Subject:", f);
	while (i < len) {
		size_t n = len - i > 45 ? 45 : len - i;

		/* do not cut a multi-byte sequence */
		while (n < len - i && n > 0 && ((unsigned char)subj[i + n] & 0xc0) == 0x80)
			n--;
		if (n == 0)
			n = len - i < 45 ? len - i : 45;
		b64_enc((const unsigned char *)subj + i, n, word);
		fprintf(f, "%s=?UTF-8?B?%s?=\r\n", i ? " " : " ", word);
		i += n;
	}
}

/* RFC 5322 date in UTC with English names whatever the locale */
static void put_date(FILE *f, long long now_s)
{
	static const char *const wd[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char *const mo[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
		"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t t = (time_t)now_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	fprintf(f, "Date: %s, %02d %s %04d %02d:%02d:%02d +0000\r\n", wd[tm.tm_wday],
			tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
			tm.tm_min, tm.tm_sec);
}

/* s in base64 lines: 57 input bytes -> 76 output characters per line */
static void put_b64(FILE *f, const char *s)
{
	size_t n = strlen(s);
	char line[120];

	for (size_t i = 0; i < n; i += 57) {
		b64_enc((const unsigned char *)s + i, n - i > 57 ? 57 : n - i, line);
		fprintf(f, "%s\r\n", line);
	}
}

/* The METHOD of a VCALENDAR text (a line "METHOD:X" of the calendar's own
 * properties) into out, or 0 when it has none that a Content-Type
 * parameter may carry (letters and '-' only). */
static int calendar_method(const char *cal, char *out, size_t len)
{
	const char *p = cal;
	size_t n;

	while (p && strncmp(p, "METHOD:", 7) != 0) {
		if (!strncmp(p, "BEGIN:VEVENT", 12))
			return 0;
		if ((p = strchr(p, '\n')))
			p++;
	}
	if (!p)
		return 0;
	p += 7;
	n = strcspn(p, "\r\n");
	if (!n || n >= len)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') || p[i] == '-'))
			return 0;
	memcpy(out, p, n);
	out[n] = '\0';
	return 1;
}

/* The invitation's body parts (see the head of this file) under the
 * message's headers; boundaries from the notification id (RFC 2045 5.1:
 * "=_" never occurs in base64), the Content-Type lines folded so that no
 * line passes 78 characters. */
static void put_invitation(FILE *f, const struct ntf_message *m, const char *method)
{
	fprintf(f, "Content-Type: multipart/mixed;\r\n boundary=\"=_pin-m-%s\"\r\n"
		"Auto-Submitted: auto-generated\r\n"
		"\r\n"
		"--=_pin-m-%s\r\n"
		"Content-Type: multipart/alternative;\r\n boundary=\"=_pin-a-%s\"\r\n"
		"\r\n"
		"--=_pin-a-%s\r\n"
		"Content-Type: text/plain; charset=utf-8\r\n"
		"Content-Transfer-Encoding: base64\r\n"
		"\r\n", m->id, m->id, m->id, m->id);
	put_b64(f, m->body);
	fprintf(f, "--=_pin-a-%s\r\n"
		"Content-Type: text/calendar; charset=UTF-8; method=%s\r\n"
		"Content-Transfer-Encoding: base64\r\n"
		"\r\n", m->id, method);
	put_b64(f, m->calendar);
	fprintf(f, "--=_pin-a-%s--\r\n"
		"--=_pin-m-%s\r\n"
		"Content-Type: application/ics; name=\"invite.ics\"\r\n"
		"Content-Disposition: attachment; filename=\"invite.ics\"\r\n"
		"Content-Transfer-Encoding: base64\r\n"
		"\r\n", m->id, m->id);
	put_b64(f, m->calendar);
	fprintf(f, "--=_pin-m-%s--\r\n", m->id);
}

char *ntf_mime_build(const struct ntf_message *m, const char *from,
		const char *domain, long long now_s)
{
	char *buf = NULL, method[32];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	put_date(f, now_s);
	fprintf(f, "From: %s\r\n", from);
	fprintf(f, "To: %s\r\n", m->to);
	put_subject(f, m->subject ? m->subject : "");
	fprintf(f, "Message-ID: <%s@%s>\r\n", m->id, domain);
	fputs("MIME-Version: 1.0\r\n", f);
	if (m->calendar && *m->calendar && calendar_method(m->calendar, method, sizeof method)) {
		put_invitation(f, m, method);
	} else {
		fputs("Content-Type: text/plain; charset=utf-8\r\n"
			"Content-Transfer-Encoding: base64\r\n"
			"Auto-Submitted: auto-generated\r\n"
			"\r\n", f);
		put_b64(f, m->body);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int ntf_smtp_configured(void)
{
	const char *u = api->config_str("smtp_url");

	return *u && *api->config_str("smtp_from");
}

/* An address we hand to MAIL RCPT: no controls, no angle brackets, one @
 * with text on both sides. */
static int address_ok(const char *a)
{
	const char *at = strchr(a, '@');

	if (!at || at == a || !at[1] || strchr(at + 1, '@') || strlen(a) > 320)
		return 0;
	for (const char *p = a; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == '<' || *p == '>' || *p == 0x7f)
			return 0;
	return 1;
}

/* contents of a secret file, first line, or NULL (malloc'd) */
static char *read_secret(const char *path)
{
	char buf[1024];
	FILE *f;
	size_t n;

	if (!path || !*path || !(f = fopen(path, "r")))
		return NULL;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return strdup(buf);
}

static size_t read_cb(char *dst, size_t size, size_t nitems, void *ud)
{
	struct ntf_xfer *x = ud;
	size_t n = size * nitems;

	if (n > x->len - x->off)
		n = x->len - x->off;
	memcpy(dst, x->data + x->off, n);
	x->off += n;
	return n;
}

static void smtp_clear(struct ntf_xfer *x)
{
	if (x->h)
		curl_easy_reset(x->h);  /* no pointer to the list or data left behind */
	curl_slist_free_all(x->list);
	x->list = NULL;
	free(x->data);
	x->data = NULL;
}

int ntf_smtp_start(struct ntf_xfer *x, const struct ntf_message *m,
		struct ntf_send_result *res)
{
	const char *from = api->config_str("smtp_from");
	const char *domain = strchr(from, '@') ? strchr(from, '@') + 1 : "pin.invalid";
	char *pw = NULL, rcpt_s[400], from_s[400];
	CURL *c;
	int require_tls = api->config_bool("smtp_require_tls");

	memset(res, 0, sizeof *res);
	if (!address_ok(m->to)) {
		res->outcome = NTF_PERMANENT;
		snprintf(res->error, sizeof res->error, "NTF_BAD_ADDRESS");
		return 1;
	}
	snprintf(rcpt_s, sizeof rcpt_s, "<%s>", m->to);
	snprintf(from_s, sizeof from_s, "<%s>", from);
	x->data = ntf_mime_build(m, from, domain, api->now_us() / 1000000);
	x->list = curl_slist_append(NULL, rcpt_s);
	c = ntf_xfer_handle(x);
	if (!x->data || !x->list || !c) {
		smtp_clear(x);
		res->outcome = NTF_RETRY;
		snprintf(res->error, sizeof res->error, "NTF_SMTP_LOCAL: out of memory");
		return 1;
	}
	x->off = 0;
	x->len = strlen(x->data);
	snprintf(x->msgid, sizeof x->msgid, "<%s@%s>", m->id, domain);
	/* strings are copied by libcurl; the list and the data are not */
	curl_easy_setopt(c, CURLOPT_URL, api->config_str("smtp_url"));
	curl_easy_setopt(c, CURLOPT_MAIL_FROM, from_s);
	curl_easy_setopt(c, CURLOPT_MAIL_RCPT, x->list);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
	curl_easy_setopt(c, CURLOPT_READDATA, x);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_INFILESIZE, (long)x->len);
	curl_easy_setopt(c, CURLOPT_USE_SSL, require_tls ? (long)CURLUSESSL_ALL :
			(long)CURLUSESSL_TRY);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			(long)api->config_num("smtp_connect_timeout_ms"));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
			(long)api->config_num("smtp_timeout_ms"));
	if (*api->config_str("smtp_user")) {
		pw = read_secret(api->config_str("smtp_password_file"));
		curl_easy_setopt(c, CURLOPT_USERNAME, api->config_str("smtp_user"));
		curl_easy_setopt(c, CURLOPT_PASSWORD, pw ? pw : "");
		if (pw) {
			memset(pw, 0, strlen(pw));
			free(pw);
		}
	}
	return 0;
}

void ntf_smtp_finish(struct ntf_xfer *x, CURLcode rc, struct ntf_send_result *res)
{
	long code = 0;

	memset(res, 0, sizeof *res);
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_OK) {
		res->outcome = NTF_SENT;
		snprintf(res->provider_id, sizeof res->provider_id, "%s", x->msgid);
	} else {
		/* 5xx from the server: refused for good; the rest may pass later */
		res->outcome = code >= 500 && code < 600 && rc != CURLE_LOGIN_DENIED ?
			NTF_PERMANENT : NTF_RETRY;
		snprintf(res->error, sizeof res->error, "NTF_SMTP_%s: curl %d %s, smtp %ld",
				res->outcome == NTF_PERMANENT ? "REFUSED" : "UNAVAILABLE",
				(int)rc, curl_easy_strerror(rc), code);
	}
	smtp_clear(x);
}
