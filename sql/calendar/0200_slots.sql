-- 0200_slots.sql -- SlotBatch and AvailabilitySlot (domain.md, ADR-0064 p.3 and p.6).
-- Applied once by pin-host --migrate inside a transaction.

CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE SCHEMA IF NOT EXISTS calendar;

CREATE TABLE calendar.slot_batches (
	id                          uuid PRIMARY KEY,
	tenant_id                   uuid NOT NULL,
	owner_user_id               uuid NOT NULL,
	kind                        varchar(32) NOT NULL
		CHECK (kind IN ('Showing', 'Consultation')),
	time_zone                   text NOT NULL,
	windows                     jsonb NOT NULL,
	from_date                   date NOT NULL,
	to_date                     date NOT NULL,
	slot_duration_minutes       int NOT NULL CHECK (slot_duration_minutes BETWEEN 15 AND 480),
	gap_minutes                 int NOT NULL DEFAULT 0 CHECK (gap_minutes BETWEEN 0 AND 240),
	auto_confirm                boolean NOT NULL DEFAULT false,
	cancellation_cutoff_minutes int NOT NULL DEFAULT 120
		CHECK (cancellation_cutoff_minutes BETWEEN 0 AND 10080),
	project_id                  uuid,
	property_object_id          uuid,
	location                    text CHECK (char_length(location) <= 500),
	created_count               int NOT NULL DEFAULT 0,
	skipped_count               int NOT NULL DEFAULT 0,
	skipped_dst_gap             int NOT NULL DEFAULT 0,
	skipped_lead_time           int NOT NULL DEFAULT 0,
	skipped_overlap             int NOT NULL DEFAULT 0,
	created_at                  timestamptz NOT NULL,
	updated_at                  timestamptz NOT NULL,
	version                     int NOT NULL DEFAULT 1,
	CHECK (from_date <= to_date AND to_date - from_date < 92)
);
CREATE INDEX ix_slot_batches_owner ON calendar.slot_batches (owner_user_id, created_at);

CREATE TABLE calendar.availability_slots (
	id                          uuid PRIMARY KEY,
	tenant_id                   uuid NOT NULL,
	owner_user_id               uuid NOT NULL,
	batch_id                    uuid REFERENCES calendar.slot_batches (id),
	kind                        varchar(32) NOT NULL
		CHECK (kind IN ('Showing', 'Consultation')),
	start_at                    timestamptz NOT NULL,
	end_at                      timestamptz NOT NULL,
	time_zone                   text NOT NULL,
	status                      varchar(32) NOT NULL DEFAULT 'Available'
		CHECK (status IN ('Available', 'Booked', 'Expired', 'Archived')),
	auto_confirm                boolean NOT NULL DEFAULT false,
	cancellation_cutoff_minutes int NOT NULL DEFAULT 120
		CHECK (cancellation_cutoff_minutes BETWEEN 0 AND 10080),
	project_id                  uuid,
	property_object_id          uuid,
	location                    text CHECK (char_length(location) <= 500),
	created_at                  timestamptz NOT NULL,
	updated_at                  timestamptz NOT NULL,
	version                     int NOT NULL DEFAULT 1,
	CHECK (end_at > start_at),
	-- No two active slots of one owner overlap ([start, end) ranges: adjacent is fine).
	CONSTRAINT ex_availability_slots_owner_active EXCLUDE USING gist (
		owner_user_id WITH =,
		tstzrange(start_at, end_at) WITH &&
	) WHERE (status IN ('Available', 'Booked'))
);

-- Public showcase: one index per driving filter, Available only, in (start_at, id)
-- order so the keyset page is an index range scan.
CREATE INDEX ix_availability_slots_showcase_owner
	ON calendar.availability_slots (owner_user_id, start_at, id)
	WHERE status = 'Available';
CREATE INDEX ix_availability_slots_showcase_project
	ON calendar.availability_slots (project_id, start_at, id)
	WHERE status = 'Available' AND project_id IS NOT NULL;
CREATE INDEX ix_availability_slots_showcase_property
	ON calendar.availability_slots (property_object_id, start_at, id)
	WHERE status = 'Available' AND property_object_id IS NOT NULL;
-- Agent listing (every status).
CREATE INDEX ix_availability_slots_owner_start
	ON calendar.availability_slots (owner_user_id, start_at, id);
-- Batch archive.
CREATE INDEX ix_availability_slots_batch
	ON calendar.availability_slots (batch_id)
	WHERE status = 'Available';
-- slot-expiration worker: Available -> Expired by start_at; Expired|Booked -> Archived by end_at.
CREATE INDEX ix_availability_slots_available_start
	ON calendar.availability_slots (start_at)
	WHERE status = 'Available';
CREATE INDEX ix_availability_slots_done_end
	ON calendar.availability_slots (end_at)
	WHERE status IN ('Expired', 'Booked');

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
 * Then, in UTC order: StartAt < p_now + p_lead_min -> 'lead_time'; overlaps an active
 * slot of p_owner -> 'overlap'; overlaps a slot kept earlier in this batch -> 'overlap'
 * (greedy; happens with overlapping windows or a duration spanning a spring gap).
 * reason IS NULL -> the slot is created.  Returns every candidate, ordered by start.
 * Inputs are validated by the caller (plugins/slots/rules.c).
 */
CREATE FUNCTION calendar.slot_plan(
	p_owner uuid, p_tz text, p_windows jsonb, p_from date, p_to date,
	p_duration_min int, p_gap_min int, p_now timestamptz, p_lead_min int DEFAULT 60)
RETURNS TABLE (local_date date, local_start time, start_at timestamptz,
	end_at timestamptz, reason text)
LANGUAGE plpgsql STABLE
-- The planner's row guesses for generate_series would trigger JIT (~200 ms).
SET jit = off
AS $fn$
DECLARE
	r record;
	dur interval := make_interval(mins => p_duration_min);
	kept_end timestamptz := '-infinity';
BEGIN
	FOR r IN
		WITH w AS (
			SELECT ARRAY(SELECT jsonb_array_elements_text(x -> 'daysOfWeek')::int) AS days,
			       (x ->> 'from')::interval AS w_from,
			       (x ->> 'to')::interval AS w_to,
			       ord AS widx
			  FROM jsonb_array_elements(p_windows) WITH ORDINALITY AS t (x, ord)
		), cand AS (
			SELECT d::date AS l_date, ts AS l_ts, w.widx
			  FROM generate_series(p_from::timestamp, p_to::timestamp, interval '1 day') AS d
			  JOIN w ON extract(isodow FROM d)::int = ANY (w.days)
			 CROSS JOIN LATERAL generate_series(d + w.w_from, d + w.w_to - dur,
				dur + make_interval(mins => p_gap_min)) AS ts
		), conv AS MATERIALIZED (
			SELECT c.l_date, c.l_ts, c.widx,
			       (SELECT min(i)
			          FROM (VALUES (c.l_ts AT TIME ZONE p_tz),
			                       ((c.l_ts - ((b.t AT TIME ZONE p_tz) - (b.t AT TIME ZONE 'UTC'))) AT TIME ZONE 'UTC'),
			                       ((c.l_ts - ((a.t AT TIME ZONE p_tz) - (a.t AT TIME ZONE 'UTC'))) AT TIME ZONE 'UTC')) AS v (i)
			         WHERE (i AT TIME ZONE p_tz) = c.l_ts) AS s_at
			  FROM cand c
			 CROSS JOIN LATERAL (SELECT (c.l_ts - interval '1 day') AT TIME ZONE p_tz AS t) b
			 CROSS JOIN LATERAL (SELECT (c.l_ts + interval '1 day') AT TIME ZONE p_tz AS t) a
		)
		SELECT v.l_date, v.l_ts::time AS l_time, v.s_at, v.s_at + dur AS e_at,
		       v.s_at IS NOT NULL AND v.s_at >= p_now + make_interval(mins => p_lead_min)
		       AND EXISTS (SELECT 1 FROM calendar.availability_slots s
		                    WHERE s.owner_user_id = p_owner
		                      AND s.status IN ('Available', 'Booked')
		                      AND tstzrange(s.start_at, s.end_at) && tstzrange(v.s_at, v.s_at + dur)) AS clash
		  FROM conv v
		 ORDER BY coalesce(v.s_at, v.l_ts AT TIME ZONE p_tz), v.l_ts, v.widx
	LOOP
		local_date := r.l_date;
		local_start := r.l_time;
		start_at := r.s_at;
		end_at := r.e_at;
		IF r.s_at IS NULL THEN
			reason := 'dst_gap';
		ELSIF r.s_at < p_now + make_interval(mins => p_lead_min) THEN
			reason := 'lead_time';
		ELSIF r.clash OR r.s_at < kept_end THEN
			reason := 'overlap';
		ELSE
			reason := NULL;
			kept_end := greatest(kept_end, r.e_at);
		END IF;
		RETURN NEXT;
	END LOOP;
END
$fn$;
