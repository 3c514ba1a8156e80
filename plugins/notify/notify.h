/* notify.h -- notify.so (notifications.md, seed 001): the notifications
 * context.  Two consumers on the worker host (calendar events -> notification
 * rows; identity users -> contact replica) and the /api/v1/me routes on the
 * API host.  Everything lives in schema notifications; schema calendar is
 * never read or written (only Kafka between the contexts). */
#ifndef PIN_NOTIFY_H
#define PIN_NOTIFY_H

#include "pin/plugin.h"

/* The host table is pc_api (sdk/core.h, set by pc_init in init). */

/* NotificationKinds and channels (notifications.md), NULL-terminated. */
extern const char *const ntf_kinds[];
extern const char *const ntf_channels[];

#define NTF_INBOX "notifications.processed_messages"
#define NTF_CODE_INVALID "NTF_INVALID_PAYLOAD"
#define NTF_CODE_TEMPLATE "NTF_TEMPLATE_NOT_RESOLVED"

/* The keys notify.so reads (keys.c) and its jobs' default intervals. */
extern const struct pin_config_key ntf_config_keys[];
#define NTF_DISPATCH_INTERVAL_MS 1000
#define NTF_PUSH_INTERVAL_MS 250
#define NTF_HOUSEKEEPING_INTERVAL_MS 600000

/* Registration of the two consumers (events.c, contacts.c): 0 or -1 with err. */
int ntf_events_register(struct pin_registrar *reg, char *err, size_t errlen);
int ntf_contacts_register(struct pin_registrar *reg, char *err, size_t errlen);

/* Retention of schema notifications: the notifications-housekeeping job
 * (retention.c).  0 or -1 with err. */
int ntf_retention_register(struct pin_registrar *reg, char *err, size_t errlen);

/* Real-time in-app (issue 10 item 4): stream tickets + the nchan auth route
 * (stream.c), the inapp-publish job (push.c).  0 or -1 with err. */
int ntf_stream_register(struct pin_registrar *reg, char *err, size_t errlen);
int ntf_push_register(struct pin_registrar *reg, char *err, size_t errlen);
/* 0 and the user id when ticket is valid at now_s (stream.c). */
int ntf_stream_ticket_verify(const char *ticket, long long now_s, char user[37]);

/* Route handlers (api.c). */
int ntf_h_list(struct pin_req *r, void *ud);
int ntf_h_read(struct pin_req *r, void *ud);
int ntf_h_settings_get(struct pin_req *r, void *ud);
int ntf_h_settings_put(struct pin_req *r, void *ud);

/* Pure helpers (render.c; no host calls except the arena in ntf_render). */
struct ntf_var {
	const char *name;
	const char *value;      /* NULL renders as "" */
};
/* {{name}} substitution; unknown placeholders render as "".  Result in
 * the arena. */
char *ntf_render(const char *tmpl, const struct ntf_var *vars, size_t n);
/* The investors' manage links (links.c, issue 32 item 3). */
int ntf_links_init(char *err, size_t errlen);      /* 0 or -1 with err */
/* The URL of a link of purpose (PC_MANAGE_CANCEL / _RESCHEDULE) for the
 * investor's message in locale, or NULL (links off).  Arena. */
const char *ntf_manage_url(int purpose, const char *appointment_id,
		const char *investor_id, int64_t start_us, const char *locale);
/* tmpl without its lines that contain needle ("{{manageUrl}}"), and
 * without trailing blank lines.  Arena. */
char *ntf_drop_lines(const char *tmpl, const char *needle);
/* Offset in minutes as text for locale ("1 дн.", "2 h"...) into buf. */
void ntf_offset_text(int minutes, const char *locale, char *buf, size_t len);

/* invite.c: the iCalendar invitation (RFC 6047 iMIP) of an appointment
 * e-mail.  Strings borrowed; PII (addresses, names) goes into the text
 * only. */
struct ntf_invite {
	const char *appointment_id;     /* the appointment the message is about */
	const char *original_id;        /* the first of its reschedule chain, or NULL */
	int reschedules;                /* rescheduleCount */
	const char *status;             /* Pending | Confirmed | Cancelled | ... */
	const char *kind;               /* Showing | Consultation */
	int64_t start_us, end_us, stamp_us;
	int for_agent;                  /* the recipient is the agent */
	const char *locale;             /* the template's (SUMMARY's language) */
	const char *agent_email, *agent_name;           /* ORGANIZER */
	const char *investor_email, *investor_name;     /* ATTENDEE */
	const char *description;        /* the e-mail's text */
};

/* The VCALENDAR text (METHOD REQUEST or CANCEL; arena), or NULL when an
 * address is missing, the span is empty or out of memory: the e-mail then
 * goes as plain text. */
const char *ntf_invite_calendar(const struct ntf_invite *iv);

#endif
