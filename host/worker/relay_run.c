/*
 * relay_run.c -- the outbox relay's threads (relay.c has the overview):
 * the loop of one relay thread, start and stop, and --once.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

static pthread_t relay_thr[RELAY_MAX_THREADS];
static int relay_nthr;

/*
 * One step of every unit: mark finished batches, read and produce the next
 * ones.  Returns -1 when something failed (the caller backs off).
 * *busy: a unit read a full batch (go again at once); *read_any: rows read.
 */
static int relay_step(struct relay *r, bool *full, bool *read_any)
{
	int rc = 0;

	*full = *read_any = false;
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];
		int done = 0, nrows;

		if (relay_unit_reap(r, u, &done) < 0)
			rc = -1;
		r->done += done;
		if (relay_unit_feed(r, u, &nrows) < 0)
			rc = -1;
		if (nrows > 0)
			*read_any = true;
		if (nrows >= r->batch)
			*full = true;
	}
	if (rc == 0) {
		r->consecutive_failures = 0;
		r->backoff_ms = 0;
	}
	return rc;
}

/* Stopping: waits up to wait_ms for the batches in flight and marks them,
 * then gives the locks back. */
static void relay_finish(struct relay *r, int wait_ms)
{
	int64_t end = pin_clock_now_us() + (int64_t)wait_ms * 1000;
	int done = 0;

	while (relay_inflight(r) && pin_clock_now_us() < end) {
		relay_poll(r, 20);
		for (int i = 0; i < r->nunits; i++)
			relay_unit_reap(r, &r->units[i], &done);
	}
	relay_producer_destroy(r);           /* what is left: failed, kept */
	for (int i = 0; i < r->nunits; i++) {
		relay_unit_reap(r, &r->units[i], &done);
		relay_unit_release(r, &r->units[i], "stopping");
	}
	r->done += done;
	relay_leader_gauge(r);
	if (pin_db_conn() && PQbackendPID(pin_db_conn()) == r->conn_pid && !r->once) {
		char sql[200];

		/* both at once (a want lock without its member lock counts for
		 * nothing: relay_count_members pairs them by session) */
		if (r->want_cursor)
			snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock_shared(" RELAY_MEMBER_CLASS
					", %d), pg_advisory_unlock_shared(" RELAY_WANT_CLASS ", %d)",
					relay_member_key(r), r->nshards);
		else
			snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock_shared("
					RELAY_MEMBER_CLASS ", %d)", relay_member_key(r));
		pin_db_exec(sql, 0, NULL);
	}
	free(r->units);
	r->units = NULL;
	r->nunits = 0;
}

static void *relay_main(void *arg)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .thread = (int)(intptr_t)arg };
	struct pin_arena *a = pin_arena_new();
	int busy = (int)pin_config_int("relay_busy_interval_ms");
	int idle = (int)pin_config_int("relay_idle_interval_ms");
	int64_t retry_us = relay_failover_ms() * 1000 / 5;
	struct relay_clock clk = { .since = pin_clock_mono_us() };

	if (retry_us > 1000000)
		retry_us = 1000000;
	relay_rclk = &clk;
	pin_arena_set_current(a);
	pin_metric_add("pin_outbox_published_total", NULL, 0);
	relay_units_build(&r);
	relay_leader_gauge(&r);
	while (!relay_should_stop()) {
		bool full = false, read_any = false;
		int64_t now = pin_clock_now_us(), sleep_us;
		int rc;

		int64_t t0 = pin_clock_mono_us();

		pin_trace_set(NULL);
		relay_clock_log(&r, &clk, t0);
		if (now >= r.next_lead_us) {
			relay_lead_round(&r);
			r.next_lead_us = now + retry_us;
		}
		relay_rc_add(RC_LEAD, &t0);
		rc = relay_step(&r, &full, &read_any);
		if (rc < 0)
			relay_on_failure(&r);
		t0 = pin_clock_mono_us();
		relay_update_pending(&r);
		relay_rc_add(RC_PENDING, &t0);
		if (r.thread == 0)
			relay_write_metrics_file();
		pin_arena_reset(a);
		if (relay_inflight(&r)) {
			t0 = pin_clock_mono_us();
			relay_poll(&r, full || read_any ? 0 : 5);
			relay_rc_add(RC_POLL, &t0);
			continue;
		}
		if (full && rc == 0)
			continue;
		now = pin_clock_now_us();
		sleep_us = (int64_t)(read_any ? busy : idle) * 1000;
		if (r.pause_until_us > now && r.pause_until_us - now < sleep_us)
			sleep_us = r.pause_until_us - now;
		if (r.next_lead_us - now < sleep_us)
			sleep_us = r.next_lead_us - now;
		if (r.rk && r.failing && relay_bootstrap_changed(&r))
			r.pause_until_us = 0;     /* the broker has a new address */
		else if (!r.rk && r.failing && r.pause_until_us > now && relay_bootstrap_known() &&
				r.consecutive_failures > 1)
			r.pause_until_us = 0;
		if (sleep_us > 0) {
			t0 = pin_clock_mono_us();
			relay_sleep_ms((int)((sleep_us + 999) / 1000));
			relay_rc_add(RC_SLEEP, &t0);
		}
	}
	relay_rclk = NULL;
	relay_finish(&r, 5000);
	pin_arena_reset(a);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

int pin_relay_start(void)
{
	if (relay_running)
		return 0;
	pin_waiter_init(&relay_w);
	relay_gauges_init();
	relay_running = true;        /* before the threads read it */
	for (relay_nthr = 0; relay_nthr < relay_threads(); relay_nthr++)
		if (pthread_create(&relay_thr[relay_nthr], NULL, relay_main,
				(void *)(intptr_t)relay_nthr) != 0)
			break;
	if (relay_nthr == 0) {
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot start its thread", NULL);
		relay_running = false;
		pin_waiter_destroy(&relay_w);
		return -1;
	}
	{
		char n[16];

		snprintf(n, sizeof(n), "%d", relay_nthr);
		pin_log(PIN_LOG_INFO, "outbox relay started", "threads", n, NULL);
	}
	return 0;
}

void pin_relay_stop(void)
{
	if (!relay_running)
		return;
	pin_waiter_stop(&relay_w);
	for (int i = 0; i < relay_nthr; i++)
		pthread_join(relay_thr[i], NULL);
	relay_nthr = 0;
	pin_waiter_destroy(&relay_w);
	relay_running = false;
	pin_log(PIN_LOG_INFO, "outbox relay stopped", NULL);
}

/* --once: every shard nobody else leads, until each is empty (or
 * relay_once_timeout_ms). */
int pin_relay_run_once(void)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .once = true };
	struct pin_arena *prev = pin_arena_current(), *a = pin_arena_new();
	int64_t deadline = pin_clock_now_us() +
		pin_config_int("relay_once_timeout_ms") * 1000;
	int rc = 0;

	pin_arena_set_current(a);
	relay_gauges_init();
	relay_units_build(&r);
	{
		struct relay_members m;

		/* running relays that split keys by another relay_shards: leading
		 * "our" shard 0 could publish keys one of them leads too */
		if (relay_count_members(&r, &m) < 0 || m.foreign > 0) {
			pin_log(PIN_LOG_WARN, "outbox relay: relays with another relay_shards"
					" are running (or the check failed), --once skips the relay", NULL);
			goto out;
		}
		/* by the cursor once cursors exist or a host relays by it (a
		 * running host makes the first), else by marking: marking in a
		 * cursor era would send again every row the cursors passed */
		r.cursor = m.cursor > 0 || m.cursors;
		if (r.cursor && !r.want_cursor) {
			pin_log(PIN_LOG_ERROR, "outbox relay: the outboxes are relayed by cursors"
					" and relay_cursor = false; --once skips the relay", NULL);
			rc = -1;
			goto out;
		}
	}
	relay_lead_round(&r);
	if (r.any_led != 1) {
		pin_log(PIN_LOG_INFO, "outbox relay: another host is the leader, skipping", NULL);
		goto out;
	}
	for (;;) {
		bool full = false, read_any = false, busy = false;

		if (pin_clock_now_us() > deadline) {
			rc = -1;
			break;
		}
		if (relay_step(&r, &full, &read_any) < 0) {
			relay_on_failure(&r);
			r.pause_until_us = 0;
			relay_sleep_ms(500);
		}
		for (int i = 0; i < r.nunits; i++) {
			struct relay_unit *u = &r.units[i];

			/* a unit is done when nothing is in flight and its last
			 * read found no row */
			if (u->led && (u->nwin || !u->caught_up || u->stalled || read_any))
				busy = true;
		}
		pin_arena_reset(a);
		if (!busy)
			break;
		if (relay_inflight(&r))
			relay_poll(&r, full || read_any ? 0 : 5);
	}
	relay_update_pending(&r);
	relay_write_metrics_file();
out:
	relay_finish(&r, rc ? 0 : 2000);
	if (r.any_led >= 0) {
		char s[24];

		snprintf(s, sizeof(s), "%lld", r.done);
		pin_log(rc ? PIN_LOG_WARN : PIN_LOG_INFO, "outbox relay: one pass done",
				"published", s, "complete", rc ? "false" : "true", NULL);
	}
	pin_arena_reset(a);
	pin_arena_set_current(prev);
	pin_arena_free(a);
	return rc;
}

