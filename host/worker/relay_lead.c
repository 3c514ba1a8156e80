/*
 * relay_lead.c -- the leadership of the outbox relay's shards (relay.c has
 * the overview): the units, the member lock of the session, a leadership
 * round that takes this host's share and gives the rest back, the
 * leader gauges.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

void relay_units_build(struct relay *r)
{
	long long s = pin_config_int("relay_shards");
	long long w = pin_config_int("relay_inflight");

	r->nshards = s < 1 ? 1 : s > 1024 ? 1024 : (int)s;
	/* marking until a leadership round has counted the members (below) */
	r->want_cursor = pin_config_bool("relay_cursor");
	r->cursor = false;
	r->inflight = w < 1 ? 1 : w > RELAY_MAX_INFLIGHT ? RELAY_MAX_INFLIGHT : (int)w;
	r->batch = (int)pin_config_int("relay_batch");
	if (r->batch < 1)
		r->batch = 1;
	/* --once drains to a read from the start that finds nothing */
	r->rewind_us = r->once ? 0 : pin_config_int("relay_rewind_ms") * 1000;
	if (r->rewind_us < 0)
		r->rewind_us = 0;
	r->nunits = (int)relay_noutboxes() * r->nshards;
	r->units = calloc((size_t)r->nunits, sizeof(*r->units));
	if (!r->units) {
		r->nunits = 0;
		return;
	}
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];

		u->table = relay_outbox((size_t)i / (size_t)r->nshards);
		u->shard = i % r->nshards;
		snprintf(u->lab, sizeof(u->lab), "outbox=\"%s\",shard=\"%d\"", u->table, u->shard);
		strcpy(u->cursor, "0");
	}
}

static void unit_log(struct relay_unit *u, int level, const char *msg, const char *reason,
		const struct relay *r)
{
	char sh[16], n[16];

	snprintf(sh, sizeof(sh), "%d", u->shard);
	snprintf(n, sizeof(n), "%d", r->nshards);
	pin_log(level, msg, "outbox", u->table, "shard", sh, "shards", n,
			"reason", reason, NULL);
}

int relay_member_key(const struct relay *r)
{
	return r->nshards + (r->cursor ? RELAY_CURSOR_BIT : 0);
}

void relay_leader_gauge(struct relay *r)
{
	int any = 0, n = 0, total;

	for (int i = 0; i < r->nunits; i++)
		n += r->units[i].led;
	any = n > 0;
	if (any != r->any_led) {
		total = atomic_fetch_add(&relay_led_units, any ? 1 : (r->any_led == 1 ? -1 : 0)) +
			(any ? 1 : (r->any_led == 1 ? -1 : 0));
		pin_metric_set("pin_outbox_relay_leader", NULL, total > 0);
	}
	r->any_led = any;
}

static void unit_lost(struct relay *r, struct relay_unit *u, const char *reason)
{
	if (!u->led)
		return;
	u->led = false;
	u->releasing = false;
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	unit_log(u, PIN_LOG_WARN, "outbox relay: shard lost", reason, r);
}

void relay_lose_all(struct relay *r, const char *reason)
{
	for (int i = 0; i < r->nunits; i++)
		unit_lost(r, &r->units[i], reason);
	relay_leader_gauge(r);
}

/* Gives a unit's lock back (its batches are marked). */
void relay_unit_release(struct relay *r, struct relay_unit *u, const char *reason)
{
	PGconn *c = pin_db_conn();
	char sh[16];
	const char *p[2] = { u->table, sh };

	if (!u->led)
		return;
	snprintf(sh, sizeof(sh), "%d", u->shard);
	if (u->cur && c && PQbackendPID(c) == r->conn_pid)
		relay_cursor_save(r, u);
	/* the gauge first: once unlocked, another thread of this host may take
	 * the shard and set it to 1 */
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	if (c && PQbackendPID(c) == r->conn_pid)
		pin_db_exec("SELECT pg_advisory_unlock(hashtext('pin.relay:' || $1) & 2147483647,"
				" $2::int)", 2, p);
	u->led = false;
	u->releasing = false;
	unit_log(u, PIN_LOG_INFO, "outbox relay: shard released", reason, r);
}

/* A new session: its name (pg_stat_activity shows which host leads what),
 * TCP keepalives / user timeout so the server ends it soon after this host
 * dies, and the member lock. */
static void session_setup(struct relay *r)
{
	char sql[600];
	long long f = relay_failover_ms() / 1000, cnt = f / 2 - 1;

	if (cnt < 1)
		cnt = 1;
	/* db.c may have re-run a statement of ours (count_members, try_lock) on
	 * this new session before we saw its pid: locks it took there are not in
	 * our books, and a re-entrant advisory lock taken twice would survive one
	 * unlock and starve its shard.  An adopted session starts with none. */
	pin_db_exec("SELECT pg_advisory_unlock_all()", 0, NULL);
	snprintf(sql, sizeof(sql), "SELECT set_config('application_name', 'pin-relay %ld', false),"
			" set_config('tcp_keepalives_idle', '1', false),"
			" set_config('tcp_keepalives_interval', '1', false),"
			" set_config('tcp_keepalives_count', '%lld', false),"
			" set_config('tcp_user_timeout', '%lld', false),"
			/* the batch read must walk the partial index in id order:
			 * the statistics of a queue table are always stale, and a
			 * seq scan + sort of the whole outbox per batch took 1.5 s
			 * at 100k rows (doc/performance.md "Outbox relay figures") */
			" set_config('enable_seqscan', 'off', false),"
			" set_config('enable_bitmapscan', 'off', false),"
			/* relay_cursor: the read must walk the cursor index in
			 * (xid, id) order; with a fresh outbox's statistics the
			 * planner took the shard index and sorted the whole
			 * shard per batch (1 s a read at 12k rows) */
			" set_config('enable_sort', 'off', false),"
			/* one plan per prepared statement: planning the cursor's
			 * read (then with the cursor's UPDATE in it) at every
			 * bind was 15 % of its backend's CPU */
			" set_config('plan_cache_mode', 'force_generic_plan', false),"
			/* the marks need no flush to disk before the next batch:
			 * a mark lost in a crash of PostgreSQL only publishes its
			 * rows again (at-least-once; consumers dedupe on
			 * messageId), and waiting for the WAL flush of every
			 * 1000-row UPDATE held the relay thread */
			" set_config('synchronous_commit', 'off', false)",
			(long)getpid(), cnt, f * 1000 / 2);
	pin_db_exec(sql, 0, NULL);
	if (!r->once) {
		/* the want lock first, in the same statement: a member lock seen
		 * without it is a host that marks by choice */
		if (r->want_cursor)
			snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock_shared(" RELAY_WANT_CLASS
					", %d), pg_advisory_lock_shared(" RELAY_MEMBER_CLASS ", %d)",
					r->nshards, relay_member_key(r));
		else
			snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock_shared("
					RELAY_MEMBER_CLASS ", %d)", relay_member_key(r));
		pin_db_exec(sql, 0, NULL);
	}
}

/* the relay threads of every worker host, by their member and want locks,
 * and whether cursors exist */
int relay_count_members(struct relay *r, struct relay_members *m)
{
	char sql[1200], n[16], c[16];
	const char *p[2] = { n, c };
	PGresult *res;

	snprintf(n, sizeof(n), "%d", r->nshards);
	snprintf(c, sizeof(c), "%d", r->nshards + RELAY_CURSOR_BIT);
	snprintf(sql, sizeof(sql), "WITH l AS (SELECT pid, classid, objid FROM pg_locks"
			" WHERE locktype = 'advisory' AND classid IN (" RELAY_MEMBER_CLASS ", "
			RELAY_WANT_CLASS ") AND objsubid = 2 AND granted AND database ="
			" (SELECT oid FROM pg_database WHERE datname = current_database()))"
			" SELECT count(*) FILTER (WHERE classid = " RELAY_MEMBER_CLASS " AND objid = $1::int),"
			" count(*) FILTER (WHERE classid = " RELAY_MEMBER_CLASS " AND objid = $2::int),"
			" count(*) FILTER (WHERE classid = " RELAY_MEMBER_CLASS " AND objid = $1::int"
			"  AND NOT EXISTS (SELECT 1 FROM l w WHERE w.pid = l.pid AND w.classid = "
			RELAY_WANT_CLASS " AND w.objid = $1::int)),"
			" count(*) FILTER (WHERE classid = " RELAY_MEMBER_CLASS
			"  AND objid NOT IN ($1::int, $2::int)),"
			" EXISTS (SELECT 1 FROM calendar.outbox_cursor) FROM l");
	res = pin_db_exec(sql, 2, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return -1;
	m->marking = atoi(PQgetvalue(res, 0, 0));
	m->cursor = atoi(PQgetvalue(res, 0, 1));
	m->by_choice = atoi(PQgetvalue(res, 0, 2));
	m->foreign = atoi(PQgetvalue(res, 0, 3));
	m->cursors = !strcmp(PQgetvalue(res, 0, 4), "t");
	return 0;
}

/*
 * Marking or the cursor.  A thread of a host with relay_cursor on starts
 * by marking and relays by the cursor once no member marks by choice -- a
 * member lock held by a session without a want lock: a worker host of an
 * earlier release, or one with relay_cursor = false -- for
 * relay_failover_s (a host of an earlier release whose session is being
 * set up again is not taken for gone), or at once when a cursor era has
 * begun: a member relays by the cursor, or calendar.outbox_cursor has
 * rows.  So an earlier release (which marks and
 * stops relaying when it sees a member lock unlike its own) keeps
 * relaying beside the new hosts through a rolling upgrade, and the shards
 * go over to the cursor once it is gone.  The switch: the thread gives
 * its shards back (their batches in flight delivered and marked first),
 * takes the cursor's member lock and leads again; a shard's first cursor
 * starts before its first row not yet marked (relay_cursor_load).
 * Nothing goes back to marking by itself: a host that marks by choice
 * relays nothing while cursors exist (marking would send again every row
 * they passed) until they are switched back by hand (doc/operating.md
 * "Outbox relay cursor").
 */
static void to_cursor(struct relay *r, const struct relay_members *m)
{
	char sql[300];
	PGresult *res;

	if (r->cursor || !r->want_cursor || r->once)
		return;
	if (!r->switching) {
		int64_t now = pin_clock_mono_us();

		if (m->by_choice)
			r->clear_since_us = 0;
		else if (!r->clear_since_us)
			r->clear_since_us = now;
		if (!m->cursors && m->cursor == 0 && (!r->clear_since_us ||
				now - r->clear_since_us < relay_failover_ms() * 1000))
			return;           /* mark beside a host that marks by choice */
		r->switching = true;
		pin_log(PIN_LOG_INFO, m->cursors || m->cursor ? "outbox relay: the outboxes are"
				" relayed by cursors; this thread gives its shards back to relay by"
				" the cursor" : "outbox relay: no worker host marks by choice; this"
				" thread gives its shards back to relay by the cursor", NULL);
	}
	for (int i = 0; i < r->nunits; i++)
		if (r->units[i].led || r->units[i].nwin)
			return;           /* released once their batches are marked */
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock_shared(" RELAY_MEMBER_CLASS ", %d),"
			" pg_advisory_lock_shared(" RELAY_MEMBER_CLASS ", %d)",
			r->nshards, r->nshards + RELAY_CURSOR_BIT);
	res = pin_db_exec(sql, 0, NULL);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return;
	r->cursor = true;
	r->switching = false;
	pin_log(PIN_LOG_INFO, "outbox relay: this thread relays by the cursor from now on", NULL);
}

static bool try_lock(struct relay_unit *u)
{
	char sh[16];
	const char *p[2] = { u->table, sh };
	PGresult *res;

	snprintf(sh, sizeof(sh), "%d", u->shard);
	res = pin_db_exec("SELECT pg_try_advisory_lock(hashtext('pin.relay:' || $1) & 2147483647,"
			" $2::int)", 2, p);
	return res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!strcmp(PQgetvalue(res, 0, 0), "t");
}

/*
 * One leadership round: checks the session (a new backend has no locks),
 * counts the relay hosts, releases units above this host's share and tries
 * the units nobody leads, up to the share.
 */
void relay_lead_round(struct relay *r)
{
	PGconn *c = pin_db_conn();
	struct relay_members m = { 0 };
	int pid, target, same = 1;
	bool other = false;

	if (!c) {
		relay_lose_all(r, "database link lost");
		r->conn_pid = 0;
		return;
	}
	pid = PQbackendPID(c);
	if (pid != r->conn_pid) {
		relay_lose_all(r, "connection changed");
		session_setup(r);
		r->conn_pid = pid;
		r->clear_since_us = 0;    /* counted again from this session's view */
	}
	if (!r->once) {
		if (relay_count_members(r, &m) < 0)
			return;
		bool was = r->cursor;

		to_cursor(r, &m);
		if (r->cursor != was && relay_count_members(r, &m) < 0)
			return;
		/* another relay_shards: nobody relays; a host that marks by
		 * choice in a cursor era relays nothing, the cursor hosts go on */
		other = m.foreign > 0 || (!r->want_cursor && (m.cursor > 0 || m.cursors));
		same = r->cursor ? m.cursor : m.marking;
	}
	if (other && !r->mismatch)
		pin_log(PIN_LOG_ERROR, m.foreign ? "outbox relay: worker hosts run with different"
				" relay_shards; no host relays until they agree" : "outbox relay: the"
				" outboxes are relayed by cursors and this host marks (relay_cursor ="
				" false); it relays nothing until they are switched back"
				" (doc/operating.md, outbox relay cursor)", NULL);
	else if (!other && r->mismatch)
		pin_log(PIN_LOG_INFO, "outbox relay: every worker host has the same relay_shards"
				" and relays the same way", NULL);
	r->mismatch = other;
	r->members = same;
	if (same < 1)
		same = 1;
	/* each outbox's shards are shared out on their own: a member leads at
	 * most ceil(relay_shards / members) shards of every outbox */
	target = r->once ? r->nshards : (r->nshards + same - 1) / same;
	for (int o = 0; o < (int)relay_noutboxes(); o++) {
		int held = 0;

		for (int k = 0; k < r->nshards; k++) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing)
				held++;
		}
		for (int k = r->nshards - 1; k >= 0; k--) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing && (r->mismatch || r->switching ||
					held > target)) {
				u->releasing = true;
				held--;
			}
		}
		/* start at a different shard on every host and thread, so
		 * members that start at once do not all race for the same
		 * shards first */
		for (int k = 0; k < r->nshards && held < target && !r->mismatch && !r->switching;
				k++) {
			int sh = ((int)getpid() * 7 + r->thread * r->nshards / relay_threads() + k) %
				r->nshards;
			struct relay_unit *u = &r->units[o * r->nshards + sh];

			if (u->led || u->nwin)   /* nwin: still marking as a former leader */
				continue;
			if (!try_lock(u))
				continue;
			u->led = true;
			if (relay_cursor_load(r, u) < 0) {
				/* no cursor, no reading: try again next round */
				relay_unit_release(r, u, "cursor not loaded");
				continue;
			}
			u->releasing = false;
			u->stalled = false;
			u->caught_up = false;
			strcpy(u->cursor, "0");
			held++;
			pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 1);
			unit_log(u, PIN_LOG_INFO, "outbox relay: shard acquired",
					r->once ? "once" : "free", r);
		}
	}
	relay_leader_gauge(r);
}
