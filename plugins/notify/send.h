/* send.h -- notify.so delivery's two senders (issue 10): e-mail over SMTP
 * (smtp.c) and SMS over a provider HTTP API (sms.c).  Leaves under the
 * dispatcher (dispatch.c): they know the host table they are given and
 * libcurl, nothing of the job that calls them. */
#ifndef PIN_NOTIFY_SEND_H
#define PIN_NOTIFY_SEND_H

#include <curl/curl.h>
#include "pin/plugin.h"

enum ntf_send_outcome {
	NTF_SENT = 0,           /* accepted by the server / provider */
	NTF_RETRY = 1,          /* transient: try again later */
	NTF_PERMANENT = 2       /* never going to work: Failed */
};

struct ntf_send_result {
	enum ntf_send_outcome outcome;
	char provider_id[200];  /* NTF_SENT: Message-ID / the provider's id */
	char error[200];        /* otherwise: code and status, never PII */
};

/* One message to send; strings borrowed. */
struct ntf_message {
	const char *id;         /* notification id (Message-ID, idempotency key) */
	const char *to;         /* e-mail address / phone (PII: never logged) */
	const char *subject;    /* e-mail only */
	const char *body;
};

/* Each sender keeps its libcurl handle from one message to the next, so
 * that its connection to the server is reused: no TCP connect, greeting,
 * EHLO, STARTTLS or AUTH per e-mail, HTTP keep-alive for SMS.  _init gives
 * it the host table; _close frees the handle (QUIT to the SMTP server).
 * Only the dispatcher's job thread sends. */

/* smtp.c.  Config: smtp_url, smtp_from, smtp_user, smtp_password_file,
 * smtp_require_tls, smtp_connect_timeout_ms, smtp_timeout_ms. */
void ntf_smtp_init(const struct pin_host_api *api);
int ntf_smtp_configured(void);
void ntf_smtp_send(const struct ntf_message *m, struct ntf_send_result *res);
void ntf_smtp_close(void);
/* The RFC 5322 message (exposed for unit tests): malloc'd, caller frees. */
char *ntf_mime_build(const struct ntf_message *m, const char *from,
		const char *domain, long long now_s);

/* sms.c.  Config: sms_url, sms_token_file, sms_timeout_ms. */
void ntf_sms_init(const struct pin_host_api *api);
int ntf_sms_configured(void);
void ntf_sms_send(const struct ntf_message *m, struct ntf_send_result *res);
void ntf_sms_close(void);

/* *h reset for the next message (curl_easy_reset keeps live connections;
 * libcurl drops one the server closed and reuses none idle for more than
 * CURLOPT_MAXAGE_CONN, 118 s), or made; NULL when out of memory. */
static inline CURL *ntf_curl_reuse(CURL **h)
{
	if (*h)
		curl_easy_reset(*h);
	else
		*h = curl_easy_init();
	return *h;
}

/* Frees *h (the connection closed properly). */
static inline void ntf_curl_close(CURL **h)
{
	if (*h)
		curl_easy_cleanup(*h);
	*h = NULL;
}

#endif
