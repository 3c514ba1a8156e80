/* test_manage.c -- issue 32 item 3: the investors' manage links end to end.
 *
 * An investor books through the public API; notify.so renders the e-mail
 * with {{manageUrl}} (the link is taken from the rendered e-mail row, the
 * text the dispatcher sends); GET of the link shows the page and changes
 * nothing; a changed, expired, wrong-purpose or foreign link is refused
 * with nothing changed; POST cancels exactly like the investor's API
 * cancel (slot Available again and in the showcase, event cancelled, the
 * same appointment-cancelled message, the agent's notification); the link
 * then says it was used.  A reschedule link offers the agent's free times
 * and moves the appointment as the API's reschedule does.  The browser
 * case opens a link in headless Chromium on a phone-sized viewport
 * (390 x 844), clicks confirm over the
 * DevTools protocol (cdp.mjs) and saves screenshots of the pages in
 * .dev/screenshots/ of the source tree (PIN_SCREENSHOT_DIR overrides).
 * Tokens for the refusals are minted with the same function notify.so uses
 * (sdk/manage.c) and the stack's key file. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sdk/manage.h"

#define PUB "/api/public/calendar/appointments"
#define IN "/api/v1/investor/calendar/appointments"
#define T_CANCELLED "pin.calendar.appointment-cancelled.v1"
#define WAIT_MS 60000
#define BOOK_IP h_src_ip("127.0.0.43")

/* n one-hour slots (08:00 UTC on) days ahead with cutoff minutes */
static char **publish(const struct h_agent *a, int n, int days, int cutoff)
{
	char *d = h_date_in(days);
	struct h_resp *r = h_post("/api/v1/agent/calendar/slots/batches", a->token,
		h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"%02d:00\"}],"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
			"\"autoConfirm\":false,\"cancellationCutoffMinutes\":%d}",
			8 + n, d, d, cutoff));
	json_object *slots;
	char **ids;

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	slots = h_jget(r->json, "slots");
	ids = calloc((size_t)n + 1, sizeof *ids);       /* a few pointers a test */
	for (int i = 0; i < n; i++)
		ids[i] = h_strdup(h_jstr(json_object_array_get_idx(slots, (size_t)i), "id"));
	return ids;
}

/* pin.identity.users.v1: the investor's contact in notify's replica */
static void contact(const char *user, const char *locale)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"Investor Test\","
		"\"avatarUrl\":null,\"email\":\"inv-%s@dev.pin.example\",\"phone\":null,"
		"\"locale\":\"%s\",\"timeZone\":\"UTC\",\"status\":\"Active\"}}",
		h_new_mid(), user, user, user, locale)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid", user) == 1,
		WAIT_MS), "contact not replicated");
}

static char *book_ok(const char *token, const char *slot)
{
	struct h_req_opts o = { h_sprintf("{\"slotId\":\"%s\"}", slot), 0, NULL, NULL, BOOK_IP };
	struct h_resp *r = h_request_opts("POST", PUB, token, &o);

	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	return h_strdup(h_jstr(r->json, "id"));
}

/* The manage link in the investor's e-mail about apt (the rendered row the
 * dispatcher sends): the path "/manage/<token>" (the origin is the stack's
 * nginx, notify.public_base_url). */
static char *link_nth(const char *investor, const char *apt, int nth)
{
	char *body = NULL;
	const char *p;

	ck_assert_msg(H_WAIT_UNTIL((body = h_sql_scalar("SELECT body FROM "
		"notifications.notifications WHERE recipient_user_id = $1::uuid "
		"AND channel = 'Email' AND kind = 'AppointmentCreated' "
		"AND subject_id = $2::uuid", investor, apt)) != NULL, WAIT_MS),
		"no e-mail row for the investor");
	p = strstr(body, "/manage/");
	for (int i = 0; i < nth && p; i++)
		p = strstr(p + 1, "/manage/");
	ck_assert_msg(p != NULL, "no manage link %d in: %s", nth, body);
	ck_assert_msg(!strncmp(p - strlen(h_env("PIN_BASE_URL")), h_env("PIN_BASE_URL"),
		strlen(h_env("PIN_BASE_URL"))), "link not on the public origin: %s", body);
	return h_sprintf("%.*s", (int)(8 + PC_MANAGE_TOKEN_LEN), p);
}

/* the cancel link (the first) and the reschedule link (the second) */
static char *link_of(const char *investor, const char *apt)
{
	return link_nth(investor, apt, 0);
}

static const char *status_of(const char *apt)
{
	return h_sql_scalar("SELECT status FROM calendar.appointments WHERE id = $1", apt);
}

static const char *slot_status(const char *slot)
{
	return h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", slot);
}

static long long uses(const char *apt)
{
	return h_sql_int("SELECT count(*) FROM calendar.manage_link_uses "
		"WHERE appointment_id = $1", apt);
}

static long long outbox_cancelled(const char *apt)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox WHERE key = $1 "
		"AND topic = '" T_CANCELLED "'", apt);
}

/* the keys of the appointment-cancelled payload of apt, sorted, and its
 * reason / cancelledBy */
static const char *cancelled_shape(const char *apt)
{
	return h_sql_scalar("SELECT string_agg(k, ',' ORDER BY k) || ' ' || "
		"  max(o.envelope -> 'payload' ->> 'reason') || ' ' || "
		"  max(o.envelope -> 'payload' ->> 'cancelledBy') "
		"FROM calendar.outbox o, jsonb_object_keys(o.envelope -> 'payload') k "
		"WHERE o.key = $1 AND o.topic = '" T_CANCELLED "'", apt);
}

/* the stack's key (the file named by manage_link_key_file in PIN_CONFIG) */
static void stack_keys(struct pc_manage_keys *k)
{
	char *conf = h_slurp(h_env("PIN_CONFIG")), err[256];
	const char *p = conf ? strstr(conf, "manage_link_key_file = ") : NULL;
	char *path;

	ck_assert_msg(p != NULL, "manage_link_key_file not in the stack's config");
	p += strlen("manage_link_key_file = ");
	path = h_sprintf("%.*s", (int)strcspn(p, "\n"), p);
	ck_assert_msg(pc_manage_keys_load(path, k, err, sizeof err) == 0, "%s", err);
}

static char *mint(const struct pc_manage_keys *k, int purpose, const char *apt,
		const char *investor, int64_t expires_s)
{
	struct pc_manage_claims c;
	char tok[PC_MANAGE_TOKEN_LEN + 1];

	memset(&c, 0, sizeof c);
	c.purpose = purpose;
	snprintf(c.appointment_id, sizeof c.appointment_id, "%s", apt);
	snprintf(c.investor_id, sizeof c.investor_id, "%s", investor);
	c.expires_s = expires_s;
	c.jti = (uint64_t)h_now_ms() * 7919u;
	c.locale = PC_MANAGE_EN;
	ck_assert_int_eq(pc_manage_sign(k, &c, tok, sizeof tok), 0);
	return h_sprintf("/manage/%s", tok);
}

static struct h_resp *post_form(const char *path)
{
	/* what a browser sends for a form without fields */
	struct h_req_opts o = { "", 0, "application/x-www-form-urlencoded", NULL, BOOK_IP };

	return h_request_opts("POST", path, NULL, &o);
}

static void assert_page(const struct h_resp *r, long status, const char *needle)
{
	ck_assert_msg(r->status == status, "%s: %ld (want %ld) %s", needle, r->status,
		status, r->body);
	ck_assert_msg(r->content_type && !strncmp(r->content_type, "text/html", 9),
		"content type %s", r->content_type ? r->content_type : "(none)");
	ck_assert_msg(strstr(r->body, needle) != NULL, "no \"%s\" in %s", needle, r->body);
	ck_assert_ptr_nonnull(strstr(r->body, "name=\"viewport\""));
	ck_assert_str_eq(h_header(r, "Cache-Control"), "no-store");
	ck_assert_str_eq(h_header(r, "Referrer-Policy"), "no-referrer");
}

/* ---- GET shows, refusals change nothing, POST cancels like the API -------- */

START_TEST(cancel_by_link)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char **slots = publish(&a, 2, 3, 120);
	char *inv, *tok, *apt, *apt2, *link, *bad;
	struct pc_manage_keys k;
	struct h_resp *r;
	int64_t start_s;

	inv = h_uuid();
	tok = h_token("investor", inv, NULL);
	contact(inv, "en");
	apt = book_ok(tok, slots[0]);
	link = link_of(inv, apt);
	start_s = h_sql_int("SELECT extract(epoch FROM start_at)::bigint "
		"FROM calendar.appointments WHERE id = $1", apt);

	/* GET: the page says what will happen; nothing changes */
	r = h_get(link, NULL);
	assert_page(r, 200, "Cancel this appointment?");
	ck_assert_ptr_nonnull(strstr(r->body, "id=\"confirm\""));
	ck_assert_ptr_nonnull(strstr(r->body, "(UTC)"));
	ck_assert_ptr_nonnull(strstr(r->body, "lang=\"en\""));
	ck_assert_ptr_null(strstr(r->body, inv));               /* no ids on the page */
	r = h_get(link, NULL);
	ck_assert_int_eq(r->status, 200);
	ck_assert_str_eq(status_of(apt), "Pending");
	ck_assert_str_eq(slot_status(slots[0]), "Booked");

	/* refusals: nothing changed, nothing recorded */
	stack_keys(&k);
	bad = h_strdup(link);
	bad[20] = bad[20] == 'A' ? 'B' : 'A';                   /* one character */
	assert_page(h_get(bad, NULL), 400, "not valid");
	assert_page(post_form(bad), 400, "not valid");
	assert_page(post_form("/manage/short"), 400, "not valid");
	r = post_form(mint(&k, PC_MANAGE_CANCEL, apt, inv, time(NULL) - 5));
	assert_page(r, 410, "expired");
	/* a reschedule link moves, never cancels: without a chosen time, 400 */
	r = post_form(mint(&k, PC_MANAGE_RESCHEDULE, apt, inv, start_s));
	assert_page(r, 400, "Choose a time");
	/* signed, but for another investor: not theirs */
	r = post_form(mint(&k, PC_MANAGE_CANCEL, apt, h_uuid(), start_s));
	assert_page(r, 404, "No such appointment");
	ck_assert_str_eq(status_of(apt), "Pending");
	ck_assert_str_eq(slot_status(slots[0]), "Booked");
	ck_assert_int_eq(uses(apt), 0);
	ck_assert_int_eq(outbox_cancelled(apt), 0);

	/* POST: cancelled with the API's cascade */
	r = post_form(link);
	assert_page(r, 200, "Appointment cancelled");
	ck_assert_str_eq(status_of(apt), "Cancelled");
	ck_assert_str_eq(h_sql_scalar("SELECT cancelled_by FROM calendar.appointments "
		"WHERE id = $1", apt), "Investor");
	ck_assert_str_eq(slot_status(slots[0]), "Available");
	ck_assert_str_eq(h_sql_scalar("SELECT e.status FROM calendar.calendar_events e "
		"JOIN calendar.appointments a ON a.calendar_event_id = e.id WHERE a.id = $1",
		apt), "Cancelled");
	ck_assert_int_eq(outbox_cancelled(apt), 1);
	ck_assert_int_eq(uses(apt), 1);
	/* the slot is in the showcase again */
	r = h_get(h_sprintf("/api/public/calendar/slots?agentUserId=%s", a.id), NULL);
	ck_assert_msg(r->status == 200 && strstr(r->body, slots[0]),
		"slot not in the showcase: %ld %s", r->status, r->body);

	/* the same message as the investor's API cancel */
	apt2 = book_ok(tok, slots[1]);
	r = h_post(h_sprintf(IN "/%s/cancel", apt2), tok, NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(cancelled_shape(apt), cancelled_shape(apt2));
	ck_assert_ptr_nonnull(strstr(cancelled_shape(apt), "CancelledByInvestor Investor"));

	/* the agent is told, as after the API cancel */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND subject_id = $2::uuid "
		"AND kind = 'AppointmentCancelled' AND role = 'Agent.CancelledByInvestor'",
		a.id, apt) > 0, WAIT_MS), "the agent got no cancellation");

	/* used: says so, changes nothing */
	assert_page(post_form(link), 410, "already been used");
	assert_page(h_get(link, NULL), 410, "already been used");
	ck_assert_int_eq(outbox_cancelled(apt), 1);
	ck_assert_int_eq(uses(apt), 1);
	/* another valid link of the cancelled appointment: final state, 409 */
	assert_page(post_form(mint(&k, PC_MANAGE_CANCEL, apt, inv, start_s)), 409,
		"cannot be changed any more");
	ck_assert_int_eq(outbox_cancelled(apt), 1);
}
END_TEST

/* The reschedule link: the agent's free times, a taken one refused with
 * nothing changed, then the move with the API's effects. */
START_TEST(reschedule_by_link)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char **slots = publish(&a, 3, 3, 120);
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL), *apt, *link, *other;
	char *new_id;
	struct h_resp *r;

	contact(inv, "en");
	apt = book_ok(tok, slots[0]);
	link = link_nth(inv, apt, 1);
	ck_assert_ptr_nonnull(strstr(h_sql_scalar("SELECT body FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = 'Email' "
		"AND subject_id = $2::uuid", inv, apt), "To move it to another time: http"));

	r = h_get(link, NULL);
	assert_page(r, 200, "Move this appointment?");
	ck_assert_ptr_nonnull(strstr(r->body, h_sprintf("action=\"?slot=%s\"", slots[1])));
	ck_assert_ptr_nonnull(strstr(r->body, h_sprintf("action=\"?slot=%s\"", slots[2])));
	ck_assert_ptr_null(strstr(r->body, h_sprintf("?slot=%s", slots[0])));
	ck_assert_ptr_null(strstr(r->body, "id=\"confirm\""));       /* no cancel here */

	/* no time chosen, a foreign slot id, a time someone else just took:
	 * nothing changes */
	assert_page(post_form(link), 400, "Choose a time");
	assert_page(post_form(h_sprintf("%s?slot=%s", link, h_uuid())), 409, "Nothing was changed");
	other = h_token("investor", h_uuid(), NULL);
	(void)book_ok(other, slots[1]);
	r = post_form(h_sprintf("%s?slot=%s", link, slots[1]));
	assert_page(r, 409, "just been taken");
	ck_assert_ptr_nonnull(strstr(r->body, "id=\"again\""));
	ck_assert_str_eq(status_of(apt), "Pending");
	ck_assert_int_eq(uses(apt), 0);

	/* the move: the API's reschedule */
	r = post_form(h_sprintf("%s?slot=%s", link, slots[2]));
	assert_page(r, 200, "Appointment moved");
	ck_assert_str_eq(status_of(apt), "Cancelled");
	new_id = h_sql_scalar("SELECT rescheduled_to_appointment_id::text "
		"FROM calendar.appointments WHERE id = $1", apt);
	ck_assert_ptr_nonnull(new_id);
	ck_assert_str_eq(h_sql_scalar("SELECT slot_id::text FROM calendar.appointments "
		"WHERE id = $1", new_id), slots[2]);
	ck_assert_str_eq(status_of(new_id), "Pending");
	ck_assert_str_eq(slot_status(slots[0]), "Available");
	ck_assert_str_eq(slot_status(slots[2]), "Booked");
	ck_assert_str_eq(h_sql_scalar("SELECT envelope -> 'payload' ->> "
		"'rescheduledFromAppointmentId' FROM calendar.outbox WHERE key = $1 "
		"AND topic = 'pin.calendar.appointment-created.v1'", new_id), apt);
	ck_assert_str_eq(h_sql_scalar("SELECT envelope -> 'payload' ->> "
		"'rescheduledToAppointmentId' FROM calendar.outbox WHERE key = $1 "
		"AND topic = '" T_CANCELLED "'", apt), new_id);
	/* used; and the cancel link of the old appointment: final */
	assert_page(post_form(h_sprintf("%s?slot=%s", link, slots[1])), 410, "already been used");
	assert_page(post_form(link_of(inv, apt)), 409, "cannot be changed any more");
	/* the investor's message about the new time carries new links */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND subject_id = $2::uuid "
		"AND channel = 'Email' AND body LIKE '%/manage/%'", inv, new_id) == 1, WAIT_MS),
		"no links in the message about the new time");
}
END_TEST

/* The same cutoff as the API: too late is refused on GET and POST. */
START_TEST(cutoff_as_api)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char **slots = publish(&a, 1, 3, 10080);        /* 7-day cutoff: too late */
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL), *apt, *link;
	struct pc_manage_keys k;
	struct h_resp *r;

	apt = book_ok(tok, slots[0]);
	stack_keys(&k);
	link = mint(&k, PC_MANAGE_CANCEL, apt, inv, time(NULL) + 3 * 86400);
	assert_page(h_get(link, NULL), 409, "too soon");
	r = post_form(link);
	assert_page(r, 409, "too soon");
	ck_assert_ptr_null(strstr(r->body, "id=\"confirm\""));
	ck_assert_str_eq(status_of(apt), "Pending");
	ck_assert_int_eq(uses(apt), 0);
	r = h_post(h_sprintf(IN "/%s/cancel", apt), tok, NULL);
	h_assert_problem(r, 409, "CANCELLATION_CUTOFF_PASSED");
}
END_TEST

/* Russian by the recipient's locale (the token carries it). */
START_TEST(russian_page)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char **slots = publish(&a, 1, 3, 120);
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL), *apt;
	struct h_resp *r;

	contact(inv, "ru");
	apt = book_ok(tok, slots[0]);
	r = h_get(link_of(inv, apt), NULL);
	assert_page(r, 200, "Отменить встречу?");
	ck_assert_ptr_nonnull(strstr(r->body, "lang=\"ru\""));
	ck_assert_ptr_nonnull(strstr(h_sql_scalar("SELECT body FROM notifications.notifications "
		"WHERE recipient_user_id = $1::uuid AND channel = 'Email' "
		"AND subject_id = $2::uuid", inv, apt), "Отменить встречу: http"));
}
END_TEST

/* ---- headless Chromium on a phone ------------------------------------------- */

START_TEST(browser_phone_confirm)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char **slots = publish(&a, 3, 3, 120);
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL), *apt, *url, *v;
	/* kept after the run (a passing run removes its state dir): the
	 * worktree's .dev/screenshots, or PIN_SCREENSHOT_DIR */
	const char *dir = h_env_opt("PIN_SCREENSHOT_DIR",
			h_sprintf("%s/.dev/screenshots", h_env("PIN_SOURCE_DIR")));
	struct stat st;

	contact(inv, "en");
	apt = book_ok(tok, slots[0]);
	url = h_sprintf("%s%s", h_env("PIN_BASE_URL"), link_of(inv, apt));
	mkdir(dir, 0755);
	h_cdp_start();
	h_cdp("{\"op\":\"viewport\",\"width\":390,\"height\":844}");
	h_cdp(h_sprintf("{\"op\":\"nav\",\"url\":\"%s\"}", url));
	v = h_cdp("{\"op\":\"eval\",\"expr\":\"document.getElementById('head').textContent\"}");
	ck_assert_str_eq(v, "\"Cancel this appointment?\"");
	/* the page fits the phone: no horizontal scrolling, a full-width button */
	v = h_cdp("{\"op\":\"eval\",\"expr\":\"document.documentElement.scrollWidth <= "
		"window.innerWidth && document.getElementById('confirm')"
		".getBoundingClientRect().width > 300\"}");
	ck_assert_str_eq(v, "true");
	h_cdp(h_sprintf("{\"op\":\"shot\",\"path\":\"%s/manage-confirm-390x844.png\"}", dir));
	ck_assert_str_eq(status_of(apt), "Pending");            /* GET changed nothing */

	h_cdp("{\"op\":\"click\",\"selector\":\"#confirm\"}");
	v = h_cdp("{\"op\":\"eval\",\"expr\":\"document.getElementById('head').textContent\"}");
	ck_assert_str_eq(v, "\"Appointment cancelled\"");
	h_cdp(h_sprintf("{\"op\":\"shot\",\"path\":\"%s/manage-done-390x844.png\"}", dir));
	ck_assert_str_eq(status_of(apt), "Cancelled");
	ck_assert_str_eq(slot_status(slots[0]), "Available");

	/* the browser's reload re-POSTs: the page says the link was used */
	h_cdp(h_sprintf("{\"op\":\"nav\",\"url\":\"%s\"}", url));
	v = h_cdp("{\"op\":\"eval\",\"expr\":\"document.getElementById('msg').textContent\"}");
	ck_assert_str_eq(v, "\"This link has already been used. Nothing was changed.\"");
	h_cdp(h_sprintf("{\"op\":\"shot\",\"path\":\"%s/manage-used-390x844.png\"}", dir));

	/* a reschedule link of a new booking: the agent's other free times */
	apt = book_ok(tok, slots[1]);
	h_cdp(h_sprintf("{\"op\":\"nav\",\"url\":\"%s%s\"}", h_env("PIN_BASE_URL"),
		link_nth(inv, apt, 1)));
	v = h_cdp("{\"op\":\"eval\",\"expr\":\"document.querySelectorAll('form.slot').length\"}");
	ck_assert_str_eq(v, "2");               /* slots[0] (free again) and slots[2] */
	h_cdp(h_sprintf("{\"op\":\"shot\",\"path\":\"%s/manage-move-390x844.png\"}", dir));
	h_cdp_stop();
	ck_assert_int_eq(stat(h_sprintf("%s/manage-confirm-390x844.png", dir), &st), 0);
	ck_assert_int_gt((int)st.st_size, 1000);
}
END_TEST

Suite *make_manage_suite(void)
{
	Suite *s = suite_create("manage");
	TCase *tc = h_tcase("manage", 180);

	tcase_add_test(tc, cancel_by_link);
	tcase_add_test(tc, reschedule_by_link);
	tcase_add_test(tc, cutoff_as_api);
	tcase_add_test(tc, russian_page);
	suite_add_tcase(s, tc);
	tc = h_tcase("manage_browser", 180);
	tcase_add_test(tc, browser_phone_confirm);
	suite_add_tcase(s, tc);
	return s;
}
