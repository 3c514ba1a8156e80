/*
 * relay_metrics.c -- the outbox relay's gauges (relay.c), the worker
 * host's metrics textfile and the relay threads' time split.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

static const char *const rc_name[RC_N] = { "lead_ms", "read_ms", "produce_ms", "mark_ms",
	"log_ms", "pending_ms", "poll_ms", "sleep_ms" };

_Thread_local struct relay_clock *relay_rclk;

/* adds the time since *t0 to step k and moves *t0 on */
void relay_rc_add(enum rc_step k, int64_t *t0)
{
	int64_t t = pin_clock_mono_us();

	if (relay_rclk)
		relay_rclk->us[k] += t - *t0;
	*t0 = t;
}

/* every unit's gauge at 0, before any relay thread runs */
void relay_gauges_init(void)
{
	long long s = pin_config_int("relay_shards");
	char lab[200];

	if (s < 1)
		s = 1;
	for (size_t o = 0; o < relay_noutboxes(); o++)
		for (long long k = 0; k < s && k < 1024; k++) {
			snprintf(lab, sizeof(lab), "outbox=\"%s\",shard=\"%lld\"", relay_outbox(o), k);
			pin_metric_set("pin_outbox_relay_shard_leader", lab, 0);
		}
	pin_metric_set("pin_outbox_relay_leader", NULL, 0);
	/* measured with relay_cursor only; 0 otherwise (nothing held back) */
	pin_metric_set("pin_outbox_relay_oldest_xact_age_seconds", NULL, 0);
}

/*
 * relay_cursor: a cursor reads only below the oldest transaction that holds
 * a transaction id, in the whole cluster (prepared ones too): its age is
 * how long rows may be held back (pin_outbox_relay_oldest_xact_age_seconds,
 * 0 when none; the alert PinOutboxCursorHeldBack).
 */
static void blocking_xact_gauge(void)
{
	PGresult *res = pin_db_exec("SELECT coalesce(extract(epoch FROM clock_timestamp() -"
			" least((SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL"
			" AND pid <> pg_backend_pid()), (SELECT min(prepared) FROM pg_prepared_xacts))), 0)",
			0, NULL);

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		pin_metric_set("pin_outbox_relay_oldest_xact_age_seconds", NULL,
				atof(PQgetvalue(res, 0, 0)));
}

/*
 * The pending gauges, on one relay thread of the host while the host leads
 * a shard, at most once a second -- and never more than a tenth of the
 * time: with a backlog of 100k rows this count was the relay's largest
 * statement.  The oldest row is the lowest id (created_at grows with id).
 */
void relay_update_pending(struct relay *r)
{
	int64_t now = pin_clock_now_us(), took;

	if (r->thread != 0 || atomic_load(&relay_led_units) <= 0 || now < r->next_pending_us)
		return;
	for (size_t i = 0; i < relay_noutboxes(); i++) {
		const char *t = relay_outbox(i);
		char *sql = pin_arena_alloc(512), *lab = pin_arena_alloc(160);
		PGresult *res;

		double oldest = 0;

		if (r->cursor && relay_outbox_has_xid(t) == 1) {
			/* the rows beyond each shard's cursor, held back or not,
			 * not parked and not marked (the read passes those); the
			 * oldest by created_at among them.  "coalesce(..) IS
			 * NULL", not the two IS NULLs: those match the marking
			 * indexes' predicate, which with the cursor hold every
			 * row sent and not yet purged, and the planner walked one
			 * of them whole -- 750 ms a count at 200k sent rows,
			 * against 0.8 ms through the cursor index (2026-12-06) */
			const char *p[1] = { t };

			snprintf(sql, 512, "SELECT coalesce(sum(p.n), 0), extract(epoch FROM min(p.o))"
					" FROM calendar.outbox_cursor c CROSS JOIN LATERAL (SELECT count(*) AS n,"
					" min(created_at) AS o FROM %s WHERE (hashtext(key) & 2147483647)"
					" %% %d = c.shard AND (xid, id) > (c.xid, c.id)"
					" AND coalesce(parked_at, published_at) IS NULL) p"
					" WHERE c.outbox = $1 AND c.shards = %d", t, r->nshards, r->nshards);
			res = pin_db_exec(sql, 1, p);
			blocking_xact_gauge();
		} else {
			snprintf(sql, 512, "SELECT (SELECT count(*) FROM %s WHERE published_at IS NULL"
					" AND parked_at IS NULL), (SELECT extract(epoch FROM created_at)"
					" FROM %s WHERE published_at IS NULL AND parked_at IS NULL"
					" ORDER BY id LIMIT 1)", t, t);
			res = pin_db_exec(sql, 0, NULL);
		}
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			continue;
		if (!strcmp(t, PIN_OUTBOX_DEFAULT))   /* the 1.0 series, unlabelled */
			pin_metric_set("pin_outbox_pending", NULL, atof(PQgetvalue(res, 0, 0)));
		snprintf(lab, 160, "outbox=\"%s\"", t);
		pin_metric_set("pin_outbox_pending", lab, atof(PQgetvalue(res, 0, 0)));
		if (!PQgetisnull(res, 0, 1))
			oldest = (double)pin_clock_now_us() / 1e6 - atof(PQgetvalue(res, 0, 1));
		pin_metric_set("pin_outbox_oldest_unpublished_age_seconds", lab,
				oldest > 0 ? oldest : 0);
	}
	took = pin_clock_now_us() - now;
	r->next_pending_us = now + (took * 10 > 1000000 ? took * 10 : 1000000);
}

/* Writes the metrics (node_exporter textfile format) to metrics_textfile,
 * at most once a second: a worker host serves no HTTP. */
void relay_write_metrics_file(void)
{
	static int64_t last;
	static int warned;
	const char *path = pin_config_str("metrics_textfile");
	char *tmp, *m;
	FILE *f;
	int ok;
	int64_t t = pin_clock_now_us();

	if (!*path || t - last < 1000000)
		return;
	last = t;
	if (!(m = pin_metrics_render()))
		return;
	tmp = pin_arena_alloc(strlen(path) + 8);
	sprintf(tmp, "%s.tmp", path);
	errno = 0;
	/* 0644 whatever the unit's UMask: node_exporter runs as another user */
	ok = (f = fopen(tmp, "w")) && fchmod(fileno(f), 0644) == 0 && fputs(m, f) >= 0;
	if (f && fclose(f) != 0)
		ok = 0;
	if (ok && rename(tmp, path) == 0) {
		if (warned)
			pin_log(PIN_LOG_INFO, "metrics_textfile written again", "path", path, NULL);
		warned = 0;
		free(m);
		return;
	}
	/* once per failure streak: an unwritable path (the unit's
	 * ProtectSystem=strict without ReadWritePaths) must not be silent */
	if (!warned)
		pin_log(PIN_LOG_WARN, "cannot write metrics_textfile", "path", path,
			"error", strerror(errno ? errno : EIO), NULL);
	warned = 1;
	free(m);
}

/* Every second of a window in which rows were marked: the thread's time
 * split at debug level, then a new window. */
void relay_clock_log(const struct relay *r, struct relay_clock *c, int64_t now)
{
	char v[RC_N + 7][24], th[16];
	int64_t win = now - c->since, sum = 0;

	if (win < 1000000)
		return;
	if (c->rows > 0) {
		for (int k = 0; k < RC_N; k++) {
			snprintf(v[k], sizeof(v[k]), "%.1f", (double)c->us[k] / 1000);
			sum += c->us[k];
		}
		snprintf(v[RC_N], sizeof(v[0]), "%.1f", (double)win / 1000);
		snprintf(v[RC_N + 1], sizeof(v[0]), "%.1f", (double)(win - sum) / 1000);
		snprintf(v[RC_N + 2], sizeof(v[0]), "%ld", c->rows);
		snprintf(v[RC_N + 3], sizeof(v[0]), "%ld", c->batches);
		snprintf(v[RC_N + 4], sizeof(v[0]), "%.1f",
				(double)c->report_us / 1000 / (double)c->batches);
		snprintf(v[RC_N + 5], sizeof(v[0]), "%.1f",
				(double)c->wait_us / 1000 / (double)c->batches);
		snprintf(v[RC_N + 6], sizeof(v[0]), "%ld", c->rewinds);
		snprintf(th, sizeof(th), "%d", r->thread);
		pin_log(PIN_LOG_DEBUG, "outbox relay: time split", "thread", th,
				"window_ms", v[RC_N], "rows", v[RC_N + 2], "batches", v[RC_N + 3],
				rc_name[RC_LEAD], v[RC_LEAD], rc_name[RC_READ], v[RC_READ],
				rc_name[RC_PRODUCE], v[RC_PRODUCE], rc_name[RC_MARK], v[RC_MARK],
				rc_name[RC_LOG], v[RC_LOG], rc_name[RC_PENDING], v[RC_PENDING],
				rc_name[RC_POLL], v[RC_POLL], rc_name[RC_SLEEP], v[RC_SLEEP],
				"other_ms", v[RC_N + 1], "report_ms_per_batch", v[RC_N + 4],
				"report_to_mark_ms_per_batch", v[RC_N + 5], "rewinds", v[RC_N + 6], NULL);
	}
	memset(c, 0, sizeof(*c));
	c->since = now;
}
