/*
 * test_metrics.c -- issue 30 item 4: the seeds' metric names, exactly.
 *
 * Seeds 001 (notifications consumer) and 004 (CRM booking consumer) name
 * the metrics the platform's dashboards and the other services use.  After
 * a real flow through both hosts (an event with a client created and
 * cancelled through the API host, its notifications enqueued by the worker;
 * CRM booking events; a stale reminder; dead letters decided by the plugin
 * and by the host) every seed-named series is found in a scrape of the two
 * hosts, with the seed's labels; the DLQ counters count the dead letters
 * the host decides itself; the seed's lag gauge grows while the consumer is
 * stalled and is 0 once it caught up; and every metric an alert rule or the
 * Grafana dashboard queries exists in a real scrape.
 */
#include "config.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include "harness.h"

#define NGROUP "notifications-calendar-events"
#define BGROUP "calendar-crm-booking-events"
#define DGROUP "calendar-crm-deal-events"
#define WAIT_MS 60000

/* the seeds' lists, verbatim (seed 001 "Metrics", seed 004 "Metrics"):
 * name, then a label set a series must carry ("" none), then whether the
 * flow below must have moved it (> 0) */
static const struct seed_metric {
	const char *seed, *name, *labels;
	int moved;
} seed_metrics[] = {
	{ "001", "notifications_enqueue_duration_ms_count", "", 1 },
	{ "001", "notifications_enqueued_total", "kind=\"AppointmentCancelled\",channel=\"InApp\"", 1 },
	{ "001", "notifications_skipped_total", "reason=\"stale-reminder\"", 1 },
	{ "001", "notifications_dlq_total", "", 1 },
	{ "001", "notifications_consumer_lag_seconds", "", 0 },
	{ "004", "calendar_crm_booking_sync_consume_duration_ms_count", "", 1 },
	{ "004", "calendar_crm_booking_sync_deadlines_created_total", "phase=\"Reserve\"", 1 },
	{ "004", "calendar_crm_booking_sync_deadlines_completed_total", "", 1 },
	{ "004", "calendar_crm_booking_sync_deadlines_rescheduled_total", "", 1 },
	{ "004", "calendar_crm_booking_sync_deadlines_cancelled_total", "", 1 },
	{ "004", "calendar_crm_booking_sync_skipped_total", "reason=\"business-duplicate\"", 1 },
	{ "004", "calendar_crm_booking_sync_replica_not_found_total", "", 0 },
	{ "004", "calendar_crm_booking_sync_dlq_total", "", 1 },
	{ "004", "calendar_crm_booking_sync_contract_mismatch_total", "", 1 },
	{ "004", "calendar_crm_booking_sync_lag_seconds", "", 0 },
};

/* ------------------------------------------------------------- scrapes */

static char *get_url(const char *url)
{
	struct h_buf b = { NULL, 0 };
	CURL *c = curl_easy_init();
	long code = 0;
	char *out;

	ck_assert(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	ck_assert_msg(curl_easy_perform(c) == CURLE_OK, "GET %s failed", url);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	ck_assert_msg(code == 200, "GET %s: %ld", url, code);
	out = h_strdup(b.p ? b.p : "");
	free(b.p);
	curl_easy_cleanup(c);
	return out;
}

static char *scrape_worker(void)
{
	return get_url(h_env("PIN_WORKER_METRICS_URL"));
}

static char *scrape_api(void)
{
	struct h_resp *r = h_get("/metrics", NULL);

	ck_assert_msg(r->status == 200, "API /metrics: %ld", r->status);
	return h_strdup(r->body);
}

/* The value of the first series of name (exactly that name) whose label set
 * contains labels ("" any); NAN when there is none. */
static double series(const char *text, const char *name, const char *labels)
{
	size_t nl = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end, *v;

		if (*l == '#' || strncmp(l, name, nl) || (l[nl] != ' ' && l[nl] != '{'))
			continue;
		end = strchr(l, '\n');
		v = l + nl;
		if (*v == '{') {
			const char *close = strchr(v, '}');

			if (!close || (end && close > end))
				continue;
			if (*labels && !strstr(h_sprintf("%.*s", (int)(close - v + 1), v), labels))
				continue;
			v = close + 1;
		} else if (*labels) {
			continue;
		}
		return strtod(v, NULL);
	}
	return NAN;
}

/* "k1,k2" of a label set 'k1="v",k2="v"' ("" for none) */
static char *label_keys(const char *set)
{
	char *keys = h_strdup("");

	for (const char *p = set; p && *p; ) {
		const char *eq = strchr(p, '=');

		if (!eq)
			break;
		keys = h_sprintf("%s%s%.*s", keys, *keys ? "," : "", (int)(eq - p), p);
		p = eq + 2;                         /* past =" */
		while (*p && *p != '"')
			p += *p == '\\' && p[1] ? 2 : 1;
		p += *p ? 1 : 0;                    /* the closing quote */
		p += *p == ',' ? 1 : 0;
	}
	return keys;
}

/* every series of name in text carries exactly the label names keys
 * (histogram buckets: keys plus le); the offending line, or NULL */
static const char *labels_other_than(const char *text, const char *name, const char *keys)
{
	size_t nl = strlen(name);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n');
		char *got;

		if (*l == '#' || strncmp(l, name, nl) || (l[nl] != ' ' && l[nl] != '{'))
			continue;
		got = l[nl] == '{' ? label_keys(h_sprintf("%.*s", (int)(strchr(l, '}') -
				l - nl - 1), l + nl + 1)) : h_strdup("");
		if (strcmp(got, keys))
			return h_sprintf("%.*s (labels %s, the seed's %s)",
				(int)(end ? end - l : (long)strlen(l)), l, got, keys);
	}
	return NULL;
}

static double worker_series(const char *name, const char *labels)
{
	return series(scrape_worker(), name, labels);
}

/* ---------------------------------------------------------------- flow */

static long long inbox(const char *table, const char *group, const char *mid)
{
	return h_sql_int(h_sprintf("SELECT count(*) FROM %s WHERE consumer_group = $1 "
		"AND message_id = $2::uuid", table), group, mid);
}

/* a calendar topic message to the notifications consumer, waited for */
static void ntf_produce(const char *name, const char *key, const char *payload)
{
	char *mid = h_new_mid();

	ck_assert_int_eq(h_kafka_produce(h_sprintf("pin.calendar.%s.v1", name), key,
		h_envelope(mid, h_sprintf("pin.calendar.%s", name), "CalendarEvent", key,
			h_iso_in(0), payload)), 0);
	ck_assert_msg(H_WAIT_UNTIL(inbox("notifications.processed_messages", NGROUP, mid) == 1,
		WAIT_MS), "%s %s not consumed", name, mid);
}

/* a CRM message (contractVersion v) to group, waited for (its inbox row:
 * handled; a dead letter has none, so wait == 0 skips the wait) */
static char *crm_produce(const char *group, const char *topic, const char *key,
		const char *agg, int v, const char *payload, int wait)
{
	char *mid = h_new_mid();
	char *env = h_envelope(mid, h_sprintf("%.*s", (int)strlen(topic) - 3, topic), agg,
			key, h_iso_in(0), payload);

	if (v != 1) {
		char *p = strstr(env, "\"contractVersion\":1");

		ck_assert_ptr_nonnull(p);
		env = h_sprintf("%.*s\"contractVersion\":%d%s", (int)(p - env), env, v,
				p + strlen("\"contractVersion\":1"));
	}
	ck_assert_int_eq(h_kafka_produce(topic, key, env), 0);
	if (wait)
		ck_assert_msg(H_WAIT_UNTIL(inbox("calendar.inbox", group, mid) == 1, WAIT_MS),
			"%s %s not handled", topic, mid);
	return mid;
}

static char *deal_created(void)
{
	char *deal = h_uuid();

	crm_produce(DGROUP, "pin.crm.deal-created.v1", deal, "Deal", 1, h_sprintf(
		"{\"dealId\":\"%s\",\"agencyCompanyId\":\"%s\",\"executorAgentUserId\":\"%s\"}",
		deal, h_uuid(), h_uuid()), 1);
	return deal;
}

static char *booking_created(const char *booking, const char *deal, int64_t in_s)
{
	return h_sprintf("{\"bookingId\":\"%s\",\"dealId\":\"%s\",\"propertyObjectId\":\"%s\","
		"\"reserveExpiresAt\":\"%s\",\"programTerms\":{\"x\":1},\"paymentAmount\":100}",
		booking, deal, h_uuid(), h_iso_in(in_s));
}

static char *booking_confirmed(const char *booking, const char *deal, int64_t in_s)
{
	return h_sprintf("{\"bookingId\":\"%s\",\"dealId\":\"%s\",\"propertyObjectId\":null,"
		"\"bookingExpiresAt\":\"%s\"}", booking, deal, h_iso_in(in_s));
}

/* The flow: both hosts, both consumers, every branch a seed metric counts. */
static void real_flow(void)
{
	const char *tenant = h_uuid(), *owner = h_uuid(), *client = h_uuid();
	char *tok = h_token("agent", owner, tenant, "calendar.events.view",
			"calendar.events.manage");
	struct h_resp *r;
	const char *id, *deal, *b1 = h_uuid(), *b2 = h_uuid();
	double ndlq0, bdlq0;
	char *w = scrape_worker();

	ndlq0 = series(w, "notifications_dlq_total", "");
	bdlq0 = series(w, "calendar_crm_booking_sync_dlq_total", "");
	ck_assert_msg(!isnan(ndlq0) && !isnan(bdlq0),
		"the seeds' DLQ counters are not there from the start");

	/* API host: an event with a client, cancelled -> the relay -> the
	 * notifications consumer enqueues AppointmentCancelled for the client */
	r = h_post("/api/v1/agent/calendar/events", tok, h_sprintf(
		"{\"kind\":\"Meeting\",\"title\":\"Встреча\",\"startAt\":\"%s\","
		"\"endAt\":\"%s\",\"timeZone\":\"Europe/Moscow\",\"clientUserId\":\"%s\"}",
		h_iso_in(5 * 86400), h_iso_in(5 * 86400 + 3600), client));
	ck_assert_msg(r->status == 201, "create: %ld %s", r->status, r->body);
	id = h_jstr(r->json, "id");
	r = h_post(h_sprintf("/api/v1/agent/calendar/events/%s/cancel", id), tok,
		"{\"reason\":\"Перенос\"}");
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid", client) == 2, 90000), "client not notified");

	/* a reminder whose StartAt passed: skipped-stale */
	{
		const char *ev = h_uuid();

		ntf_produce("reminder-due", ev, h_sprintf("{\"reminderId\":\"%s\","
			"\"eventId\":\"%s\",\"tenantId\":\"%s\",\"ownerUserId\":\"%s\","
			"\"clientUserId\":null,\"kind\":\"Showing\",\"startAt\":"
			"\"2020-01-01T09:00:00Z\",\"timeZone\":\"Europe/Moscow\","
			"\"offsetMinutes\":60,\"appointmentId\":null}", h_uuid(), ev, tenant,
			owner));
	}
	/* a dead letter the HOST decides (not JSON: the envelope never reaches
	 * the plugin) -- seed 001's notifications_dlq_total counts it */
	ck_assert_int_eq(h_kafka_produce("pin.calendar.reminder-due.v1", h_uuid(),
		"this is not an envelope"), 0);
	ck_assert_msg(H_WAIT_UNTIL(worker_series("notifications_dlq_total", "") >= ndlq0 + 1,
		WAIT_MS), "the host's dead letter is not in notifications_dlq_total (%g -> %g)",
		ndlq0, worker_series("notifications_dlq_total", ""));

	/* CRM: Reserve deadline created; the same booking again (business
	 * duplicate); a contractVersion 2 confirmation (warn-and-proceed:
	 * Booking phase); a re-confirmation with a later expiry (rescheduled);
	 * booking-cancelled (cancelled); a payload without bookingId (the
	 * plugin's FATAL) and a non-JSON value (the host's) */
	deal = deal_created();
	crm_produce(BGROUP, "pin.crm.booking-created.v1", b1, "Booking", 1,
		booking_created(b1, deal, 3600), 1);
	crm_produce(BGROUP, "pin.crm.booking-created.v1", b1, "Booking", 1,
		booking_created(b1, deal, 3600), 1);
	crm_produce(BGROUP, "pin.crm.booking-confirmed.v1", b1, "Booking", 2,
		booking_confirmed(b1, deal, 7200), 1);
	crm_produce(BGROUP, "pin.crm.booking-confirmed.v1", b1, "Booking", 1,
		booking_confirmed(b1, deal, 10800), 1);
	crm_produce(BGROUP, "pin.crm.booking-created.v1", b2, "Booking", 1,
		booking_created(b2, deal, 3600), 1);
	crm_produce(BGROUP, "pin.crm.booking-cancelled.v1", b2, "Booking", 1,
		h_sprintf("{\"bookingId\":\"%s\"}", b2), 1);
	crm_produce(BGROUP, "pin.crm.booking-created.v1", h_uuid(), "Booking", 1,
		"{\"dealId\":null}", 0);
	ck_assert_int_eq(h_kafka_produce("pin.crm.booking-created.v1", h_uuid(), "{"), 0);
	/* both dead letters, each counted once: the plugin's and the host's */
	ck_assert_msg(H_WAIT_UNTIL(worker_series("calendar_crm_booking_sync_dlq_total", "")
		>= bdlq0 + 2, WAIT_MS), "calendar_crm_booking_sync_dlq_total %g -> %g, not + 2",
		bdlq0, worker_series("calendar_crm_booking_sync_dlq_total", ""));
	h_sleep_ms(1000);
	ck_assert_msg(worker_series("calendar_crm_booking_sync_dlq_total", "") == bdlq0 + 2,
		"a dead letter counted twice: %g -> %g", bdlq0,
		worker_series("calendar_crm_booking_sync_dlq_total", ""));
	ck_assert_msg(worker_series("notifications_dlq_total", "") == ndlq0 + 1,
		"notifications_dlq_total %g -> %g", ndlq0,
		worker_series("notifications_dlq_total", ""));
}

/* Seeds 001 and 004: every metric they name, with their labels, in a scrape
 * of the two hosts after the flow; none of the names they replace. */
START_TEST(seed_named_series_after_a_real_flow)
{
	char *api, *wrk, *both, *found = h_strdup("");

	real_flow();
	api = scrape_api();
	wrk = scrape_worker();
	both = h_sprintf("%s\n%s", api, wrk);
	for (size_t i = 0; i < sizeof seed_metrics / sizeof seed_metrics[0]; i++) {
		const struct seed_metric *m = &seed_metrics[i];
		double v = series(both, m->name, m->labels);

		ck_assert_msg(!isnan(v), "seed %s: no series %s{%s} on either host",
			m->seed, m->name, m->labels);
		ck_assert_msg(!m->moved || v > 0, "seed %s: %s{%s} is %g after the flow",
			m->seed, m->name, m->labels, v);
		{       /* the seed's label names, on every series of the name */
			const char *bad = labels_other_than(both, m->name, label_keys(m->labels));

			ck_assert_msg(!bad, "seed %s: %s", m->seed, bad);
		}
		found = h_sprintf("%s  %s%s%s%s = %g (%s)\n", found, m->name,
			*m->labels ? "{" : "", m->labels, *m->labels ? "}" : "", v,
			isnan(series(wrk, m->name, m->labels)) ? "api" : "worker");
	}
	/* the histograms are in milliseconds (seed: *_duration_ms) */
	ck_assert_msg(strstr(wrk, "# TYPE notifications_enqueue_duration_ms histogram") &&
		strstr(wrk, "notifications_enqueue_duration_ms_bucket{le=\"60000\"}") &&
		strstr(wrk, "calendar_crm_booking_sync_consume_duration_ms_bucket{le=\"1\"}"),
		"the _ms histograms have no millisecond buckets");
	/* the names they replace are gone */
	ck_assert(!strstr(both, "notifications_enqueue_duration_seconds"));
	ck_assert(!strstr(both, "calendar_crm_booking_sync_consume_duration_seconds"));
	fprintf(stderr, "seed-named series after the flow:\n%s", found);
}
END_TEST

/* ------------------------------------- what alerts and the dashboard query */

static bool is_prefixed(const char *s)
{
	static const char *const pre[] = { "pin_", "notifications_", "calendar_",
		"process_", NULL };

	for (int i = 0; pre[i]; i++)
		if (!strncmp(s, pre[i], strlen(pre[i])))
			return true;
	return false;
}

/* Adds to *names (" a b c ") the metric names of one PromQL expression:
 * identifiers outside strings and {} label matchers, not followed by "("
 * (a function or aggregation), with one of our prefixes. */
static void promql_names(const char *e, char **names)
{
	int brace = 0;

	for (const char *p = e; *p; ) {
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
			if (*p)
				p++;
			continue;
		}
		if (*p == '{' || *p == '}') {
			brace += *p == '{' ? 1 : -1;
			p++;
			continue;
		}
		if (!brace && (isalpha((unsigned char)*p) || *p == '_') &&
				(p == e || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
			const char *s = p, *q;
			char *id;

			while (isalnum((unsigned char)*p) || *p == '_' || *p == ':')
				p++;
			for (q = p; *q == ' '; q++)
				;
			id = h_sprintf("%.*s", (int)(p - s), s);
			if (*q != '(' && is_prefixed(id) && !strstr(*names, h_sprintf(" %s ", id)))
				*names = h_sprintf("%s%s ", *names, id);
			continue;
		}
		p++;
	}
}

/* the expressions of the rules file (expr: one line, or a folded block) */
static void rules_names(const char *text, char **names)
{
	const char *l = text;

	while (l && *l) {
		const char *nl = strchr(l, '\n'), *x = strstr(l, "expr:");

		if (x && (!nl || x < nl)) {
			const char *v = x + 5;
			size_t ind = (size_t)(x - l);

			while (*v == ' ')
				v++;
			if (*v == '>' || *v == '|') {      /* a block: the deeper lines */
				char *block = h_strdup("");

				for (l = nl ? nl + 1 : NULL; l && *l; l = nl ? nl + 1 : NULL) {
					size_t sp = strspn(l, " ");

					nl = strchr(l, '\n');
					if (sp <= ind && l[sp] != '\n')
						break;
					block = h_sprintf("%s %.*s", block,
						(int)(nl ? (size_t)(nl - l) : strlen(l)), l);
				}
				promql_names(block, names);
				continue;
			}
			promql_names(h_sprintf("%.*s", (int)(nl ? (size_t)(nl - v) : strlen(v)), v),
				names);
		}
		l = nl ? nl + 1 : NULL;
	}
}

/* the "expr" strings of the dashboard (JSON) */
static void dashboard_names(const char *text, char **names)
{
	for (const char *p = text; (p = strstr(p, "\"expr\"")); ) {
		json_object *o;
		const char *q = strchr(p + 6, '"');
		const char *end;

		if (!q)
			break;
		for (end = q + 1; *end && *end != '"'; end++)
			if (*end == '\\' && end[1])
				end++;
		o = json_tokener_parse(h_sprintf("%.*s", (int)(end - q + 1), q));
		ck_assert_msg(o && json_object_is_type(o, json_type_string),
			"dashboard expr not a JSON string near %.80s", p);
		promql_names(json_object_get_string(o), names);
		json_object_put(o);
		p = end;
	}
}

/* in the scrape as a series, or as a histogram's _bucket/_sum/_count */
static bool in_scrape(const char *text, const char *name)
{
	return !isnan(series(text, name, ""));
}

/* Every metric an alert rule or the Grafana dashboard queries is exposed by
 * one of the hosts after the flow: a rename cannot silently disable an
 * alert or blank a panel.  The only exceptions are counters whose series
 * appear with their first labelled event and whose rule handles a new
 * series (PinOutboxRowsParked): those must at least be written by the code
 * under that name. */
START_TEST(every_queried_metric_exists)
{
	const char *src = h_env("PIN_SOURCE_DIR");
	char *names = h_strdup(" "), *both, *missing = h_strdup("");
	static const char *const first_event_only[] = { "pin_outbox_failed_total", NULL };
	int n = 0;

	rules_names(h_slurp(h_sprintf("%s/packaging/prometheus/pin-calendar.rules.yml", src)),
		&names);
	dashboard_names(h_slurp(h_sprintf("%s/packaging/grafana/pin-calendar.json", src)),
		&names);
	/* the extraction works: names of both files, none of the functions */
	ck_assert_msg(strstr(names, " pin_consumer_oldest_unprocessed_age_seconds ") &&
		strstr(names, " pin_http_request_duration_seconds_bucket ") &&
		strstr(names, " pin_api_requests_queued ") && !strstr(names, " histogram_quantile "),
		"extracted: %s", names);
	real_flow();
	both = h_sprintf("%s\n%s", scrape_api(), scrape_worker());
	for (char *p = names + 1; *p; ) {
		char *sp = strchr(p, ' ');
		char *name = h_sprintf("%.*s", (int)(sp - p), p);
		bool excused = false;

		n++;
		for (int i = 0; first_event_only[i]; i++)
			if (!strcmp(name, first_event_only[i]))
				excused = true;
		if (excused) {
			ck_assert_msg(system(h_sprintf("grep -rqs --include='*.c' '\"%s\"' %s/host "
				"%s/plugins", name, src, src)) == 0, "%s: not in the code", name);
		} else if (!in_scrape(both, name)) {
			missing = h_sprintf("%s %s", missing, name);
		}
		p = sp + 1;
	}
	ck_assert_msg(!*missing, "queried by a rule or the dashboard, exposed by no host:%s",
		missing);
	fprintf(stderr, "%d metric names queried by the rules and the dashboard, all "
		"exposed\n", n);
}
END_TEST

/* ------------------------------------------------------------------ lag */

struct locker {
	PGconn *c;
};

static void lock_links(struct locker *l)
{
	PGresult *r;

	l->c = PQconnectdb(h_env("PIN_PG_DSN"));
	ck_assert_msg(PQstatus(l->c) == CONNECTION_OK, "lock connection");
	r = PQexec(l->c, "BEGIN; LOCK TABLE calendar.booking_deadline_links "
		"IN ACCESS EXCLUSIVE MODE");
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "lock: %s",
		PQerrorMessage(l->c));
	PQclear(r);
}

static void unlock_links(struct locker *l)
{
	if (l->c) {
		PQclear(PQexec(l->c, "COMMIT"));
		PQfinish(l->c);
		l->c = NULL;
	}
}

#define BLAG "calendar_crm_booking_sync_lag_seconds"
#define HAGE "pin_consumer_oldest_unprocessed_age_seconds"

/* Seed 004's lag is "how old is the oldest message not yet handled": a
 * consumer that cannot finish a message (a lock its handler needs is held
 * by another session) with messages waiting shows a lag that grows from
 * scrape to scrape; once the lock is gone and the messages are handled it
 * is 0.  Before, the gauge was "now - createdAt of the last message
 * handled", set only when a message was handled: it stood still.  The
 * host's pin_consumer_oldest_unprocessed_age_seconds{group} (the input of
 * PinConsumerLag) grows too: it was sampled on the consumer thread, which
 * sits in the handler. */
START_TEST(seed_lag_grows_while_stalled_and_returns_to_zero)
{
	struct locker lk = { NULL };
	const char *deal = deal_created(), *b = h_uuid();
	char *m1, *m2;
	double a1 = NAN, a2 = NAN, g1, g2;

	ck_assert_msg(H_WAIT_UNTIL(worker_series(BLAG, "") == 0, 30000),
		"the booking consumer is not caught up at the start: %g",
		worker_series(BLAG, ""));
	lock_links(&lk);
	m1 = crm_produce(BGROUP, "pin.crm.booking-created.v1", b, "Booking", 1,
		booking_created(b, deal, 3600), 0);
	m2 = crm_produce(BGROUP, "pin.crm.booking-confirmed.v1", b, "Booking", 1,
		booking_confirmed(b, deal, 7200), 0);
	ck_assert_msg(H_WAIT_UNTIL((a1 = worker_series(BLAG, "")) >= 1, 20000),
		"the lag did not show the waiting messages: %g", a1);
	g1 = worker_series(HAGE, "group=\"" BGROUP "\"");
	h_sleep_ms(2500);
	a2 = worker_series(BLAG, "");
	g2 = worker_series(HAGE, "group=\"" BGROUP "\"");
	ck_assert_msg(a2 >= a1 + 2, "the lag did not grow while stalled: %g then %g", a1, a2);
	/* the host's own age (PinConsumerLag's input) grows as well */
	ck_assert_msg(g2 >= g1 + 2 && g2 >= a2 - 1, "%s{group=%s}: %g then %g (seed lag %g)",
		HAGE, BGROUP, g1, g2, a2);
	ck_assert_int_eq(inbox("calendar.inbox", BGROUP, m2), 0);
	fprintf(stderr, "stalled: %s %.3f s, then %.3f s; %s %.3f s, then %.3f s\n",
		BLAG, a1, a2, HAGE, g1, g2);
	unlock_links(&lk);
	ck_assert_msg(H_WAIT_UNTIL(inbox("calendar.inbox", BGROUP, m1) == 1 &&
		inbox("calendar.inbox", BGROUP, m2) == 1, WAIT_MS), "not handled after the lock");
	ck_assert_msg(H_WAIT_UNTIL(worker_series(BLAG, "") == 0, 30000),
		"the lag stayed %g after catching up", worker_series(BLAG, ""));
	ck_assert_msg(worker_series("notifications_consumer_lag_seconds", "") < 60,
		"notifications lag %g", worker_series("notifications_consumer_lag_seconds", ""));
}
END_TEST

Suite *make_metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = h_tcase("seed_names", 240);

	tcase_add_test(tc, seed_named_series_after_a_real_flow);
	tcase_add_test(tc, every_queried_metric_exists);
	suite_add_tcase(s, tc);
	tc = h_tcase("seed_lag", 180);
	tcase_add_test(tc, seed_lag_grows_while_stalled_and_returns_to_zero);
	suite_add_tcase(s, tc);
	return s;
}
