/*
 * relay_cursor.c -- the commit-ordered cursor of a relay shard (relay_cursor
 * = true, migration 0780; doc/operating.md "Outbox relay cursor"): whether an
 * outbox has the xid column, a shard's cursor row read (made at first) and
 * written.  Below the batches (relay_batch.c) and the leases (relay_lead.c)
 * that use it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

/* 1: the outbox has the xid column of migration 0780, 0: not, -1: failed */
int relay_outbox_has_xid(const char *table)
{
	const char *p[1] = { table };
	PGresult *res = pin_db_exec("SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass"
			" AND attname = 'xid' AND NOT attisdropped", 1, p);

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return -1;
	return atoi(PQgetvalue(res, 0, 0)) == 1;
}

int relay_cursor_load(struct relay *r, struct relay_unit *u)
{
	char n[16], sh[16], *sql;
	const char *p[3] = { u->table, n, sh };
	PGresult *res;

	int has;

	u->cur = false;
	u->cur_hold = false;
	if (!r->cursor)
		return 0;
	if ((has = relay_outbox_has_xid(u->table)) < 0)
		return -1;
	if (!has) {
		if (!r->cursor_warned)
			pin_log(PIN_LOG_WARN, "outbox relay: relay_cursor is on but the outbox has no"
					" xid column (migration 0780); its rows are marked", "outbox",
					u->table, NULL);
		r->cursor_warned = true;
		return 0;
	}
	snprintf(n, sizeof(n), "%d", r->nshards);
	snprintf(sh, sizeof(sh), "%d", u->shard);
	/* a shard without a cursor starts at the lowest cursor of another
	 * relay_shards (a count changed: rows between that and their own
	 * cursor go out again), else before its first row not yet published
	 * by marking, or at the oldest running transaction, whichever is
	 * lower */
	sql = pin_arena_alloc(1400);
	snprintf(sql, 1400, "WITH ins AS (INSERT INTO calendar.outbox_cursor"
			" (outbox, shards, shard, xid, id, moved_at)"
			" SELECT $1, $2::int, $3::int, s.x, s.i, clock_timestamp() FROM ("
			" (SELECT c.xid AS x, c.id AS i, 1 AS k FROM calendar.outbox_cursor c"
			"  WHERE c.outbox = $1 AND c.shards <> $2::int ORDER BY c.xid, c.id LIMIT 1)"
			" UNION ALL (SELECT o.xid, o.id - 1, 2 FROM %s o WHERE o.published_at IS NULL"
			"  AND o.parked_at IS NULL AND o.xid IS NOT NULL"
			"  AND (hashtext(o.key) & 2147483647) %% %d = $3::int ORDER BY o.xid, o.id LIMIT 1)"
			" UNION ALL SELECT pg_snapshot_xmin(pg_current_snapshot()), 0, 3) s"
			" ORDER BY s.k = 1 DESC, s.x, s.i LIMIT 1 ON CONFLICT DO NOTHING"
			" RETURNING xid::text, id::text)"
			" SELECT * FROM ins UNION ALL SELECT xid::text, id::text FROM calendar.outbox_cursor"
			" WHERE outbox = $1 AND shards = $2::int AND shard = $3::int",
			u->table, r->nshards);
	res = pin_db_exec(sql, 3, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1)
		return -1;
	snprintf(u->dx, sizeof(u->dx), "%s", PQgetvalue(res, 0, 0));
	snprintf(u->did, sizeof(u->did), "%s", PQgetvalue(res, 0, 1));
	strcpy(u->rx, u->dx);
	strcpy(u->rid, u->did);
	strcpy(u->wx, u->dx);
	strcpy(u->wid, u->did);
	u->cur = true;
	return 0;
}

/* Writes the unit's delivered position when it moved since the last write
 * (never backwards: a forward move by a session that lost the lock is still
 * a position this host delivered).  -1: failed (tried again next time). */
int relay_cursor_save(struct relay *r, struct relay_unit *u)
{
	char sh[16], sql[300], stmt[48];
	const char *p[4] = { u->dx, u->did, u->table, sh };
	PGresult *res;

	if (!strcmp(u->dx, u->wx) && !strcmp(u->did, u->wid))
		return 0;
	snprintf(sh, sizeof(sh), "%d", u->shard);
	snprintf(sql, sizeof(sql), "UPDATE calendar.outbox_cursor SET xid = $1::xid8,"
			" id = $2::bigint, moved_at = clock_timestamp() WHERE outbox = $3"
			" AND shards = %d AND shard = $4::int AND (xid, id) < ($1::xid8, $2::bigint)",
			r->nshards);
	snprintf(stmt, sizeof(stmt), "pin_relay_cursor_move:%d", r->nshards);
	res = pin_db_exec_prepared(stmt, sql, 4, p);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		return -1;
	strcpy(u->wx, u->dx);
	strcpy(u->wid, u->did);
	return 0;
}
