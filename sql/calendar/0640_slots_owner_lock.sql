-- 0640_slots_owner_lock.sql -- issue 13: no two active slots of one owner
-- overlap, kept by the owner's lock instead of an exclusion constraint.
--
-- The gist exclusion constraint ex_availability_slots_owner_active (0200)
-- cost ~15 ms of backend CPU in a 480-slot publish (~45 % of the slot
-- INSERT: the gist insert plus one conflict search per row), measured in
-- README "480-slot publish".  The rule it enforced holds without it:
--
-- INVARIANT (every writer of availability_slots must keep it):
--   * a statement that gives a row of an owner an active status
--     ('Available', 'Booked') it did not have, or that sets start_at or
--     end_at of an active row, runs in a transaction that holds the owner's
--     lock pg_advisory_xact_lock(hashtextextended('calendar.slots:' ||
--     owner_user_id, 0)) (cal_agent_slots_lock, plugins/caldomain/agent.c)
--     and has checked, after taking it, that the row overlaps no active slot
--     of that owner (calendar.slot_plan does, for a publish).
--   Today the only such statement is the publish INSERT of
--   plugins/slots/batch.c (lock, then slot_plan, then the INSERT, in one
--   transaction; READ COMMITTED, so slot_plan's snapshot, taken after the
--   lock, sees every slot a previous lock holder committed).  Every other
--   writer only changes status and never from Expired/Archived back to an
--   active one: Available -> Booked (booking), Booked -> Available (a
--   release: the row was active already), Available|Booked -> Expired |
--   Archived (expiry, archive, departure).  None of them can create an
--   overlap.  A new writer that creates slots or moves them in time takes
--   the lock first or brings the constraint back.
--   tests/integration/test_slots.c (concurrent_overlapping_publishes) fires
--   overlapping publishes of one owner at once and checks the table.
--
-- A slot lasts at most 480 minutes (SlotDurationMinutes 15..480, domain.md):
-- now a CHECK, so slot_plan reads the owner's active slots near the batch
-- by a bounded range scan of the btree ix_availability_slots_owner_start
-- (it read them through the gist index before).
--
-- calendar.slot_plan: same signature, same rows as 0620; only the read of
-- the owner's active slots (ex) changed.
ALTER TABLE calendar.availability_slots
	DROP CONSTRAINT ex_availability_slots_owner_active;
ALTER TABLE calendar.availability_slots
	ADD CONSTRAINT ck_availability_slots_duration
	CHECK (end_at - start_at <= interval '480 minutes');

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
BEGIN
	WITH ex AS MATERIALIZED (
		-- every candidate lies in [from 00:00 - 14 h, to + 1 day + 14 h]
		-- (UTC offsets are within -12 .. +14 h): two days of margin.  A
		-- range scan of ix_availability_slots_owner_start: a slot that
		-- touches the span starts at most 480 minutes before it
		-- (ck_availability_slots_duration)
		SELECT s.start_at AS s, s.end_at AS e
		  FROM calendar.availability_slots s
		 WHERE s.owner_user_id = p_owner
		   AND s.start_at >= (p_from - 2)::timestamp AT TIME ZONE 'UTC' - interval '480 minutes'
		   AND s.start_at < (p_to + 3)::timestamp AT TIME ZONE 'UTC'
		   AND s.end_at > (p_from - 2)::timestamp AT TIME ZONE 'UTC'
		   AND s.status IN ('Available', 'Booked')
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
		            -- a change within a day: the readings of the 0200 rule
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
		            WHEN v.s_at < lead_at THEN 'lead_time' END AS pre0,
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
