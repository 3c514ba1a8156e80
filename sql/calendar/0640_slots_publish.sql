-- 0640_slots_publish.sql -- issue 13: the exclusion index of
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
-- ids it changes nothing measurable (doc/performance.md, 480-slot publish).
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

-- This file also redefined calendar.slot_plan so that its read of the
-- owner's active slots names the hash too (the gist scan then descends by
-- it); the function is defined in R__functions.sql now, the one place of
-- the schema's functions.
-- valid-checksum: 702324736b92c45b
-- valid-checksum: d2847c309c8c90f7
--   (the file as applied, with the function; sql/README.md)
