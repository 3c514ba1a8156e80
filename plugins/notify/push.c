/* push.c -- real-time in-app notifications, the publisher side (issue 10
 * item 4): the worker job `inapp-publish` (default every 250 ms) takes
 * committed, unpublished InApp rows with FOR UPDATE SKIP LOCKED (two worker
 * hosts never push one row at the same time), POSTs
 *   {id, kind, title, body, deepLink, createdAt}
 * to <nchan_publish_url>ntf.<recipient> (nginx's loopback-only nchan
 * publisher location) and marks the row published in the same transaction.
 *
 * Throughput (issue 31 item 2, doc/performance.md "Real time under
 * subscribers"): the POSTs of a take go out on PUSH_LANES kept-alive
 * connections at once (one libcurl multi that lives as long as the job, so
 * a pass opens no connection), a recipient's rows always on the same lane
 * in the take's order (one channel gets its messages in created_at order);
 * a take that came back full is followed by the next at once, for up to
 * PASS_BUDGET_US, not after the job's interval; the take's outcomes go to
 * the outbox in one statement.  Before (2026-12-05, 160c414) a pass opened
 * a connection, POSTed serially, wrote one outbox INSERT per row (~1.2 ms a
 * row on the bench machine, the INSERTs more than half) and took at most
 * 100 rows per interval: at most ~270 rows/s there, and a burst above that
 * queued for seconds (~600 rows/s: p99 26.8 s; after: 0.33 s).
 *
 * Delivery is at least once: a host killed between the POST and the commit
 * pushes the row again (same id: clients de-duplicate on it).  A failed POST
 * (nginx down, non-2xx) backs the row off (1 s, 2 s, ... 60 s) and counts
 * notifications_inapp_publish_failures_total; a transport error ends the
 * pass.  Rows older than nchan_publish_max_age_s (3600) are given up without
 * a push (the feed has them).  Without nchan_publish_url the job does nothing.
 *
 * The final outcome of each row (issue 30 item 5, seed 001 step 7: "the
 * final outcome is emitted as pin.notifications.dispatched.v1 by the
 * dispatcher") goes to notifications.outbox in the transaction that marks
 * the row published, like the e-mail and SMS dispatcher's: channel InApp,
 * status Sent (nchan accepted it for the user's channel) or Failed with
 * failureCode NTF_INAPP_EXPIRED (given up unpushed).  The row's own status
 * stays Pending until the user reads it (the feed's unread state). */
#include "config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "sdk/sdk.h"
#include "notify.h"
#include "dispatch.h"

#define JOB_NAME "inapp-publish"
#define BATCH 100
#define BACKOFF_MAX_S 60
#define PUSH_LANES 4                    /* POSTs in flight at once */
#define PASS_BUDGET_US 2000000LL        /* full takes back to back, at most */

/* Set once in init (main thread), read-only afterwards. */
static const char *pub_url;
static long long timeout_ms = 2000;
static long long max_age_s = 3600;

/* The job's connections to the publisher (its ud, freed at shutdown): one
 * multi and PUSH_LANES easy handles; only the job's thread uses them. */
struct pusher {
	CURLM *m;
	CURL *h[PUSH_LANES];
	struct curl_slist *hl;
};

static size_t discard(char *d, size_t s, size_t n, void *ud)
{
	(void)d;
	(void)ud;
	return s * n;
}

static void pusher_free(void *ud)
{
	struct pusher *ps = ud;

	if (!ps)
		return;
	for (int l = 0; l < PUSH_LANES; l++)
		if (ps->h[l])
			curl_easy_cleanup(ps->h[l]);
	if (ps->m)
		curl_multi_cleanup(ps->m);
	curl_slist_free_all(ps->hl);
	free(ps);
}

static struct pusher *pusher_new(void)
{
	struct pusher *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->m = curl_multi_init();
	ps->hl = curl_slist_append(NULL, "Content-Type: application/json");
	for (int l = 0; l < PUSH_LANES; l++)
		ps->h[l] = curl_easy_init();
	if (!ps->m || !ps->hl) {
		pusher_free(ps);
		return NULL;
	}
	for (int l = 0; l < PUSH_LANES; l++)
		if (!ps->h[l]) {
			pusher_free(ps);
			return NULL;
		}
	return ps;
}

/* The POSTs of one take: row i to url[i] with body[i] (NULL: not pushed),
 * on lane lane[i], a lane's rows in index order.  Sets res[i]: 0 on 2xx, 1
 * on another status, -1 on a transport error (nginx unreachable, timeout),
 * 2 when not attempted, and status[i].  After a transport error nothing
 * more starts (those in flight finish): the rest waits for the next pass. */
static void post_all(struct pusher *ps, int n, char **url, char **body,
		const int *lane, int *res, long *status)
{
	int cur[PUSH_LANES], pos[PUSH_LANES], stop = 0, busy = 0;

	for (int l = 0; l < PUSH_LANES; l++) {
		cur[l] = -1;
		pos[l] = 0;
	}
	for (int i = 0; i < n; i++) {
		res[i] = 2;
		status[i] = 0;
	}
	for (;;) {
		int running, q;
		CURLMsg *msg;

		for (int l = 0; l < PUSH_LANES && !stop; l++) {
			CURL *c = ps->h[l];
			int i = pos[l];

			if (cur[l] >= 0)
				continue;
			while (i < n && (lane[i] != l || !body[i]))
				i++;
			pos[l] = i + 1;
			if (i >= n)
				continue;
			curl_easy_setopt(c, CURLOPT_URL, url[i]);
			curl_easy_setopt(c, CURLOPT_HTTPHEADER, ps->hl);
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body[i]);
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body[i]));
			curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
			curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
			curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
			if (curl_multi_add_handle(ps->m, c) != CURLM_OK) {
				res[i] = -1;
				stop = 1;
				break;
			}
			cur[l] = i;
			busy++;
		}
		if (!busy)
			return;
		curl_multi_perform(ps->m, &running);
		while ((msg = curl_multi_info_read(ps->m, &q))) {
			int l = 0, i;

			if (msg->msg != CURLMSG_DONE)
				continue;
			while (l < PUSH_LANES && ps->h[l] != msg->easy_handle)
				l++;
			if (l == PUSH_LANES || (i = cur[l]) < 0)
				continue;
			if (msg->data.result == CURLE_OK) {
				curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE,
					&status[i]);
				res[i] = status[i] >= 200 && status[i] < 300 ? 0 : 1;
			} else {
				res[i] = -1;
				stop = 1;
			}
			curl_multi_remove_handle(ps->m, msg->easy_handle);
			cur[l] = -1;
			busy--;
		}
		if (busy)
			curl_multi_wait(ps->m, NULL, 0, 100, NULL);   /* 7.28: configure asks >= 7.60 */
	}
}

/* the lane of a recipient: a channel's rows go out one after the other */
static int lane_of(const char *user)
{
	uint32_t h = 2166136261u;

	for (; *user; user++)
		h = (h ^ (unsigned char)*user) * 16777619u;
	return (int)(h % PUSH_LANES);
}

/* the pushed message: a row of the take as {id, kind, title, body,
 * deepLink, createdAt} */
static const struct pc_jfield message_f[] = {
	{ "id", "id", PC_J_STR },
	{ "kind", "kind", PC_J_STR },
	{ "title", "title", PC_J_STR },
	{ "body", "body", PC_J_STR },
	{ "deepLink", "deep_link", PC_J_STR },
	{ "createdAt", "created_us", PC_J_TIME },
};

/* pin.notifications.dispatched.v1 of take row i (no PII, as dispatch.c's):
 * Sent after a push, Failed NTF_INAPP_EXPIRED for a row given up.  The
 * payload (the caller puts it), written with the take's others in one
 * outbox_put_many. */
static json_object *outcome(const PGresult *res, int i, int sent, const char *now)
{
	json_object *p = json_object_new_object();
	const char *id = PQgetvalue(res, i, 0);
	int attempts = atoi(PQgetvalue(res, i, 7)) + (sent ? 1 : 0);

	json_object_object_add(p, "notificationId", json_object_new_string(id));
	json_object_object_add(p, "recipientUserId",
			json_object_new_string(PQgetvalue(res, i, 1)));
	json_object_object_add(p, "channel", json_object_new_string("InApp"));
	json_object_object_add(p, "kind", json_object_new_string(PQgetvalue(res, i, 2)));
	json_object_object_add(p, "status", json_object_new_string(sent ? "Sent" : "Failed"));
	json_object_object_add(p, "attempts", json_object_new_int(attempts));
	json_object_object_add(p, "sentAt", sent ? json_object_new_string(now) : NULL);
	json_object_object_add(p, "failedAt", sent ? NULL : json_object_new_string(now));
	json_object_object_add(p, "failureCode", sent ? NULL :
			json_object_new_string("NTF_INAPP_EXPIRED"));
	json_object_object_add(p, "sourceMessageId", PQgetisnull(res, i, 9) ? NULL :
			json_object_new_string(PQgetvalue(res, i, 9)));
	return p;
}

/* the outcomes of the ndone rows done[] / sent[] in one statement: 0 or
 * the outbox's error */
static int emit_all(const PGresult *res, char **done, const int *sent, int ndone,
		const char *now)
{
	struct pin_outbox_msg *m = pc_api->alloc(sizeof(*m) * (size_t)ndone);
	int rc;

	for (int j = 0; j < ndone; j++) {
		int i = (sent[j] > 0 ? sent[j] : -sent[j]) - 1;

		m[j] = (struct pin_outbox_msg){ PC_TOPIC_NOTIFICATIONS_DISPATCHED, done[j],
			"pin.notifications.dispatched", "Notification", done[j],
			outcome(res, i, sent[j] > 0, now) };
	}
	rc = pc_api->outbox_put_many(NTF_OUTBOX, m, (size_t)ndone, sizeof(*m));
	for (int j = 0; j < ndone; j++)
		json_object_put(m[j].payload);
	return rc;
}

/* "{a,b}" text array of the ids in v[0..n) */
static char *id_array(char **v, int n)
{
	size_t len = 3 + (size_t)n * 37;
	char *s = pc_api->alloc(len), *p = s;

	*p++ = '{';
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", v[i]);
	*p++ = '}';
	*p = '\0';
	return s;
}

/* One take: at most BATCH rows, pushed, marked and their outcomes written
 * in one transaction.  Returns the rows done (pushed or given up) or an
 * error; *full when the take came back full and nothing stopped it, so the
 * caller takes the next at once. */
static int take(struct pusher *ps, int *full)
{
	int64_t now = pc_api->now_us();
	const char *p[4];
	char lim[16], **done, now_txt[40], **url, **body;
	int *sent = NULL;       /* per done row: take row + 1, negative: given up */
	int *lane, *res;
	long *status;
	struct pc_colmap msg;
	PGresult *res_take, *up;
	int n, ndone = 0, pushed = 0, rc = 0, transport = 0;

	*full = 0;
	snprintf(lim, sizeof(lim), "%d", BATCH);
	pc_api->fmt_time(now, now_txt, sizeof(now_txt));
	p[0] = pc_time_param(now);
	p[1] = lim;
	if (pc_api->db_begin() < 0)
		return PIN_ERR_DB;
	/* take and lag are planned at each execution (not prepared): a generic
	 * plan made while the table held no unpublished row is a sequential scan
	 * that stays until the next ANALYZE, exactly during a burst (doc/performance.md,
	 * consumers) */
	res_take = pc_api->db_exec(
		"SELECT id, recipient_user_id, kind, title, body, deep_link, "
		"  (extract(epoch FROM created_at) * 1000000)::bigint AS created_us, "
		"  publish_attempts, "
		"  created_at < $1::timestamptz - make_interval(secs => $3::int) AS too_old, "
		"  source_message_id "
		"FROM notifications.notifications "
		"WHERE channel = 'InApp' AND published_at IS NULL "
		"  AND (publish_next_at IS NULL OR publish_next_at <= $1::timestamptz) "
		"ORDER BY created_at, id LIMIT $2::int FOR UPDATE SKIP LOCKED", 3,
		(const char *[]){ p[0], p[1], pc_api->sprintf("%lld", max_age_s) });
	if (!res_take || PQresultStatus(res_take) != PGRES_TUPLES_OK) {
		rc = PIN_ERR_DB;
		goto out;
	}
	n = PQntuples(res_take);
	if (n == 0)
		goto commit;
	if (pc_colmap_init(&msg, message_f, PC_NFIELDS(message_f), res_take) < 0) {
		rc = PIN_ERR;
		goto out;
	}
	done = pc_api->alloc(sizeof(char *) * (size_t)n);
	sent = pc_api->alloc(sizeof(int) * (size_t)n);
	url = pc_api->alloc(sizeof(char *) * (size_t)n);
	body = pc_api->alloc(sizeof(char *) * (size_t)n);
	lane = pc_api->alloc(sizeof(int) * (size_t)n);
	res = pc_api->alloc(sizeof(int) * (size_t)n);
	status = pc_api->alloc(sizeof(long) * (size_t)n);
	for (int i = 0; i < n; i++) {
		const char *user = PQgetvalue(res_take, i, 1);
		json_object *m;

		url[i] = NULL;
		body[i] = NULL;
		lane[i] = lane_of(user);
		if (PQgetvalue(res_take, i, 8)[0] == 't')
			continue;       /* too old to be news: the feed has it */
		m = pc_colmap_json(&msg, res_take, i);
		url[i] = pc_api->sprintf("%sntf.%s", pub_url, user);
		body[i] = pc_api->strdup(json_object_to_json_string_ext(m,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(m);
	}
	post_all(ps, n, url, body, lane, res, status);
	for (int i = 0; i < n; i++) {
		const char *id = PQgetvalue(res_take, i, 0);

		if (!body[i]) {
			sent[ndone] = -(i + 1);
			done[ndone++] = (char *)id;
			pc_api->metric_add("notifications_inapp_publish_expired_total", NULL, 1);
			continue;
		}
		if (res[i] == 2)
			continue;       /* not attempted: the next pass */
		if (res[i] == 0) {
			sent[ndone] = i + 1;
			done[ndone++] = (char *)id;
			pushed++;
			continue;
		}
		/* back off this row: 1, 2, 4 ... 60 s */
		{
			int att = atoi(PQgetvalue(res_take, i, 7)) + 1;
			long long back = att >= 7 ? BACKOFF_MAX_S : 1LL << (att - 1);
			const char *q[3] = { id, pc_time_param(now + back * 1000000LL),
				pc_api->sprintf("%d", att) };

			if (back > BACKOFF_MAX_S)
				back = BACKOFF_MAX_S;
			up = pc_api->db_exec_prepared("ntf_push_retry",
				"UPDATE notifications.notifications SET publish_attempts = $3::int, "
				"publish_next_at = $2::timestamptz WHERE id = $1::uuid", 3, q);
			if (!up || PQresultStatus(up) != PGRES_COMMAND_OK) {
				rc = PIN_ERR_DB;
				goto out;
			}
		}
		if (res[i] < 0)
			transport = 1;
		pc_api->metric_add("notifications_inapp_publish_failures_total",
			res[i] < 0 ? "reason=\"transport\"" : "reason=\"status\"", 1);
		pc_api->log(PIN_LOG_WARN, "in-app publish failed", "notificationId", id,
			"status", pc_api->sprintf("%ld", status[i]), NULL);
	}
	if (ndone) {
		const char *q[2] = { id_array(done, ndone), p[0] };

		up = pc_api->db_exec(           /* planned now, as the take */
			"UPDATE notifications.notifications SET published_at = $2::timestamptz, "
			"publish_next_at = NULL WHERE id = ANY($1::uuid[])", 2, q);
		if (!up || PQresultStatus(up) != PGRES_COMMAND_OK) {
			rc = PIN_ERR_DB;
			goto out;
		}
		/* the final outcomes, in the same transaction, one statement
		 * (one INSERT per row was 0.8 ms a row of the take, more than
		 * its POST: 2026-12-05) */
		if (emit_all(res_take, done, sent, ndone, now_txt) != 0) {
			rc = PIN_ERR_DB;
			goto out;
		}
	}
commit:
	if (pc_api->db_commit() < 0) {
		rc = PIN_ERR_DB;
		goto out;
	}
	if (pushed)
		pc_api->metric_add("notifications_inapp_published_total", NULL, pushed);
	*full = n == BATCH && !transport;
	rc = ndone;
out:
	if (rc < 0)
		pc_api->db_rollback();
	return rc;
}

static int publish(void *ud)
{
	struct pusher *ps = ud;
	int64_t t0 = pc_api->now_us();
	const char *p[1];
	PGresult *res;
	int total = 0, rc, full;

	if (!pub_url || !ps)
		return 0;
	/* a burst: full takes back to back, within the budget (the scheduler's
	 * stop is seen between passes) */
	do {
		rc = take(ps, &full);
		if (rc < 0)
			return total ? total : rc;
		total += rc;
	} while (full && pc_api->now_us() - t0 < PASS_BUDGET_US);
	p[0] = pc_time_param(pc_api->now_us());
	res = pc_api->db_exec(
		"SELECT coalesce(extract(epoch FROM $1::timestamptz - min(created_at)), 0) "
		"FROM notifications.notifications "
		"WHERE channel = 'InApp' AND published_at IS NULL", 1, p);
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		pc_api->metric_set("notifications_inapp_publish_lag_seconds", NULL,
			atof(PQgetvalue(res, 0, 0)));
	return total;
}

int ntf_push_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, NTF_PUSH_INTERVAL_MS, publish, NULL, pusher_free };
	const char *u = pc_api->config_str("nchan_publish_url");

	/* bounds and scheme: checked by the host against the declaration */
	timeout_ms = pc_api->config_num("nchan_publish_timeout_ms");
	max_age_s = pc_api->config_num("nchan_publish_max_age_s");
	if (*u)
		pub_url = u;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		snprintf(err, errlen, "curl_global_init failed");
		return -1;
	}
	if (!(j.ud = pusher_new())) {
		snprintf(err, errlen, "notify: cannot set up the in-app publisher");
		return -1;
	}
	if (reg->job(reg, &j) < 0) {
		pusher_free(j.ud);
		snprintf(err, errlen, "notify: cannot register job " JOB_NAME);
		return -1;
	}
	return 0;
}
