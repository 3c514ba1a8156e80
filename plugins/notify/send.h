/* send.h -- notify.so delivery's two senders (issue 10): e-mail over SMTP
 * (smtp.c) and SMS over a provider HTTP API (sms.c).  Leaves under the
 * dispatcher (dispatch.c): they know the host table they are given and
 * libcurl, nothing of the job that calls them. */
#ifndef PIN_NOTIFY_SEND_H
#define PIN_NOTIFY_SEND_H

#include <curl/curl.h>
#include <json-c/json.h>
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
	const char *calendar;   /* e-mail only: a VCALENDAR with METHOD (RFC 6047
	                         * iMIP, invite.c) or NULL; PII */
};

/* One send in flight.  The dispatcher (dispatch.c) keeps a pool of them per
 * channel, notify.dispatch_senders each, and runs their transfers at once
 * through one libcurl multi handle, whose connection cache keeps the
 * connections between messages and passes: no TCP connect, greeting, EHLO,
 * STARTTLS or AUTH per e-mail, HTTP keep-alive for SMS, at most one
 * connection per sender.  A sender's _start fills the record and sets up
 * h for one message; the dispatcher adds h to its multi handle, and after
 * the transfer the sender's _finish reads the outcome, frees what _start
 * made and resets h (kept: made on first use).  Only the dispatcher's job
 * thread sends. */
struct ntf_xfer {
	CURL *h;                   /* kept from message to message */
	char *data;                /* SMTP: the message (malloc'd) */
	size_t off, len;           /* SMTP: upload position */
	struct curl_slist *list;   /* SMTP: the recipient; SMS: the headers */
	json_object *json;         /* SMS: the request body */
	char reply[4096];          /* SMS: the answer's body */
	size_t nreply;
	char msgid[200];           /* SMTP: the Message-ID */
};

/* smtp.c.  Config: smtp_url, smtp_from, smtp_user, smtp_password_file,
 * smtp_require_tls, smtp_connect_timeout_ms, smtp_timeout_ms.
 * _start: 0 when x->h is ready to transfer m; 1 when the outcome is
 * decided without a send (an address refused, out of memory), in res. */
void ntf_smtp_init(const struct pin_host_api *api);
int ntf_smtp_configured(void);
int ntf_smtp_start(struct ntf_xfer *x, const struct ntf_message *m,
		struct ntf_send_result *res);
/* the outcome of x's transfer, which ended with rc, into res */
void ntf_smtp_finish(struct ntf_xfer *x, CURLcode rc, struct ntf_send_result *res);
/* The RFC 5322 message (exposed for unit tests): malloc'd, caller frees.
 * Without m->calendar a text/plain message; with it multipart/mixed of
 * multipart/alternative (text/plain, then text/calendar; method=...) and
 * the same calendar as an invite.ics attachment (application/ics). */
char *ntf_mime_build(const struct ntf_message *m, const char *from,
		const char *domain, long long now_s);

/* sms.c.  Config: sms_url, sms_token_file, sms_timeout_ms.  _start and
 * _finish as the SMTP ones. */
void ntf_sms_init(const struct pin_host_api *api);
int ntf_sms_configured(void);
int ntf_sms_start(struct ntf_xfer *x, const struct ntf_message *m,
		struct ntf_send_result *res);
void ntf_sms_finish(struct ntf_xfer *x, CURLcode rc, struct ntf_send_result *res);

/* x->h made when missing; NULL when out of memory. */
static inline CURL *ntf_xfer_handle(struct ntf_xfer *x)
{
	if (!x->h)
		x->h = curl_easy_init();
	return x->h;
}

/* Frees x->h (not in a multi handle). */
static inline void ntf_xfer_close(struct ntf_xfer *x)
{
	if (x->h)
		curl_easy_cleanup(x->h);
	x->h = NULL;
}

#endif
