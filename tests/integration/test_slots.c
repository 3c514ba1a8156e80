/*
 * test_slots.c -- slots.so and the slot parts of workers.so against the test
 * stack: DST matrix of the generation, the lead-time boundary, overlaps, the
 * batch limit, every 4xx of the agent slot API, the public showcase filters,
 * slot-expiration and the identity replica consumer.
 *
 * Dates: the host clock is the wall clock (2026-11/12 when this was written;
 * batches reach today + 183 days), so the spring changes of 2027 and Sydney's
 * fall-back (2027-04-04) go through the HTTP preview and publish.  The northern
 * autumn changes of 2027 (Europe/Berlin 10-31, America/New_York 11-07) are
 * beyond that horizon: they are tested DB-only on calendar.slot_plan, the very
 * function preview and publish call (the HTTP layer adds nothing to the
 * generation but validation).  Once the fixed 2027 dates are past, move them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define BATCHES "/api/v1/agent/calendar/slots/batches"
#define PREVIEW "/api/v1/agent/calendar/slots/batches/preview"
#define SLOTS "/api/v1/agent/calendar/slots"
#define SHOWCASE "/api/public/calendar/slots"
#define PERM "calendar.slots.manage"

struct agent {
	char *sub, *tenant, *token;
};

static struct agent new_agent(void)
{
	struct agent a;

	a.sub = h_uuid();
	a.tenant = h_uuid();
	a.token = h_token("agent", a.sub, a.tenant, PERM);
	return a;
}

static char *batch_body(const char *tz, const char *windows, const char *from,
		const char *to, int duration, const char *extra)
{
	return h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"%s\",\"windows\":%s,"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":%d%s%s}",
			tz, windows, from, to, duration, extra ? "," : "", extra ? extra : "");
}

static json_object *arr(json_object *o, const char *key)
{
	json_object *a = h_jget(o, key);

	ck_assert_msg(a && json_object_is_type(a, json_type_array), "no array %s", key);
	return a;
}

static const char *idx_str(json_object *a, size_t i, const char *key)
{
	return h_jstr(json_object_array_get_idx(a, i), key);
}

/* Asserts the startAt list of a preview/publish "slots" array. */
static void assert_starts(const struct h_resp *r, const char *const *want)
{
	json_object *slots = arr(r->json, "slots");
	size_t i, n = json_object_array_length(slots);

	for (i = 0; want[i]; i++) {
		ck_assert_msg(i < n, "only %zu slots, want %s: %s", n, want[i], r->body);
		ck_assert_msg(!strcmp(idx_str(slots, i, "startAt"), want[i]),
				"slot %zu: %s, want %s (%s)", i, idx_str(slots, i, "startAt"),
				want[i], r->body);
	}
	ck_assert_msg(i == n, "%zu slots, want %zu: %s", n, i, r->body);
}

/* Asserts the skipped list: "localDate localStart reason" strings. */
static void assert_skipped(const struct h_resp *r, const char *const *want)
{
	json_object *sk = arr(r->json, "skipped");
	size_t i, j, n = json_object_array_length(sk);

	for (i = 0; want[i]; i++) {
		int found = 0;

		for (j = 0; j < n; j++) {
			char *s = h_sprintf("%s %s %s", idx_str(sk, j, "localDate"),
					idx_str(sk, j, "localStart"), idx_str(sk, j, "reason"));
			if (!strcmp(s, want[i]))
				found = 1;
		}
		ck_assert_msg(found, "skipped entry %s missing: %s", want[i], r->body);
	}
	ck_assert_msg(i == n, "%zu skipped, want %zu: %s", n, i, r->body);
}

static struct h_resp *preview(const struct agent *a, const char *body)
{
	return h_post(PREVIEW, a->token, body);
}

/* ------------------------------------------------------------ DST matrix */

START_TEST(dst_berlin_spring_forward)
{
	struct agent a = new_agent();
	struct h_resp *r = preview(&a, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"14:00\",\"to\":\"15:00\"}]",
		"2027-03-28", "2027-03-28", 30, NULL));
	static const char *const starts[] = { "2027-03-28T00:00:00Z", "2027-03-28T00:30:00Z",
		"2027-03-28T01:00:00Z", "2027-03-28T01:30:00Z",
		"2027-03-28T12:00:00Z", "2027-03-28T12:30:00Z", NULL };
	static const char *const skipped[] = { "2027-03-28 02:00 dst_gap",
		"2027-03-28 02:30 dst_gap", NULL };

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	assert_starts(r, starts);
	assert_skipped(r, skipped);
	/* local labels of the kept slots */
	ck_assert_str_eq(idx_str(arr(r->json, "slots"), 2, "localStart"), "03:00");
	ck_assert_str_eq(idx_str(arr(r->json, "slots"), 4, "localStart"), "14:00");
}
END_TEST

START_TEST(dst_new_york_spring_forward)
{
	struct agent a = new_agent();
	struct h_resp *r = preview(&a, batch_body("America/New_York",
		"[{\"daysOfWeek\":[7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"14:00\",\"to\":\"15:00\"}]",
		"2027-03-14", "2027-03-14", 60, NULL));
	static const char *const starts[] = { "2027-03-14T06:00:00Z", "2027-03-14T07:00:00Z",
		"2027-03-14T18:00:00Z", NULL };
	static const char *const skipped[] = { "2027-03-14 02:00 dst_gap", NULL };

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	assert_starts(r, starts);
	assert_skipped(r, skipped);
}
END_TEST

START_TEST(dst_sydney_fall_back_first_occurrence)
{
	struct agent a = new_agent();
	struct h_resp *r = preview(&a, batch_body("Australia/Sydney",
		"[{\"daysOfWeek\":[7],\"from\":\"01:30\",\"to\":\"03:30\"},"
		" {\"daysOfWeek\":[7],\"from\":\"15:00\",\"to\":\"16:00\"}]",
		"2027-04-04", "2027-04-04", 30, NULL));
	/* 02:00-03:00 happens twice (AEDT +11, then AEST +10): first occurrence
	 * only, no doubled slot, and 03:00 is AEST */
	static const char *const starts[] = { "2027-04-03T14:30:00Z", "2027-04-03T15:00:00Z",
		"2027-04-03T15:30:00Z", "2027-04-03T17:00:00Z",
		"2027-04-04T05:00:00Z", "2027-04-04T05:30:00Z", NULL };
	static const char *const none[] = { NULL };

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	assert_starts(r, starts);
	assert_skipped(r, none);
}
END_TEST

/* Asserts that a preview and a publish of the same body gave the same slots
 * (startAt, endAt) and the same skipped entries, in the same order. */
static void assert_preview_eq_publish(const struct h_resp *pv, const struct h_resp *pb)
{
	json_object *a = arr(pv->json, "slots"), *b = arr(pb->json, "slots");
	json_object *sa = arr(pv->json, "skipped"), *sb = arr(pb->json, "skipped");
	size_t i;

	ck_assert_int_eq((int)json_object_array_length(a), (int)json_object_array_length(b));
	ck_assert_int_eq(json_object_get_int(h_jget(pb->json, "created")),
			(int)json_object_array_length(a));
	for (i = 0; i < json_object_array_length(a); i++) {
		ck_assert_str_eq(idx_str(a, i, "startAt"), idx_str(b, i, "startAt"));
		ck_assert_str_eq(idx_str(a, i, "endAt"), idx_str(b, i, "endAt"));
	}
	ck_assert_int_eq((int)json_object_array_length(sa), (int)json_object_array_length(sb));
	for (i = 0; i < json_object_array_length(sa); i++) {
		ck_assert_str_eq(idx_str(sa, i, "localDate"), idx_str(sb, i, "localDate"));
		ck_assert_str_eq(idx_str(sa, i, "localStart"), idx_str(sb, i, "localStart"));
		ck_assert_str_eq(idx_str(sa, i, "reason"), idx_str(sb, i, "reason"));
	}
}

/* Sydney's fall-back (2027-04-04 03:00 AEDT -> 02:00 AEST) end to end:
 * preview, then publish of the same body (same result), morning and
 * afternoon windows on Saturday/Sunday/Monday keep their wall time (the UTC
 * instant moves by one hour), and the ambiguous 02:00-03:00 hour is laid
 * once, at its first (AEDT) occurrence. */
START_TEST(dst_sydney_fall_back_publish)
{
	struct agent a = new_agent();
	char *body = batch_body("Australia/Sydney",
		"[{\"daysOfWeek\":[6,7,1],\"from\":\"09:00\",\"to\":\"10:00\"},"
		" {\"daysOfWeek\":[6,7,1],\"from\":\"15:00\",\"to\":\"16:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"02:00\",\"to\":\"03:00\"}]",
		"2027-04-03", "2027-04-05", 30, NULL);
	static const char *const starts[] = {
		"2027-04-02T22:00:00Z", "2027-04-02T22:30:00Z",         /* Sat 09:00 AEDT */
		"2027-04-03T04:00:00Z", "2027-04-03T04:30:00Z",         /* Sat 15:00 AEDT */
		"2027-04-03T15:00:00Z", "2027-04-03T15:30:00Z",         /* Sun 02:00 AEDT (1st) */
		"2027-04-03T23:00:00Z", "2027-04-03T23:30:00Z",         /* Sun 09:00 AEST */
		"2027-04-04T05:00:00Z", "2027-04-04T05:30:00Z",         /* Sun 15:00 AEST */
		"2027-04-04T23:00:00Z", "2027-04-04T23:30:00Z",         /* Mon 09:00 AEST */
		"2027-04-05T05:00:00Z", "2027-04-05T05:30:00Z", NULL }; /* Mon 15:00 AEST */
	static const char *const none[] = { NULL };
	struct h_resp *pv = preview(&a, body), *pb;

	ck_assert_msg(pv->status == 200, "%ld %s", pv->status, pv->body);
	assert_starts(pv, starts);
	assert_skipped(pv, none);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", a.sub), 0);
	pb = h_post(BATCHES, a.token, body);
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	assert_starts(pb, starts);
	assert_preview_eq_publish(pv, pb);
	/* stored: every slot at its local wall time, none at the second 02:00/02:30 */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND time_zone = 'Australia/Sydney' "
		"AND to_char(start_at AT TIME ZONE 'Australia/Sydney', 'HH24:MI') "
		"    IN ('09:00', '09:30', '15:00', '15:30', '02:00', '02:30')", a.sub), 14);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND start_at >= '2027-04-03T16:00:00Z' "
		"AND start_at < '2027-04-03T17:00:00Z'", a.sub), 0);
	/* publishing it again creates nothing: every slot is an overlap now */
	pb = h_post(BATCHES, a.token, body);
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	ck_assert_int_eq(json_object_get_int(h_jget(pb->json, "created")), 0);
	ck_assert_int_eq((int)json_object_array_length(arr(pb->json, "skipped")), 14);
}
END_TEST

/* Preview and publish agree on a spring-forward day too (dst_gap skips). */
START_TEST(dst_new_york_preview_equals_publish)
{
	struct agent a = new_agent();
	char *body = batch_body("America/New_York",
		"[{\"daysOfWeek\":[6,7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"13:00\",\"to\":\"14:30\"}]",
		"2027-03-13", "2027-03-14", 30, "\"gapMinutes\":15");
	struct h_resp *pv = preview(&a, body), *pb;
	static const char *const skipped[] = { "2027-03-14 02:30 dst_gap", NULL };

	ck_assert_msg(pv->status == 200, "%ld %s", pv->status, pv->body);
	/* 01:00, 01:45, 02:30 (gap), 03:15 local, both days; 13:00, 13:45 Sunday */
	assert_skipped(pv, skipped);
	pb = h_post(BATCHES, a.token, body);
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	assert_preview_eq_publish(pv, pb);
	ck_assert_int_eq(json_object_get_int(h_jget(pb->json, "created")), 9);
	/* Sunday 03:15 is EDT (07:15Z), Saturday 03:15 EST (08:15Z) */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND start_at IN ('2027-03-14T07:15:00Z', "
		"'2027-03-13T08:15:00Z')", a.sub), 2);
}
END_TEST

/* Europe/Berlin 2027-10-31 is beyond today + 183: DB-only on calendar.slot_plan. */
START_TEST(dst_berlin_fall_back_db_only)
{
	PGresult *res = h_sql(
		"SELECT to_char(local_start, 'HH24:MI'), "
		"       to_char(start_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI\"Z\"'), "
		"       coalesce(reason, '') "
		"FROM calendar.slot_plan($1::uuid, 'Europe/Berlin', "
		"  '[{\"daysOfWeek\":[7],\"from\":\"01:30\",\"to\":\"03:30\"},"
		"    {\"daysOfWeek\":[7],\"from\":\"15:00\",\"to\":\"15:30\"}]', "
		"  '2027-10-31', '2027-10-31', 30, 0, '2027-10-01T00:00:00Z') "
		"ORDER BY start_at", h_uuid());
	static const char *const want[][2] = {
		{ "01:30", "2027-10-30T23:30Z" }, { "02:00", "2027-10-31T00:00Z" },
		{ "02:30", "2027-10-31T00:30Z" }, { "03:00", "2027-10-31T02:00Z" },
		{ "15:00", "2027-10-31T14:00Z" } };
	int i;

	ck_assert_int_eq(PQntuples(res), 5);
	for (i = 0; i < 5; i++) {
		ck_assert_str_eq(PQgetvalue(res, i, 0), want[i][0]);
		ck_assert_str_eq(PQgetvalue(res, i, 1), want[i][1]);
		ck_assert_str_eq(PQgetvalue(res, i, 2), "");
	}
	/* New York's fall-back (2027-11-07 01:30 happens twice): first = EDT */
	ck_assert_str_eq(h_sql_scalar(
		"SELECT to_char(start_at AT TIME ZONE 'UTC', 'HH24:MI') "
		"FROM calendar.slot_plan($1::uuid, 'America/New_York', "
		"  '[{\"daysOfWeek\":[7],\"from\":\"01:30\",\"to\":\"02:30\"}]', "
		"  '2027-11-07', '2027-11-07', 60, 0, '2027-10-01T00:00:00Z')", h_uuid()), "05:30");
}
END_TEST

/* A slot spanning the spring gap lasts real minutes: the next local start
 * would overlap it and is skipped as overlap (never a doubled booking). */
START_TEST(dst_duration_across_gap_overlap)
{
	struct agent a = new_agent();
	struct h_resp *r = preview(&a, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[7],\"from\":\"00:00\",\"to\":\"06:00\"}]",
		"2027-03-28", "2027-03-28", 90, NULL));
	static const char *const starts[] = { "2027-03-27T23:00:00Z", "2027-03-28T00:30:00Z",
		"2027-03-28T02:30:00Z", NULL };
	static const char *const skipped[] = { "2027-03-28 03:00 overlap", NULL };

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	assert_starts(r, starts);
	assert_skipped(r, skipped);
}
END_TEST

/* Weekly window keeps its local wall time across the change (10:00 Berlin:
 * 09:00Z in CET, 08:00Z in CEST). */
START_TEST(dst_weekly_window_keeps_wall_time)
{
	struct agent a = new_agent();
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[2],\"from\":\"10:00\",\"to\":\"11:00\"}]",
		"2027-03-15", "2027-04-11", 60, "\"projectId\":\"" "11111111-2222-4333-8444-555555555555" "\""));
	static const char *const starts[] = { "2027-03-16T09:00:00Z", "2027-03-23T09:00:00Z",
		"2027-03-30T08:00:00Z", "2027-04-06T08:00:00Z", NULL };

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	assert_starts(r, starts);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), 4);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "batch"), "timeZone"), "Europe/Berlin");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND status = 'Available' "
		"AND to_char(start_at AT TIME ZONE 'Europe/Berlin', 'HH24:MI') = '10:00'", a.sub), 4);
}
END_TEST

/* ------------------------------------------------------------ lead time */

START_TEST(lead_time_boundary_db)
{
	/* a slot starting exactly now + 60 min is kept; 1 minute earlier is not */
	PGresult *res = h_sql(
		"SELECT to_char(local_start, 'HH24:MI'), coalesce(reason, '') "
		"FROM calendar.slot_plan($1::uuid, 'UTC', "
		"  '[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"09:59\",\"to\":\"10:15\"}]', "
		"  '2027-01-05', '2027-01-05', 15, 1, '2027-01-05T09:00:00Z') ORDER BY 1",
		h_uuid());

	ck_assert_int_eq(PQntuples(res), 1);
	ck_assert_str_eq(PQgetvalue(res, 0, 1), "lead_time");
	res = h_sql(
		"SELECT to_char(local_start, 'HH24:MI'), coalesce(reason, '') "
		"FROM calendar.slot_plan($1::uuid, 'UTC', "
		"  '[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"10:15\"}]', "
		"  '2027-01-05', '2027-01-05', 15, 0, '2027-01-05T09:00:00Z')", h_uuid());
	ck_assert_int_eq(PQntuples(res), 1);
	ck_assert_str_eq(PQgetvalue(res, 0, 1), "");
}
END_TEST

START_TEST(lead_time_through_api)
{
	struct agent a = new_agent();
	struct h_resp *r = preview(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"00:00\",\"to\":\"24:00\"}]",
		h_date_in(0), h_date_in(1), 60, NULL));
	json_object *slots, *sk;
	char *limit = h_iso_in(3600 - 5);   /* a little slack for the request time */
	size_t i;
	int leads = 0;

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	slots = arr(r->json, "slots");
	sk = arr(r->json, "skipped");
	for (i = 0; i < json_object_array_length(slots); i++)
		ck_assert_msg(strcmp(idx_str(slots, i, "startAt"), limit) >= 0,
				"slot %s inside the lead time (%s)",
				idx_str(slots, i, "startAt"), limit);
	for (i = 0; i < json_object_array_length(sk); i++)
		if (!strcmp(idx_str(sk, i, "reason"), "lead_time"))
			leads++;
	/* today's hours up to now + 60 min are skipped (at least 00:00) */
	ck_assert_int_ge(leads, 1);
	ck_assert_int_eq((int)(json_object_array_length(slots) + leads), 48);
}
END_TEST

/* ------------------------------------------------------------ overlaps, limits */

START_TEST(overlap_with_existing_and_exclusion_constraint)
{
	struct agent a = new_agent();
	const char *win = "[{\"daysOfWeek\":[1,2,3,4,5],\"from\":\"09:00\",\"to\":\"12:00\"}]";
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("Europe/Berlin", win,
			h_date_in(10), h_date_in(16), 60, NULL));
	const char *batch1;
	int created;

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	created = json_object_get_int(h_jget(r->json, "created"));
	ck_assert_int_ge(created, 12);
	batch1 = h_strdup(h_jstr(h_jget(r->json, "batch"), "id"));
	/* same windows, shifted by 30 min: every slot overlaps */
	r = h_post(BATCHES, a.token, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[1,2,3,4,5],\"from\":\"09:30\",\"to\":\"11:30\"}]",
		h_date_in(10), h_date_in(16), 60, NULL));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), 0);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "skipped")), created * 2 / 3);
	ck_assert_str_eq(idx_str(arr(r->json, "skipped"), 0, "reason"), "overlap");
	/* the database refuses an overlapping active slot on its own */
	{
		PGresult *res = PQexecParams(h_pg(),
			"INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, kind, "
			"  start_at, end_at, time_zone, created_at, updated_at) "
			"SELECT gen_random_uuid(), tenant_id, owner_user_id, kind, start_at + interval '10 min', "
			"  end_at + interval '10 min', time_zone, created_at, updated_at "
			"FROM calendar.availability_slots WHERE owner_user_id = $1 LIMIT 1",
			1, NULL, (const char *const[]){ a.sub }, NULL, NULL, 0);
		ck_assert_str_eq(PQresultErrorField(res, PG_DIAG_SQLSTATE), "23P01");
		PQclear(res);
	}
	/* archived slots no longer block their time: the shifted batch now fits */
	r = h_post(h_sprintf(BATCHES "/%s/archive", batch1), a.token, NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archived")), created);
	r = h_post(BATCHES, a.token, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[1,2,3,4,5],\"from\":\"09:30\",\"to\":\"11:30\"}]",
		h_date_in(10), h_date_in(16), 60, NULL));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), created * 2 / 3);
}
END_TEST

START_TEST(batch_too_large_writes_nothing)
{
	struct agent a = new_agent();
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"20:00\"}]",
		h_date_in(2), h_date_in(60), 30, NULL));

	h_assert_problem(r, 422, "SLOT_BATCH_TOO_LARGE");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.slot_batches "
		"WHERE owner_user_id = $1", a.sub), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", a.sub), 0);
	r = preview(&a, batch_body("Europe/Berlin",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"20:00\"}]",
		h_date_in(2), h_date_in(60), 30, NULL));
	h_assert_problem(r, 422, "SLOT_BATCH_TOO_LARGE");
	/* exactly 500 is fine: 25 days x 20 slots */
	r = preview(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"02:00\",\"to\":\"12:00\"}]",
		h_date_in(2), h_date_in(26), 30, NULL));
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "slots")), 500);
}
END_TEST

/* The limit counts the slots to create: 520 candidates of which 20 overlap
 * existing slots give 500 (fine); the same 520 without the overlaps are
 * too many. */
START_TEST(batch_limit_counts_created_slots)
{
	struct agent a = new_agent(), b = new_agent();
	const char *w = "[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"02:00\",\"to\":\"12:00\"}]";
	char *big = batch_body("UTC", w, h_date_in(2), h_date_in(27), 30, NULL);
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("UTC", w, h_date_in(2),
			h_date_in(2), 30, NULL)), *pv;
	json_object *sk;
	size_t i;

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), 20);
	pv = preview(&a, big);
	ck_assert_msg(pv->status == 200, "%ld %s", pv->status, pv->body);
	ck_assert_int_eq((int)json_object_array_length(arr(pv->json, "slots")), 500);
	sk = arr(pv->json, "skipped");
	ck_assert_int_eq((int)json_object_array_length(sk), 20);
	for (i = 0; i < 20; i++)
		ck_assert_str_eq(idx_str(sk, i, "reason"), "overlap");
	r = h_post(BATCHES, a.token, big);
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	assert_preview_eq_publish(pv, r);
	ck_assert_int_eq(json_object_get_int(h_jget(h_jget(r->json, "batch"), "skippedCount")), 20);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND status = 'Available'", a.sub), 520);

	h_assert_problem(preview(&b, big), 422, "SLOT_BATCH_TOO_LARGE");
	h_assert_problem(h_post(BATCHES, b.token, big), 422, "SLOT_BATCH_TOO_LARGE");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", b.sub), 0);
}
END_TEST

/* A repeated publish with the same Idempotency-Key answers the first
 * response again and writes nothing more; another body under that key is
 * refused. */
START_TEST(publish_idempotency_key)
{
	struct agent a = new_agent();
	char *body = batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"12:00\"}]",
		h_date_in(6), h_date_in(6), 60, NULL);
	const char *key = h_sprintf("Idempotency-Key: %s", h_uuid());
	struct h_resp *r1 = h_request("POST", BATCHES, a.token, body, key), *r2;

	ck_assert_msg(r1->status == 201, "%ld %s", r1->status, r1->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r1->json, "created")), 2);
	r2 = h_request("POST", BATCHES, a.token, body, key);
	ck_assert_msg(r2->status == 201, "replay: %ld %s", r2->status, r2->body);
	ck_assert_str_eq(h_jstr(h_jget(r2->json, "batch"), "id"),
			h_jstr(h_jget(r1->json, "batch"), "id"));
	ck_assert_int_eq(json_object_get_int(h_jget(r2->json, "created")), 2);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.slot_batches "
		"WHERE owner_user_id = $1", a.sub), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", a.sub), 2);
	r2 = h_request("POST", BATCHES, a.token, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"14:00\",\"to\":\"15:00\"}]",
		h_date_in(6), h_date_in(6), 60, NULL), key);
	h_assert_problem(r2, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", a.sub), 2);
}
END_TEST

/* ------------------------------------------------------------ 4xx */

static void expect_422(const struct agent *a, const char *body, const char *code,
		const char *field)
{
	struct h_resp *r = h_post(BATCHES, a->token, body);
	json_object *errs;
	size_t i;
	int found = 0;

	h_assert_problem(r, 422, code);
	if (!field)
		return;
	errs = h_jget(r->json, "errors");
	ck_assert_msg(errs != NULL, "no errors: %s", r->body);
	for (i = 0; i < json_object_array_length(errs); i++)
		if (!strcmp(idx_str(errs, i, "field"), field))
			found = 1;
	ck_assert_msg(found, "no error on %s: %s", field, r->body);
}

START_TEST(validation_errors)
{
	struct agent a = new_agent();
	const char *w = "[{\"daysOfWeek\":[1],\"from\":\"09:00\",\"to\":\"12:00\"}]";
	char *f = h_date_in(3), *t = h_date_in(10);

	expect_422(&a, batch_body("Europe/Berlin", w, f, t, 60, "\"colour\":\"red\""),
			"VALIDATION_FAILED", "colour");
	expect_422(&a, h_sprintf("{\"kind\":\"Meeting\",\"timeZone\":\"UTC\",\"windows\":%s,"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60}", w, f, t),
			"VALIDATION_FAILED", "kind");
	expect_422(&a, batch_body("Mars/Olympus", w, f, t, 60, NULL), "UNKNOWN_TIME_ZONE", NULL);
	expect_422(&a, batch_body("+02", w, f, t, 60, NULL), "UNKNOWN_TIME_ZONE", NULL);
	expect_422(&a, batch_body("UTC", "[]", f, t, 60, NULL), "VALIDATION_FAILED", "windows");
	expect_422(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[1],\"from\":\"12:00\",\"to\":\"09:00\"}]", f, t, 60, NULL),
		"VALIDATION_FAILED", "windows[0].to");
	expect_422(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[8],\"from\":\"09:00\",\"to\":\"12:00\"}]", f, t, 60, NULL),
		"VALIDATION_FAILED", "windows[0].daysOfWeek");
	expect_422(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[1],\"from\":\"9:00\",\"to\":\"12:00\"}]", f, t, 60, NULL),
		"VALIDATION_FAILED", "windows[0].from");
	expect_422(&a, batch_body("UTC",
		"[{\"daysOfWeek\":[1],\"from\":\"09:00\",\"to\":\"12:00\",\"x\":1}]", f, t, 60, NULL),
		"VALIDATION_FAILED", "windows[0].x");
	{
		char *many = h_strdup("[");
		int i;
		for (i = 0; i < 15; i++)
			many = h_sprintf("%s%s{\"daysOfWeek\":[1],\"from\":\"%02d:00\",\"to\":\"%02d:30\"}",
					many, i ? "," : "", i, i);
		many = h_sprintf("%s]", many);
		expect_422(&a, batch_body("UTC", many, f, t, 15, NULL), "VALIDATION_FAILED", "windows");
	}
	expect_422(&a, batch_body("UTC", w, h_date_in(3), h_date_in(3 + 92), 60, NULL),
			"VALIDATION_FAILED", "toDate");
	expect_422(&a, batch_body("UTC", w, h_date_in(150), h_date_in(190), 60, NULL),
			"VALIDATION_FAILED", "toDate");
	expect_422(&a, batch_body("UTC", w, h_date_in(-2), h_date_in(3), 60, NULL),
			"VALIDATION_FAILED", "fromDate");
	expect_422(&a, batch_body("UTC", w, t, f, 60, NULL), "VALIDATION_FAILED", "toDate");
	expect_422(&a, batch_body("UTC", w, "2027-02-30", t, 60, NULL),
			"VALIDATION_FAILED", "fromDate");
	/* a window shorter than one slot would silently give nothing */
	expect_422(&a, batch_body("UTC", "[{\"daysOfWeek\":[1],\"from\":\"09:00\",\"to\":\"12:00\"},"
		"{\"daysOfWeek\":[2],\"from\":\"09:00\",\"to\":\"09:45\"}]", f, t, 60, NULL),
		"VALIDATION_FAILED", "windows[1].to");
	expect_422(&a, batch_body("UTC", w, f, t, 10, NULL),
			"VALIDATION_FAILED", "slotDurationMinutes");
	expect_422(&a, batch_body("UTC", w, f, t, 481, NULL),
			"VALIDATION_FAILED", "slotDurationMinutes");
	expect_422(&a, batch_body("UTC", w, f, t, 60, "\"gapMinutes\":241"),
			"VALIDATION_FAILED", "gapMinutes");
	expect_422(&a, batch_body("UTC", w, f, t, 60, "\"cancellationCutoffMinutes\":10081"),
			"VALIDATION_FAILED", "cancellationCutoffMinutes");
	expect_422(&a, batch_body("UTC", w, f, t, 60, "\"projectId\":\"nope\""),
			"VALIDATION_FAILED", "projectId");
	{
		char loc[520];
		memset(loc, 'x', 501);
		loc[501] = 0;
		expect_422(&a, batch_body("UTC", w, f, t, 60, h_sprintf("\"location\":\"%s\"", loc)),
				"VALIDATION_FAILED", "location");
	}
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.slot_batches "
		"WHERE owner_user_id = $1", a.sub), 0);
}
END_TEST

START_TEST(tz_canonical_spelling)
{
	struct agent a = new_agent();
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("europe/berlin",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"11:00\"}]",
		h_date_in(5), h_date_in(5), 60, NULL));

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "batch"), "timeZone"), "Europe/Berlin");
	ck_assert_str_eq(idx_str(arr(r->json, "slots"), 0, "timeZone"), "Europe/Berlin");
}
END_TEST

START_TEST(auth_errors)
{
	struct agent a = new_agent();
	char *body = batch_body("UTC", "[{\"daysOfWeek\":[1],\"from\":\"09:00\",\"to\":\"12:00\"}]",
			h_date_in(3), h_date_in(10), 60, NULL);
	struct h_resp *r = h_post(BATCHES, NULL, body);

	h_assert_problem(r, 401, "UNAUTHENTICATED");
	r = h_post(BATCHES, h_token("agent", a.sub, a.tenant, "calendar.events.manage"), body);
	h_assert_problem(r, 403, "FORBIDDEN");
	r = h_post(BATCHES, h_token("investor", a.sub, NULL, PERM), body);
	h_assert_problem(r, 403, "FORBIDDEN");
	r = h_get(SLOTS, h_token("agent", a.sub, NULL, PERM));
	h_assert_problem(r, 403, "FORBIDDEN");
}
END_TEST

/* ------------------------------------------------------------ archive, list */

START_TEST(archive_slot_and_batch)
{
	struct agent a = new_agent(), other = new_agent();
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"13:00\"}]",
		h_date_in(5), h_date_in(5), 60, NULL));
	json_object *slots;
	const char *batch_id, *s0, *s1;

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	slots = arr(r->json, "slots");
	ck_assert_int_eq((int)json_object_array_length(slots), 3);
	batch_id = h_strdup(h_jstr(h_jget(r->json, "batch"), "id"));
	s0 = h_strdup(idx_str(slots, 0, "id"));
	s1 = h_strdup(idx_str(slots, 1, "id"));

	r = h_post(h_sprintf(SLOTS "/%s/archive", s0), a.token, NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Archived");
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 2);
	r = h_post(h_sprintf(SLOTS "/%s/archive", s0), a.token, "{}");
	ck_assert_msg(r->status == 200, "again: %ld %s", r->status, r->body);

	h_sql("UPDATE calendar.availability_slots SET status = 'Booked' WHERE id = $1", s1);
	r = h_post(h_sprintf(SLOTS "/%s/archive", s1), a.token, NULL);
	h_assert_problem(r, 409, "SLOT_BOOKED");

	r = h_request("POST", h_sprintf(SLOTS "/%s/archive", idx_str(slots, 2, "id")),
			a.token, NULL, "If-Match: \"7\"");
	h_assert_problem(r, 409, "VERSION_CONFLICT");

	r = h_post(h_sprintf(SLOTS "/%s/archive", idx_str(slots, 2, "id")), other.token, NULL);
	h_assert_problem(r, 404, "SLOT_NOT_FOUND");
	r = h_post(SLOTS "/not-a-uuid/archive", a.token, NULL);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");

	r = h_post(h_sprintf(BATCHES "/%s/archive", batch_id), other.token, NULL);
	h_assert_problem(r, 404, "BATCH_NOT_FOUND");
	r = h_post(h_sprintf(BATCHES "/%s/archive", batch_id), a.token, NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archived")), 1);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots "
		"WHERE id = $1", s1), "Booked");
}
END_TEST

START_TEST(agent_list_filters_and_paging)
{
	struct agent a = new_agent();
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"15:00\"}]",
		h_date_in(5), h_date_in(5), 60, NULL));
	json_object *items;
	const char *cursor;
	char *first;

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	h_post(h_sprintf(SLOTS "/%s/archive", idx_str(arr(r->json, "slots"), 0, "id")),
			a.token, NULL);
	r = h_get(SLOTS "?limit=2", a.token);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	items = arr(r->json, "items");
	ck_assert_int_eq((int)json_object_array_length(items), 2);
	first = h_strdup(idx_str(items, 0, "startAt"));
	cursor = h_jstr(r->json, "nextCursor");
	ck_assert_ptr_nonnull(cursor);
	r = h_get(h_sprintf(SLOTS "?limit=2&cursor=%s", cursor), a.token);
	items = arr(r->json, "items");
	ck_assert_int_eq((int)json_object_array_length(items), 2);
	ck_assert_msg(strcmp(idx_str(items, 0, "startAt"), first) > 0, "page 2 not after page 1");
	r = h_get(h_sprintf(SLOTS "?limit=2&cursor=%s", h_jstr(r->json, "nextCursor")), a.token);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 1);
	ck_assert_ptr_null(h_jstr(r->json, "nextCursor"));

	r = h_get(SLOTS "?status=Archived", a.token);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 1);
	r = h_get(SLOTS "?status=Nope", a.token);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	r = h_get(h_sprintf(SLOTS "?from=%s&to=%s", h_iso_in(0), h_iso_in(93 * 86400)), a.token);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
}
END_TEST

/* ------------------------------------------------------------ showcase */

START_TEST(showcase_filters)
{
	struct agent a = new_agent(), b = new_agent();
	const char *project = h_uuid(), *prop = h_uuid();
	struct h_resp *r;
	json_object *items;
	const char *booked, *soon;

	h_sql("INSERT INTO calendar.user_replicas (user_id, display_name, status, "
		"last_event_at, created_at, updated_at) VALUES ($1, 'Anna Agent', 'Active', "
		"now(), now(), now())", a.sub);
	r = h_post(BATCHES, a.token, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"14:00\"}]",
		h_date_in(4), h_date_in(4), 60,
		h_sprintf("\"projectId\":\"%s\",\"propertyObjectId\":\"%s\"", project, prop)));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	booked = h_strdup(idx_str(arr(r->json, "slots"), 0, "id"));
	soon = h_strdup(idx_str(arr(r->json, "slots"), 1, "id"));
	r = h_post(BATCHES, b.token, h_sprintf("{\"kind\":\"Consultation\",\"timeZone\":\"UTC\","
		"\"windows\":[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"12:00\"}],"
		"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
		"\"projectId\":\"%s\"}", h_date_in(4), h_date_in(4), project));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	/* not bookable: one Booked, one moved inside the lead time */
	h_sql("UPDATE calendar.availability_slots SET status = 'Booked' WHERE id = $1", booked);
	h_sql("UPDATE calendar.availability_slots SET start_at = now() + interval '30 min', "
		"end_at = now() + interval '90 min' WHERE id = $1", soon);

	r = h_get(h_sprintf(SHOWCASE "?agentUserId=%s", a.sub), NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	items = arr(r->json, "items");
	ck_assert_int_eq((int)json_object_array_length(items), 2);
	ck_assert_str_eq(h_jstr(h_jget(json_object_array_get_idx(items, 0), "agent"),
			"displayName"), "Anna Agent");
	{
		size_t i;

		for (i = 0; i < json_object_array_length(items); i++) {
			json_object *it = json_object_array_get_idx(items, i);

			ck_assert(!json_object_object_get_ex(it, "tenantId", NULL));
			ck_assert(!json_object_object_get_ex(it, "batchId", NULL));
			ck_assert_str_eq(h_jstr(it, "status"), "Available");
			ck_assert_str_eq(h_jstr(h_jget(it, "agent"), "userId"), a.sub);
		}
		ck_assert_msg(!strstr(r->body, a.tenant), "tenant id leaked: %s", r->body);
	}

	r = h_get(h_sprintf(SHOWCASE "?projectId=%s", project), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 4);
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&kind=Consultation", project), NULL);
	items = arr(r->json, "items");
	ck_assert_int_eq((int)json_object_array_length(items), 2);
	ck_assert_ptr_null(h_jstr(h_jget(json_object_array_get_idx(items, 0), "agent"),
			"displayName"));
	r = h_get(h_sprintf(SHOWCASE "?propertyObjectId=%s", prop), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 2);
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&agentUserId=%s", project, b.sub), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 2);
	/* paging */
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&limit=3", project), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 3);
	ck_assert_ptr_nonnull(h_jstr(r->json, "nextCursor"));
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&limit=3&cursor=%s", project,
			h_jstr(r->json, "nextCursor")), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 1);
	/* range */
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&from=%s&to=%s", project,
			h_iso_in(0), h_iso_in(2 * 86400)), NULL);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 0);
	/* errors */
	r = h_get(SHOWCASE, NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_get(SHOWCASE "?agentUserId=nope", NULL);
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	r = h_get(h_sprintf(SHOWCASE "?projectId=%s&from=%s&to=%s", project,
			h_iso_in(0), h_iso_in(100 * 86400)), NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
}
END_TEST

/* The WHERE shape of the showcase statement of plugins/slots/showcase.c
 * (SHOWCASE_SQL) for one driver, with the optional filters bound to NULL as
 * a custom plan sees them.  Keep in sync. */
static char *showcase_explain(const char *driver)
{
	return h_sprintf("EXPLAIN SELECT s.id, u.display_name "
		"FROM calendar.availability_slots s "
		"LEFT JOIN calendar.user_replicas u ON u.user_id = s.owner_user_id "
		"WHERE s.status = 'Available' AND %s "
		"  AND (%s IS NULL OR s.owner_user_id = %s) "
		"  AND (%s IS NULL OR s.project_id = %s) "
		"  AND (%s IS NULL OR s.property_object_id = %s) "
		"  AND (NULL::text IS NULL OR s.kind = NULL::text) "
		"  AND s.start_at >= now() + interval '60 min' "
		"  AND s.start_at < now() + interval '92 days' "
		"  AND (s.start_at, s.id) > (now() + interval '60 min', "
		"       '00000000-0000-0000-0000-000000000000'::uuid) "
		"ORDER BY s.start_at, s.id LIMIT 101",
		h_sprintf("s.%s = $1::uuid", driver),
		!strcmp(driver, "owner_user_id") ? "$1::uuid" : "NULL::uuid",
		!strcmp(driver, "owner_user_id") ? "$1::uuid" : "NULL::uuid",
		!strcmp(driver, "project_id") ? "$1::uuid" : "NULL::uuid",
		!strcmp(driver, "project_id") ? "$1::uuid" : "NULL::uuid",
		!strcmp(driver, "property_object_id") ? "$1::uuid" : "NULL::uuid",
		!strcmp(driver, "property_object_id") ? "$1::uuid" : "NULL::uuid");
}

/* Every driving filter of the showcase is served by an index of
 * availability_slots, never by a sequential scan, whatever else the table
 * holds (the planner may pick either owner index: both give the order). */
START_TEST(showcase_uses_index)
{
	static const char *const drivers[][3] = {
		{ "owner_user_id", "ix_availability_slots_showcase_owner",
			"ix_availability_slots_owner_start" },
		{ "project_id", "ix_availability_slots_showcase_project", NULL },
		{ "property_object_id", "ix_availability_slots_showcase_property", NULL },
	};
	PGresult *res;
	size_t d;
	int i;

	/* some volume: 300 owners x 8 slots, far ahead, then fresh statistics */
	h_sql("INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, kind, "
		"  start_at, end_at, time_zone, project_id, property_object_id, created_at, updated_at) "
		"SELECT gen_random_uuid(), o.t, o.o, 'Showing', "
		"  date_trunc('hour', now()) + interval '120 days' + k * interval '1 hour', "
		"  date_trunc('hour', now()) + interval '120 days' + k * interval '1 hour' + interval '30 min', "
		"  'UTC', o.p, o.q, now(), now() "
		"FROM (SELECT gen_random_uuid() AS o, gen_random_uuid() AS t, gen_random_uuid() AS p, "
		"        gen_random_uuid() AS q FROM generate_series(1, 300)) o "
		"CROSS JOIN generate_series(0, 7) k");
	h_sql("ANALYZE calendar.availability_slots");
	h_sql("SET enable_seqscan = off");
	for (d = 0; d < sizeof(drivers) / sizeof(drivers[0]); d++) {
		char *plan = h_strdup("");
		int indexed = 0;

		res = h_sql(showcase_explain(drivers[d][0]), h_uuid());
		for (i = 0; i < PQntuples(res); i++) {
			const char *l = PQgetvalue(res, i, 0);

			plan = h_sprintf("%s\n%s", plan, l);
			if (strstr(l, "Scan") && (strstr(l, drivers[d][1]) ||
			    (drivers[d][2] && strstr(l, drivers[d][2]))))
				indexed = 1;
		}
		ck_assert_msg(!strstr(plan, "Seq Scan on availability_slots"),
				"%s: sequential scan:%s", drivers[d][0], plan);
		ck_assert_msg(indexed, "%s: no showcase index in the plan:%s",
				drivers[d][0], plan);
	}
	h_sql("RESET enable_seqscan");
}
END_TEST

/* ------------------------------------------------------------ workers */

START_TEST(slot_expiration_job)
{
	const char *owner = h_uuid(), *tenant = h_uuid();
	const char *ins =
		"INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, kind, "
		"  start_at, end_at, time_zone, status, created_at, updated_at) "
		"VALUES ($1, $2, $3, 'Showing', now() + $4::interval, now() + $4::interval + "
		"  interval '30 min', 'UTC', $5, now(), now())";
	char *soon = h_uuid(), *later = h_uuid(), *old_exp = h_uuid(), *old_booked = h_uuid(),
		*recent_booked = h_uuid();

	h_sql(ins, soon, tenant, owner, "30 minutes", "Available");
	h_sql(ins, later, tenant, owner, "3 days", "Available");
	h_sql(ins, old_exp, tenant, owner, "-40 days", "Expired");
	h_sql(ins, old_booked, tenant, owner, "-31 days", "Booked");
	h_sql(ins, recent_booked, tenant, owner, "-2 days", "Booked");
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", soon), "Expired");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", later), "Available");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", old_exp), "Archived");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", old_booked), "Archived");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", recent_booked), "Booked");
	/* travel: 3 days later the other slot is inside the lead time */
	ck_assert_int_eq(h_run_worker_once(3 * 86400), 0);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", later), "Expired");
	/* idempotent by state */
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", soon), "Expired");
}
END_TEST

/* Booked -> Archived 30 days after the end leaves the appointment that
 * references the slot intact: it stays readable, and a later release by the
 * appointment (investor cancel) does not bring the archived slot back. */
START_TEST(slot_expiration_booked_with_appointment)
{
	struct agent a = new_agent();
	char *inv = h_uuid(), *itok = h_token("investor", inv, NULL);
	const char *st = "SELECT status FROM calendar.availability_slots WHERE id = $1";
	const char *slot, *apt;
	struct h_resp *r = h_post(BATCHES, a.token, batch_body("UTC",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"10:00\",\"to\":\"11:00\"}]",
		h_date_in(3), h_date_in(3), 60, "\"autoConfirm\":true"));

	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	slot = h_strdup(idx_str(arr(r->json, "slots"), 0, "id"));
	r = h_post("/api/public/calendar/appointments", itok,
			h_sprintf("{\"slotId\":\"%s\"}", slot));
	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Confirmed");
	apt = h_strdup(h_jstr(r->json, "id"));
	/* the slot as the job sees it 45 days on */
	h_sql("UPDATE calendar.availability_slots SET start_at = start_at - interval '45 days', "
		"end_at = end_at - interval '45 days' WHERE id = $1", slot);
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_str_eq(h_sql_scalar(st, slot), "Archived");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.appointments WHERE id = $1",
			apt), "Confirmed");
	r = h_get(h_sprintf("/api/v1/investor/calendar/appointments/%s", apt), itok);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "slot"), "status"), "Archived");
	r = h_post(h_sprintf("/api/v1/investor/calendar/appointments/%s/cancel", apt), itok, NULL);
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	ck_assert_str_eq(h_sql_scalar(st, slot), "Archived");
}
END_TEST

/* A pin.identity.users.v1 envelope with message id mid. */
static char *user_msg_id(const char *mid, const char *user, const char *name,
		const char *created_at, const char *status)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\","
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\","
		"\"displayName\":\"%s\",\"avatarUrl\":null,\"email\":\"x@example.com\","
		"\"phone\":\"+100\",\"status\":\"%s\"}}", mid, created_at, user, user, name, status);
}

static char *user_msg(const char *user, const char *name, const char *created_at,
		const char *status, char **mid_out)
{
	char *mid = h_sql_scalar("SELECT gen_random_uuid()::text");

	if (mid_out)
		*mid_out = mid;
	return user_msg_id(mid, user, name, created_at, status);
}

START_TEST(identity_replica_consumer)
{
	const char *user = h_uuid();
	const char *q = "SELECT display_name FROM calendar.user_replicas WHERE user_id = $1";
	const char *inbox = "SELECT count(*) FROM calendar.inbox "
		"WHERE consumer_group = 'calendar-identity-users' AND message_id = $1::uuid";
	char *mid;

	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user,
		user_msg(user, "Second", "2026-11-30T10:00:00.000Z", "Active", NULL)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_scalar(q, user) != NULL, 60000), "replica not written");
	ck_assert_str_eq(h_sql_scalar(q, user), "Second");
	/* older message: processed (inbox row) but not applied */
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user,
		user_msg(user, "First", "2026-11-30T09:00:00.000Z", "Active", &mid)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(inbox, mid) == 1, 30000), "older message not consumed");
	ck_assert_str_eq(h_sql_scalar(q, user), "Second");
	/* newer message: applied */
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user,
		user_msg(user, "Third", "2026-11-30T11:00:00.000Z", "Deactivated", NULL)), 0);
	ck_assert_msg(H_WAIT_UNTIL(!strcmp(h_sql_scalar(q, user), "Third"), 30000),
			"newer message not applied");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.user_replicas "
		"WHERE user_id = $1", user), "Deactivated");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM information_schema.columns "
		"WHERE table_schema = 'calendar' AND table_name = 'user_replicas' "
		"AND column_name IN ('email', 'phone')"), 0);
}
END_TEST

/* Redelivery and a replay from the start (inbox rows already purged by
 * housekeeping) converge: one replica row, the newest message wins, every
 * message id is in the inbox once. */
START_TEST(identity_replay_converges)
{
	const char *user = h_uuid();
	const char *q = "SELECT display_name || '/' || status FROM calendar.user_replicas "
		"WHERE user_id = $1";
	const char *inbox = "SELECT count(*) FROM calendar.inbox "
		"WHERE consumer_group = 'calendar-identity-users' AND message_id = $1::uuid";
	const char *t = "pin.identity.users.v1";
	char *m1 = h_sql_scalar("SELECT gen_random_uuid()::text");
	char *m2 = h_sql_scalar("SELECT gen_random_uuid()::text");
	char *m3 = h_sql_scalar("SELECT gen_random_uuid()::text");
	char *v1 = user_msg_id(m1, user, "Old Name", "2026-11-30T08:00:00.000Z", "Active");
	char *v2 = user_msg_id(m2, user, "New Name", "2026-11-30T09:00:00.000Z", "Active");
	char *v3 = user_msg_id(m3, user, "Newest Name", "2026-11-30T10:00:00.000Z", "Deactivated");
	char *sentinel;

	ck_assert_int_eq(h_kafka_produce(t, user, v1), 0);
	ck_assert_int_eq(h_kafka_produce(t, user, v2), 0);
	ck_assert_int_eq(h_kafka_produce(t, user, v3), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(inbox, m3) == 1, 60000), "first pass not consumed");
	ck_assert_str_eq(h_sql_scalar(q, user), "Newest Name/Deactivated");

	/* redelivery of all three (inbox hits), then a replay as if from offset 0
	 * with the inbox rows gone (the replica's last event time decides) */
	ck_assert_int_eq(h_kafka_produce(t, user, v3), 0);
	ck_assert_int_eq(h_kafka_produce(t, user, v1), 0);
	ck_assert_int_eq(h_kafka_produce(t, user, v2), 0);
	h_sql("DELETE FROM calendar.inbox WHERE consumer_group = 'calendar-identity-users' "
		"AND message_id IN ($1::uuid, $2::uuid)", m1, m2);
	ck_assert_int_eq(h_kafka_produce(t, user, v1), 0);
	ck_assert_int_eq(h_kafka_produce(t, user, v2), 0);
	/* same key, same partition: once this older sentinel is in the inbox,
	 * everything produced before it was handled */
	sentinel = user_msg(user, "Sentinel", "2026-11-30T07:00:00.000Z", "Active", &m1);
	ck_assert_int_eq(h_kafka_produce(t, user, sentinel), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(inbox, m1) == 1, 60000), "replay not consumed");
	ck_assert_str_eq(h_sql_scalar(q, user), "Newest Name/Deactivated");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.user_replicas "
		"WHERE user_id = $1", user), 1);
	ck_assert_int_eq(h_sql_int(inbox, m2), 1);
	ck_assert_int_eq(h_sql_int(inbox, m3), 1);
	ck_assert_str_eq(h_sql_scalar("SELECT last_event_at = '2026-11-30T10:00:00Z' "
		"FROM calendar.user_replicas WHERE user_id = $1", user), "t");
}
END_TEST

static bool dlq_for(const struct h_kmsg *m, void *ud)
{
	return m->key && !strcmp(m->key, (const char *)ud);
}

START_TEST(identity_invalid_payload_dlq)
{
	const char *key = h_uuid();
	char *mid = h_sql_scalar("SELECT gen_random_uuid()::text");

	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", key, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"not-a-uuid\",\"status\":\"Active\"}}", mid, key)), 0);
	ck_assert_msg(h_kafka_wait("calendar-identity-users.dlq", 60000, dlq_for, (void *)key)
			!= NULL, "no DLQ message");
}
END_TEST

Suite *make_slots_suite(void)
{
	Suite *s = suite_create("slots");
	TCase *tc;

	tc = h_tcase("dst", 60);
	tcase_add_test(tc, dst_berlin_spring_forward);
	tcase_add_test(tc, dst_new_york_spring_forward);
	tcase_add_test(tc, dst_sydney_fall_back_first_occurrence);
	tcase_add_test(tc, dst_sydney_fall_back_publish);
	tcase_add_test(tc, dst_new_york_preview_equals_publish);
	tcase_add_test(tc, dst_berlin_fall_back_db_only);
	tcase_add_test(tc, dst_duration_across_gap_overlap);
	tcase_add_test(tc, dst_weekly_window_keeps_wall_time);
	tcase_add_test(tc, lead_time_boundary_db);
	tcase_add_test(tc, lead_time_through_api);
	suite_add_tcase(s, tc);

	tc = h_tcase("batches", 60);
	tcase_add_test(tc, overlap_with_existing_and_exclusion_constraint);
	tcase_add_test(tc, batch_too_large_writes_nothing);
	tcase_add_test(tc, batch_limit_counts_created_slots);
	tcase_add_test(tc, publish_idempotency_key);
	tcase_add_test(tc, validation_errors);
	tcase_add_test(tc, tz_canonical_spelling);
	tcase_add_test(tc, auth_errors);
	tcase_add_test(tc, archive_slot_and_batch);
	tcase_add_test(tc, agent_list_filters_and_paging);
	suite_add_tcase(s, tc);

	tc = h_tcase("showcase", 60);
	tcase_add_test(tc, showcase_filters);
	tcase_add_test(tc, showcase_uses_index);
	suite_add_tcase(s, tc);

	tc = h_tcase("workers", 180);
	tcase_add_test(tc, slot_expiration_job);
	tcase_add_test(tc, slot_expiration_booked_with_appointment);
	tcase_add_test(tc, identity_replica_consumer);
	tcase_add_test(tc, identity_replay_converges);
	tcase_add_test(tc, identity_invalid_payload_dlq);
	suite_add_tcase(s, tc);
	return s;
}
