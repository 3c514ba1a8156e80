/*
 * test_ops.c -- the host as an operator sees it (issue 2): a plugin of
 * another ABI or one whose init fails stops the host with a clear message
 * and a non-zero exit; a clock offset is refused unless the config allows
 * it; a configuration with an unknown key or a bad value is refused naming
 * file, line and key, --check-config and --print-config answer as
 * doc/configuration.md says; the housekeeping job deletes only what is old
 * enough; a database
 * outage shows in /readyz, /metrics and as 503 UNAVAILABLE, and the running
 * host recovers without a restart.
 *
 * Runs last: the outage case stops the stack's PostgreSQL for a moment.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Text appended to the one-shot host log since offset. */
static char *log_since(long offset)
{
	char *path = h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR"));
	FILE *f = fopen(path, "r");
	char *buf;
	long len;

	if (!f)
		return h_strdup("");
	fseek(f, 0, SEEK_END);
	len = ftell(f) - offset;
	if (len <= 0) {
		fclose(f);
		return h_strdup("");
	}
	buf = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	fseek(f, offset, SEEK_SET);
	len = (long)fread(buf, 1, (size_t)len, f);
	fclose(f);
	buf[len] = '\0';
	char *out = h_strdup(buf);
	free(buf);
	return out;
}

static long log_size(void)
{
	struct stat st;
	char *path = h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR"));

	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Runs an API host with one fixture plugin; it must refuse to start. */
static void assert_refused(const char *fixture, const char *why)
{
	char *so = h_sprintf("%s/%s.so", h_env("PIN_FIXTURE_DIR"), fixture);
	char *sock = h_sprintf("unix:%s/ops-%s.sock", h_env("PIN_DEV_DIR"), fixture);
	const char *extra[] = { "--listen", sock, NULL };
	long before = log_size();
	int status = h_run_host("api", so, 0, extra);
	char *log = log_since(before);

	ck_assert_msg(status != 0, "%s: the host started (exit %d)", fixture, status);
	ck_assert_msg(strstr(log, why) != NULL, "%s: no \"%s\" in the log: %s",
			fixture, why, log);
	ck_assert_msg(strstr(log, "api host listening") == NULL,
			"%s: the host listened before refusing: %s", fixture, log);
}

START_TEST(plugin_of_another_major_refused)
{
	assert_refused("badmajor", "abi_major");
}
END_TEST

START_TEST(plugin_of_a_newer_minor_refused)
{
	assert_refused("badminor", "abi_minor");
}
END_TEST

START_TEST(plugin_init_failure_stops_host)
{
	assert_refused("failinit", "init failed");
}
END_TEST

/* The stack's config as PIN_DEV_DIR/<name>: without the lines that contain
 * DROP, then the lines ADD (each NULL: none). */
static char *stack_conf(const char *name, const char *drop, const char *add)
{
	char *conf = h_sprintf("%s/%s", h_env("PIN_DEV_DIR"), name);
	FILE *in = fopen(h_env("PIN_CONFIG"), "r"), *out = fopen(conf, "w");
	char line[4096];

	ck_assert_ptr_nonnull(in);
	ck_assert_ptr_nonnull(out);
	while (fgets(line, sizeof(line), in))
		if (!drop || !strstr(line, drop))
			fputs(line, out);
	if (add)
		fprintf(out, "\n%s\n", add);
	fclose(in);
	fclose(out);
	return conf;
}

START_TEST(clock_offset_needs_permission)
{
	/* the stack's config with allow_clock_offset removed */
	char *conf = stack_conf("ops-no-offset.conf", "allow_clock_offset", NULL);
	const char *extra[] = { "--config", conf, "--once", NULL };
	long before = log_size();
	int status = h_run_host("worker", NULL, 3600, extra);

	ck_assert_msg(status != 0, "a shifted clock was accepted (exit %d)", status);
	ck_assert_msg(strstr(log_since(before), "clock offset refused") != NULL,
			"no refusal in the log");

	/* with the permission (the stack's own config) the same run works */
	ck_assert_int_eq(h_run_worker_once(3600), 0);
}
END_TEST

/* A worker host of its own (no plugins: the relay and the metrics; no
 * metrics listener; it joins the relay members for its few seconds and gives
 * its shards back on SIGTERM, as in "Relay shards and failover") with the
 * stack's config plus metrics_textfile = PATH, until the log since BEFORE shows WANT_LOG or PATH exists (want_log NULL);
 * then stopped.  Returns whether that happened within 15 s. */
static bool textfile_worker(const char *conf_name, const char *path, const char *want_log,
		long before)
{
	char *conf = stack_conf(conf_name, NULL,
			h_sprintf("metrics_listen =\nmetrics_textfile = %s", path));
	const char *extra[] = { "--config", conf, NULL };
	struct stat st;
	pid_t pid;
	int status;
	bool seen;

	pid = h_spawn_host("worker", "", 0, extra);
	seen = want_log ? H_WAIT_UNTIL(strstr(log_since(before), want_log) != NULL, 15000)
			: H_WAIT_UNTIL(stat(path, &st) == 0, 15000);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	return seen;
}

/* metrics_textfile: node_exporter (another user) can read what the worker
 * writes whatever the unit's UMask, and a path it cannot write is logged,
 * not silent (the packaged unit's ProtectSystem=strict). */
START_TEST(metrics_textfile_readable_or_logged)
{
	char *prom = h_sprintf("%s/ops-worker.prom", h_env("PIN_DEV_DIR"));
	struct stat st;
	mode_t um;
	char *text;

	unlink(prom);
	um = umask(0077);   /* as the packaged units */
	ck_assert_msg(textfile_worker("ops-textfile.conf", prom, NULL, log_size()),
			"no %s from a running worker host", prom);
	umask(um);
	ck_assert_msg(stat(prom, &st) == 0, "%s", prom);
	ck_assert_msg((st.st_mode & 0777) == 0644, "mode %o, want 0644", (unsigned)(st.st_mode & 0777));
	text = h_slurp(prom);
	ck_assert_msg(text && strstr(text, "# TYPE pin_"), "no pin_ metric in the file: %.200s",
			text ? text : "(unreadable)");

	ck_assert_msg(textfile_worker("ops-textfile-bad.conf",
			h_sprintf("%s/no-such-dir/worker.prom", h_env("PIN_DEV_DIR")),
			"cannot write metrics_textfile", log_size()),
			"an unwritable metrics_textfile was not logged");
}
END_TEST

/* ---- declared configuration (issue 29 item 2) --------------------------- */

/* The line number of the first line of FILE that contains WHAT, or 0. */
static int line_of(const char *file, const char *what)
{
	FILE *f = fopen(file, "r");
	char line[4096];
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, what)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	return 0;
}

/* A host of MODE with the stack's command line and extra args; its exit
 * status, and what it wrote since then in *out. */
static int host_run(const char *mode, const char *const *extra, char **out)
{
	long before = log_size();
	int status = h_run_host(mode, strcmp(mode, "api") ? NULL : h_env("PIN_API_PLUGINS"),
			0, extra);

	*out = log_since(before);
	return status;
}

/* A typo in a key refuses the start of either host, naming file, line, key
 * and the key it resembles; nothing listens, nothing runs. */
START_TEST(config_typo_refuses_start)
{
	char *conf = stack_conf("ops-typo.conf", NULL, "db_concurency = 8");
	char *sock = h_sprintf("unix:%s/ops-typo.sock", h_env("PIN_DEV_DIR"));
	char *want = h_sprintf("\"in\":\"%s:%d\"", conf, line_of(conf, "db_concurency"));
	const char *api[] = { "--config", conf, "--listen", sock, NULL };
	const char *worker[] = { "--config", conf, "--once", NULL };
	char *out;
	int status;

	status = host_run("api", api, &out);
	ck_assert_msg(status != 0, "the API host started with a typo (exit %d)", status);
	ck_assert_msg(strstr(out, "\"msg\":\"configuration: unknown key\",\"key\":\"db_concurency\"")
		&& strstr(out, want) && strstr(out, "did you mean \\\"db_concurrency\\\"?"),
		"no refusal naming key, %s and the suggestion: %s", want, out);
	ck_assert_msg(strstr(out, "configuration refused, not starting"), "%s", out);
	ck_assert_msg(!strstr(out, "api host listening") && !strstr(out, "plugin loaded"),
		"the host went on: %s", out);
	status = host_run("worker", worker, &out);
	ck_assert_msg(status != 0 && strstr(out, "db_concurency"),
		"the worker host ran with a typo (exit %d): %s", status, out);
}
END_TEST

/* pin-host --check-config: 0 and "test is successful" for the stack's own
 * configuration in each mode (the keys of every plugin in plugin_dir are
 * known to either host); 1 with the finding for a typo, a wrong type, a
 * plugin's key out of range */
START_TEST(check_config_exit_codes)
{
	const char *ok_api[] = { "--check-config", NULL };
	const char *ok_migrate[] = { "--check-config", "--mode", "migrate", NULL };
	char *out, *conf;
	int status;

	status = host_run("api", ok_api, &out);
	ck_assert_msg(status == 0 && strstr(out, "test is successful") && !strstr(out, "[error]"),
		"api: exit %d: %s", status, out);
	status = host_run("worker", ok_api, &out);
	ck_assert_msg(status == 0 && strstr(out, "test is successful"), "worker: exit %d: %s",
		status, out);
	status = host_run("worker", ok_migrate, &out);
	ck_assert_msg(status == 0 && strstr(out, "test is successful"), "migrate: exit %d: %s",
		status, out);

	const struct {
		const char *name, *line, *want;
	} bad[] = {
		{ "ops-bad-typo.conf", "smtp_ulr = smtp://localhost", "unknown key \"smtp_ulr\"" },
		{ "ops-bad-type.conf", "relay_batch = lots",
		  "invalid value \"lots\" of key \"relay_batch\"" },
		{ "ops-bad-range.conf", "notify.dispatch_batch = 0",
		  "of key \"notify.dispatch_batch\"" },
		{ "ops-bad-url.conf", "sms_url = ftp://sms.example", "has a scheme other than" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *args[] = { "--check-config", "--config", NULL, NULL };
		char *where;

		conf = stack_conf(bad[i].name, NULL, bad[i].line);
		args[2] = conf;
		where = h_sprintf("in %s:%d", conf, line_of(conf, bad[i].line));
		status = host_run("worker", args, &out);
		ck_assert_msg(status != 0, "%s: exit 0: %s", bad[i].line, out);
		ck_assert_msg(strstr(out, bad[i].want) && strstr(out, where) &&
			strstr(out, "test failed"), "%s: want %s %s: %s", bad[i].line,
			bad[i].want, where, out);
	}
}
END_TEST

/* pin-host --print-config: where each value comes from, secrets redacted */
START_TEST(print_config_sources_and_redaction)
{
	const char *args[] = { "--print-config", NULL };
	char *secret = NULL, *out, *line, *want;
	FILE *f = fopen(h_env("PIN_CONFIG"), "r");
	char buf[4096];
	int status;

	ck_assert_ptr_nonnull(f);
	while (fgets(buf, sizeof buf, f))
		if (!strncmp(buf, "jwt_hs256_secret = ", 19)) {
			buf[strcspn(buf, "\n")] = '\0';
			secret = h_strdup(buf + 19);
		}
	fclose(f);
	ck_assert_msg(secret && strlen(secret) >= 32, "no jwt_hs256_secret in the stack's config");
	ck_assert_int_eq(setenv("PIN_RELAY_BATCH", "77", 1), 0);
	status = host_run("worker", args, &out);
	unsetenv("PIN_RELAY_BATCH");
	ck_assert_msg(status == 0, "exit %d: %s", status, out);
	ck_assert_msg(!strstr(out, secret), "the JWT secret is printed");
	/* the worker's keys only: jwt_hs256_secret applies to API hosts */
	ck_assert_msg(!strstr(out, "\njwt_hs256_secret ="), "%s", out);
	ck_assert_msg(strstr(out, "# plugin notify") && strstr(out, "# plugin workers"), "%s", out);
	line = strstr(out, "\nrelay_batch = 77 ");
	ck_assert_msg(line && strstr(line, "# environment PIN_RELAY_BATCH"), "%s", out);
	line = strstr(out, "\npg_dsn = ");
	ck_assert_msg(line && strstr(line, "# flag"), "%s", out);
	line = strstr(out, "\nrelay_shards = 4 ");
	ck_assert_msg(line && strncmp(strstr(line, "# "), "# default", 9) == 0, "%s", out);
	want = h_sprintf("# %s:%d", h_env("PIN_CONFIG"),
		line_of(h_env("PIN_CONFIG"), "crm_booking.replica_retry_deadline_s"));
	line = strstr(out, "\ncrm_booking.replica_retry_deadline_s = 30 ");
	ck_assert_msg(line && !strncmp(strstr(line, "# "), want, strlen(want)), "want %s: %s",
		want, out);

	/* an API host's: the secret redacted */
	status = host_run("api", args, &out);
	ck_assert_msg(status == 0 && strstr(out, "\njwt_hs256_secret = <redacted>"), "%s", out);
	ck_assert_msg(!strstr(out, secret), "the JWT secret is printed");
}
END_TEST

/* ---- housekeeping (workers.md) ------------------------------------------ */

/* A Cancelled manual event of a fresh agent, last changed days_ago. */
static char *cancelled_event(int days_ago)
{
	char *tok = h_token("agent", h_uuid(), h_uuid(), "calendar.events.view",
			"calendar.events.manage", NULL);
	struct h_resp *r = h_post("/api/v1/agent/calendar/events", tok,
			h_sprintf("{\"kind\":\"Task\",\"title\":\"t\",\"startAt\":\"%s\","
				"\"timeZone\":\"UTC\",\"reminderOffsetsMinutes\":[60]}",
				h_iso_in(10 * 86400)));
	char *id;

	ck_assert_msg(r->status == 201, "create: %ld %s", r->status, r->body);
	id = h_strdup(h_jstr(r->json, "id"));
	r = h_post(h_sprintf("/api/v1/agent/calendar/events/%s/cancel", id), tok, NULL);
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	h_sql("UPDATE calendar.calendar_events SET updated_at = now() - make_interval(days => $2::int)"
		" WHERE id = $1", id, h_sprintf("%d", days_ago));
	return id;
}

START_TEST(housekeeping_purges_only_old_rows)
{
	char *old_ev = cancelled_event(200), *new_ev = cancelled_event(10);
	char *ob_old = h_uuid(), *ob_new = h_uuid(), *in_old = h_uuid(), *in_new = h_uuid();
	char *caller = h_uuid();
	const char *ob = "INSERT INTO calendar.outbox (message_id, topic, key, envelope,"
		" created_at, published_at) VALUES ($1, 'pin.test.events.v1', 'k', '{}',"
		" now() - make_interval(days => $2::int), now() - make_interval(days => $2::int))";
	const char *ib = "INSERT INTO calendar.inbox (consumer_group, message_id, processed_at)"
		" VALUES ('ops-test', $1, now() - make_interval(days => $2::int))";
	const char *ik = "INSERT INTO calendar.idempotency_keys (caller, key, request_hash,"
		" status, created_at) VALUES ($1, $2, 'h', 201,"
		" now() - make_interval(hours => $3::int))";

	h_sql(ob, ob_old, "8");
	h_sql(ob, ob_new, "1");
	h_sql(ib, in_old, "31");
	h_sql(ib, in_new, "1");
	h_sql(ik, caller, "old", "25");
	h_sql(ik, caller, "new", "1");

	ck_assert_int_eq(h_run_worker_once(0), 0);

	const struct {
		const char *what, *from_where, *arg;
		long long want;
	} left[] = {
		/* old terminal event and its reminders gone; the recent one kept */
		{ "old event", "calendar.calendar_events WHERE id = $1", old_ev, 0 },
		{ "old event's reminders", "calendar.event_reminders"
		  " WHERE calendar_event_id = $1", old_ev, 0 },
		{ "recent event", "calendar.calendar_events WHERE id = $1", new_ev, 1 },
		{ "recent event's reminder", "calendar.event_reminders"
		  " WHERE calendar_event_id = $1", new_ev, 1 },
		/* outbox: published > 7 days ago gone; inbox: > 30 days gone */
		{ "old outbox row", "calendar.outbox WHERE message_id = $1", ob_old, 0 },
		{ "recent outbox row", "calendar.outbox WHERE message_id = $1", ob_new, 1 },
		{ "old inbox row", "calendar.inbox WHERE message_id = $1", in_old, 0 },
		{ "recent inbox row", "calendar.inbox WHERE message_id = $1", in_new, 1 },
		/* Idempotency-Key records live 24 h */
		{ "old idempotency key", "calendar.idempotency_keys"
		  " WHERE caller = $1 AND key = 'old'", caller, 0 },
		{ "recent idempotency key", "calendar.idempotency_keys"
		  " WHERE caller = $1 AND key = 'new'", caller, 1 },
	};
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		long long n = h_sql_int(h_sprintf("SELECT count(*) FROM %s",
				left[i].from_where), left[i].arg);

		ck_assert_msg(n == left[i].want, "%s: %lld rows left, want %lld",
				left[i].what, n, left[i].want);
	}
}
END_TEST

/* Issue 30 item 6: every table that grows with use has a bound.  One pass
 * of the housekeeping deletes what is past each retention and leaves what is
 * younger (or still referred to): closed booking-deadline links (and then
 * their BookingDeadline events, in the same pass), Archived slots and the
 * slot batches none of whose slots is left, Sent and Skipped reminders of
 * events that stay, replicas of closed deals. */
START_TEST(housekeeping_bounds_every_table)
{
	const char *tenant = h_uuid(), *owner = h_uuid();
	const char *ev_planned = h_uuid(), *ev_deadline = h_uuid(), *ev_open = h_uuid();
	const char *bk_old = h_uuid(), *bk_new = h_uuid(), *bk_open_ev = h_uuid(),
		*bk_dl = h_uuid();
	const char *deal_old = h_uuid(), *deal_linked = h_uuid(), *deal_new = h_uuid(),
		*deal_live = h_uuid();
	const char *sl_old = h_uuid(), *sl_new = h_uuid(), *sl_booked = h_uuid();
	const char *b_empty_old = h_uuid(), *b_empty_new = h_uuid(), *b_kept = h_uuid();
	const char *apt_old = h_uuid(), *apt_new = h_uuid();
	const char *r_sent_old = h_uuid(), *r_skip_old = h_uuid(), *r_sent_new = h_uuid(),
		*r_pending = h_uuid();
	/* a Manual task (stays: Planned), a Cancelled BookingDeadline event and
	 * a Planned one, all last changed 200 days ago */
	const char *ev = "INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id,"
		" kind, origin, status, title, start_at, time_zone, deal_id, booking_id,"
		" cancelled_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6::text, 't',"
		" now() - interval '200 days', 'UTC', NULLIF($7, '')::uuid, NULLIF($8, '')::uuid,"
		" CASE WHEN $6::text = 'Cancelled' THEN now() - interval '200 days' END,"
		" now() - interval '200 days', now() - interval '200 days')";
	const char *link = "INSERT INTO calendar.booking_deadline_links (booking_id, phase,"
		" deal_id, tenant_id, calendar_event_id, status, created_at, updated_at)"
		" VALUES ($1, 'Reserve', $2, $3, NULLIF($4, '')::uuid, $5,"
		" now() - make_interval(days => $6::int),"
		" now() - make_interval(days => $6::int))";
	const char *deal = "INSERT INTO calendar.crm_deal_replicas (deal_id, is_terminal,"
		" created_at, updated_at) VALUES ($1, $2::boolean,"
		" now() - make_interval(days => $3::int), now() - make_interval(days => $3::int))";
	const char *batch = "INSERT INTO calendar.slot_batches (id, tenant_id, owner_user_id,"
		" kind, time_zone, windows, from_date, to_date, slot_duration_minutes, created_at,"
		" updated_at) VALUES ($1, $2, $3, 'Showing', 'UTC', '[]',"
		" current_date - $4::int - 7, current_date - $4::int, 60, now(), now())";
	const char *slot = "INSERT INTO calendar.availability_slots (id, tenant_id,"
		" owner_user_id, batch_id, kind, start_at, end_at, time_zone, status, created_at,"
		" updated_at) VALUES ($1, $2, $3, $4, 'Showing',"
		" now() - make_interval(days => $5::int, hours => 1),"
		" now() - make_interval(days => $5::int), 'UTC', 'Archived', now(), now())";
	const char *apt = "INSERT INTO calendar.appointments (id, tenant_id, slot_id,"
		" calendar_event_id, agent_user_id, investor_user_id, kind, start_at, end_at,"
		" time_zone, status, cancelled_by, cancelled_at, confirm_deadline_at, created_at,"
		" updated_at) SELECT $1, $2, s.id, gen_random_uuid(), $4, gen_random_uuid(),"
		" 'Showing', s.start_at, s.end_at, 'UTC', 'Cancelled', 'Agent',"
		" now() - make_interval(days => $5::int), s.start_at,"
		" now() - make_interval(days => $5::int), now() - make_interval(days => $5::int)"
		" FROM calendar.availability_slots s WHERE s.id = $3";
	const char *rem = "INSERT INTO calendar.event_reminders (id, calendar_event_id,"
		" offset_minutes, due_at, status, sent_at, created_at, updated_at) VALUES ($1, $2,"
		" $3::int, now() - make_interval(days => $4::int), $5::text,"
		" CASE WHEN $5::text = 'Sent' THEN now() - make_interval(days => $4::int) END, now(), now())";

	h_sql(ev, ev_planned, tenant, owner, "Task", "Manual", "Planned", "", "");
	h_sql(ev, ev_deadline, tenant, owner, "BookingDeadline", "CrmBooking", "Cancelled",
		deal_old, bk_dl);
	h_sql(ev, ev_open, tenant, owner, "BookingDeadline", "CrmBooking", "Planned",
		deal_linked, bk_open_ev);
	/* links: closed 200 days ago (gone; the one of ev_deadline too, and then
	 * the event), closed 10 days ago (kept), closed but its event still
	 * Planned (kept, and so is the event) */
	h_sql(link, bk_old, deal_old, tenant, "", "Cancelled", "200");
	h_sql(link, bk_dl, deal_old, tenant, ev_deadline, "Completed", "200");
	h_sql(link, bk_new, deal_new, tenant, "", "Cancelled", "10");
	h_sql(link, bk_open_ev, deal_linked, tenant, ev_open, "Completed", "200");
	/* deal replicas: closed 200 days ago (gone once its links are), closed
	 * 200 days ago but a link left (kept), closed 10 days ago (kept), open
	 * (kept) */
	h_sql(deal, deal_old, "true", "200");
	h_sql(deal, deal_linked, "true", "200");
	h_sql(deal, deal_new, "true", "10");
	h_sql(deal, deal_live, "false", "400");
	/* slots: Archived, ended 200 days ago (gone), ended 40 days ago (kept),
	 * ended 200 days ago but an appointment refers to it (kept) */
	h_sql(batch, b_empty_old, tenant, owner, "200");
	h_sql(batch, b_empty_new, tenant, owner, "40");
	h_sql(batch, b_kept, tenant, owner, "200");
	h_sql(slot, sl_old, tenant, owner, b_empty_old, "200");
	h_sql(slot, sl_new, tenant, owner, b_empty_new, "40");
	h_sql(slot, sl_booked, tenant, owner, b_kept, "200");
	h_sql("INSERT INTO calendar.appointments (id, tenant_id, slot_id, calendar_event_id,"
		" agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,"
		" confirm_deadline_at, created_at, updated_at) SELECT gen_random_uuid(), $2,"
		" s.id, gen_random_uuid(), $3, gen_random_uuid(), 'Showing', s.start_at,"
		" s.end_at, 'UTC', 'Confirmed', s.start_at, now(), now()"
		" FROM calendar.availability_slots s WHERE s.id = $1", sl_booked, tenant, owner);
	/* appointments: Cancelled 200 days ago (gone, and then its Archived slot
	 * in the same pass), Cancelled 10 days ago (kept, and its slot) */
	h_sql(apt, apt_old, tenant, sl_old, owner, "200");
	h_sql(apt, apt_new, tenant, sl_new, owner, "10");
	/* reminders of the Planned task: Sent and Skipped due 200 days ago
	 * (gone), Sent due 10 days ago (kept), Pending (kept) */
	h_sql(rem, r_sent_old, ev_planned, "60", "200", "Sent");
	h_sql(rem, r_skip_old, ev_planned, "1440", "201", "Skipped");
	h_sql(rem, r_sent_new, ev_planned, "120", "10", "Sent");
	h_sql(rem, r_pending, ev_planned, "30", "-1", "Pending");

	long before = log_size();

	ck_assert_int_eq(h_run_worker_once(0), 0);

	const struct {
		const char *what, *sql, *arg;
		const char *want;
	} left[] = {
		{ "appointments", "SELECT string_agg(id::text, ',')"
		  " FROM calendar.appointments WHERE tenant_id = $1 AND status = 'Cancelled'",
		  tenant, apt_new },
		{ "links", "SELECT string_agg(booking_id::text, ',' ORDER BY booking_id)"
		  " FROM calendar.booking_deadline_links WHERE tenant_id = $1", tenant,
		  h_sprintf("%s", strcmp(bk_new, bk_open_ev) < 0 ? h_sprintf("%s,%s", bk_new,
			bk_open_ev) : h_sprintf("%s,%s", bk_open_ev, bk_new)) },
		{ "events", "SELECT string_agg(id::text, ',' ORDER BY id)"
		  " FROM calendar.calendar_events WHERE tenant_id = $1", tenant,
		  strcmp(ev_planned, ev_open) < 0 ? h_sprintf("%s,%s", ev_planned, ev_open)
		  : h_sprintf("%s,%s", ev_open, ev_planned) },
		{ "deal replicas", "SELECT string_agg(deal_id::text, ',' ORDER BY updated_at,"
		  " is_terminal) FROM calendar.crm_deal_replicas WHERE deal_id = ANY ("
		  "string_to_array($1, ',')::uuid[])",
		  h_sprintf("%s,%s,%s,%s", deal_old, deal_linked, deal_new, deal_live),
		  h_sprintf("%s,%s,%s", deal_live, deal_linked, deal_new) },
		{ "slots", "SELECT string_agg(id::text, ',' ORDER BY end_at)"
		  " FROM calendar.availability_slots WHERE tenant_id = $1", tenant,
		  h_sprintf("%s,%s", sl_booked, sl_new) },
		{ "slot batches", "SELECT string_agg(id::text, ',' ORDER BY to_date)"
		  " FROM calendar.slot_batches WHERE tenant_id = $1", tenant,
		  h_sprintf("%s,%s", b_kept, b_empty_new) },
		{ "reminders", "SELECT string_agg(id::text, ',' ORDER BY due_at)"
		  " FROM calendar.event_reminders WHERE calendar_event_id = $1", ev_planned,
		  h_sprintf("%s,%s", r_sent_new, r_pending) },
	};
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		const char *got = h_sql_scalar(left[i].sql, left[i].arg);

		ck_assert_msg(got && !strcmp(got, left[i].want), "%s left: %s, want %s",
			left[i].what, got ? got : "(none)", left[i].want);
	}
	/* each purge counted and logged per table
	 * (pin_housekeeping_deleted_total{table}: the same count) */
	static const char *const tables[] = { "booking_deadline_links", "calendar_events",
		"appointments", "availability_slots", "slot_batches", "event_reminders",
		"crm_deal_replicas" };
	char *log = log_since(before);

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char *save = NULL, *line, *copy = h_strdup(log);
		const char *want = h_sprintf("\"table\":\"%s\",\"count\":\"", tables[i]);
		bool seen = false;

		for (line = strtok_r(copy, "\n", &save); line && !seen;
				line = strtok_r(NULL, "\n", &save))
			seen = strstr(line, "\"housekeeping deleted rows\"") && strstr(line, want);
		ck_assert_msg(seen, "no 'housekeeping deleted rows' line for table %s", tables[i]);
	}
}
END_TEST

/* ---- database outage ---------------------------------------------------- */

static int pg_ctl(const char *action)
{
	char *cmd;

	if (!strcmp(action, "stop"))
		cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' -m fast -w "
				"stop >/dev/null 2>&1", h_env("PIN_PG_BIN"),
				h_env("PIN_PG_DATA"));
	else
		cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' -l '%s' -w "
				"-t 60 -o '%s' start >/dev/null 2>&1", h_env("PIN_PG_BIN"),
				h_env("PIN_PG_DATA"), h_env("PIN_PG_LOG"),
				h_env("PIN_PG_OPTS"));
	return system(cmd);
}

static bool status_is(const char *path, const char *token, long want)
{
	struct h_resp *r = h_get(path, token);
	bool ok = r->status == want;

	h_resp_free(r);
	return ok;
}

static bool metric_is(const char *line)
{
	struct h_resp *r = h_get("/metrics", NULL);
	bool ok = r->status == 200 && strstr(r->body, line) != NULL;

	h_resp_free(r);
	return ok;
}

static void outage_teardown(void)
{
	/* never leave the stack without its database */
	pg_ctl("start");
}

START_TEST(database_outage_503_then_recovers)
{
	char *tok = h_token("agent", h_uuid(), h_uuid(), "calendar.events.view", NULL);
	/* a route that reads the database (the agent's event list) */
	const char *list = "/api/v1/agent/calendar/events"
		"?from=2026-12-01T00:00:00Z&to=2026-12-08T00:00:00Z";
	struct h_resp *r;

	ck_assert(status_is("/readyz", NULL, 200));
	ck_assert(status_is(list, tok, 200));

	ck_assert_int_eq(pg_ctl("stop"), 0);

	r = h_get("/readyz", NULL);
	h_assert_problem(r, 503, "UNAVAILABLE");
	r = h_get(list, tok);
	h_assert_problem(r, 503, "UNAVAILABLE");
	/* liveness is not readiness: the process is fine */
	ck_assert(status_is("/healthz", NULL, 200));
	ck_assert_msg(metric_is("\npin_db_up 0\n"), "pin_db_up is not 0 during the outage");

	ck_assert_int_eq(pg_ctl("start"), 0);

	/* the same host process, no restart: ready again within seconds */
	ck_assert_msg(H_WAIT_UNTIL(status_is("/readyz", NULL, 200), 15000),
			"/readyz did not recover");
	ck_assert_msg(H_WAIT_UNTIL(status_is(list, tok, 200), 15000),
			"the API did not recover");
	ck_assert_msg(metric_is("\npin_db_up 1\n"), "pin_db_up is not 1 again");
	/* the worker host recovers too: a job pass against the database works */
	ck_assert_int_eq(h_run_worker_once(0), 0);
}
END_TEST

Suite *make_ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = h_tcase("refusals", 120);
	TCase *to = h_tcase("outage", 120);

	tcase_add_test(tc, plugin_of_another_major_refused);
	tcase_add_test(tc, plugin_of_a_newer_minor_refused);
	tcase_add_test(tc, plugin_init_failure_stops_host);
	tcase_add_test(tc, clock_offset_needs_permission);
	tcase_add_test(tc, config_typo_refuses_start);
	tcase_add_test(tc, check_config_exit_codes);
	tcase_add_test(tc, print_config_sources_and_redaction);
	tcase_add_test(tc, metrics_textfile_readable_or_logged);
	tcase_add_test(tc, housekeeping_purges_only_old_rows);
	tcase_add_test(tc, housekeeping_bounds_every_table);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(to, NULL, outage_teardown);
	tcase_add_test(to, database_outage_503_then_recovers);
	suite_add_tcase(s, to);
	return s;
}
