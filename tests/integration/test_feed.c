/* test_feed.c -- the agent's iCalendar subscription feed (issue 32 item 1):
 * the token's create / rotate / revoke through the API, the public feed
 * parsed by libical and by Python's icalendar, ETag / 304, the per-token
 * limit of nginx, appointments' UID over a reschedule, and real clients
 * (vdirsyncer, http storage -> filesystem; khal importing the feed) seeing
 * an event, its move and its cancellation. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <libical/ical.h>
#include "harness.h"

#define FT "/api/v1/agent/calendar/feed-token"
#define EV "/api/v1/agent/calendar/events"
#define PY "/usr/bin/python3"

static struct h_agent mk_agent(void)
{
	return h_agent_new(NULL, "calendar.events.view");
}

/* A fresh agent who also writes events */
static struct h_agent mk_writer(void)
{
	struct h_agent a = mk_agent();

	a.token = h_token("agent", a.id, a.tenant, "calendar.events.view",
			"calendar.events.manage");
	return a;
}

/* The token of a feed path "/calendar/feeds/<token>.ics". */
static char *path_token(const char *path)
{
	char *t = h_strdup(path + strlen("/calendar/feeds/"));

	t[strlen(t) - 4] = '\0';
	return t;
}

/* POST feed-token: asserts 201; returns the feed's path (/calendar/feeds/..). */
static char *new_token(const struct h_agent *a, bool *rotated)
{
	struct h_resp *r = h_post(FT, a->token, NULL);
	const char *url, *tok, *p;

	ck_assert_msg(r->status == 201, "feed-token: %ld %s", r->status, r->body);
	url = h_jstr(r->json, "feedUrl");
	tok = h_jstr(r->json, "token");
	ck_assert_ptr_nonnull(url);
	ck_assert_ptr_nonnull(tok);
	ck_assert_int_eq((int)strlen(tok), 43);
	ck_assert_str_eq(h_header(r, "Cache-Control"), "no-store");
	if (rotated)
		*rotated = json_object_get_boolean(h_jget(r->json, "rotated"));
	p = strstr(url, "/calendar/feeds/");
	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p, h_sprintf("/calendar/feeds/%s.ics", tok));
	return h_strdup(p);
}

static char *mk_event(const struct h_agent *a, int64_t in_s, const char *title,
		const char *location)
{
	char *body = h_sprintf("{\"kind\":\"Meeting\",\"title\":\"%s\",\"location\":\"%s\","
			"\"description\":\"agenda; line two, with a comma\","
			"\"startAt\":\"%s\",\"endAt\":\"%s\",\"timeZone\":\"Europe/Moscow\"}",
			title, location, h_iso_in(in_s), h_iso_in(in_s + 3600));
	struct h_resp *r = h_post(EV, a->token, body);

	ck_assert_msg(r->status == 201, "event: %ld %s", r->status, r->body);
	return h_strdup(h_jstr(r->json, "id"));
}

/* ---- libical: the VEVENT of uid in text, NULL when absent -------------- */
struct vev {
	int sequence;
	char status[32];
	char location[256];
	time_t dtstart;
	int count;            /* VEVENTs with this UID */
	int total;            /* VEVENTs in the feed */
};

static bool ical_find(const char *text, const char *uid, struct vev *out)
{
	icalcomponent *cal = icalparser_parse_string(text), *c;
	bool found = false;

	ck_assert_msg(cal != NULL, "libical could not parse the feed");
	ck_assert_int_eq(icalcomponent_isa(cal), ICAL_VCALENDAR_COMPONENT);
	ck_assert_int_eq(icalcomponent_count_errors(cal), 0);
	memset(out, 0, sizeof(*out));
	for (c = icalcomponent_get_first_component(cal, ICAL_VEVENT_COMPONENT); c;
			c = icalcomponent_get_next_component(cal, ICAL_VEVENT_COMPONENT)) {
		const char *u = icalcomponent_get_uid(c);

		out->total++;
		if (!u || strcmp(u, uid) != 0)
			continue;
		out->count++;
		found = true;
		out->sequence = icalcomponent_get_sequence(c);
		snprintf(out->status, sizeof out->status, "%s",
				icalproperty_status_to_string(icalcomponent_get_status(c)));
		snprintf(out->location, sizeof out->location, "%s",
				icalcomponent_get_location(c) ? icalcomponent_get_location(c) : "");
		out->dtstart = icaltime_as_timet_with_zone(icalcomponent_get_dtstart(c),
				icaltimezone_get_utc_timezone());
		ck_assert_ptr_nonnull(icalcomponent_get_first_property(c, ICAL_DTSTAMP_PROPERTY));
	}
	icalcomponent_free(cal);
	return found;
}

/* ---- Python's icalendar: "UID SEQUENCE STATUS LOCATION" of every VEVENT */
static char *py_parse(const char *text)
{
	char dir[] = "/tmp/pin-feed-XXXXXX", *f, *cmd, *out;
	FILE *fp;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	f = h_sprintf("%s/feed.ics", dir);
	fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fputs(text, fp);
	fclose(fp);
	cmd = h_sprintf(PY " -c 'import sys, icalendar\n"
		"cal = icalendar.Calendar.from_ical(open(sys.argv[1], \"rb\").read())\n"
		"for e in cal.walk(\"VEVENT\"):\n"
		"    print(e[\"UID\"], int(e.get(\"SEQUENCE\", 0)), e.get(\"STATUS\"), "
		"e.decoded(\"DTSTART\").isoformat(), e.get(\"LOCATION\"), sep=\"|\")\n"
		"' %s > %s/out.txt 2>&1", f, dir);
	ck_assert_msg(system(cmd) == 0, "python icalendar: %s", h_slurp(h_sprintf("%s/out.txt", dir)));
	out = h_slurp(h_sprintf("%s/out.txt", dir));
	ck_assert_ptr_nonnull(out);
	return out;
}

static struct h_resp *feed(const char *path, const char *inm)
{
	if (inm)
		return h_request("GET", path, NULL, NULL, h_sprintf("If-None-Match: %s", inm));
	return h_get(path, NULL);
}

static char *sha256_hex(const char *s)
{
	unsigned char md[32];
	unsigned n = 0, i;
	char *hex = h_strdup("0000000000000000000000000000000000000000000000000000000000000000");

	ck_assert_int_eq(EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL), 1);
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return hex;
}

/* create, read, rotate (old URL dead at once), revoke; only the hash stored */
START_TEST(token_lifecycle)
{
	struct h_agent a = mk_agent();
	struct h_resp *r;
	char *p1, *p2, *tok1;
	bool rotated = true;

	r = h_get(FT, a.token);
	h_assert_problem(r, 404, "FEED_TOKEN_NOT_FOUND");
	p1 = new_token(&a, &rotated);
	ck_assert(!rotated);
	tok1 = path_token(p1);
	/* the table holds SHA-256 of the token, never the token */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.feed_tokens "
			"WHERE user_id = $1 AND token_sha256 = decode($2, 'hex')",
			a.id, sha256_hex(tok1)), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.feed_tokens t "
			"WHERE position($1 in t::text) > 0", tok1), 0);
	r = h_get(FT, a.token);
	ck_assert_int_eq(r->status, 200);
	ck_assert_ptr_nonnull(h_jstr(r->json, "createdAt"));
	ck_assert_ptr_null(h_jget(r->json, "token"));

	r = feed(p1, NULL);
	ck_assert_msg(r->status == 200, "feed: %ld %s", r->status, r->body);
	ck_assert_str_eq(r->content_type, "text/calendar; charset=utf-8");
	ck_assert(strncmp(r->body, "BEGIN:VCALENDAR\r\n", 17) == 0);

	/* rotation: the old URL is dead at once, the new one works */
	p2 = new_token(&a, &rotated);
	ck_assert(rotated);
	ck_assert_str_ne(p1, p2);
	h_assert_problem(feed(p1, NULL), 404, "FEED_NOT_FOUND");
	ck_assert_int_eq(feed(p2, NULL)->status, 200);

	/* revocation */
	r = h_request("DELETE", FT, a.token, NULL);
	ck_assert_int_eq(r->status, 204);
	h_assert_problem(feed(p2, NULL), 404, "FEED_NOT_FOUND");
	h_assert_problem(h_request("DELETE", FT, a.token, NULL), 404, "FEED_TOKEN_NOT_FOUND");
	h_assert_problem(h_get(FT, a.token), 404, "FEED_TOKEN_NOT_FOUND");

	/* made-up and malformed tokens; no login needed, none is honoured */
	h_assert_problem(feed("/calendar/feeds/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.ics",
			NULL), 404, "FEED_NOT_FOUND");
	h_assert_problem(feed("/calendar/feeds/short.ics", NULL), 404, "FEED_NOT_FOUND");
	/* an investor has no feed */
	r = h_post(FT, h_token("investor", h_uuid(), NULL), NULL);
	ck_assert_int_eq(r->status, 403);
}
END_TEST

/* the content, parsed by libical and icalendar; 304; reschedule; cancel */
START_TEST(content_etag_reschedule_cancel)
{
	struct h_agent a = mk_writer(), other = mk_writer();
	char *path, *id, *uid, *etag, *py, *mine;
	struct h_resp *r;
	struct vev v;
	time_t t0;

	id = mk_event(&a, 2 * 86400, "Viewing, flat 12", "Tverskaya 1; Moscow");
	mk_event(&other, 2 * 86400, "someone else's", "elsewhere");
	/* outside the window (400 days ahead): not in the feed */
	mine = mk_event(&a, 400LL * 86400, "far away", "x");
	path = new_token(&a, NULL);
	uid = h_sprintf("event-%s@pin-calendar", id);

	r = feed(path, NULL);
	ck_assert_int_eq(r->status, 200);
	ck_assert_ptr_nonnull(r->etag);
	etag = h_strdup(r->etag);
	ck_assert(ical_find(r->body, uid, &v));
	ck_assert_int_eq(v.total, 1);          /* not the colleague's, not the far one */
	ck_assert(strstr(r->body, mine) == NULL);
	ck_assert_int_eq(v.count, 1);
	ck_assert_int_eq(v.sequence, 0);
	ck_assert_str_eq(v.status, "CONFIRMED");
	ck_assert_str_eq(v.location, "Tverskaya 1; Moscow");
	t0 = v.dtstart;
	py = py_parse(r->body);
	ck_assert_msg(strstr(py, h_sprintf("%s|0|CONFIRMED|", uid)) != NULL, "%s", py);
	ck_assert_msg(strstr(py, "|Tverskaya 1; Moscow") != NULL, "%s", py);

	/* unchanged: 304 with the same tag, no body */
	r = feed(path, etag);
	ck_assert_int_eq(r->status, 304);
	ck_assert_int_eq((int)r->body_len, 0);
	ck_assert_str_eq(r->etag, etag);
	r = feed(path, h_sprintf("\"other\", W/%s", etag));
	ck_assert_int_eq(r->status, 304);

	/* reschedule: same UID, higher SEQUENCE, the new start; the old tag is stale */
	r = h_post(h_sprintf(EV "/%s/reschedule", id), a.token,
			h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(3 * 86400)));
	ck_assert_msg(r->status == 200, "reschedule: %ld %s", r->status, r->body);
	r = feed(path, etag);
	ck_assert_int_eq(r->status, 200);
	ck_assert_str_ne(r->etag, etag);
	ck_assert(ical_find(r->body, uid, &v));
	ck_assert_int_eq(v.count, 1);
	ck_assert_int_gt(v.sequence, 0);
	/* a day later (the two instants were taken a moment apart) */
	ck_assert_int_lt(abs((int)(v.dtstart - t0) - 86400), 10);
	py = py_parse(r->body);
	ck_assert_msg(strstr(py, h_sprintf("%s|%d|CONFIRMED|", uid, v.sequence)) != NULL, "%s", py);

	/* cancel: STATUS:CANCELLED, still there (a client removes or strikes it) */
	r = h_post(h_sprintf(EV "/%s/cancel", id), a.token, "{}");
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	r = feed(path, NULL);
	ck_assert(ical_find(r->body, uid, &v));
	ck_assert_str_eq(v.status, "CANCELLED");
	py = py_parse(r->body);
	ck_assert_msg(strstr(py, "|CANCELLED|") != NULL, "%s", py);
}
END_TEST

/* an investor's reschedule books a new appointment: the feed shows ONE
 * entry, UID of the first appointment, a higher SEQUENCE, at the new time */
START_TEST(appointment_reschedule_same_uid)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char *inv = h_uuid(), *itok = h_token("investor", inv, NULL);
	char *d = h_date_in(5), *path, *first, *uid, *s0, *s1;
	struct h_resp *r;
	struct vev v;
	int seq0;
	json_object *slots;

	r = h_post("/api/v1/agent/calendar/slots/batches", a.token, h_sprintf(
		"{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":[{\"daysOfWeek\":"
		"[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"10:00\"}],\"fromDate\":\"%s\","
		"\"toDate\":\"%s\",\"slotDurationMinutes\":60,\"autoConfirm\":true,"
		"\"cancellationCutoffMinutes\":60}", d, d));
	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	slots = h_jget(r->json, "slots");
	s0 = h_strdup(h_jstr(json_object_array_get_idx(slots, 0), "id"));
	s1 = h_strdup(h_jstr(json_object_array_get_idx(slots, 1), "id"));
	r = h_post("/api/public/calendar/appointments", itok, h_sprintf("{\"slotId\":\"%s\"}", s0));
	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	first = h_strdup(h_jstr(r->json, "id"));
	uid = h_sprintf("appointment-%s@pin-calendar", first);
	path = new_token(&a, NULL);

	r = feed(path, NULL);
	ck_assert(ical_find(r->body, uid, &v));
	seq0 = v.sequence;
	ck_assert_str_eq(v.status, "CONFIRMED");

	r = h_post(h_sprintf("/api/v1/investor/calendar/appointments/%s/reschedule", first),
			itok, h_sprintf("{\"newSlotId\":\"%s\"}", s1));
	ck_assert_msg(r->status == 201, "reschedule: %ld %s", r->status, r->body);
	r = feed(path, NULL);
	ck_assert(ical_find(r->body, uid, &v));
	ck_assert_int_eq(v.count, 1);
	ck_assert_int_eq(v.total, 1);
	ck_assert_int_gt(v.sequence, seq0);
	ck_assert_str_eq(v.status, "CONFIRMED");
	ck_assert_int_eq((int)(v.dtstart % 86400), 9 * 3600);   /* the 09:00 slot */
	/* no investor contact in the feed (the agent's event card only) */
	ck_assert(strstr(r->body, inv) == NULL);
	ck_assert(strstr(r->body, "ATTENDEE") == NULL);
}
END_TEST

/* nginx: a limit per feed URL; 429 problem+json with Retry-After */
START_TEST(rate_limited_per_token)
{
	struct h_agent a = mk_agent();
	char *path = new_token(&a, NULL);
	struct h_resp *r = NULL;
	int i, limited = 0;

	for (i = 0; i < 30 && !limited; i++) {
		r = feed(path, NULL);
		if (r->status == 429)
			limited = 1;
		else
			ck_assert_int_eq(r->status, 200);
	}
	ck_assert_msg(limited, "30 polls in a row were not limited");
	ck_assert_int_gt(i, 5);                 /* the burst went through first */
	h_assert_problem(r, 429, "RATE_LIMITED");
	ck_assert_ptr_nonnull(r->retry_after);
	/* another agent's feed is not affected */
	a = mk_agent();
	ck_assert_int_eq(feed(new_token(&a, NULL), NULL)->status, 200);
}
END_TEST

/* ---- real clients: vdirsyncer (http storage -> filesystem storage) and
 * khal (import of each fetched feed into a calendar of its own) ---------- */
static char *vdir_all(const char *dir, int *files)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *all = h_strdup("");

	ck_assert_ptr_nonnull(d);
	*files = 0;
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".ics")) {
			all = h_sprintf("%s%s", all, h_slurp(h_sprintf("%s/%s", dir, e->d_name)));
			(*files)++;
		}
	closedir(d);
	return all;
}

static int count_of(const char *s, const char *needle)
{
	int n = 0;

	for (s = strstr(s, needle); s; s = strstr(s + 1, needle))
		n++;
	return n;
}

/* vdirsyncer sync; then the feed fetched once more, imported by khal
 * (--batch: an event whose UID khal has is replaced); khal's list of the
 * next 30 days "<start> <title> <status>" lines */
static char *clients_sync(const char *tmp, const char *path)
{
	char *cmd = h_sprintf("yes | vdirsyncer -c %s/config discover >%s/log 2>&1 && "
			"vdirsyncer -c %s/config sync >>%s/log 2>&1", tmp, tmp, tmp, tmp);
	struct h_resp *r;
	FILE *fp;
	char *out;

	ck_assert_msg(system(cmd) == 0, "vdirsyncer: %s", h_slurp(h_sprintf("%s/log", tmp)));
	r = feed(path, NULL);
	ck_assert_int_eq(r->status, 200);
	fp = fopen(h_sprintf("%s/feed.ics", tmp), "w");
	ck_assert_ptr_nonnull(fp);
	fwrite(r->body, 1, r->body_len, fp);
	fclose(fp);
	cmd = h_sprintf("khal -c %s/khal.conf import --batch %s/feed.ics >%s/khal.log 2>&1 && "
			"khal -c %s/khal.conf list --format '{start} {title} {status}' %s 30d "
			">%s/khal.out 2>>%s/khal.log", tmp, tmp, tmp, tmp, h_date_in(0), tmp, tmp);
	ck_assert_msg(system(cmd) == 0, "khal: %s", h_slurp(h_sprintf("%s/khal.log", tmp)));
	out = h_slurp(h_sprintf("%s/khal.out", tmp));
	/* what a person sees in the client, into the test log */
	printf("feed: khal list:\n%s", out);
	return out;
}

/* "2026-12-07T..." -> "20261207" */
static char *ical_day(const char *iso)
{
	return h_sprintf("%.4s%.2s%.2s", iso, iso + 5, iso + 8);
}

/* seconds from now to 12:00 UTC of the day days ahead: khal lists an event
 * under each day it touches, so the test's one-hour event must not cross
 * midnight whatever the time the suite runs at (it did from 23:00 UTC) */
static int64_t noon_in(int days)
{
	time_t now = time(NULL);

	return (int64_t)days * 86400 + 12 * 3600 - (int64_t)(now % 86400);
}

START_TEST(clients_see_event_move_and_cancel)
{
	struct h_agent a = mk_writer();
	char tmp[] = "/tmp/pin-vdir-XXXXXX", *dir, *kdir, *id, *path, *all, *k, *when;
	int files;
	struct h_resp *r;
	FILE *fp;

	ck_assert_ptr_nonnull(mkdtemp(tmp));
	dir = h_sprintf("%s/cal", tmp);
	kdir = h_sprintf("%s/khal-cal", tmp);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(mkdir(kdir, 0700), 0);
	id = mk_event(&a, noon_in(1), "Showing for the clients", "Arbat 5");
	path = new_token(&a, NULL);
	fp = fopen(h_sprintf("%s/config", tmp), "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "[general]\nstatus_path = \"%s/status\"\n\n"
		"[pair feed]\na = \"feed_local\"\nb = \"feed_remote\"\ncollections = null\n"
		"conflict_resolution = \"b wins\"\n\n"
		"[storage feed_local]\ntype = \"filesystem\"\npath = \"%s\"\nfileext = \".ics\"\n\n"
		"[storage feed_remote]\ntype = \"http\"\nurl = \"%s%s\"\n",
		tmp, dir, h_env("PIN_BASE_URL"), path);
	fclose(fp);
	fp = fopen(h_sprintf("%s/khal.conf", tmp), "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "[calendars]\n[[feed]]\npath = %s\ntype = calendar\n[locale]\n"
		"timeformat = %%H:%%M\ndateformat = %%Y-%%m-%%d\nlongdateformat = %%Y-%%m-%%d\n"
		"datetimeformat = %%Y-%%m-%%d %%H:%%M\nlongdatetimeformat = %%Y-%%m-%%d %%H:%%M\n"
		"default_timezone = UTC\nlocal_timezone = UTC\n[sqlite]\npath = %s/khal.db\n",
		kdir, tmp);
	fclose(fp);

	/* the event */
	k = clients_sync(tmp, path);
	all = vdir_all(dir, &files);
	ck_assert_int_eq(files, 1);
	ck_assert_msg(strstr(all, "SUMMARY:Showing for the clients") != NULL, "%s", all);
	ck_assert(strstr(all, "LOCATION:Arbat 5") != NULL);
	ck_assert(strstr(all, "SEQUENCE:0") != NULL);
	when = h_iso_in(noon_in(1));
	ck_assert_msg(strstr(k, "Showing for the clients") && strstr(k, h_sprintf("%.10s", when)),
			"khal: %s", k);

	/* the move: vdirsyncer holds one item, at the new day, SEQUENCE 1
	 * (its http storage names items by content, so the old one is gone
	 * and the new one there); khal replaced its entry by UID */
	r = h_post(h_sprintf(EV "/%s/reschedule", id), a.token,
			h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(noon_in(2))));
	ck_assert_int_eq(r->status, 200);
	k = clients_sync(tmp, path);
	all = vdir_all(dir, &files);
	ck_assert_int_eq(files, 1);
	ck_assert_int_eq(count_of(all, "BEGIN:VEVENT"), 1);
	ck_assert_msg(strstr(all, "SEQUENCE:1") != NULL, "the move is not in the vdir: %s", all);
	ck_assert(strstr(all, h_sprintf("DTSTART:%s", ical_day(h_iso_in(noon_in(2))))) != NULL);
	/* khal lists days with events only: the new day, not the old one */
	ck_assert_msg(strstr(k, h_sprintf("%.10s", h_iso_in(noon_in(2)))) &&
			!strstr(k, h_sprintf("%.10s", when)), "khal: %s", k);
	ck_assert_msg(count_of(k, "Showing for the clients") == 1, "khal: %s", k);
	ck_assert(access(h_sprintf("%s/event-%s@pin-calendar.ics", kdir, id), F_OK) == 0);

	/* the cancellation */
	r = h_post(h_sprintf(EV "/%s/cancel", id), a.token, "{}");
	ck_assert_int_eq(r->status, 200);
	k = clients_sync(tmp, path);
	all = vdir_all(dir, &files);
	ck_assert_int_eq(files, 1);
	ck_assert_msg(strstr(all, "STATUS:CANCELLED") != NULL, "no cancellation: %s", all);
	ck_assert_msg(strstr(k, "Showing for the clients CANCELLED") != NULL, "khal: %s", k);
	ck_assert_msg(count_of(k, "Showing for the clients") == 1, "khal: %s", k);
}
END_TEST

Suite *make_feed_suite(void)
{
	Suite *s = suite_create("feed");
	TCase *tc = h_tcase("feed", 120);

	tcase_add_test(tc, token_lifecycle);
	tcase_add_test(tc, content_etag_reschedule_cancel);
	tcase_add_test(tc, appointment_reschedule_same_uid);
	tcase_add_test(tc, rate_limited_per_token);
	tcase_add_test(tc, clients_see_event_move_and_cancel);
	suite_add_tcase(s, tc);
	return s;
}
