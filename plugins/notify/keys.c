/* keys.c -- the configuration keys notify.so reads (declared
 * configuration, pin/plugin.h 1.7): read from the descriptor without init,
 * so worker and API hosts, --check-config and pin-host.conf(5) know them. */
#include "config.h"
#include "pin/plugin.h"
#include "notify.h"

#define W PIN_CFG_WORKER
#define A PIN_CFG_API
#define R PIN_CFG_RELOAD

const struct pin_config_key ntf_config_keys[] = {
	/* ---- delivery: e-mail, SMS and the dispatcher job */
	{ "smtp_url", PIN_CFG_URL, "", W, R, 0, 0, "smtp|smtps", NULL, "delivery",
	  "e-mail: smtp://host:587 (STARTTLS when offered) or smtps://host:465; "
	  "empty: e-mail rows stay Pending" },
	{ "smtp_from", PIN_CFG_STRING, "", W, R, 0, 0, NULL, NULL, "delivery",
	  "sender address of the e-mails (e-mail is off without it)" },
	{ "smtp_require_tls", PIN_CFG_BOOL, "false", W, R, 0, 0, NULL, NULL, "delivery",
	  "refuse to send over smtp:// unless the server offers STARTTLS" },
	{ "smtp_user", PIN_CFG_STRING, "", W, R, 0, 0, NULL, NULL, "delivery",
	  "SMTP AUTH user; empty: no AUTH" },
	{ "smtp_password_file", PIN_CFG_PATH, "", W, R, 0, 0, NULL, NULL, "delivery",
	  "file whose first line is the SMTP password (mode 0600, the service user's)" },
	{ "smtp_connect_timeout_ms", PIN_CFG_DURATION, "5000", W, R, 1, 600000, NULL, "ms",
	  "delivery", "connect timeout of an SMTP session" },
	{ "smtp_timeout_ms", PIN_CFG_DURATION, "30000", W, R, 1, 3600000, NULL, "ms",
	  "delivery", "timeout of a whole SMTP session" },
	{ "sms_url", PIN_CFG_URL, "", W, R, 0, 0, "http|https", NULL, "delivery",
	  "the SMS provider's API; empty: SMS rows stay Pending" },
	{ "sms_token_file", PIN_CFG_PATH, "", W, R, 0, 0, NULL, NULL, "delivery",
	  "file whose first line is the SMS provider's bearer token" },
	{ "sms_connect_timeout_ms", PIN_CFG_DURATION, "5000", W, R, 1, 600000, NULL, "ms",
	  "delivery", "connect timeout of an SMS request" },
	{ "sms_timeout_ms", PIN_CFG_DURATION, "15000", W, R, 1, 3600000, NULL, "ms",
	  "delivery", "timeout of a whole SMS request" },
	PIN_CFG_JOB_INTERVAL("notification-dispatch", NTF_DISPATCH_INTERVAL_MS, "delivery",
	  "pause between passes of the e-mail and SMS dispatcher"),
	{ "notify.dispatch_batch", PIN_CFG_INT, "250", W, R, 1, 10000, NULL, "rows",
	  "delivery", "notifications claimed per dispatcher batch and channel (e-mail, SMS)" },
	{ "notify.dispatch_senders", PIN_CFG_INT, "4", W, R, 1, 16, NULL, "connections",
	  "delivery", "sends in flight at once per worker host and channel, each on a "
	  "connection of its own to the SMTP server / SMS provider, kept between messages "
	  "(doc/operating.md, \"E-mail and SMS delivery\")" },
	{ "notify.dispatch_lease_s", PIN_CFG_DURATION, "300", W, R, 1, 86400, NULL, "s",
	  "delivery", "a claimed row is taken again by another host after this (keep it "
	  "above the send timeouts)" },
	{ "notify.dispatch_max_attempts", PIN_CFG_INT, "8", W, R, 1, 1000, NULL, "attempts",
	  "delivery", "a message still failing after this many sends is Failed" },
	{ "notify.dispatch_backoff_base_s", PIN_CFG_DURATION, "30", W, R, 1, 86400, NULL, "s",
	  "delivery", "retry n waits base x 2^(n-1), at most notify.dispatch_backoff_max_s" },
	{ "notify.dispatch_backoff_max_s", PIN_CFG_DURATION, "3600", W, R, 1, 604800, NULL, "s",
	  "delivery", "longest wait between two sends of one message" },
	{ "notify.dispatch_contact_retry_s", PIN_CFG_DURATION, "300", W, R, 1, 86400, NULL, "s",
	  "delivery", "a row whose e-mail or phone is unknown is looked at again after this" },
	{ "notify.dispatch_contact_wait_max_s", PIN_CFG_DURATION, "86400", W, R, 1, 2592000,
	  NULL, "s", "delivery", "a row whose contact stays unknown this long is Failed" },

	/* ---- the investors' manage links (issue 32 item 3; links.c) */
	{ "manage_link_key_file", PIN_CFG_PATH, "", A | W, 0, 0, 0, NULL, NULL, "manage links",
	  "file of the key of the investors' manage links (one secret of >= 32 bytes a "
	  "line: the first signs, every line verifies; mode 0640 root:pin-calendar); the "
	  "same file on every API and worker host; empty: no links in the messages and "
	  "/manage/ answers 503 (doc/operating.md, \"Manage links\")" },
	{ "notify.public_base_url", PIN_CFG_URL, "", W, 0, 0, 0, "http|https", NULL,
	  "manage links", "the public origin investors reach nginx at "
	  "(https://calendar.example.com): {{manageUrl}} in their e-mails and SMS is it + "
	  "/manage/<token>; empty: no links (the template line is left out)" },

	/* ---- real-time in-app (nchan) */
	{ "nchan_publish_url", PIN_CFG_URL, "", W, R, 0, 0, "http|https", NULL, "real-time",
	  "nginx's loopback nchan publisher prefix (+ ntf.<userId>); empty: no push" },
	{ "nchan_publish_timeout_ms", PIN_CFG_DURATION, "2000", W, 0, 100, 60000, NULL, "ms",
	  "real-time", "timeout of one publish request" },
	{ "nchan_publish_max_age_s", PIN_CFG_DURATION, "3600", W, 0, 1, 604800, NULL, "s",
	  "real-time", "in-app rows older than this are given up without a push" },
	PIN_CFG_JOB_INTERVAL("inapp-publish", NTF_PUSH_INTERVAL_MS, "real-time",
	  "pause between passes of the in-app publisher"),
	{ "ntf_stream_secret", PIN_CFG_STRING, "", A, PIN_CFG_SECRET, 32, 4096, NULL, "bytes",
	  "real-time", "key of the stream tickets (the same on every API host); "
	  "empty: derived from jwt_hs256_secret" },
	{ "ntf_stream_secret_file", PIN_CFG_PATH, "", A, 0, 0, 0, NULL, NULL, "real-time",
	  "file whose first line is ntf_stream_secret" },
	{ "ntf_stream_ticket_ttl_s", PIN_CFG_DURATION, "60", A, 0, 5, 3600, NULL, "s",
	  "real-time", "lifetime of a stream ticket" },

	/* ---- retention */
	PIN_CFG_JOB_INTERVAL("notifications-housekeeping", NTF_HOUSEKEEPING_INTERVAL_MS,
	  "retention",
	  "pause between passes of the notifications housekeeping"),
	{ "job.notifications-housekeeping.batch", PIN_CFG_INT, "500", W, R, 1, 10000, NULL,
	  "rows", "retention", "rows deleted per transaction" },
	{ "notifications.housekeeping.inbox_days", PIN_CFG_DURATION, "30", W, R, 1, 36500,
	  NULL, "days", "retention", "consumed-message records older than this are deleted" },
	{ "notifications.housekeeping.notification_days", PIN_CFG_DURATION, "180", W, R, 1,
	  36500, NULL, "days", "retention",
	  "Sent and Failed notifications (the record of e-mails and SMS sent or given up) "
	  "created longer ago are deleted" },
	{ "notifications.housekeeping.read_days", PIN_CFG_DURATION, "30", W, R, 1, 36500,
	  NULL, "days", "retention",
	  "in-app notifications the recipient has read, created longer ago, are deleted" },
	{ "notifications.housekeeping.unread_days", PIN_CFG_DURATION, "90", W, R, 1, 36500,
	  NULL, "days", "retention",
	  "Pending notifications (in-app never read; e-mail or SMS never delivered) created "
	  "longer ago are deleted" },
	{ "notifications.housekeeping.final_state_days", PIN_CFG_DURATION, "180", W, R, 1,
	  36500, NULL, "days", "retention", "recorded final states older than this are deleted" },
	{ "notifications.housekeeping.outbox_days", PIN_CFG_DURATION, "7", W, R, 1, 36500,
	  NULL, "days", "retention", "published rows of notifications.outbox older than this "
	  "are deleted" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};
