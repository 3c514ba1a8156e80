-- R__functions.sql -- every function and trigger of the calendar schema, each
-- defined here and nowhere else.  A repeatable migration (sql/README.md):
-- pin-host --migrate applies it after the versioned files (NNNN_*.sql) of
-- every schema, and again whenever its content changes or a versioned file
-- was applied, in one transaction with its row in public.schema_migrations.
-- So it must be re-runnable as it stands: CREATE OR REPLACE FUNCTION, CREATE
-- OR REPLACE TRIGGER (PostgreSQL 14+).
--
-- Why one place: calendar.slot_plan stood in three migrations (0200, 0620,
-- 0640, the last two 106 lines differing by one), calendar.us in two (0100,
-- 0630), the reminder guard's trigger in two (0100, 0660); the current
-- definition was whichever file came last.  Now a change to a function is a
-- diff of this file, its history is this file's history, and a fresh
-- database and an upgraded one get the same definition from the same text.
--
-- What became of the old copies: their statements were taken out of 0100,
-- 0200, 0620, 0630, 0640 and 0660, whose comments say where they went.
-- Databases that ran them are not affected: the migrator never runs an
-- applied versioned file again, and each rewritten file declares the
-- checksum it had when applied ("-- valid-checksum:"), so the migrator takes
-- the rewrite as the same migration instead of warning about an edit.  What
-- those databases hold is exactly what this file defines (CREATE OR REPLACE
-- of the same text); the migrate suite (tests/integration/test_migrate.c)
-- checks that a fresh database and one upgraded from the files as they were
-- (and from an install that stopped at 0610) end with the same schema.
--
-- Rules for this file:
--  * A versioned migration must not call these functions (a data backfill):
--    on a fresh database they do not exist until this file runs.  A backfill
--    carries its own SQL.
--  * A signature or result change (CREATE OR REPLACE cannot change argument
--    types or names, or the result type): DROP FUNCTION IF EXISTS of the old
--    signature here, before the new definition, and keep the DROP.
--  * A function no longer wanted: DROP FUNCTION IF EXISTS here.
--  * Triggers live here with their functions; the tables they are on live in
--    the versioned files.

-- calendar.us: epoch microseconds of an instant.  Plugins read every
-- timestamptz through it, so no session time zone or DateStyle is ever
-- involved.  Every read path returns its instants as calendar.us(col) (7 per
-- event of a list page, 2 per showcase slot), so it must be inlined: the
-- first body (0100) called extract(epoch FROM timestamptz), which PostgreSQL
-- declares STABLE (other fields depend on the session's time zone), and an
-- IMMUTABLE SQL function whose body is less than immutable is never inlined:
-- every call ran through the SQL-function executor, ~1.2-2.3 us per call on
-- the dev machine (EXPLAIN ANALYZE over 300k rows: 355-800 ms), about half of
-- a 100-event page's time in PostgreSQL.  The distance to the epoch as an
-- interval (timestamptz - timestamptz and extract(epoch FROM interval) are
-- IMMUTABLE) gives the same exact numeric epoch (days * 86400 plus the
-- microseconds of the time part); the planner inlines the body into the
-- query: ~0.25 us per call (72 ms over the same rows).  Same values as the
-- first body over 4M instants of years 1..5000 (random, and every
-- microsecond of 1969-12-31 23:59:59 .. 1970-01-01 00:00:01), in any session
-- time zone; it differs only where both are out of range (the interval
-- overflows past year ~292000, where the first body failed on the bigint
-- cast; instants the API accepts are years 1900..9999, host/core/clock.c).
CREATE OR REPLACE FUNCTION calendar.us(t timestamptz) RETURNS bigint
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN (extract(epoch FROM t - timestamptz '1970-01-01 00:00:00+00') * 1000000)::bigint;

-- INV-REM-2: Sent and Skipped event reminders are immutable (they may only
-- be deleted, with their event, by housekeeping).  The trigger fires only
-- for the rows it refuses: a WHEN condition is checked without calling the
-- function, where a call per updated row (each Pending -> Sent of the
-- reminder dispatcher, 2000 per batch) cost ~1.5 us only to return NEW
-- (20,000-row UPDATE: 171 -> 142 ms on the dev machine).  The function still
-- checks.
CREATE OR REPLACE FUNCTION calendar.event_reminders_terminal_guard() RETURNS trigger
	LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.status <> 'Pending' THEN
		RAISE EXCEPTION 'event reminder % is % and immutable (INV-REM-2)',
			OLD.id, OLD.status USING ERRCODE = 'check_violation';
	END IF;
	RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER tr_event_reminders_terminal_guard
	BEFORE UPDATE ON calendar.event_reminders
	FOR EACH ROW WHEN (OLD.status <> 'Pending')
	EXECUTE FUNCTION calendar.event_reminders_terminal_guard();

/*
 * calendar.slot_plan: the generation rules of domain.md as one set-based function,
 * so the API (publish, preview) and DB-only tests run the very same code.
 *
 * Windows x weekdays x dates in p_tz -> candidate local starts (generate_series of
 * local timestamps, step = duration + gap, local end <= window end) -> UTC instants.
 * PostgreSQL maps a nonexistent local time with the offset before the change and an
 * ambiguous one to the later (standard) reading, so each local start is tried with
 * the zone's offsets of the day before and the day after (and the plain conversion):
 * the readings that convert back to the same local time are its real instants.  None
 * -> 'dst_gap'; several -> the earliest (first occurrence).
 * Then, in UTC order: StartAt < p_now + p_lead_min -> 'lead_time'; overlaps an absence
 * of p_owner (calendar.time_off, issue 32) -> 'time_off'; overlaps an active
 * slot of p_owner -> 'overlap'; overlaps a slot kept earlier in this batch -> 'overlap'
 * (greedy; happens with overlapping windows or a duration spanning a spring gap).
 * reason IS NULL -> the slot is created.  Returns every candidate, ordered by start.
 * Inputs are validated by the caller (plugins/slots/batch_rules.c).
 *
 * Cost (issue 13): the rules above done literally, candidate by candidate, took
 * ~19 ms of a 107 ms 480-slot publish, in ~12 time zone conversions per candidate
 * (the plain reading, the offsets of the day before and after, the round trip of
 * each reading; ~2.5 us each on the dev machine) and one gist probe of the
 * exclusion index per candidate.  This body returns the same rows ~5x cheaper:
 *  - the zone's UTC offset is sampled once per local midnight of the range
 *    (from - 1 day .. to + 2 days); a date whose four surrounding midnights
 *    (d - 1 .. d + 2) share one offset has no change within a day of any of its
 *    local times, so every reading the general rule tries is L - offset and it
 *    converts back (checked per candidate: one conversion).  Every other date (a
 *    change within a day) takes the general rule.  The two differ only for two
 *    changes within 24 hours that cancel out, which no zone's rules have.
 *  - the owner's active slots that can touch the batch's span are read once (one
 *    gist scan, naming uuid_hash_extended(owner, 0), the first key of the
 *    exclusion index of 0640, so that the scan descends by it); a candidate
 *    overlaps one of them when the last of them starting before it ends after its
 *    start, or the next one starts before its end (active slots of one owner
 *    never overlap each other: two window aggregates over the candidates and
 *    those slots by start);
 *  - the greedy rule among the batch's own slots (a row-by-row plpgsql loop,
 *    ~15 us a row) runs only when two eligible candidates overlap (overlapping
 *    windows, a duration across a spring gap); otherwise every eligible
 *    candidate is kept and the rows go out in one RETURN QUERY.
 */
CREATE OR REPLACE FUNCTION calendar.slot_plan(
	p_owner uuid, p_tz text, p_windows jsonb, p_from date, p_to date,
	p_duration_min int, p_gap_min int, p_now timestamptz, p_lead_min int DEFAULT 60)
RETURNS TABLE (local_date date, local_start time, start_at timestamptz,
	end_at timestamptz, reason text)
LANGUAGE plpgsql STABLE
-- The planner's row guesses for generate_series would trigger JIT (~200 ms).
SET jit = off
AS $fn$
DECLARE
	dur interval := make_interval(mins => p_duration_min);
	lead_at timestamptz := p_now + make_interval(mins => p_lead_min);
	kept_end timestamptz := '-infinity';
	a_date date[];
	a_time time[];
	a_s timestamptz[];
	a_e timestamptz[];
	a_pre text[];
	intra boolean;
	idx int;
	has_off boolean;
BEGIN
	-- an absence near the batch's span (issue 32): only then is each
	-- candidate probed for one (a publish without absences pays one probe)
	SELECT EXISTS (SELECT 1 FROM calendar.time_off t
	                WHERE t.owner_user_id = p_owner
	                  AND tstzrange(t.start_at, t.end_at) &&
	                      tstzrange((p_from - 2)::timestamp AT TIME ZONE 'UTC',
	                                (p_to + 3)::timestamp AT TIME ZONE 'UTC'))
	  INTO has_off;
	WITH ex AS MATERIALIZED (
		-- every candidate lies in [from 00:00 - 14 h, to + 1 day + 14 h]
		-- (UTC offsets are within -12 .. +14 h): two days of margin
		SELECT s.start_at AS s, s.end_at AS e
		  FROM calendar.availability_slots s
		 WHERE uuid_hash_extended(s.owner_user_id, 0) = uuid_hash_extended(p_owner, 0)
		   AND s.owner_user_id = p_owner
		   AND s.status IN ('Available', 'Booked')
		   AND tstzrange(s.start_at, s.end_at) &&
		       tstzrange((p_from - 2)::timestamp AT TIME ZONE 'UTC',
		                 (p_to + 3)::timestamp AT TIME ZONE 'UTC')
	), w AS (
		SELECT ARRAY(SELECT jsonb_array_elements_text(x -> 'daysOfWeek')::int) AS days,
		       (x ->> 'from')::interval AS w_from,
		       (x ->> 'to')::interval AS w_to,
		       ord AS widx
		  FROM jsonb_array_elements(p_windows) WITH ORDINALITY AS t (x, ord)
	), mid AS (
		-- the zone's offset (local - UTC) at each local midnight
		SELECT m, m - ((m AT TIME ZONE p_tz) AT TIME ZONE 'UTC') AS o
		  FROM generate_series((p_from - 1)::timestamp, (p_to + 2)::timestamp,
		                       interval '1 day') AS m
	), day AS (
		SELECT m AS d, o,
		       o = lag(o) OVER (ORDER BY m) AND o = lead(o) OVER (ORDER BY m)
		       AND o = lead(o, 2) OVER (ORDER BY m) AS steady
		  FROM mid
	), cand AS (
		SELECT d.d::date AS l_date, ts AS l_ts, w.widx, d.o, coalesce(d.steady, false) AS steady
		  FROM day d
		  JOIN w ON extract(isodow FROM d.d)::int = ANY (w.days)
		 CROSS JOIN LATERAL generate_series(d.d + w.w_from, d.d + w.w_to - dur,
			dur + make_interval(mins => p_gap_min)) AS ts
		 WHERE d.d BETWEEN p_from::timestamp AND p_to::timestamp
	), conv AS MATERIALIZED (
		SELECT c.l_date, c.l_ts, c.widx,
		       CASE WHEN c.steady AND
		                 (((c.l_ts - c.o) AT TIME ZONE 'UTC') AT TIME ZONE p_tz) = c.l_ts
		            THEN (c.l_ts - c.o) AT TIME ZONE 'UTC'
		            -- a change within a day: the general rule's readings
		            ELSE (SELECT min(i)
		                    FROM (SELECT (c.l_ts - interval '1 day') AT TIME ZONE p_tz AS t) b,
		                         (SELECT (c.l_ts + interval '1 day') AT TIME ZONE p_tz AS t) a,
		                         LATERAL (VALUES (c.l_ts AT TIME ZONE p_tz),
		                                 ((c.l_ts - ((b.t AT TIME ZONE p_tz) - (b.t AT TIME ZONE 'UTC'))) AT TIME ZONE 'UTC'),
		                                 ((c.l_ts - ((a.t AT TIME ZONE p_tz) - (a.t AT TIME ZONE 'UTC'))) AT TIME ZONE 'UTC')) AS v (i)
		                   WHERE (i AT TIME ZONE p_tz) = c.l_ts)
		       END AS s_at
		  FROM cand c
	), x AS (
		-- the candidates (ex = false) and the active slots, by start
		SELECT v.l_date, v.l_ts, v.widx, v.s_at, v.s_at + dur AS e_at,
		       coalesce(v.s_at, v.l_ts AT TIME ZONE p_tz) AS k,
		       CASE WHEN v.s_at IS NULL THEN 'dst_gap'
		            WHEN v.s_at < lead_at THEN 'lead_time'
		            WHEN has_off AND EXISTS (SELECT 1 FROM calendar.time_off t
		                   WHERE t.owner_user_id = p_owner
		                     AND tstzrange(t.start_at, t.end_at) &&
		                         tstzrange(v.s_at, v.s_at + dur)) THEN 'time_off' END AS pre0,
		       false AS ex
		  FROM conv v
		UNION ALL
		SELECT NULL, NULL, NULL, ex.s, ex.e, ex.s, NULL, true FROM ex
	), y AS (
		SELECT x.*,
		       max(x.e_at) FILTER (WHERE x.ex) OVER (ORDER BY x.s_at, x.ex DESC
		           ROWS UNBOUNDED PRECEDING) AS ex_end_before,
		       min(x.s_at) FILTER (WHERE x.ex) OVER (ORDER BY x.s_at DESC, x.ex
		           ROWS UNBOUNDED PRECEDING) AS ex_start_after
		  FROM x
	), z AS (
		SELECT y.*,
		       coalesce(y.pre0, CASE WHEN y.ex_end_before > y.s_at OR y.ex_start_after < y.e_at
		                             THEN 'overlap' END) AS pre
		  FROM y
		 WHERE NOT y.ex
	), f AS (
		SELECT z.*,
		       z.pre IS NULL AND z.s_at < max(z.e_at) FILTER (WHERE z.pre IS NULL)
		           OVER (ORDER BY z.k, z.l_ts, z.widx
		                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS clash
		  FROM z
	)
	SELECT coalesce(array_agg(f.l_date ORDER BY f.k, f.l_ts, f.widx), '{}'),
	       coalesce(array_agg(f.l_ts::time ORDER BY f.k, f.l_ts, f.widx), '{}'),
	       coalesce(array_agg(f.s_at ORDER BY f.k, f.l_ts, f.widx), '{}'),
	       coalesce(array_agg(f.e_at ORDER BY f.k, f.l_ts, f.widx), '{}'),
	       coalesce(array_agg(f.pre ORDER BY f.k, f.l_ts, f.widx), '{}'),
	       coalesce(bool_or(f.clash), false)
	  INTO a_date, a_time, a_s, a_e, a_pre, intra
	  FROM f;

	IF NOT intra THEN
		-- no two eligible candidates overlap: the greedy rule keeps them all
		RETURN QUERY SELECT * FROM unnest(a_date, a_time, a_s, a_e, a_pre);
		RETURN;
	END IF;
	-- in start order, a candidate overlapping one kept earlier in this
	-- batch is an 'overlap' (greedy)
	FOR idx IN 1 .. cardinality(a_date) LOOP
		local_date := a_date[idx];
		local_start := a_time[idx];
		start_at := a_s[idx];
		end_at := a_e[idx];
		IF a_pre[idx] IS NOT NULL THEN
			reason := a_pre[idx];
		ELSIF a_s[idx] < kept_end THEN
			reason := 'overlap';
		ELSE
			reason := NULL;
			kept_end := greatest(kept_end, a_e[idx]);
		END IF;
		RETURN NEXT;
	END LOOP;
END
$fn$;

-- ---------------------------------------------------------------------------
-- The outbox relay's commit-ordered cursor (migration 0780, relay_cursor;
-- doc/operating.md "Outbox relay cursor").
--
-- A key's rows must leave in the order their transactions wrote them.  The
-- cursor reads in (xid, id) order, and a transaction can take its id before it
-- waits for the lock of an aggregate whose previous writer takes a higher id
-- and commits first: its row would be read first.  So after each INSERT
-- statement the xid of a new row is raised to the highest xid of the rows of
-- its key it can see (a writer serialised behind another sees that one's
-- row): it is then read after them, and still only once its own transaction
-- ended (its true id is lower, and the cursor reads below the oldest
-- transaction still running).  One statement per INSERT statement; the
-- row-level form cost ~130 us a row (doc/performance.md, the relay's
-- commit-ordered cursor).  Always on, also while the relay marks: the worker
-- hosts go over from marking to the cursor by themselves (relay_cursor, the
-- default), and the rows not yet relayed at that moment must already be in
-- their key's order.
CREATE OR REPLACE FUNCTION calendar.outbox_order_xid() RETURNS trigger
LANGUAGE plpgsql
-- the queue's statistics are always stale: an index probe per new row
SET enable_seqscan = off SET enable_hashjoin = off
AS $fn$
BEGIN
	IF TG_TABLE_SCHEMA = 'calendar' AND TG_TABLE_NAME = 'outbox' THEN
		UPDATE calendar.outbox o SET xid = m.mx
		FROM (SELECT n.id, max(p.xid) AS mx FROM outbox_new n
		      JOIN calendar.outbox p ON p.key = n.key AND p.xid > n.xid GROUP BY n.id) m
		WHERE o.id = m.id;
	ELSE
		EXECUTE format('UPDATE %I.%I o SET xid = m.mx FROM (SELECT n.id, max(p.xid) AS mx'
			' FROM outbox_new n JOIN %I.%I p ON p.key = n.key AND p.xid > n.xid'
			' GROUP BY n.id) m WHERE o.id = m.id', TG_TABLE_SCHEMA, TG_TABLE_NAME,
			TG_TABLE_SCHEMA, TG_TABLE_NAME);
	END IF;
	RETURN NULL;
END
$fn$;

-- (DROP and CREATE: a statement trigger with a transition table, re-run
-- whole on every application of this file)
DROP TRIGGER IF EXISTS outbox_order_xid ON calendar.outbox;
CREATE TRIGGER outbox_order_xid AFTER INSERT ON calendar.outbox
	REFERENCING NEW TABLE AS outbox_new
	FOR EACH STATEMENT EXECUTE FUNCTION calendar.outbox_order_xid();

DO $do$
BEGIN
	IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'notifications'
			AND table_name = 'outbox' AND column_name = 'xid') THEN
		DROP TRIGGER IF EXISTS outbox_order_xid ON notifications.outbox;
		CREATE TRIGGER outbox_order_xid AFTER INSERT ON notifications.outbox
			REFERENCING NEW TABLE AS outbox_new
			FOR EACH STATEMENT EXECUTE FUNCTION calendar.outbox_order_xid();
	END IF;
END
$do$;

-- The xid below which every row of an outbox is behind every shard's cursor
-- (of the newest relay_shards); NULL while a shard has no cursor yet.
-- Retention in cursor mode deletes old rows below it (housekeeping).
CREATE OR REPLACE FUNCTION calendar.outbox_cursor_horizon(p_outbox text) RETURNS xid8
LANGUAGE sql STABLE AS $fn$
	SELECT min(c.xid) FROM calendar.outbox_cursor c
	WHERE c.outbox = p_outbox AND c.shards = (SELECT c2.shards FROM calendar.outbox_cursor c2
		WHERE c2.outbox = p_outbox ORDER BY c2.moved_at DESC LIMIT 1)
	HAVING count(*) = max(c.shards)
$fn$;

-- Whether an outbox row has gone out to Kafka, whichever way the relay
-- runs: marked published (relay_cursor = false, or before the hosts went
-- over to the cursor), or behind its shard's cursor and not parked (the
-- cursor passes a parked row without sending it).  A cursor of any
-- relay_shards count that passed the row counts: its relay delivered it.
-- For operators and tests alike (operating.md, "Outbox relay cursor"):
--   SELECT calendar.outbox_sent(o) FROM calendar.outbox o WHERE id = 42;
CREATE OR REPLACE FUNCTION calendar.outbox_sent(p_outbox text, p_key text, p_xid xid8,
	p_id bigint, p_published_at timestamptz, p_parked_at timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $fn$
	SELECT p_parked_at IS NULL AND (p_published_at IS NOT NULL OR EXISTS (
		SELECT 1 FROM calendar.outbox_cursor c WHERE c.outbox = p_outbox
		AND c.shard = (hashtext(p_key) & 2147483647) % c.shards
		AND (p_xid, p_id) <= (c.xid, c.id)))
$fn$;

CREATE OR REPLACE FUNCTION calendar.outbox_sent(o calendar.outbox) RETURNS boolean
LANGUAGE sql STABLE AS $fn$
	SELECT calendar.outbox_sent('calendar.outbox', o.key, o.xid, o.id, o.published_at,
		o.parked_at)
$fn$;

DO $do$
BEGIN
	IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'notifications'
			AND table_name = 'outbox' AND column_name = 'xid') THEN
		CREATE OR REPLACE FUNCTION calendar.outbox_sent(o notifications.outbox)
		RETURNS boolean LANGUAGE sql STABLE AS $fn$
			SELECT calendar.outbox_sent('notifications.outbox', o.key, o.xid, o.id,
				o.published_at, o.parked_at)
		$fn$;
	END IF;
END
$do$;
