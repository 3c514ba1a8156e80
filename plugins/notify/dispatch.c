/*
 * dispatch.c -- the dispatcher job "notification-dispatch" (issue 10, seed
 * 001 persist-then-send), worker hosts.
 *
 * One pass:
 *   1. claim: one statement (its own transaction) takes up to
 *      notify.dispatch_batch due rows of each channel -- Pending, Email/Sms (a channel
 *      whose sender is not configured is left alone), not_before and
 *      next_attempt_at null or past, no live lease; the longest due first
 *      (DUE_AT) -- with FOR UPDATE SKIP LOCKED, and sets lease_until = now +
 *      dispatch_lease_s and lease_owner = this pass.  Two worker hosts
 *      never claim one row; a host killed mid-send releases its rows when
 *      the lease ends.
 *   2. send the claimed rows OUTSIDE any transaction (smtp.c, sms.c),
 *      notify.dispatch_senders at once per channel, each on a connection
 *      of its own kept between messages (one libcurl multi handle: the
 *      transfers of one thread, no lock, the job's own database
 *      connection; SEND below).  The address
 *      is the row's snapshot taken at enqueue (seed 001 step 5); a row
 *      enqueued before its contact was known reads the contact replica at
 *      claim time and keeps what it found as its snapshot; a row whose
 *      contact is still unknown is retried later (seed 001: the address catches up)
 *      without counting an attempt, and Failed (NTF_CONTACT_UNKNOWN) only
 *      after dispatch_contact_wait_max_s.  The claim itself puts such a row
 *      back (CLAIM_SQL, "waits") instead of leasing it: nothing is sent for
 *      it, so no lease is needed, and it costs one row version per look
 *      instead of two (the lease, then the deferral).
 *   3. record the outcomes of the batch in ONE transaction (RECORD_SQL: one
 *      UPDATE of every row, each only while the lease is ours; one outbox
 *      INSERT): Sent (+ sent_at, provider_message_id), or a retry
 *      (attempts + 1, next_attempt_at = now + base * 2^(attempts-1) capped,
 *      last_error without PII), or Failed (permanent error, or attempts
 *      reached dispatch_max_attempts).  A final outcome (Sent / Failed)
 *      writes pin.notifications.dispatched.v1 into notifications.outbox in
 *      the same transaction (api->outbox_put_many).  A row whose lease
 *      another pass holds now is left alone (logged).  A row not sent within
 *      SEND_WINDOW_US of the batch's start (a server that answers by
 *      timeouts) is released unchanged: due again at once, no attempt
 *      counted, so a pass -- and a host's stop -- is never held longer than
 *      that plus one send's timeout.
 *
 * Duplicates: a row is sent again only if the host dies (or the lease ends)
 * after the server accepted the message and before step 3 committed: at most
 * one duplicate per such crash, with the same Message-ID / idempotencyKey.
 * If the outcomes' transaction fails, the rows stay leased and are sent
 * again after the lease, as after a crash.
 *
 * Speed (doc/performance.md, "The notify dispatcher"): the sends of a batch
 * overlap (several connections; libcurl has no SMTP pipelining), the
 * connections are reused from one message and pass to the next, and a
 * batch costs one commit (one WAL flush) instead of one per row; a pass
 * claims batch after batch while they come back full, for at most
 * PASS_MAX_US.  In a backlog (a pass's first claim came back full) each
 * channel runs as a shard of its own (thread, connection, multi handle)
 * for up to PASS_HOLD_US, and longer while the other's batch holds the pass
 * anyway; a full batch's next claim is made while its transfers run
 * (PREFETCH), and each channel's shard writes its outcomes on a second
 * thread and connection while its senders go on (RECORDER): the senders stop neither
 * for the claim nor for the outcomes' transaction.  The guarantees are the
 * same: every row sent is leased first, and recorded only while the lease
 * is ours.
 *
 * Metrics: notifications_dispatch_total{channel,status} (status sent, retry,
 * failed, contact_unknown), notifications_dispatch_duration_seconds{channel}
 * (histogram of one message's transfer: _bucket{le}, _sum, _count),
 * notifications_dispatch_lag_seconds (age of the oldest due row, 0 when
 * none).
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>

#include "notify.h"
#include "sdk/topics.h"
#include "dispatch.h"
#include "send.h"

static const struct pin_host_api *api;

/* The instant a row is due since: its creation, a quiet-hours not_before, a
 * retry's next_attempt_at or the end of a lapsed lease, whichever is last
 * (greatest ignores NULLs).  Indexed after the channel, with id, over the
 * Pending e-mail/SMS rows (sql/notifications/0810_dispatch_due_by_channel.sql,
 * the same expression and predicate): each channel's claim reads the oldest
 * due entries of its own channel, the lag the first of each.  (Ordered by
 * the due instant alone, a claim of one channel walked every due row of the
 * other ahead of its own: in a burst, each SMS claim passed over the whole
 * e-mail backlog.)
 * DUE_PLAN: both are planned at each execution (db_exec, not prepared): a
 * connection's generic plan made while the table held few rows is a
 * sequential scan that stays until the next ANALYZE, exactly when a burst
 * fills the table (doc/performance.md, consumers). */
#define DUE_AT "greatest(n.created_at, n.not_before, n.next_attempt_at, n.lease_until)"
/* the due rows of channel ch (the claim: each channel its own share; the
 * index's predicate spelt out: a parameter does not prove it) */
#define DUE_ROWS_OF(ch) "n.status = 'Pending' AND n.channel <> 'InApp'" \
	" AND n.channel = " ch " AND " DUE_AT " <= $1::timestamptz"

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
 * $3.  Up to $5 rows of EACH channel of $4: a backlog of one channel (20k
 * e-mails due before the SMS of the same reminders) does not hold the
 * other's senders idle.  The locked rows are a MATERIALIZED CTE, run once:
 * as a subquery of the UPDATE, a plan made before the table was analyzed
 * (a burst's first claim) can run the LIMITed, SKIP LOCKED selection again
 * for each row it joins -- more rows than the limit, and 20 s for 800 of
 * them (2026-12-05). */
static const char CLAIM_SQL[] =
	"WITH d AS MATERIALIZED ("
	"  SELECT q.id, q.addr, coalesce(q.addr, '') = '' AND q.age <= $6::bigint AS waits"
	"    FROM unnest($4::text[]) AS chan(ch) CROSS JOIN LATERAL"
	"         (SELECT n.id, " AGE_S " AS age,"
	"            coalesce(nullif(n.address, ''),"
	"              (SELECT CASE WHEN n.channel = 'Email' THEN c.email ELSE c.phone END"
	"                 FROM notifications.recipient_contacts c"
	"                WHERE c.user_id = n.recipient_user_id)) AS addr"
	"           FROM notifications.notifications AS n"
	"          WHERE " DUE_ROWS_OF("chan.ch")
	"          ORDER BY " DUE_AT ", n.id LIMIT $5::int"
	"          FOR UPDATE SKIP LOCKED) AS q)"
	"UPDATE notifications.notifications AS n"
	"   SET lease_until = CASE WHEN d.waits THEN NULL ELSE $2::timestamptz END,"
	"       lease_owner = CASE WHEN d.waits THEN NULL ELSE $3::uuid END,"
	"       last_error = CASE WHEN d.waits THEN 'NTF_CONTACT_UNKNOWN' ELSE n.last_error END,"
	"       next_attempt_at = CASE WHEN d.waits THEN $7::timestamptz"
	"                              ELSE n.next_attempt_at END,"
	"       address = coalesce(nullif(d.addr, ''), n.address)"
	"  FROM d"
	" WHERE n.id = d.id"
	" RETURNING n.id::text, n.channel, n.kind, n.title, n.body, n.attempts, d.addr,"
	"   " AGE_S ", n.recipient_user_id::text, d.waits, n.calendar";

enum { C_ID, C_CHANNEL, C_KIND, C_TITLE, C_BODY, C_ATTEMPTS, C_TO, C_AGE, C_USER, C_WAITS,
	C_CALENDAR };

/* the age of the oldest due row of the channels $2: the first entry of each
 * channel's part of the index */
static const char LAG_SQL[] =
	"SELECT coalesce(extract(epoch FROM $1::timestamptz - min(q.due)), 0)"
	"  FROM unnest($2::text[]) AS chan(ch) CROSS JOIN LATERAL"
	"       (SELECT " DUE_AT " AS due FROM notifications.notifications AS n"
	"         WHERE " DUE_ROWS_OF("chan.ch") " ORDER BY " DUE_AT " LIMIT 1) AS q";

/* The outcomes of a batch, written only while our lease holds: $2 is a
 * JSON array of {i (the row's index in the claim), id, st (Sent, Failed,
 * Pending), at (when the outcome was known: sent_at / failed_at), inc (1:
 * an attempt counted), pid (provider id), err, nxt (next attempt), rel
 * (true: not sent, the lease is only released)}; $1 our lease owner.  Rows
 * whose lease another pass holds now, or that are no longer Pending, are
 * not returned. */
static const char RECORD_SQL[] =
	"UPDATE notifications.notifications AS n"
	"   SET status = CASE WHEN o.rel THEN n.status ELSE o.st END,"
	"       attempts = n.attempts + o.inc,"
	"       sent_at = CASE WHEN o.rel THEN n.sent_at"
	"                      WHEN o.st = 'Sent' THEN o.at END,"
	"       failed_at = CASE WHEN o.rel THEN n.failed_at"
	"                        WHEN o.st = 'Failed' THEN o.at END,"
	"       provider_message_id = coalesce(o.pid, n.provider_message_id),"
	"       last_error = CASE WHEN o.rel THEN n.last_error ELSE o.err END,"
	"       next_attempt_at = CASE WHEN o.rel THEN n.next_attempt_at ELSE o.nxt END,"
	"       lease_until = NULL, lease_owner = NULL"
	"  FROM jsonb_to_recordset($2::jsonb) AS o(i int, id uuid, st text, at timestamptz,"
	"         inc int, pid text, err text, nxt timestamptz, rel boolean)"
	" WHERE n.id = o.id AND n.lease_owner = $1::uuid AND n.status = 'Pending'"
	" RETURNING n.id::text, n.recipient_user_id::text, n.channel, n.kind, n.status,"
	"   n.attempts, n.source_message_id::text, o.i";

enum { R_ID, R_USER, R_CHANNEL, R_KIND, R_STATUS, R_ATTEMPTS, R_SOURCE, R_I };

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

/* ---- one claimed row and its outcome ------------------------------------ */

enum { CH_EMAIL, CH_SMS, NCH };
static const char *const ch_name[NCH] = { "Email", "Sms" };

struct row {
	int ch;                 /* CH_EMAIL / CH_SMS */
	int send;               /* to be sent (leased, with an address) */
	int done;               /* has an outcome to record */
	const char *status;     /* Sent / Failed / Pending */
	int inc;                /* an attempt counted */
	int64_t at_us;          /* when the outcome was known */
	int64_t next_us;        /* Pending: the next attempt */
	struct ntf_send_result r;
};

/* ---- SEND: the batch's transfers at once --------------------------------- */

#define SENDERS_MAX 16          /* notify.dispatch_senders' upper bound */
#define SEND_WINDOW_US 20000000 /* a batch starts no send after this */

/* One sender: its transfer record (easy handle kept) and the row it sends. */
struct slot {
	struct ntf_xfer x;
	int row;                /* -1: free */
	int64_t t0;
};

/* The multi handles: [0] the job's thread's, [1] the second shard's of a
 * pass whose channels run apart (dispatch_job); each is used by one thread
 * at a time (a pass's shards are joined before the next pass), and its
 * connection cache keeps the connections between passes.  slots[c] are
 * channel c's senders: one thread sends a channel's rows at a time. */
enum { M_JOB, M_SHARD, NMULTI };
static CURLM *multis[NMULTI];
static struct slot slots[NCH][SENDERS_MAX];

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

/* The outcome of row i's send (r filled): counted, logged when not sent. */
static void outcome(PGresult *res, int i, struct row *w)
{
	const char *id = PQgetvalue(res, i, C_ID), *ch = ch_name[w->ch];
	int attempts = atoi(PQgetvalue(res, i, C_ATTEMPTS)) + 1;
	char att[16];

	snprintf(att, sizeof att, "%d", attempts);
	w->done = 1;
	w->inc = 1;
	w->at_us = api->now_us();
	if (w->r.outcome == NTF_SENT) {
		count(ch, "sent");
		w->status = "Sent";
	} else if (w->r.outcome == NTF_PERMANENT ||
			attempts >= api->config_num("notify.dispatch_max_attempts")) {
		count(ch, "failed");
		api->log(PIN_LOG_WARN, "notification dispatch: failed", "notificationId", id,
				"channel", ch, "attempts", att, "error", w->r.error, NULL);
		w->status = "Failed";
	} else {
		count(ch, "retry");
		api->log(PIN_LOG_INFO, "notification dispatch: will retry", "notificationId", id,
				"channel", ch, "attempts", att, "error", w->r.error, NULL);
		w->status = "Pending";
		w->next_us = api->now_us() + backoff_us(attempts);
	}
}

/* Starts row i on slot s of its channel: 1 when its transfer runs, 0 when
 * its outcome was decided without one (an address the sender refuses). */
static int start(CURLM *multi, PGresult *res, int i, struct row *w, struct slot *s)
{
	struct ntf_message m = { PQgetvalue(res, i, C_ID), PQgetvalue(res, i, C_TO),
		PQgetvalue(res, i, C_TITLE), PQgetvalue(res, i, C_BODY),
		/* the invitation of an appointment e-mail (invite.c), or NULL */
		PQgetisnull(res, i, C_CALENDAR) ? NULL : PQgetvalue(res, i, C_CALENDAR) };
	int rc = w->ch == CH_EMAIL ? ntf_smtp_start(&s->x, &m, &w->r) :
		ntf_sms_start(&s->x, &m, &w->r);

	if (rc == 0) {
		curl_easy_setopt(s->x.h, CURLOPT_PRIVATE, (void *)s);
		if (curl_multi_add_handle(multi, s->x.h) == CURLM_OK) {
			s->row = i;
			s->t0 = api->now_us();
			return 1;
		}
		/* cannot happen but out of memory: the transfer's outcome */
		if (w->ch == CH_EMAIL)
			ntf_smtp_finish(&s->x, CURLE_OUT_OF_MEMORY, &w->r);
		else
			ntf_sms_finish(&s->x, CURLE_OUT_OF_MEMORY, &w->r);
	}
	outcome(res, i, w);
	return 0;
}

/* The transfers that ended: their outcomes, their slots free. */
static int reap(CURLM *multi, PGresult *res, struct row *rows)
{
	CURLMsg *msg;
	int left, n = 0;

	while ((msg = curl_multi_info_read(multi, &left))) {
		struct slot *s = NULL;
		struct row *w;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
		curl_multi_remove_handle(multi, s->x.h);
		w = &rows[s->row];
		if (w->ch == CH_EMAIL)
			ntf_smtp_finish(&s->x, msg->data.result, &w->r);
		else
			ntf_sms_finish(&s->x, msg->data.result, &w->r);
		observe(ch_name[w->ch], (double)(api->now_us() - s->t0) / 1e6);
		outcome(res, s->row, w);
		s->row = -1;
		n++;
	}
	return n;
}

/* ---- PREFETCH: the next claim while the batch's transfers run ---------- */

/* A claim's parameters (CLAIM_SQL $1..$7) for the channels chans, made at
 * t: due at t, leased until t + dispatch_lease_s for a fresh owner. */
struct claim {
	char now[40], until[40], owner[37], lim[16], wait_max[24], next[40];
	const char *p[7];
	int64_t t;
};

/* when a row without a contact is looked at again: now +
 * notify.dispatch_contact_retry_s */
static void contact_retry_at(char *next, size_t len)
{
	api->fmt_time(api->now_us() + api->config_num("notify.dispatch_contact_retry_s") *
			1000000, next, len);
}

static void claim_init(struct claim *c, const char *chans, int64_t t)
{
	c->t = t;
	api->fmt_time(t, c->now, sizeof c->now);
	api->fmt_time(t + api->config_num("notify.dispatch_lease_s") * 1000000,
			c->until, sizeof c->until);
	api->uuid_v7(c->owner);
	snprintf(c->lim, sizeof c->lim, "%lld", api->config_num("notify.dispatch_batch"));
	snprintf(c->wait_max, sizeof c->wait_max, "%lld",
			api->config_num("notify.dispatch_contact_wait_max_s"));
	contact_retry_at(c->next, sizeof c->next);
	c->p[0] = c->now;
	c->p[1] = c->until;
	c->p[2] = c->owner;
	c->p[3] = chans;
	c->p[4] = c->lim;
	c->p[5] = c->wait_max;
	c->p[6] = c->next;
}

/* The next claim of a backlog, sent on the thread's connection as soon as
 * the batch's first transfers are under way and read while they run (libpq's
 * asynchronous calls; the socket polled with the transfers'): the senders
 * do not stop for the claim's round trip and statement.  Its rows are
 * leased from the moment it runs, as a claim made after the batch would be:
 * the batch's own rows are leased then, so the two never share a row.  The
 * connection does nothing else until the result is read (pf_wait), and the
 * batch's outcomes are written after that. */
struct prefetch {
	struct claim c;
	PGconn *conn;
	int state;              /* PF_IDLE, PF_SENT, PF_DONE */
	PGresult *res;          /* its result (libpq's: PQclear), NULL on failure */
};
enum { PF_IDLE, PF_SENT, PF_DONE };

static void pf_issue(struct prefetch *pf)
{
	pf->conn = api->db();
	pf->state = PF_DONE;
	/* DUE_PLAN: unnamed, planned at each execution as db_exec's */
	if (pf->conn && PQsendQueryParams(pf->conn, CLAIM_SQL, 7, NULL, pf->c.p, NULL, NULL, 0))
		pf->state = PF_SENT;
	else
		api->log(PIN_LOG_ERROR, "notification dispatch: cannot send the next claim", NULL);
}

/* reads what arrived of the claim's answer, without waiting */
static void pf_poll(struct prefetch *pf)
{
	if (!pf || pf->state != PF_SENT)
		return;
	if (!PQconsumeInput(pf->conn))
		return;                 /* the connection failed: pf_wait reads the error */
	while (pf->state == PF_SENT && !PQisBusy(pf->conn)) {
		PGresult *r = PQgetResult(pf->conn);

		if (!r)
			pf->state = PF_DONE;
		else if (!pf->res)
			pf->res = r;
		else
			PQclear(r);
	}
}

/* The claim's result, waited for (sent now when it was not yet): NULL when
 * it failed (logged). */
static PGresult *pf_wait(struct prefetch *pf)
{
	PGresult *r;

	if (pf->state == PF_IDLE)
		pf_issue(pf);
	if (pf->state == PF_SENT) {
		while ((r = PQgetResult(pf->conn))) {
			if (!pf->res)
				pf->res = r;
			else
				PQclear(r);
		}
		pf->state = PF_DONE;
	}
	r = pf->res;
	pf->res = NULL;
	if (r && PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		api->log(PIN_LOG_ERROR, "notification dispatch: the next claim failed",
				"sqlstate", st ? st : "", NULL);
		PQclear(r);
		r = NULL;
	}
	return r;
}

/* Sends the rows marked send, in claim order per channel, senders at once
 * per channel, on multi handle mi and the slots of the channels c0..c1-1
 * (the batch's own: a shard touches no other channel's slots); a row not
 * started by until keeps done 0 (released).  pf (or NULL): the next claim,
 * sent once the first transfers are under way, read while they run. */
static void send_batch(PGresult *res, struct row *rows, int n, int senders, int64_t until,
		int mi, int c0, int c1, struct prefetch *pf)
{
	int next[NCH] = { 0, 0 }, busy = 0, running;
	CURLM *multi = multis[mi];

	if (!multi && !(multi = multis[mi] = curl_multi_init())) {
		api->log(PIN_LOG_ERROR, "notification dispatch: curl_multi_init failed", NULL);
		return;
	}
	/* one connection per sender and server, kept idle between batches */
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)senders);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)(NCH * senders));
	for (;;) {
		int late = api->now_us() >= until;

		for (int c = c0; c < c1 && !late; c++)
			for (int k = 0; k < senders; k++) {
				struct slot *s = &slots[c][k];

				while (s->row < 0) {
					while (next[c] < n && !(rows[next[c]].send &&
							rows[next[c]].ch == c))
						next[c]++;
					if (next[c] >= n)
						break;
					busy += start(multi, res, next[c], &rows[next[c]], s);
					next[c]++;
				}
			}
		if (!busy)
			break;
		curl_multi_perform(multi, &running);
		if (pf && pf->state == PF_IDLE)
			pf_issue(pf);   /* the requests are out: the claim now */
		pf_poll(pf);
		if (reap(multi, res, rows) > 0) {
			busy = 0;
			for (int c = c0; c < c1; c++)
				for (int k = 0; k < SENDERS_MAX; k++)
					busy += slots[c][k].row >= 0;
			continue;
		}
		if (pf && pf->state == PF_SENT) {
			struct curl_waitfd w = { PQsocket(pf->conn), CURL_WAIT_POLLIN, 0 };

			curl_multi_poll(multi, &w, 1, 1000, NULL);
		} else {
			curl_multi_poll(multi, NULL, 0, 1000, NULL);
		}
	}
}

/* ---- RECORD: the batch's outcomes in one transaction --------------------- */

/* pin.notifications.dispatched.v1 of row i of rec (no PII) */
static json_object *dispatched(PGresult *rec, int i, int64_t at_us, const char *error)
{
	json_object *p = json_object_new_object();
	const char *st = PQgetvalue(rec, i, R_STATUS);
	char now[40];

	api->fmt_time(at_us, now, sizeof now);

	json_object_object_add(p, "notificationId",
			json_object_new_string(PQgetvalue(rec, i, R_ID)));
	json_object_object_add(p, "recipientUserId",
			json_object_new_string(PQgetvalue(rec, i, R_USER)));
	json_object_object_add(p, "channel", json_object_new_string(PQgetvalue(rec, i, R_CHANNEL)));
	json_object_object_add(p, "kind", json_object_new_string(PQgetvalue(rec, i, R_KIND)));
	json_object_object_add(p, "status", json_object_new_string(st));
	json_object_object_add(p, "attempts",
			json_object_new_int(atoi(PQgetvalue(rec, i, R_ATTEMPTS))));
	json_object_object_add(p, "sentAt", !strcmp(st, "Sent") ?
			json_object_new_string(now) : NULL);
	json_object_object_add(p, "failedAt", !strcmp(st, "Failed") ?
			json_object_new_string(now) : NULL);
	json_object_object_add(p, "failureCode", error && *error ?
			json_object_new_string_len(error, (int)strcspn(error, ":")) : NULL);
	json_object_object_add(p, "sourceMessageId",
			json_object_new_string(PQgetvalue(rec, i, R_SOURCE)));
	return p;
}

/* Writes the outcomes of the claimed rows (done, or leased and not sent:
 * released) and the dispatched events of the final ones, in one
 * transaction.  0, or PIN_ERR_DB (nothing written: the rows are taken
 * again after the lease, a possible duplicate each). */
static int record_batch(PGresult *res, struct row *rows, int n, const char *owner)
{
	json_object *arr = json_object_new_array();
	struct pin_outbox_msg *msgs;
	json_object **pl;
	char at[40], next[40];
	const char *p[2];
	PGresult *rec;
	int m, nm = 0, rc = PIN_ERR_DB, released = 0;
	unsigned char *got;

	for (int i = 0; i < n; i++) {
		json_object *o;

		if (!rows[i].done && !rows[i].send)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "i", json_object_new_int(i));
		json_object_object_add(o, "id", json_object_new_string(PQgetvalue(res, i, C_ID)));
		if (!rows[i].done) {
			released++;
			json_object_object_add(o, "st", json_object_new_string("Pending"));
			json_object_object_add(o, "inc", json_object_new_int(0));
			json_object_object_add(o, "rel", json_object_new_boolean(1));
		} else {
			json_object_object_add(o, "st", json_object_new_string(rows[i].status));
			json_object_object_add(o, "inc", json_object_new_int(rows[i].inc));
			json_object_object_add(o, "rel", json_object_new_boolean(0));
			api->fmt_time(rows[i].at_us, at, sizeof at);
			json_object_object_add(o, "at", json_object_new_string(at));
			if (*rows[i].r.provider_id)
				json_object_object_add(o, "pid",
						json_object_new_string(rows[i].r.provider_id));
			if (*rows[i].r.error)
				json_object_object_add(o, "err",
						json_object_new_string(rows[i].r.error));
			if (rows[i].next_us) {
				api->fmt_time(rows[i].next_us, next, sizeof next);
				json_object_object_add(o, "nxt", json_object_new_string(next));
			}
		}
		json_object_array_add(arr, o);
	}
	if (json_object_array_length(arr) == 0) {
		json_object_put(arr);
		return 0;
	}
	if (released) {
		char k[16];

		snprintf(k, sizeof k, "%d", released);
		api->log(PIN_LOG_WARN, "notification dispatch: rows not sent in time, released",
				"rows", k, NULL);
	}
	p[0] = owner;
	p[1] = json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN);
	if (api->db_begin() != 0) {
		json_object_put(arr);
		goto fail;
	}
	rec = api->db_exec_prepared("ntf_dispatch_record", RECORD_SQL, 2, p);
	json_object_put(arr);
	if (!rec || PQresultStatus(rec) != PGRES_TUPLES_OK) {
		api->db_rollback();
		goto fail;
	}
	m = PQntuples(rec);
	msgs = api->alloc(sizeof *msgs * (size_t)(m ? m : 1));
	pl = api->alloc(sizeof *pl * (size_t)(m ? m : 1));
	got = api->alloc((size_t)n + 1);
	for (int j = 0; j < m; j++) {
		int i = atoi(PQgetvalue(rec, j, R_I));
		const char *st = PQgetvalue(rec, j, R_STATUS);

		if (i < 0 || i >= n)    /* cannot be: the indexes we sent */
			continue;
		got[i] = 1;
		if (!strcmp(st, "Pending"))
			continue;
		pl[nm] = dispatched(rec, j, rows[i].at_us, rows[i].r.error);
		msgs[nm] = (struct pin_outbox_msg){ PC_TOPIC_NOTIFICATIONS_DISPATCHED,
			PQgetvalue(rec, j, R_ID), "pin.notifications.dispatched", "Notification",
			PQgetvalue(rec, j, R_ID), pl[nm] };
		nm++;
	}
	rc = api->outbox_put_many(NTF_OUTBOX, msgs, (size_t)nm, sizeof *msgs);
	for (int j = 0; j < nm; j++)
		json_object_put(pl[j]);
	if (rc != 0) {
		api->db_rollback();
		goto fail;
	}
	if (api->db_commit() != 0)
		goto fail;
	/* the lease ended and another pass owns the row now */
	for (int i = 0; i < n; i++)
		if ((rows[i].done || rows[i].send) && !got[i])
			api->log(PIN_LOG_WARN, "notification dispatch: lease lost before recording",
					"notificationId", PQgetvalue(res, i, C_ID),
					"channel", ch_name[rows[i].ch], NULL);
	return 0;
fail:
	{
		char k[16];

		snprintf(k, sizeof k, "%d", n);
		api->log(PIN_LOG_ERROR, "notification dispatch: cannot record the outcomes",
				"rows", k, NULL);
	}
	return PIN_ERR_DB;
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

static void update_lag(const char *chans, const char *now)
{
	const char *p[2] = { now, chans };
	PGresult *res = api->db_exec(LAG_SQL, 2, p);     /* planned now: DUE_PLAN */

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		api->metric_set("notifications_dispatch_lag_seconds", NULL,
				atof(PQgetvalue(res, 0, 0)));
}

#define PASS_MAX_US 5000000   /* claims of one pass while full, then the next pass */
/* A shard whose channel is still backlogged goes on past PASS_MAX_US while
 * the other shard still works (the pass waits for that one anyway), up to
 * PASS_HOLD_US; a stop waits at most that plus one batch. */
#define PASS_HOLD_US 10000000
/* A shard's pause before it claims again after a batch that was not full
 * while the other shard still works (the fan-out may still be writing the
 * rows of a burst: the sends go on as they come instead of after the pass). */
#define SHARD_PAUSE_US 50000

/* rows of the largest channel of c0..c1-1 in claim res */
static int rows_of(PGresult *res, int c0, int c1)
{
	int per[NCH] = { 0, 0 }, m = 0;

	for (int i = 0; i < PQntuples(res); i++)
		per[strcmp(PQgetvalue(res, i, C_CHANNEL), "Email") ? CH_SMS : CH_EMAIL]++;
	for (int c = c0; c < c1; c++)
		if (per[c] > m)
			m = per[c];
	return m;
}

/* RECORDER: a channel's shard writes a batch's outcomes on a thread and
 * connection of their own (a second shard of its own, api->run_shards)
 * while its senders go on with the next batch: the outcomes' transaction
 * (an UPDATE of 250 rows, the outbox rows, a WAL flush: 100-400 ms under
 * load, 2026-12-05) no longer stops the sends.  One batch is recorded at a
 * time: the next waits until the one before is written, so at most two
 * batches are sent and not yet recorded (each leased: a crash sends each
 * of their rows again at most once, as before). */
struct rec_batch {
	PGresult *res;          /* the claim */
	int own;                /* res is libpq's (PQclear once recorded) */
	struct row *rows;
	int n;
	char owner[37];
};

struct recorder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rec_batch b;
	int has;                /* b waits or is being written */
	int stop;               /* no more batches */
	atomic_int started;     /* the recorder's thread runs */
};

static void rec_free(struct rec_batch *b)
{
	if (b->own)
		PQclear(b->res);
}

/* the recorder's thread: batch after batch until stop */
static int rec_main(struct recorder *rc)
{
	atomic_store(&rc->started, 1);
	pthread_mutex_lock(&rc->mu);
	for (;;) {
		struct rec_batch b;

		while (!rc->has && !rc->stop)
			pthread_cond_wait(&rc->cv, &rc->mu);
		if (!rc->has)
			break;
		b = rc->b;
		pthread_mutex_unlock(&rc->mu);
		record_batch(b.res, b.rows, b.n, b.owner);
		rec_free(&b);
		pthread_mutex_lock(&rc->mu);
		rc->has = 0;
		pthread_cond_broadcast(&rc->cv);
	}
	pthread_mutex_unlock(&rc->mu);
	return 0;
}

/* hands b to the recorder once the one before is written; 0 when the
 * recorder's thread does not run (the caller records b itself) */
static int rec_put(struct recorder *rc, const struct rec_batch *b)
{
	if (!rc || !atomic_load(&rc->started))
		return 0;
	pthread_mutex_lock(&rc->mu);
	while (rc->has)
		pthread_cond_wait(&rc->cv, &rc->mu);
	rc->b = *b;
	rc->has = 1;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->mu);
	return 1;
}

/* waits for the last batch to be written, then lets the recorder end */
static void rec_stop(struct recorder *rc)
{
	pthread_mutex_lock(&rc->mu);
	while (rc->has)
		pthread_cond_wait(&rc->cv, &rc->mu);
	rc->stop = 1;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->mu);
}

/* One claimed batch: its rows of the channels c0..c1-1 (a pass's first
 * claim holds both channels' rows, which two shards then send) sent on
 * multi handle mi, the next claim pf (or NULL) made meanwhile (its result
 * in *next, NULL when it failed), then the batch's outcomes recorded, by
 * the recorder rc when there is one.  own: res is libpq's, freed once
 * recorded.  Returns the batch's rows of c0..c1-1. */
static int dispatch_batch(PGresult *res, int own, const char *owner, int64_t t,
		int mi, int c0, int c1, struct prefetch *pf, PGresult **next,
		struct recorder *rc)
{
	int n = PQntuples(res);
	struct row *rows = api->alloc(sizeof *rows * (size_t)(n ? n : 1));
	int senders = (int)api->config_num("notify.dispatch_senders"), mine = 0;
	struct rec_batch b = { res, own, rows, n, "" };

	if (senders < 1)
		senders = 1;
	if (senders > SENDERS_MAX)
		senders = SENDERS_MAX;
	for (int i = 0; i < n; i++) {
		struct row *w = &rows[i];

		w->ch = strcmp(PQgetvalue(res, i, C_CHANNEL), "Email") ? CH_SMS : CH_EMAIL;
		if (w->ch < c0 || w->ch >= c1)
			continue;       /* the other shard's: neither sent nor recorded here */
		mine++;
		if (waits(res, i)) {     /* put back by the claim: counted once written */
			count(ch_name[w->ch], "contact_unknown");
		} else if (contact_unknown(res, i)) {
			/* Seed 001's limit: a leased row without a contact is one
			 * that waited longer than dispatch_contact_wait_max_s (the
			 * claim puts the younger ones back itself, "waits", from the
			 * same address it returns): Failed NTF_CONTACT_UNKNOWN, final,
			 * no attempt counted */
			count(ch_name[w->ch], "failed");
			w->done = 1;
			w->at_us = api->now_us();
			w->status = "Failed";
			snprintf(w->r.error, sizeof w->r.error, "NTF_CONTACT_UNKNOWN");
		} else {
			w->send = 1;
		}
	}
	send_batch(res, rows, n, senders, t + SEND_WINDOW_US, mi, c0, c1, pf);
	if (pf)
		*next = pf_wait(pf);    /* the connection is free again */
	snprintf(b.owner, sizeof b.owner, "%s", owner);
	if (!rec_put(rc, &b)) {
		record_batch(res, rows, n, owner);
		rec_free(&b);
	}
	return mine;
}

/* A pass: its start, its first claim (both channels) with its parameters,
 * and its shards' state: SH_DONE, SH_RUNNING, SH_FULL (running, its last
 * claim came back full), SH_RIDING (past PASS_HOLD_US, claiming only while
 * the other shard's batch holds the pass anyway). */
struct pass {
	int64_t t0;
	PGresult *first;
	struct claim fc;
	atomic_int state[NCH];
};
enum { SH_DONE, SH_RUNNING, SH_FULL, SH_RIDING };

/* Whether a loop claims again after a batch (full or not) at el after the
 * pass's start: shard sh (-1: not a shard) of ps.  A shard claims while
 * full, or while the other's last claim was full (rows still coming), up
 * to PASS_HOLD_US; past it, while the other shard still works on a batch
 * (the pass waits for that one anyway: an e-mail batch takes seconds, the
 * SMS senders need not stand idle meanwhile), unless the other one is
 * past it too (SH_RIDING: then both end, the pass ends after the batches
 * under way). */
static int again(struct pass *ps, int sh, int full, int64_t el)
{
	int o;

	if (sh < 0)
		return full && el < PASS_MAX_US;
	o = atomic_load(&ps->state[1 - sh]);
	if (el < PASS_HOLD_US) {
		atomic_store(&ps->state[sh], full ? SH_FULL : SH_RUNNING);
		return full || o == SH_FULL;
	}
	if (o == SH_FULL || o == SH_RUNNING) {
		atomic_store(&ps->state[sh], SH_RIDING);
		return 1;
	}
	return 0;
}

/* Batches of the channels chans (c0..c1-1 their indexes) on multi handle
 * mi, from res (claimed with *c; NULL: claimed here first), claimed again
 * while they come back full, until ps->t0 + PASS_MAX_US; in shard sh (the
 * channel's index; -1: not a shard) until ps->t0 + PASS_HOLD_US, and after
 * a batch that was not full also while the other shard's last claim was
 * full (after SHARD_PAUSE_US: rows still being written).  The next claim of
 * a full batch is made while its transfers run (PREFETCH); the outcomes are
 * written by rc when there is one (RECORDER).  Rows claimed, or PIN_ERR_DB
 * when the first claim failed. */
static int claim_loop(struct pass *ps, const char *chans, int mi, int c0, int c1, int sh,
		PGresult *res, const struct claim *c, struct recorder *rc)
{
	int lim = (int)api->config_num("notify.dispatch_batch"), total = 0, own = 0;
	struct claim cur;
	struct prefetch pf;

	if (res) {
		cur = *c;
	} else {
		claim_init(&cur, chans, api->now_us());
		res = api->db_exec(CLAIM_SQL, 7, cur.p);           /* DUE_PLAN */
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
			return PIN_ERR_DB;
	}
	for (;;) {
		int full = rows_of(res, c0, c1) >= lim;
		PGresult *next = NULL;

		if (full && again(ps, sh, 1, api->now_us() - ps->t0)) {
			/* a backlog: the next claim while this batch is sent */
			memset(&pf, 0, sizeof pf);
			claim_init(&pf.c, chans, api->now_us());
			total += dispatch_batch(res, own, cur.owner, cur.t, mi, c0, c1, &pf, &next,
					rc);
			if (!next)
				break;
			res = next;
			own = 1;
			cur = pf.c;     /* its owner and time (p[] is not used again) */
			continue;
		}
		total += dispatch_batch(res, own, cur.owner, cur.t, mi, c0, c1, NULL, NULL, rc);
		if (!again(ps, sh, full, api->now_us() - ps->t0))
			break;
		if (!full) {
			struct timespec ts = { 0, SHARD_PAUSE_US * 1000L };

			nanosleep(&ts, NULL);
		}
		claim_init(&cur, chans, api->now_us());
		res = api->db_exec(CLAIM_SQL, 7, cur.p);           /* DUE_PLAN */
		own = 0;
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
			break;
	}
	return total;
}

/* A channel shard's two: its senders (k 0, the shard's thread) and its
 * recorder (k 1, a thread and connection of its own). */
struct chan_pipe {
	struct pass *ps;
	int ch;                 /* CH_EMAIL or CH_SMS */
	struct recorder rc;
};

static int chan_pipe_shard(void *ud, int k, int n)
{
	struct chan_pipe *cp = ud;
	int rc;

	(void)n;
	if (k == 1)
		return rec_main(&cp->rc);
	rc = claim_loop(cp->ps, cp->ch == CH_EMAIL ? "{Email}" : "{Sms}",
			cp->ch == CH_EMAIL ? M_JOB : M_SHARD, cp->ch, cp->ch + 1, cp->ch,
			cp->ps->first, &cp->ps->fc, &cp->rc);
	rec_stop(&cp->rc);
	return rc;
}

/* Shard k of a pass whose channels run apart: channel k alone, its rows of
 * the pass's first claim first; shard 0 (e-mail) on the job's thread and
 * multi handle, shard 1 (SMS) on its own thread, connection and multi
 * handle (api->run_shards); each with its recorder on a thread and
 * connection of its own. */
static int channel_shard(void *ud, int k, int n)
{
	struct chan_pipe cp = { .ps = ud, .ch = k };
	int rc;

	(void)n;
	pthread_mutex_init(&cp.rc.mu, NULL);
	pthread_cond_init(&cp.rc.cv, NULL);
	/* the recorder's thread; without it (none started) the senders
	 * record themselves and it returns at once after them */
	rc = api->run_shards(2, chan_pipe_shard, &cp);
	pthread_cond_destroy(&cp.rc.cv);
	pthread_mutex_destroy(&cp.rc.mu);
	atomic_store(&cp.ps->state[k], SH_DONE);
	return rc;
}

/* A pass: the first claim takes both channels' due rows in one statement
 * (a quiet pass stays one claim and one transaction).  When it comes back
 * full and both channels are configured, the pass runs each channel on its
 * own (two shards at once), from that claim's rows on: a channel claims
 * its next batch while its own is sent and goes on while the other still
 * works, so the SMS senders neither wait for the e-mails' slower batches
 * nor stop at the pass's end while the e-mail shard holds it
 * (doc/performance.md, "The notify dispatcher"). */
static int dispatch_job(void *ud)
{
	const char *chans = channels();
	struct pass ps = { .t0 = api->now_us() };
	PGresult *res;
	char now[40];

	(void)ud;
	if (!chans)
		return 0;
	/* the age of the oldest due row, once per pass (the first entry of
	 * each channel in ix_notifications_due_channel) */
	api->fmt_time(ps.t0, now, sizeof now);
	update_lag(chans, now);
	claim_init(&ps.fc, chans, api->now_us());
	res = api->db_exec(CLAIM_SQL, 7, ps.fc.p);             /* DUE_PLAN */
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return PIN_ERR_DB;
	if (rows_of(res, 0, NCH) >= api->config_num("notify.dispatch_batch") &&
			!strcmp(chans, "{Email,Sms}") && PIN_API_HAS(api, run_shards)) {
		ps.first = res;
		atomic_init(&ps.state[CH_EMAIL], SH_FULL);
		atomic_init(&ps.state[CH_SMS], SH_FULL);
		return api->run_shards(NCH, channel_shard, &ps);
	}
	return claim_loop(&ps, chans, M_JOB, 0, NCH, -1, res, &ps.fc, NULL);
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
	for (int c = 0; c < NCH; c++)
		for (int k = 0; k < SENDERS_MAX; k++)
			slots[c][k].row = -1;
	if (!PIN_API_HAS(a, outbox_put_many) || !PIN_API_HAS(reg, outbox)) {
		snprintf(err, errlen, "notify: the host lacks ABI 1.4 (outbox_put_many)");
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
	for (int c = 0; c < NCH; c++)
		for (int k = 0; k < SENDERS_MAX; k++)
			ntf_xfer_close(&slots[c][k].x);
	for (int m = 0; m < NMULTI; m++) {
		if (multis[m])
			curl_multi_cleanup(multis[m]);  /* closes the kept connections (QUIT) */
		multis[m] = NULL;
	}
	curl_global_cleanup();
}
