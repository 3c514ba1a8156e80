-- 0200_slots.sql -- SlotBatch and AvailabilitySlot (domain.md, ADR-0064 p.3 and p.6).
-- Applied once by pin-host --migrate inside a transaction.
-- It also defined calendar.slot_plan, the generation rules, which is defined
-- in R__functions.sql now, the one place of the schema's functions.
-- valid-checksum: f37bb4e3c790e218
--   (the file as applied before slot_plan moved; sql/README.md)

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
