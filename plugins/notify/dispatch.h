/* dispatch.h -- notify.so delivery (issue 10): the dispatcher job
 * (dispatch.c) and its two senders, e-mail over SMTP (smtp.c) and SMS over a
 * provider HTTP API (sms.c).  Only pin/plugin.h and libcurl; nothing from
 * plugins/common. */
#ifndef PIN_NOTIFY_DISPATCH_H
#define PIN_NOTIFY_DISPATCH_H

#include <stddef.h>
#include <curl/curl.h>
#include "pin/plugin.h"

#define NTF_OUTBOX "notifications.outbox"
#define NTF_TOPIC_DISPATCHED "pin.notifications.dispatched.v1"

/* The host table (set by ntf_dispatch_register). */
extern const struct pin_host_api *ntf_dapi;

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

/* smtp.c.  Config: smtp_url, smtp_from, smtp_user, smtp_password_file,
 * smtp_require_tls, smtp_connect_timeout_ms, smtp_timeout_ms. */
int ntf_smtp_configured(void);
void ntf_smtp_send(const struct ntf_message *m, struct ntf_send_result *res);
/* The RFC 5322 message (exposed for unit tests): malloc'd, caller frees. */
char *ntf_mime_build(const struct ntf_message *m, const char *from,
		const char *domain, long long now_s);

/* sms.c.  Config: sms_url, sms_token_file, sms_timeout_ms. */
int ntf_sms_configured(void);
void ntf_sms_send(const struct ntf_message *m, struct ntf_send_result *res);

/* The channel's libcurl handle (0 e-mail, 1 SMS), kept from one message to
 * the next so that its connection to the server is reused: no TCP connect,
 * greeting, EHLO, STARTTLS or AUTH per e-mail, HTTP keep-alive for SMS.
 * Each call resets the options (curl_easy_reset keeps live connections);
 * libcurl drops a connection the server closed, and does not reuse one idle
 * for more than CURLOPT_MAXAGE_CONN (118 s).  Only the dispatcher's job
 * thread sends; ntf_dispatch_fini frees both (QUIT to the SMTP server).
 * NULL when out of memory. */
CURL *ntf_curl_handle(int channel);

/* dispatch.c: registers the job notification-dispatch and the outbox.
 * 0, or -1 with err. */
int ntf_dispatch_register(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen);
void ntf_dispatch_fini(void);

#endif
