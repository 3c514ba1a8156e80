-- 0640_slots_publish.sql -- issue 13 (session 7): the exclusion index of
-- availability slots is keyed by a 64-bit hash of the owner first.
--
-- The overlap rule stays as domain.md states it: no two active (Available,
-- Booked) slots of one owner overlap, enforced by the exclusion constraint
-- ex_availability_slots_owner_active (btree_gist).  Only its key changes:
-- (owner_user_id =, tstzrange &&) becomes (uuid_hash_extended(owner_user_id, 0)
-- =, owner_user_id =, tstzrange &&).  Two rows conflict exactly when they
-- did before: equal owners have equal hashes, and the uuid itself is still
-- compared, so a hash collision of two owners never makes them conflict.
--
-- Why: btree_gist's uuid penalty and split look only at the first 64 bits of
-- a uuid (as a double).  Owners whose ids share those bits (every bench id
-- b0000000-0000-4000-..; any id scheme with a common prefix) all cost the same
-- to place, so their entries scatter over the whole index and every
-- exclusion check (one per inserted row, and per booking: the status update is
-- not HOT) and slot_plan's read of the owner's active slots walk pages of
-- other owners.  The int8 hash spreads every owner evenly and keeps one
-- owner's entries together whatever its id looks like; for owners with random
-- ids it changes nothing measurable (doc/performance.md "480-slot publish (session 7)").
--
-- The constraint is rebuilt (ACCESS EXCLUSIVE on availability_slots while the
-- gist is built: ~1 s per 100k slots on the dev machine).  The 23P01 path
-- (409 SLOT_NOT_AVAILABLE) and the constraint's name are unchanged.
ALTER TABLE calendar.availability_slots
	DROP CONSTRAINT ex_availability_slots_owner_active;
ALTER TABLE calendar.availability_slots
	ADD CONSTRAINT ex_availability_slots_owner_active EXCLUDE USING gist (
		(uuid_hash_extended(owner_user_id, 0)) WITH =,
		owner_user_id WITH =,
		tstzrange(start_at, end_at) WITH &&
	) WHERE (status IN ('Available', 'Booked'));

-- calendar.slot_plan of 0620, unchanged but for its read of the owner's active
-- slots, which names the hash too so that the gist scan descends by it (a
-- scan without a condition on the first key column visits every subtree).
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
