/*
 * test_slots.c -- slots.so and the slot parts of workers.so against the test
 * stack: DST matrix of the generation, the lead-time boundary, overlaps, the
 * batch limit, every 4xx of the agent slot API, the public showcase filters,
 * slot-expiration and the identity replica consumer.
 *
 * Dates: the host clock is the wall clock and batches must lie in [today,
 * today + 183] (in the batch zone), so fixed dates expire.  The DST tests
 * that go through preview/publish find each zone's next offset change in
 * the time zone database at run time and compute their expectations from
 * it (see "DST matrix" below); fixed 2027 cases stay as a second layer on
 * calendar.slot_plan, the very function preview and publish call, which has
 * no horizon (the HTTP layer adds nothing to the generation but
 * validation).  Other tests use dates relative to today (h_date_in).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "sdk/civil.h"

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

/*
 * The DST tests do not use fixed dates (publishing refuses past dates and
 * dates after today + 183, so fixed dates expire).  Each test asks the test
 * PostgreSQL's time zone database for its zone's next offset change of one
 * direction (h_tz_next_change: local noons compared day by day, then the
 * minute of the change) whose local date lies in [today + 8, today + 175]:
 * batches from the day before to the day after it (a fortnight either side
 * for the weekly test, clipped) then stay inside [today + 2, today + 181],
 * clear of the lead time and of the horizon in every zone.  The expected
 * result is computed here from that change alone (dst_expect: a wall-clock
 * model -- before the change the old offset, in a spring gap nothing
 * ('dst_gap'), in a fall-back overlap the first (old-offset) reading, after
 * it the new offset; candidates in UTC order, a start inside a slot kept
 * before it is an 'overlap') and compared with the whole answer of the API.
 *
 * A zone without a change of that direction inside the window (Berlin and
 * New York have no fall-back from about May to October, Sydney no spring
 * forward from October to March) takes the first change of the same
 * direction of the other two zones inside it, so the HTTP path is still
 * tested with a real change.  When none of the three has one (spring: about
 * 23 March - 9 April; fall: about 28 March - 3 May) the test runs the same
 * batch DB-only on calendar.slot_plan -- the function preview and publish
 * call -- at the zone's next change with now = two days before the batch,
 * asserts the same exact expectations and says so on stderr; the parts that
 * need a publish (stored rows, republish) are then not run.  Never a silent
 * pass: every test asserts a computed, non-empty expectation.
 *
 * PIN_TEST_DST_SHIFT_DAYS=N moves the tests' "today" for the search by N
 * days (changes that then fall outside the real horizon go DB-only): a way
 * to check these tests on other dates by hand.  dst_model_any_date checks it
 * on every run for a spread of dates, and the fixed 2027 cases below
 * (dst_fixed_*) keep the hand-written expectations on calendar.slot_plan.
 */
#define DST_FIRST_DAY 8
#define DST_LAST_DAY 175

static const char *const dst_zones[] = { "Europe/Berlin", "America/New_York",
	"Australia/Sydney", NULL };

struct dst {
	const char *zone;        /* the zone of the batches */
	struct h_tz_change ch;
	long day;                /* ch.date, days since 1970-01-01 */
	int lb, la;              /* wall clock of the change on ch.date (minutes):
	                            old reading (02:00 Berlin spring) and new (03:00) */
	bool api;                /* inside the horizon: through preview/publish */
};

static long day_of(const char *ymd)
{
	long y;
	unsigned m, d;

	ck_assert_msg(sscanf(ymd, "%ld-%u-%u", &y, &m, &d) == 3, "bad date %s", ymd);
	return (long)pc_days_from_civil(y, m, d);
}

static char *ymd_of(long day)
{
	time_t t = (time_t)day * 86400;
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
	return h_strdup(buf);
}

static char *iso_of(long long s)
{
	time_t t = (time_t)s;
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return h_strdup(buf);
}

static char *hhmm(int min)
{
	return h_sprintf("%02d:%02d", min / 60, min % 60);
}

/* ISO weekday (1 = Monday) as the bit of a dst_win mask. */
static unsigned dow_bit(long day)
{
	return 1u << (((day % 7) + 7 + 3) % 7 + 1);   /* 1970-01-01: Thursday */
}

static void dst_fill(struct dst *z, const char *zone, bool api)
{
	z->zone = zone;
	z->day = day_of(z->ch.date);
	z->lb = (int)((z->ch.at_s + z->ch.before_min * 60LL - z->day * 86400LL) / 60);
	z->la = z->lb + z->ch.after_min - z->ch.before_min;
	z->api = api;
}

/* Next change of direction dir for zone (see the comment above). */
static void dst_pick(const char *zone, int dir, struct dst *z)
{
	int shift = atoi(h_env_opt("PIN_TEST_DST_SHIFT_DAYS", "0"));
	const char *from = h_date_in(shift + DST_FIRST_DAY), *to = h_date_in(shift + DST_LAST_DAY);
	const char *used = zone;
	size_t i;

	memset(z, 0, sizeof(*z));
	if (h_tz_next_change(zone, from, to, dir, &z->ch) < 0) {
		used = NULL;
		for (i = 0; dst_zones[i] && !used; i++)
			if (strcmp(dst_zones[i], zone) &&
			    h_tz_next_change(dst_zones[i], from, to, dir, &z->ch) == 0)
				used = dst_zones[i];
	}
	if (!used) {
		used = zone;
		ck_assert_msg(h_tz_next_change(zone, from, h_date_in(shift + 800), dir,
				&z->ch) == 0, "%s: no change of direction %d in 800 days", zone, dir);
	}
	dst_fill(z, used, false);
	z->api = z->day >= day_of(h_date_in(DST_FIRST_DAY)) &&
		z->day <= day_of(h_date_in(DST_LAST_DAY));
	fprintf(stderr, "dst: %s %s -> %s %s at %s (%+d -> %+d min, wall %s -> %s), %s\n",
			zone, dir > 0 ? "spring forward" : "fall back", z->zone, z->ch.date,
			z->ch.at, z->ch.before_min, z->ch.after_min, hhmm(z->lb), hhmm(z->la),
			z->api ? "through the API" : "DB-only: outside the publish horizon");
	ck_assert_msg(dir > 0 ? z->la > z->lb : z->la < z->lb, "direction of %s", z->ch.at);
	/* the windows below sit around the change and before 09:00 */
	ck_assert_msg(z->lb >= 60 && z->lb <= 480 && z->la >= 60 && z->la <= 480,
			"change at an unexpected wall time %d/%d", z->lb, z->la);
}

/* UTC instant of local (day, min) near z's change; false in the spring gap
 * (*at: the old-offset reading, for ordering only).  In the fall-back
 * overlap the first occurrence (old offset). */
static bool dst_instant(const struct dst *z, long day, int min, long long *at)
{
	int off = z->ch.after_min;
	bool ok = true;

	if (day < z->day || (day == z->day && min < z->lb)) {
		off = z->ch.before_min;
	} else if (day == z->day && min < z->la) {
		off = z->ch.before_min;
		ok = false;
	}
	*at = (long long)day * 86400 + (long long)min * 60 - (long long)off * 60;
	return ok;
}

struct dst_win {
	unsigned dows;           /* dow_bit() mask */
	int from, to;            /* minutes */
};

struct dst_batch {
	const struct dst *z;
	struct dst_win w[3];
	size_t nw;
	long from, to;           /* days */
	int dur, gap;
	const char *extra;       /* more body members or NULL */
};

static char *windows_json(const struct dst_batch *b)
{
	char *s = h_strdup("[");
	size_t i;
	int d;

	for (i = 0; i < b->nw; i++) {
		char *days = h_strdup("");

		for (d = 1; d <= 7; d++)
			if (b->w[i].dows & (1u << d))
				days = h_sprintf("%s%s%d", days, *days ? "," : "", d);
		s = h_sprintf("%s%s{\"daysOfWeek\":[%s],\"from\":\"%s\",\"to\":\"%s\"}", s,
				i ? "," : "", days, hhmm(b->w[i].from), hhmm(b->w[i].to));
	}
	return h_sprintf("%s]", s);
}

static char *dst_body(const struct dst_batch *b)
{
	char *extra = b->gap ? h_sprintf("\"gapMinutes\":%d", b->gap) : NULL;

	if (b->extra)
		extra = extra ? h_sprintf("%s,%s", extra, b->extra) : h_strdup(b->extra);
	return batch_body(b->z->zone, windows_json(b), ymd_of(b->from), ymd_of(b->to),
			b->dur, extra);
}

struct dst_cand {
	long day;
	int min;
	size_t widx;
	long long at;
	bool gap;
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct dst_cand *a = pa, *b = pb;

	if (a->at != b->at)
		return a->at < b->at ? -1 : 1;
	if (a->day != b->day)
		return a->day < b->day ? -1 : 1;
	if (a->min != b->min)
		return a->min < b->min ? -1 : 1;
	return a->widx < b->widx ? -1 : a->widx > b->widx;
}

/* The expected preview of b ({"slots": [...], "skipped": [...]}), computed
 * from the change alone (not by the code under test). */
static struct h_resp *dst_expect(const struct dst_batch *b)
{
	struct dst_cand *c = NULL;
	size_t n = 0, cap = 0, i, k;
	json_object *o = json_object_new_object(), *slots = json_object_new_array(),
		*skipped = json_object_new_array();
	long long kept_end = 0;
	bool kept_any = false;
	long day;

	ck_assert(b->from >= b->z->day - 60 && b->to <= b->z->day + 60);
	for (day = b->from; day <= b->to; day++)
		for (k = 0; k < b->nw; k++) {
			int m;

			if (!(b->w[k].dows & dow_bit(day)))
				continue;
			for (m = b->w[k].from; m + b->dur <= b->w[k].to; m += b->dur + b->gap) {
				if (n == cap) {
					cap = cap ? cap * 2 : 64;
					c = realloc(c, cap * sizeof(*c));
					ck_assert(c != NULL);
				}
				c[n].day = day;
				c[n].min = m;
				c[n].widx = k;
				c[n].gap = !dst_instant(b->z, day, m, &c[n].at);
				n++;
			}
		}
	if (n)
		qsort(c, n, sizeof(*c), cand_cmp);
	for (i = 0; i < n; i++) {
		json_object *e = json_object_new_object();
		const char *reason = NULL;

		json_object_object_add(e, "localDate", json_object_new_string(ymd_of(c[i].day)));
		json_object_object_add(e, "localStart", json_object_new_string(hhmm(c[i].min)));
		if (c[i].gap) {
			reason = "dst_gap";
		} else if (kept_any && c[i].at < kept_end) {
			reason = "overlap";
		} else {
			kept_any = true;
			if (c[i].at + b->dur * 60LL > kept_end)
				kept_end = c[i].at + b->dur * 60LL;
		}
		if (reason) {
			json_object_object_add(e, "reason", json_object_new_string(reason));
			json_object_array_add(skipped, e);
		} else {
			json_object_object_add(e, "startAt", json_object_new_string(iso_of(c[i].at)));
			json_object_object_add(e, "endAt",
					json_object_new_string(iso_of(c[i].at + b->dur * 60LL)));
			json_object_array_add(slots, e);
		}
	}
	free(c);
	json_object_object_add(o, "slots", slots);
	json_object_object_add(o, "skipped", skipped);
	return h_resp_json(200, o);
}

/* calendar.slot_plan called directly, in the preview's shape. */
static struct h_resp *sql_plan(const char *tz, const char *windows, const char *from,
		const char *to, int dur, int gap, const char *now)
{
	PGresult *res = h_sql(
		"SELECT local_date::text, to_char(local_start, 'HH24:MI'), "
		"       to_char(start_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
		"       to_char(end_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), reason "
		"FROM calendar.slot_plan($1::uuid, $2, $3::jsonb, $4::date, $5::date, "
		"                        $6::int, $7::int, $8::timestamptz)",
		h_uuid(), tz, windows, from, to, h_sprintf("%d", dur), h_sprintf("%d", gap), now);
	json_object *o = json_object_new_object(), *slots = json_object_new_array(),
		*skipped = json_object_new_array();
	int i;

	for (i = 0; i < PQntuples(res); i++) {
		json_object *e = json_object_new_object();

		json_object_object_add(e, "localDate", json_object_new_string(PQgetvalue(res, i, 0)));
		json_object_object_add(e, "localStart", json_object_new_string(PQgetvalue(res, i, 1)));
		if (PQgetisnull(res, i, 4)) {
			json_object_object_add(e, "startAt",
					json_object_new_string(PQgetvalue(res, i, 2)));
			json_object_object_add(e, "endAt",
					json_object_new_string(PQgetvalue(res, i, 3)));
			json_object_array_add(slots, e);
		} else {
			json_object_object_add(e, "reason",
					json_object_new_string(PQgetvalue(res, i, 4)));
			json_object_array_add(skipped, e);
		}
	}
	json_object_object_add(o, "slots", slots);
	json_object_object_add(o, "skipped", skipped);
	return h_resp_json(200, o);
}

/* The preview of b: over HTTP when the change is inside the horizon, else
 * calendar.slot_plan directly with now = two days before fromDate. */
static struct h_resp *dst_run(const struct agent *a, const struct dst_batch *b)
{
	if (b->z->api)
		return preview(a, dst_body(b));
	return sql_plan(b->z->zone, windows_json(b), ymd_of(b->from), ymd_of(b->to),
			b->dur, b->gap, h_sprintf("%sT00:00:00Z", ymd_of(b->from - 2)));
}

/* Prints both answers when cond fails (they are too long for a Check
 * message), then fails with msg. */
#define plan_check(cond, got, want, ...) do {                                  \
		if (!(cond))                                                    \
			fprintf(stderr, "got  %s\nwant %s\n", (got)->body, (want)->body); \
		ck_assert_msg((cond), __VA_ARGS__);                             \
	} while (0)

/* got has exactly want's slots (in order: startAt, endAt and, for a
 * preview, localDate and localStart; a publish answers stored slots) and
 * want's skipped entries (any order). */
static void assert_plan(const struct h_resp *got, const struct h_resp *want)
{
	static const char *const keys[] = { "startAt", "endAt", "localDate", "localStart" };
	json_object *gs, *ws = arr(want->json, "slots");
	json_object *gk, *wk = arr(want->json, "skipped");
	size_t i, j, k, n, nk;
	bool used[512];

	ck_assert_msg(got->status == 200 || got->status == 201, "%ld %.300s", got->status,
			got->body);
	gs = arr(got->json, "slots");
	gk = arr(got->json, "skipped");
	n = json_object_array_length(gk);
	nk = h_jget(got->json, "batch") ? 2 : 4;
	plan_check(json_object_array_length(gs) == json_object_array_length(ws), got, want,
			"%zu slots, want %zu", json_object_array_length(gs),
			json_object_array_length(ws));
	for (i = 0; i < json_object_array_length(ws); i++)
		for (k = 0; k < nk; k++) {
			const char *g = idx_str(gs, i, keys[k]), *w = idx_str(ws, i, keys[k]);

			plan_check(g && w && !strcmp(g, w), got, want, "slot %zu %s: %s, want %s",
					i, keys[k], g ? g : "(none)", w);
		}
	plan_check(n == json_object_array_length(wk) && n < 512, got, want,
			"%zu skipped, want %zu", n, json_object_array_length(wk));
	memset(used, 0, sizeof(used));
	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++)
			if (!used[j] && !strcmp(idx_str(gk, j, "localDate"), idx_str(wk, i, "localDate"))
			    && !strcmp(idx_str(gk, j, "localStart"), idx_str(wk, i, "localStart"))
			    && !strcmp(idx_str(gk, j, "reason"), idx_str(wk, i, "reason")))
				break;
		plan_check(j < n, got, want, "skipped %s %s %s missing",
				idx_str(wk, i, "localDate"), idx_str(wk, i, "localStart"),
				idx_str(wk, i, "reason"));
		used[j] = true;
	}
}

static int count_reason(const struct h_resp *r, const char *reason)
{
	json_object *sk = arr(r->json, "skipped");
	size_t i;
	int n = 0;

	for (i = 0; i < json_object_array_length(sk); i++)
		n += !strcmp(idx_str(sk, i, "reason"), reason);
	return n;
}

/* Slots of r starting in [from, to) (ISO UTC strings compare as instants). */
static int count_starts_between(const struct h_resp *r, const char *from, const char *to)
{
	json_object *s = arr(r->json, "slots");
	size_t i;
	int n = 0;

	for (i = 0; i < json_object_array_length(s); i++)
		n += strcmp(idx_str(s, i, "startAt"), from) >= 0 &&
			strcmp(idx_str(s, i, "startAt"), to) < 0;
	return n;
}

/* Comma-separated values of key in r's slots (for SQL string_to_array). */
static char *slots_csv(const struct h_resp *r, const char *key, const char *key2)
{
	json_object *s = arr(r->json, "slots");
	char *out = h_strdup("");
	size_t i;

	for (i = 0; i < json_object_array_length(s); i++)
		out = h_sprintf("%s%s%s%s%s", out, i ? "," : "", idx_str(s, i, key),
				key2 ? " " : "", key2 ? idx_str(s, i, key2) : "");
	return out;
}

/* Spring forward: the wall-clock hour the change skips has no slot
 * ('dst_gap'), the kept slots around it carry their wall-clock label. */
static void dst_spring_preview(const char *zone, int dur)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want;

	dst_pick(zone, +1, &z);
	b = (struct dst_batch){ .z = &z, .nw = 2, .from = z.day, .to = z.day, .dur = dur,
		.w = { { dow_bit(z.day), z.lb - 60, z.la + 60 },
		       { dow_bit(z.day), 14 * 60, 15 * 60 } } };
	want = dst_expect(&b);
	ck_assert_int_eq(count_reason(want, "dst_gap"), (z.la - z.lb + dur - 1) / dur);
	ck_assert_int_eq((int)json_object_array_length(arr(want->json, "skipped")),
			(z.la - z.lb + dur - 1) / dur);
	assert_plan(dst_run(&a, &b), want);
}

START_TEST(dst_berlin_spring_forward)
{
	dst_spring_preview("Europe/Berlin", 30);
}
END_TEST

START_TEST(dst_new_york_spring_forward)
{
	dst_spring_preview("America/New_York", 60);
}
END_TEST

START_TEST(dst_sydney_spring_forward)
{
	dst_spring_preview("Australia/Sydney", 30);
}
END_TEST

/* Fall back: the repeated wall-clock hour is laid once, at its first
 * (old-offset) occurrence; nothing is skipped. */
static void dst_fall_preview(const char *zone, int dur)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want, *got;
	const char *second, *second_end;
	json_object *s;
	size_t i;
	int amb = 0;

	dst_pick(zone, -1, &z);
	b = (struct dst_batch){ .z = &z, .nw = 2, .from = z.day, .to = z.day, .dur = dur,
		.w = { { dow_bit(z.day), z.la - 30, z.lb + 30 },
		       { dow_bit(z.day), 15 * 60, 16 * 60 } } };
	want = dst_expect(&b);
	got = dst_run(&a, &b);
	assert_plan(got, want);
	ck_assert_int_eq((int)json_object_array_length(arr(got->json, "skipped")), 0);
	/* each ambiguous wall-clock start once ... */
	s = arr(got->json, "slots");
	for (i = 0; i < json_object_array_length(s); i++) {
		int h, m;

		ck_assert(sscanf(idx_str(s, i, "localStart"), "%d:%d", &h, &m) == 2);
		amb += h * 60 + m >= z.la && h * 60 + m < z.lb;
	}
	ck_assert_int_eq(amb, (z.lb - z.la + dur - 1) / dur);
	/* ... and never at its second occurrence [change, change + shift) */
	second = iso_of(z.ch.at_s);
	second_end = iso_of(z.ch.at_s + (z.ch.before_min - z.ch.after_min) * 60LL);
	ck_assert_int_eq(count_starts_between(got, second, second_end), 0);
	/* the first occurrence is the old offset: the first ambiguous start is
	 * before the change instant */
	ck_assert_int_eq(count_starts_between(got, iso_of(z.ch.at_s -
			(z.ch.before_min - z.ch.after_min) * 60LL), second), amb);
}

START_TEST(dst_berlin_fall_back_first_occurrence)
{
	dst_fall_preview("Europe/Berlin", 30);
}
END_TEST

START_TEST(dst_new_york_fall_back_first_occurrence)
{
	dst_fall_preview("America/New_York", 60);
}
END_TEST

START_TEST(dst_sydney_fall_back_first_occurrence)
{
	dst_fall_preview("Australia/Sydney", 30);
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

/* The zone's fall-back end to end: preview, then publish of the same body
 * (same result), morning and afternoon windows on the day before, the day
 * of and the day after the change keep their wall time (the UTC instant
 * moves by the shift), and the ambiguous hour is laid once, at its first
 * occurrence. */
static void dst_fall_publish(const char *zone)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want, *pv, *pb;
	unsigned days;
	int n;

	dst_pick(zone, -1, &z);
	days = dow_bit(z.day - 1) | dow_bit(z.day) | dow_bit(z.day + 1);
	b = (struct dst_batch){ .z = &z, .nw = 3, .from = z.day - 1, .to = z.day + 1,
		.dur = 30, .w = { { days, 9 * 60, 10 * 60 }, { days, 15 * 60, 16 * 60 },
		                  { dow_bit(z.day), z.la, z.lb } } };
	want = dst_expect(&b);
	n = (int)json_object_array_length(arr(want->json, "slots"));
	ck_assert_int_eq(n, 12 + (z.lb - z.la) / 30);
	pv = dst_run(&a, &b);
	assert_plan(pv, want);
	if (!z.api) {
		fprintf(stderr, "dst: %s fall back: publish part not run (DB-only)\n", zone);
		return;
	}
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1", a.sub), 0);
	pb = h_post(BATCHES, a.token, dst_body(&b));
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	assert_plan(pb, want);
	assert_preview_eq_publish(pv, pb);
	/* stored: every slot at its local wall time ... */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND time_zone = $2 "
		"AND to_char(start_at AT TIME ZONE $2, 'YYYY-MM-DD HH24:MI') "
		"    = ANY (string_to_array($3, ','))", a.sub, z.zone,
		slots_csv(want, "localDate", "localStart")), n);
	/* ... none at the second occurrence of the ambiguous hour */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND start_at >= $2::timestamptz "
		"AND start_at < $2::timestamptz + make_interval(mins => $3::int)", a.sub,
		z.ch.at, h_sprintf("%d", z.ch.before_min - z.ch.after_min)), 0);
	/* publishing it again creates nothing: every slot is an overlap now */
	pb = h_post(BATCHES, a.token, dst_body(&b));
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	ck_assert_int_eq(json_object_get_int(h_jget(pb->json, "created")), 0);
	ck_assert_int_eq((int)json_object_array_length(arr(pb->json, "skipped")), n);
	ck_assert_int_eq(count_reason(pb, "overlap"), n);
}

START_TEST(dst_sydney_fall_back_publish)
{
	dst_fall_publish("Australia/Sydney");
}
END_TEST

START_TEST(dst_berlin_fall_back_publish)
{
	dst_fall_publish("Europe/Berlin");
}
END_TEST

/* Preview and publish agree on a spring-forward day too (dst_gap skips):
 * windows on the day before and the day of the change, with a gap between
 * slots so a start falls inside the skipped hour. */
static void dst_spring_publish(const char *zone)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want, *pv, *pb;
	int n;

	dst_pick(zone, +1, &z);
	b = (struct dst_batch){ .z = &z, .nw = 2, .from = z.day - 1, .to = z.day, .dur = 30,
		.gap = 15, .w = { { dow_bit(z.day - 1) | dow_bit(z.day), z.lb - 60, z.la + 60 },
		                  { dow_bit(z.day), 13 * 60, 14 * 60 + 30 } } };
	want = dst_expect(&b);
	n = (int)json_object_array_length(arr(want->json, "slots"));
	ck_assert_int_ge(count_reason(want, "dst_gap"), 1);
	pv = dst_run(&a, &b);
	assert_plan(pv, want);
	if (!z.api) {
		fprintf(stderr, "dst: %s spring forward: publish part not run (DB-only)\n", zone);
		return;
	}
	pb = h_post(BATCHES, a.token, dst_body(&b));
	ck_assert_msg(pb->status == 201, "%ld %s", pb->status, pb->body);
	assert_preview_eq_publish(pv, pb);
	assert_plan(pb, want);
	ck_assert_int_eq(json_object_get_int(h_jget(pb->json, "created")), n);
	/* stored at exactly the computed instants (old offset the day before,
	 * new offset after the change) */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND start_at = ANY "
		"(string_to_array($2, ',')::timestamptz[])", a.sub,
		slots_csv(want, "startAt", NULL)), n);
}

START_TEST(dst_new_york_preview_equals_publish)
{
	dst_spring_publish("America/New_York");
}
END_TEST

START_TEST(dst_berlin_preview_equals_publish)
{
	dst_spring_publish("Europe/Berlin");
}
END_TEST

/* A slot spanning the spring gap lasts real minutes: the next local start
 * would overlap it and is skipped as overlap (never a doubled booking). */
START_TEST(dst_duration_across_gap_overlap)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want;

	dst_pick("Europe/Berlin", +1, &z);
	ck_assert_int_ge(z.lb, 120);
	/* 90 min from two hours before the change: the second slot spans it */
	b = (struct dst_batch){ .z = &z, .nw = 1, .from = z.day, .to = z.day, .dur = 90,
		.w = { { dow_bit(z.day), z.lb - 120, z.lb + 240 } } };
	want = dst_expect(&b);
	ck_assert_int_eq(count_reason(want, "overlap"), 1);
	ck_assert_int_eq(count_reason(want, "dst_gap"), 0);
	assert_plan(dst_run(&a, &b), want);
}
END_TEST

/* Weekly window keeps its local wall time across the change (10:00 Berlin:
 * 09:00Z in CET, 08:00Z in CEST), published. */
START_TEST(dst_weekly_window_keeps_wall_time)
{
	struct agent a = new_agent();
	struct dst z;
	struct dst_batch b;
	struct h_resp *want, *r;
	json_object *s;
	int n;

	dst_pick("Europe/Berlin", +1, &z);
	b = (struct dst_batch){ .z = &z, .nw = 1, .from = z.day - 13, .to = z.day + 13,
		.dur = 60, .extra = "\"projectId\":\"11111111-2222-4333-8444-555555555555\"",
		.w = { { dow_bit(z.day + 2), 10 * 60, 11 * 60 } } };
	if (z.api) {
		long lo = day_of(h_date_in(2)), hi = day_of(h_date_in(181));

		b.from = b.from < lo ? lo : b.from;
		b.to = b.to > hi ? hi : b.to;
	}
	want = dst_expect(&b);
	s = arr(want->json, "slots");
	n = (int)json_object_array_length(s);
	/* at least one before and one after the change, at different UTC times */
	ck_assert_int_ge(n, 2);
	ck_assert_str_ne(idx_str(s, 0, "startAt") + 11, idx_str(s, n - 1, "startAt") + 11);
	if (!z.api) {
		fprintf(stderr, "dst: weekly window: DB-only (no publish)\n");
		assert_plan(dst_run(&a, &b), want);
		return;
	}
	r = h_post(BATCHES, a.token, dst_body(&b));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	assert_plan(r, want);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), n);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "batch"), "timeZone"), z.zone);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND status = 'Available' "
		"AND to_char(start_at AT TIME ZONE $2, 'HH24:MI') = '10:00'", a.sub, z.zone), n);
}
END_TEST

/* The model above against calendar.slot_plan for a spread of "todays" (past
 * and up to two years ahead): each zone's next change of each direction is
 * found and the spring/fall batches of the preview tests give exactly the
 * computed result.  This is what keeps the date-relative tests honest on
 * dates other than the day they run. */
START_TEST(dst_model_any_date)
{
	static const int shifts[] = { -400, -200, 0, 60, 120, 180, 240, 300, 365, 500, 730 };
	size_t i, k;
	int dir;

	for (i = 0; i < sizeof(shifts) / sizeof(shifts[0]); i++)
		for (k = 0; dst_zones[k]; k++)
			for (dir = -1; dir <= 1; dir += 2) {
				struct dst z;
				struct dst_batch b;
				struct h_resp *want;

				memset(&z, 0, sizeof(z));
				ck_assert_msg(h_tz_next_change(dst_zones[k], h_date_in(shifts[i]),
						h_date_in(shifts[i] + 400), dir, &z.ch) == 0,
						"%s: no change %d after today %+d", dst_zones[k], dir,
						shifts[i]);
				dst_fill(&z, dst_zones[k], false);
				b = (struct dst_batch){ .z = &z, .nw = 2, .from = z.day - 1,
					.to = z.day + 1, .dur = 30, .gap = dir > 0 ? 15 : 0,
					.w = { { 0xfe, z.lb - 90, z.lb + 90 },
					       { dow_bit(z.day), 15 * 60, 16 * 60 } } };
				want = dst_expect(&b);
				ck_assert_int_eq(count_reason(want, "dst_gap") > 0, dir > 0);
				assert_plan(dst_run(NULL, &b), want);
			}
}
END_TEST

/* ------------------------------------------------ DST: fixed dates, SQL */

/* Second layer: hand-written expectations for the 2027 changes on
 * calendar.slot_plan called directly (no publish horizon), now = 2027-01-01. */
#define FIXED_NOW "2027-01-01T00:00:00Z"

START_TEST(dst_fixed_changes_found)
{
	static const struct {
		const char *zone;
		int dir;
		const char *date, *at;
		int before, after;
	} want[] = {
		{ "Europe/Berlin", 1, "2027-03-28", "2027-03-28T01:00:00Z", 60, 120 },
		{ "Europe/Berlin", -1, "2027-10-31", "2027-10-31T01:00:00Z", 120, 60 },
		{ "America/New_York", 1, "2027-03-14", "2027-03-14T07:00:00Z", -300, -240 },
		{ "America/New_York", -1, "2027-11-07", "2027-11-07T06:00:00Z", -240, -300 },
		{ "Australia/Sydney", -1, "2027-04-04", "2027-04-03T16:00:00Z", 660, 600 },
		{ "Australia/Sydney", 1, "2027-10-03", "2027-10-02T16:00:00Z", 600, 660 },
	};
	struct h_tz_change ch;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ck_assert_msg(h_tz_next_change(want[i].zone, "2027-01-01", "2027-12-31",
				want[i].dir, &ch) == 0, "%s %d", want[i].zone, want[i].dir);
		ck_assert_str_eq(ch.date, want[i].date);
		ck_assert_str_eq(ch.at, want[i].at);
		ck_assert_str_eq(iso_of(ch.at_s), want[i].at);
		ck_assert_int_eq(ch.before_min, want[i].before);
		ck_assert_int_eq(ch.after_min, want[i].after);
	}
	/* none: outside the season, or a zone without changes */
	ck_assert_int_eq(h_tz_next_change("Europe/Berlin", "2027-04-01", "2027-09-30", 1, &ch), -1);
	ck_assert_int_eq(h_tz_next_change("Europe/Berlin", "2027-03-29", "2027-10-30", 0, &ch), -1);
	ck_assert_int_eq(h_tz_next_change("UTC", "2027-01-01", "2027-12-31", 0, &ch), -1);
	/* either direction: the first one */
	ck_assert_int_eq(h_tz_next_change("Australia/Sydney", "2027-01-01", "2027-12-31", 0, &ch), 0);
	ck_assert_str_eq(ch.date, "2027-04-04");
}
END_TEST

START_TEST(dst_fixed_spring_forward_sql)
{
	struct h_resp *r = sql_plan("Europe/Berlin",
		"[{\"daysOfWeek\":[7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"14:00\",\"to\":\"15:00\"}]",
		"2027-03-28", "2027-03-28", 30, 0, FIXED_NOW);
	static const char *const berlin[] = { "2027-03-28T00:00:00Z", "2027-03-28T00:30:00Z",
		"2027-03-28T01:00:00Z", "2027-03-28T01:30:00Z",
		"2027-03-28T12:00:00Z", "2027-03-28T12:30:00Z", NULL };
	static const char *const berlin_sk[] = { "2027-03-28 02:00 dst_gap",
		"2027-03-28 02:30 dst_gap", NULL };
	static const char *const ny[] = { "2027-03-14T06:00:00Z", "2027-03-14T07:00:00Z",
		"2027-03-14T18:00:00Z", NULL };
	static const char *const ny_sk[] = { "2027-03-14 02:00 dst_gap", NULL };
	static const char *const ny15_sk[] = { "2027-03-14 02:30 dst_gap", NULL };
	static const char *const across[] = { "2027-03-27T23:00:00Z", "2027-03-28T00:30:00Z",
		"2027-03-28T02:30:00Z", NULL };
	static const char *const across_sk[] = { "2027-03-28 03:00 overlap", NULL };
	static const char *const weekly[] = { "2027-03-16T09:00:00Z", "2027-03-23T09:00:00Z",
		"2027-03-30T08:00:00Z", "2027-04-06T08:00:00Z", NULL };
	static const char *const none[] = { NULL };

	assert_starts(r, berlin);
	assert_skipped(r, berlin_sk);
	ck_assert_str_eq(idx_str(arr(r->json, "slots"), 2, "localStart"), "03:00");
	ck_assert_str_eq(idx_str(arr(r->json, "slots"), 4, "localStart"), "14:00");

	r = sql_plan("America/New_York",
		"[{\"daysOfWeek\":[7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"14:00\",\"to\":\"15:00\"}]",
		"2027-03-14", "2027-03-14", 60, 0, FIXED_NOW);
	assert_starts(r, ny);
	assert_skipped(r, ny_sk);

	/* 01:00, 01:45, 02:30 (gap), 03:15 local, both days; 13:00, 13:45 Sunday;
	 * Sunday 03:15 is EDT (07:15Z), Saturday 03:15 EST (08:15Z) */
	r = sql_plan("America/New_York",
		"[{\"daysOfWeek\":[6,7],\"from\":\"01:00\",\"to\":\"04:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"13:00\",\"to\":\"14:30\"}]",
		"2027-03-13", "2027-03-14", 30, 15, FIXED_NOW);
	assert_skipped(r, ny15_sk);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "slots")), 9);
	ck_assert_int_eq(count_starts_between(r, "2027-03-13T08:15:00Z", "2027-03-13T08:15:01Z"), 1);
	ck_assert_int_eq(count_starts_between(r, "2027-03-14T07:15:00Z", "2027-03-14T07:15:01Z"), 1);

	r = sql_plan("Europe/Berlin", "[{\"daysOfWeek\":[7],\"from\":\"00:00\",\"to\":\"06:00\"}]",
		"2027-03-28", "2027-03-28", 90, 0, FIXED_NOW);
	assert_starts(r, across);
	assert_skipped(r, across_sk);

	r = sql_plan("Europe/Berlin", "[{\"daysOfWeek\":[2],\"from\":\"10:00\",\"to\":\"11:00\"}]",
		"2027-03-15", "2027-04-11", 60, 0, FIXED_NOW);
	assert_starts(r, weekly);
	assert_skipped(r, none);
}
END_TEST

START_TEST(dst_fixed_sydney_fall_back_sql)
{
	/* 02:00-03:00 happens twice (AEDT +11, then AEST +10): first occurrence
	 * only, no doubled slot, and 03:00 is AEST */
	struct h_resp *r = sql_plan("Australia/Sydney",
		"[{\"daysOfWeek\":[7],\"from\":\"01:30\",\"to\":\"03:30\"},"
		" {\"daysOfWeek\":[7],\"from\":\"15:00\",\"to\":\"16:00\"}]",
		"2027-04-04", "2027-04-04", 30, 0, FIXED_NOW);
	static const char *const first[] = { "2027-04-03T14:30:00Z", "2027-04-03T15:00:00Z",
		"2027-04-03T15:30:00Z", "2027-04-03T17:00:00Z",
		"2027-04-04T05:00:00Z", "2027-04-04T05:30:00Z", NULL };
	static const char *const three_days[] = {
		"2027-04-02T22:00:00Z", "2027-04-02T22:30:00Z",         /* Sat 09:00 AEDT */
		"2027-04-03T04:00:00Z", "2027-04-03T04:30:00Z",         /* Sat 15:00 AEDT */
		"2027-04-03T15:00:00Z", "2027-04-03T15:30:00Z",         /* Sun 02:00 AEDT (1st) */
		"2027-04-03T23:00:00Z", "2027-04-03T23:30:00Z",         /* Sun 09:00 AEST */
		"2027-04-04T05:00:00Z", "2027-04-04T05:30:00Z",         /* Sun 15:00 AEST */
		"2027-04-04T23:00:00Z", "2027-04-04T23:30:00Z",         /* Mon 09:00 AEST */
		"2027-04-05T05:00:00Z", "2027-04-05T05:30:00Z", NULL }; /* Mon 15:00 AEST */
	static const char *const none[] = { NULL };

	assert_starts(r, first);
	assert_skipped(r, none);
	r = sql_plan("Australia/Sydney",
		"[{\"daysOfWeek\":[6,7,1],\"from\":\"09:00\",\"to\":\"10:00\"},"
		" {\"daysOfWeek\":[6,7,1],\"from\":\"15:00\",\"to\":\"16:00\"},"
		" {\"daysOfWeek\":[7],\"from\":\"02:00\",\"to\":\"03:00\"}]",
		"2027-04-03", "2027-04-05", 30, 0, FIXED_NOW);
	assert_starts(r, three_days);
	assert_skipped(r, none);
	ck_assert_int_eq(count_starts_between(r, "2027-04-03T16:00:00Z", "2027-04-03T17:00:00Z"), 0);
}
END_TEST

/* Europe/Berlin's and New York's 2027 fall-back, fixed, on calendar.slot_plan. */
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

/* Overlapping publishes of one owner fired at once (one connection each):
 * the owner's lock (owner_lock() in plugins/slots/batch.c) runs them one
 * after the other, so the answers are those of sequential publishes (the
 * exclusion constraint ex_availability_slots_owner_active is the database's
 * guarantee; with the lock it is never hit, no 409 SLOT_NOT_AVAILABLE): one
 * creates its slots, every other one is a 201 that creates nothing and skips
 * every slot as "overlap" (each slot of either body overlaps one of the
 * other's).  No two active slots of the owner overlap in the table. */
#define CONC_N 8
START_TEST(concurrent_overlapping_publishes)
{
	struct agent a = new_agent();
	char *bodies[CONC_N], *tokens[CONC_N];
	struct h_resp **r;
	int i, winner = -1, created = 0;

	for (i = 0; i < CONC_N; i++) {
		/* even: 09:00-12:00 in 60 minutes; odd: 09:30-11:30 */
		bodies[i] = batch_body("Europe/Berlin", i % 2 ?
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"09:30\",\"to\":\"11:30\"}]" :
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"09:00\",\"to\":\"12:00\"}]",
			h_date_in(10), h_date_in(16), 60, NULL);
		tokens[i] = a.token;
	}
	r = h_post_all(BATCHES, CONC_N, bodies, tokens, NULL);
	for (i = 0; i < CONC_N; i++) {
		json_object *sk;
		int c;
		size_t j;

		ck_assert_msg(r[i]->status == 201, "publish %d: %ld %s", i, r[i]->status,
				r[i]->body);
		c = json_object_get_int(h_jget(r[i]->json, "created"));
		sk = arr(r[i]->json, "skipped");
		if (c > 0) {
			ck_assert_msg(winner < 0, "publishes %d and %d both created slots",
					winner, i);
			winner = i;
			created = c;
			ck_assert_int_eq(c, 7 * (i % 2 ? 2 : 3));
			ck_assert_int_eq((int)json_object_array_length(sk), 0);
			continue;
		}
		ck_assert_int_eq((int)json_object_array_length(arr(r[i]->json, "slots")), 0);
		ck_assert_int_eq((int)json_object_array_length(sk), 7 * (i % 2 ? 2 : 3));
		for (j = 0; j < json_object_array_length(sk); j++)
			ck_assert_str_eq(idx_str(sk, j, "reason"), "overlap");
	}
	ck_assert_msg(winner >= 0, "no publish created slots");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.slot_batches "
		"WHERE owner_user_id = $1", a.sub), CONC_N);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND status IN ('Available', 'Booked')", a.sub), created);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots x "
		"JOIN calendar.availability_slots y ON y.owner_user_id = x.owner_user_id "
		"  AND y.id <> x.id AND y.start_at < x.end_at AND x.start_at < y.end_at "
		"WHERE x.owner_user_id = $1 AND x.status IN ('Available', 'Booked') "
		"  AND y.status IN ('Available', 'Booked')", a.sub), 0);
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
	expect_422(&a, batch_body("Mars/Olympus", w, f, t, 60, NULL), "UNKNOWN_TIME_ZONE",
			"timeZone");
	expect_422(&a, batch_body("+02", w, f, t, 60, NULL), "UNKNOWN_TIME_ZONE", "timeZone");
	/* with another invalid field: VALIDATION_FAILED names both */
	expect_422(&a, batch_body("Mars/Olympus", w, f, t, 60, "\"colour\":\"red\""),
			"VALIDATION_FAILED", "timeZone");
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

	/* NoFields: a body other than none or {} is refused, nothing archived */
	r = h_post(h_sprintf(SLOTS "/%s/archive", s0), a.token, "{\"zz\":1}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(h_sprintf(SLOTS "/%s/archive", s0), a.token, "[]");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(h_sprintf(BATCHES "/%s/archive", batch_id), a.token, "\"x\"");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots"
		" WHERE batch_id = $1 AND status = 'Archived'", batch_id), 0);
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

/* Issue 13: the publish answer is built from what was sent (no RETURNING);
 * each of its slots must be the very object the agent list reads back from
 * the table (slot_json of SLOT_COLS), byte for byte: ids, batch, owner,
 * tenant, a zone with '/', start/end, the optional references, a location
 * that needs escaping. */
START_TEST(publish_slots_equal_stored_rows)
{
	struct agent a = new_agent();
	struct h_resp *r, *l;
	json_object *slots, *items;
	size_t i, n;

	r = h_post(BATCHES, a.token, batch_body("Europe/Moscow",
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"09:00\",\"to\":\"12:00\"}]",
		h_date_in(3), h_date_in(4), 45,
		"\"gapMinutes\":15,\"autoConfirm\":true,\"cancellationCutoffMinutes\":30,"
		"\"projectId\":\"3f1c2a4e-0000-4000-8000-0000000000aa\","
		"\"location\":\"Office \\\"North\\\" / 2nd floor \\u00e9\""));
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	slots = arr(r->json, "slots");
	n = json_object_array_length(slots);
	ck_assert_int_eq((int)n, 2 * 3);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), (int)n);
	l = h_get(SLOTS "?limit=100", a.token);
	ck_assert_msg(l->status == 200, "%ld %s", l->status, l->body);
	items = arr(l->json, "items");
	ck_assert_int_eq((int)json_object_array_length(items), (int)n);
	for (i = 0; i < n; i++) {
		const char *got = json_object_to_json_string_ext(
			json_object_array_get_idx(slots, i), JSON_C_TO_STRING_PLAIN);
		const char *want = json_object_to_json_string_ext(
			json_object_array_get_idx(items, i), JSON_C_TO_STRING_PLAIN);

		ck_assert_msg(strcmp(got, want) == 0, "slot %zu:\n 201: %s\nlist: %s", i, got, want);
	}
	/* and the raw text of the answer carries them in that form */
	ck_assert_ptr_nonnull(strstr(r->body, json_object_to_json_string_ext(
			json_object_array_get_idx(items, 0), JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE)));
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

/* issue 9 item 7: the nil uuid is no user id, for both identity groups
 * (calendar replica, notification contacts): DLQ, no replica row */
START_TEST(identity_nil_uuid_dlq)
{
	static const char *nil = "00000000-0000-0000-0000-000000000000";
	const char *key = h_uuid();
	char *mid = h_sql_scalar("SELECT gen_random_uuid()::text");
	const char *code;

	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", key, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"Nil\",\"avatarUrl\":null,"
		"\"email\":null,\"phone\":null,\"status\":\"Active\"}}", mid, key, nil)), 0);
	ck_assert_msg((code = h_kafka_error_code("calendar-identity-users.dlq", 60000, dlq_for,
			(void *)key)) != NULL, "no calendar DLQ message");
	ck_assert_str_eq(code, "CAL_IDENTITY_INVALID_PAYLOAD");
	ck_assert_msg(h_kafka_wait("notifications-identity-users.dlq", 60000, dlq_for,
			(void *)key) != NULL, "no notifications DLQ message");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.user_replicas "
		"WHERE user_id = $1::uuid", nil), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.recipient_contacts "
		"WHERE user_id = $1::uuid", nil), 0);
}
END_TEST

Suite *make_slots_suite(void)
{
	Suite *s = suite_create("slots");
	TCase *tc;

	tc = h_tcase("dst", 60);
	tcase_add_test(tc, dst_berlin_spring_forward);
	tcase_add_test(tc, dst_new_york_spring_forward);
	tcase_add_test(tc, dst_sydney_spring_forward);
	tcase_add_test(tc, dst_berlin_fall_back_first_occurrence);
	tcase_add_test(tc, dst_new_york_fall_back_first_occurrence);
	tcase_add_test(tc, dst_sydney_fall_back_first_occurrence);
	tcase_add_test(tc, dst_sydney_fall_back_publish);
	tcase_add_test(tc, dst_berlin_fall_back_publish);
	tcase_add_test(tc, dst_new_york_preview_equals_publish);
	tcase_add_test(tc, dst_berlin_preview_equals_publish);
	tcase_add_test(tc, dst_model_any_date);
	tcase_add_test(tc, dst_fixed_changes_found);
	tcase_add_test(tc, dst_fixed_spring_forward_sql);
	tcase_add_test(tc, dst_fixed_sydney_fall_back_sql);
	tcase_add_test(tc, dst_berlin_fall_back_db_only);
	tcase_add_test(tc, dst_duration_across_gap_overlap);
	tcase_add_test(tc, dst_weekly_window_keeps_wall_time);
	tcase_add_test(tc, lead_time_boundary_db);
	tcase_add_test(tc, lead_time_through_api);
	suite_add_tcase(s, tc);

	tc = h_tcase("batches", 60);
	tcase_add_test(tc, overlap_with_existing_and_exclusion_constraint);
	tcase_add_test(tc, concurrent_overlapping_publishes);
	tcase_add_test(tc, batch_too_large_writes_nothing);
	tcase_add_test(tc, batch_limit_counts_created_slots);
	tcase_add_test(tc, publish_idempotency_key);
	tcase_add_test(tc, publish_slots_equal_stored_rows);
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
	tcase_add_test(tc, identity_nil_uuid_dlq);
	suite_add_tcase(s, tc);
	return s;
}
