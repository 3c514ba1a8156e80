/*
 * dispatch.c -- the dispatcher job "notification-dispatch" (issue 10, seed
 * 001 persist-then-send), worker hosts.
 *
 * One pass:
 *   1. claim: one statement (its own transaction) takes up to
 *      notify.dispatch_batch due rows -- Pending, Email/Sms (a channel
 *      whose sender is not configured is left alone), not_before and
 *      next_attempt_at null or past, no live lease; the longest due first
 *      (DUE_AT) -- with FOR UPDATE SKIP LOCKED, and sets lease_until = now +
 *      dispatch_lease_s and lease_owner = this pass.  Two worker hosts
 *      never claim one row; a host killed mid-send releases its rows when
 *      the lease ends.
 *   2. send each row OUTSIDE any transaction (smtp.c, sms.c).  The address
 *      is the row's snapshot taken at enqueue (seed 001 step 5); a row
 *      enqueued before its contact was known reads the contact replica at
 *      claim time and keeps what it found as its snapshot; a row whose
 *      contact is still unknown is retried later (seed 001: the address catches up)
 *      without counting an attempt, and Failed (NTF_CONTACT_UNKNOWN) only
 *      after dispatch_contact_wait_max_s.  The claim itself puts such a row
 *      back (CLAIM_SQL, "waits") instead of leasing it: nothing is sent for
 *      it, so no lease is needed, and it costs one row version per look
 *      instead of two (the lease, then the deferral).
 *   3. record, one transaction per row, only while the lease is ours:
 *      Sent (+ sent_at, provider_message_id), or a retry (attempts + 1,
 *      next_attempt_at = now + base * 2^(attempts-1) capped, last_error
 *      without PII), or Failed (permanent error, or attempts reached
 *      dispatch_max_attempts).  A final outcome (Sent / Failed) writes
 *      pin.notifications.dispatched.v1 into notifications.outbox in the
 *      same transaction.
 *
 * Duplicates: a row is sent again only if the host dies (or the lease ends)
 * after the server accepted the message and before step 3 committed: at most
 * one duplicate per such crash, with the same Message-ID / idempotencyKey.
 *
 * Speed: each channel's libcurl handle is kept between messages, so its
 * connection is reused (send.h); a pass claims batch after batch
 * while they come back full, for at most PASS_MAX_US.
 *
 * Metrics: notifications_dispatch_total{channel,status} (status sent, retry,
 * failed, contact_unknown), notifications_dispatch_duration_seconds{channel}
 * (histogram: _bucket{le}, _sum, _count), notifications_dispatch_lag_seconds
 * (age of the oldest due row, 0 when none).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "notify.h"
#include "sdk/topics.h"
#include "dispatch.h"
#include "send.h"

static const struct pin_host_api *api;

/* The instant a row is due since: its creation, a quiet-hours not_before, a
 * retry's next_attempt_at or the end of a lapsed lease, whichever is last
 * (greatest ignores NULLs).  Indexed with id over the Pending e-mail/SMS rows
 * (sql/notifications/0040_dispatch_due_index.sql, the same expression and
 * predicate): the claim reads the oldest due entries, the lag the first.
 * DUE_PLAN: both are planned at each execution (db_exec, not prepared): a
 * connection's generic plan made while the table held few rows is a
 * sequential scan that stays until the next ANALYZE, exactly when a burst
 * fills the table (doc/performance.md, consumers). */
#define DUE_AT "greatest(n.created_at, n.not_before, n.next_attempt_at, n.lease_until)"
/* the due rows of the channels in parameter $chans (the index's predicate
 * spelt out: a parameter does not prove it) */
#define DUE_ROWS(chans) "n.status = 'Pending' AND n.channel <> 'InApp'" \
	" AND n.channel = ANY ($" chans "::text[]) AND " DUE_AT " <= $1::timestamptz"

/* the row's age in seconds at $1 */
#define AGE_S "extract(epoch FROM $1::timestamptz - n.created_at)::bigint"

/* The claim.  Each due row's address for its channel is its snapshot (seed
 * 001 step 5: taken at enqueue, events.c), else -- no address was known
 * then -- its recipient_contacts row's (NULL without one: the catch-up),
 * which becomes the row's snapshot; returned with it.  A contact changed
 * after the enqueue does not redirect a row that has its snapshot.  A row
 * whose address is unknown (NULL or empty: contact_unknown()) and that may
 * still wait (age <= $6 s, notify.dispatch_contact_wait_max_s) is not
 * leased: the same statement puts it back until $7 (no attempt counted), so
 * such a row costs one row version per look instead of two; it
 * comes back with "waits" true.  The others are leased until $2 for owner
 * $3. */
static const char CLAIM_SQL[] =
	"UPDATE notifications.notifications AS n"
	"   SET lease_until = CASE WHEN d.waits THEN NULL ELSE $2::timestamptz END,"
	"       lease_owner = CASE WHEN d.waits THEN NULL ELSE $3::uuid END,"
	"       last_error = CASE WHEN d.waits THEN 'NTF_CONTACT_UNKNOWN' ELSE n.last_error END,"
	"       next_attempt_at = CASE WHEN d.waits THEN $7::timestamptz"
	"                              ELSE n.next_attempt_at END,"
	"       address = coalesce(nullif(d.addr, ''), n.address)"
	"  FROM (SELECT q.id, q.addr, coalesce(q.addr, '') = '' AND q.age <= $6::bigint AS waits"
	"         FROM (SELECT n.id, " AGE_S " AS age,"
	"                 coalesce(nullif(n.address, ''),"
	"                   (SELECT CASE WHEN n.channel = 'Email' THEN c.email ELSE c.phone END"
	"                      FROM notifications.recipient_contacts c"
	"                     WHERE c.user_id = n.recipient_user_id)) AS addr"
	"                FROM notifications.notifications AS n"
	"               WHERE " DUE_ROWS("4")
	"               ORDER BY " DUE_AT ", n.id LIMIT $5::int"
	"               FOR UPDATE SKIP LOCKED) AS q) AS d"
	" WHERE n.id = d.id"
	" RETURNING n.id::text, n.channel, n.kind, n.title, n.body, n.attempts, d.addr,"
	"   " AGE_S ", n.recipient_user_id::text, d.waits";

enum { C_ID, C_CHANNEL, C_KIND, C_TITLE, C_BODY, C_ATTEMPTS, C_TO, C_AGE, C_USER, C_WAITS };

static const char LAG_SQL[] =
	"SELECT coalesce(extract(epoch FROM $1::timestamptz - min(" DUE_AT ")), 0)"
	"  FROM notifications.notifications AS n"
	" WHERE " DUE_ROWS("2");

/* the outcome, written only while our lease holds */
static const char RECORD_SQL[] =
	"UPDATE notifications.notifications"
	"   SET status = $3, attempts = attempts + $4::int,"
	"       sent_at = CASE WHEN $3 = 'Sent' THEN $5::timestamptz END,"
	"       failed_at = CASE WHEN $3 = 'Failed' THEN $5::timestamptz END,"
	"       provider_message_id = coalesce($6, provider_message_id),"
	"       last_error = $7, next_attempt_at = $8::timestamptz,"
	"       lease_until = NULL, lease_owner = NULL"
	" WHERE id = $1::uuid AND lease_owner = $2::uuid AND status = 'Pending'"
	" RETURNING id::text, recipient_user_id::text, channel, kind, status, attempts,"
	"   source_message_id::text";

static void observe(const char *channel, double s)
{
	char lab[96];

	snprintf(lab, sizeof lab, "channel=\"%s\"", channel);
	api->metric_observe("notifications_dispatch_duration_seconds", lab, s);
}

static void count0(const char *channel)
{
	char lab[96];

	snprintf(lab, sizeof lab, "channel=\"%s\",status=\"sent\"", channel);
	api->metric_add("notifications_dispatch_total", lab, 0);
}

static void count(const char *channel, const char *status)
{
	char lab[96];

	snprintf(lab, sizeof lab, "channel=\"%s\",status=\"%s\"", channel, status);
	api->metric_add("notifications_dispatch_total", lab, 1);
}

/* "{Email,Sms}" of the configured channels, or NULL when none */
static const char *channels(void)
{
	int e = ntf_smtp_configured(), s = ntf_sms_configured();

	return e && s ? "{Email,Sms}" : e ? "{Email}" : s ? "{Sms}" : NULL;
}

/* pin.notifications.dispatched.v1 of the row rec returned (no PII) */
static int emit(PGresult *rec, const char *now, const char *error)
{
	json_object *p = json_object_new_object();
	const char *id = PQgetvalue(rec, 0, 0), *st = PQgetvalue(rec, 0, 4);
	int rc;

	json_object_object_add(p, "notificationId", json_object_new_string(id));
	json_object_object_add(p, "recipientUserId",
			json_object_new_string(PQgetvalue(rec, 0, 1)));
	json_object_object_add(p, "channel", json_object_new_string(PQgetvalue(rec, 0, 2)));
	json_object_object_add(p, "kind", json_object_new_string(PQgetvalue(rec, 0, 3)));
	json_object_object_add(p, "status", json_object_new_string(st));
	json_object_object_add(p, "attempts", json_object_new_int(atoi(PQgetvalue(rec, 0, 5))));
	json_object_object_add(p, "sentAt", !strcmp(st, "Sent") ?
			json_object_new_string(now) : NULL);
	json_object_object_add(p, "failedAt", !strcmp(st, "Failed") ?
			json_object_new_string(now) : NULL);
	json_object_object_add(p, "failureCode", error ? json_object_new_string_len(error,
			(int)strcspn(error, ":")) : NULL);
	json_object_object_add(p, "sourceMessageId",
			json_object_new_string(PQgetvalue(rec, 0, 6)));
	rc = api->outbox_put_to(NTF_OUTBOX, PC_TOPIC_NOTIFICATIONS_DISPATCHED, id,
			"pin.notifications.dispatched", "Notification", id, p);
	json_object_put(p);
	return rc;
}

/* Step 3 for one row: 0, or PIN_ERR_DB (the lease runs out, the row is
 * taken again: a possible duplicate). */
static int record(const char *id, const char *owner, const char *channel,
		const char *status, int attempt, const char *provider_id,
		const char *error, int64_t next_us)
{
	char now[40], next[40];
	const char *p[8];
	PGresult *res;
	int final = strcmp(status, "Pending") != 0;

	api->fmt_time(api->now_us(), now, sizeof now);
	if (next_us)
		api->fmt_time(next_us, next, sizeof next);
	p[0] = id;
	p[1] = owner;
	p[2] = status;
	p[3] = attempt ? "1" : "0";
	p[4] = now;
	p[5] = provider_id && *provider_id ? provider_id : NULL;
	p[6] = error;
	p[7] = next_us ? next : NULL;
	if (api->db_begin() != 0)
		return PIN_ERR_DB;
	res = api->db_exec_prepared("ntf_dispatch_record", RECORD_SQL, 8, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		goto fail;
	if (PQntuples(res) == 0) {
		/* the lease ended and another pass owns the row now */
		api->db_rollback();
		api->log(PIN_LOG_WARN, "notification dispatch: lease lost before recording",
				"notificationId", id, "channel", channel, NULL);
		return 0;
	}
	if (final && emit(res, now, error) != 0)
		goto fail;
	return api->db_commit() == 0 ? 0 : PIN_ERR_DB;
fail:
	api->db_rollback();
	api->log(PIN_LOG_ERROR, "notification dispatch: cannot record the outcome",
			"notificationId", id, "channel", channel, NULL);
	return PIN_ERR_DB;
}

static int64_t backoff_us(int attempts)
{
	long long base = api->config_num("notify.dispatch_backoff_base_s");
	long long max = api->config_num("notify.dispatch_backoff_max_s");
	long long d = base;

	for (int i = 1; i < attempts && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	return (int64_t)d * 1000000;
}

/* when a row without a contact is looked at again: now +
 * notify.dispatch_contact_retry_s */
static void contact_retry_at(char *next, size_t len)
{
	api->fmt_time(api->now_us() + api->config_num("notify.dispatch_contact_retry_s") *
			1000000, next, len);
}

static int contact_unknown(PGresult *res, int i)
{
	return PQgetisnull(res, i, C_TO) || !*PQgetvalue(res, i, C_TO);
}

/* the claim put the row back to wait for its contact (not leased) */
static int waits(PGresult *res, int i)
{
	return !strcmp(PQgetvalue(res, i, C_WAITS), "t");
}

/* Seed 001's limit: a leased row without a contact is one that waited
 * longer than dispatch_contact_wait_max_s (the claim puts the younger ones
 * back itself, "waits", from the same address it returns): Failed
 * NTF_CONTACT_UNKNOWN, final, in its own transaction with its dispatched
 * event. */
static void fail_unknown(PGresult *res, int i, const char *owner)
{
	const char *id = PQgetvalue(res, i, C_ID), *ch = PQgetvalue(res, i, C_CHANNEL);

	count(ch, "failed");
	record(id, owner, ch, "Failed", 0, NULL, "NTF_CONTACT_UNKNOWN", 0);
}

/* One claimed row with a contact: send, then record. */
static void dispatch_row(PGresult *res, int i, const char *owner)
{
	const char *id = PQgetvalue(res, i, C_ID), *ch = PQgetvalue(res, i, C_CHANNEL);
	int attempts = atoi(PQgetvalue(res, i, C_ATTEMPTS));
	struct ntf_message m = { id, PQgetvalue(res, i, C_TO), PQgetvalue(res, i, C_TITLE),
		PQgetvalue(res, i, C_BODY) };
	struct ntf_send_result r;
	int64_t t0, now;
	char att[16];

	t0 = api->now_us();
	if (!strcmp(ch, "Email"))
		ntf_smtp_send(&m, &r);
	else
		ntf_sms_send(&m, &r);
	now = api->now_us();
	observe(ch, (double)(now - t0) / 1e6);
	attempts++;
	snprintf(att, sizeof att, "%d", attempts);
	if (r.outcome == NTF_SENT) {
		count(ch, "sent");
		record(id, owner, ch, "Sent", 1, r.provider_id, NULL, 0);
	} else if (r.outcome == NTF_PERMANENT ||
			attempts >= api->config_num("notify.dispatch_max_attempts")) {
		count(ch, "failed");
		api->log(PIN_LOG_WARN, "notification dispatch: failed", "notificationId", id,
				"channel", ch, "attempts", att, "error", r.error, NULL);
		record(id, owner, ch, "Failed", 1, NULL, r.error, 0);
	} else {
		count(ch, "retry");
		api->log(PIN_LOG_INFO, "notification dispatch: will retry", "notificationId", id,
				"channel", ch, "attempts", att, "error", r.error, NULL);
		record(id, owner, ch, "Pending", 1, NULL, r.error, now + backoff_us(attempts));
	}
}

static void update_lag(const char *chans, const char *now)
{
	const char *p[2] = { now, chans };
	PGresult *res = api->db_exec(LAG_SQL, 2, p);     /* planned now: DUE_PLAN */

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		api->metric_set("notifications_dispatch_lag_seconds", NULL,
				atof(PQgetvalue(res, 0, 0)));
}

#define PASS_MAX_US 5000000   /* claims of one pass while full, then the next pass */

static int dispatch_job(void *ud)
{
	const char *chans = channels();
	char now[40], until[40], owner[37], lim[16], wait_max[24], next[40];
	const char *p[7] = { now, until, owner, chans, lim, wait_max, next };
	PGresult *res;
	int n, total = 0, full;
	int64_t t0 = api->now_us(), t = t0;

	(void)ud;
	if (!chans)
		return 0;
	/* the age of the oldest due row, once per pass (the first entry of
	 * ix_notifications_due) */
	api->fmt_time(t, now, sizeof now);
	update_lag(chans, now);
	do {
		api->fmt_time(t, now, sizeof now);
		api->fmt_time(t + api->config_num("notify.dispatch_lease_s") * 1000000,
				until, sizeof until);
		api->uuid_v7(owner);
		snprintf(lim, sizeof lim, "%lld", api->config_num("notify.dispatch_batch"));
		snprintf(wait_max, sizeof wait_max, "%lld",
				api->config_num("notify.dispatch_contact_wait_max_s"));
		contact_retry_at(next, sizeof next);
		res = api->db_exec(CLAIM_SQL, 7, p);             /* DUE_PLAN */
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
			return total ? total : PIN_ERR_DB;
		n = PQntuples(res);
		for (int i = 0; i < n; i++)     /* Failed first, as before: no send */
			if (!waits(res, i) && contact_unknown(res, i))
				fail_unknown(res, i, owner);
		for (int i = 0; i < n; i++)
			if (waits(res, i))      /* put back by the claim: counted once written */
				count(PQgetvalue(res, i, C_CHANNEL), "contact_unknown");
			else if (!contact_unknown(res, i))
				dispatch_row(res, i, owner);
		total += n;
		full = n >= atoi(lim);
		t = api->now_us();
		/* a backlog is sent in one pass (no interval's pause between
		 * batches), for at most PASS_MAX_US so that a stop is not held */
	} while (full && t - t0 < PASS_MAX_US);
	return total;
}

int ntf_dispatch_register(const struct pin_host_api *a, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	static const struct pin_job job = { "notification-dispatch", NTF_DISPATCH_INTERVAL_MS,
		dispatch_job,
		NULL, NULL };

	api = a;
	ntf_smtp_init(a);
	ntf_sms_init(a);
	if (!PIN_API_HAS(a, outbox_put_to) || !PIN_API_HAS(reg, outbox)) {
		snprintf(err, errlen, "notify: the host lacks ABI 1.1 (per-context outbox)");
		return -1;
	}
	if (reg->outbox(reg, NTF_OUTBOX) < 0 || reg->job(reg, &job) < 0) {
		snprintf(err, errlen, "notify: dispatcher registration refused");
		return -1;
	}
	/* 0 from the start: rate() and the dashboard see the series */
	count0("Email");
	count0("Sms");
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		snprintf(err, errlen, "notify: curl_global_init failed");
		return -1;
	}
	return 0;
}

void ntf_dispatch_fini(void)
{
	ntf_smtp_close();
	ntf_sms_close();
	curl_global_cleanup();
}
