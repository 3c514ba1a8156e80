-- 0650_outbox_purge_index (issue 13): an index path for the housekeeping purge
-- of published outbox rows (calendar.outbox, older than 7 days by default).
-- The purge selected its batch with "published_at < $1 ORDER BY .. LIMIT n"
-- and no index served that: every batch of 500 read the WHOLE outbox (a
-- sequential scan of the 7 days of rows the table holds; on the dev bench's
-- 2.6 GB outbox one batch ran for minutes).  Now each batch reads the first
-- entries of this partial index, and a pass with nothing to purge reads one.
-- Its cost: one more index entry per row when the relay marks it published
-- (that UPDATE already writes a new row version and entries in the primary
-- key and message_id indexes); unpublished rows have none.
--
-- Upgrade note (doc/operating.md, upgrade): the migration runner
-- applies a file in one transaction, so this is a plain CREATE INDEX: writes to
-- calendar.outbox -- every business write that emits an event -- wait while
-- the table is read once.  On a large outbox build it beforehand, outside any
-- transaction:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_published_at_idx
--       ON calendar.outbox (published_at) WHERE published_at IS NOT NULL;
-- this file then finds it (IF NOT EXISTS).  An INVALID leftover of a failed
-- concurrent build is dropped and built again here.
-- valid-checksum: 8d7508f63537aae7
--   (its comments reworded only; sql/README.md)
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'calendar' AND c.relname = 'outbox_published_at_idx'
			AND NOT i.indisvalid) THEN
		DROP INDEX calendar.outbox_published_at_idx;
	END IF;
END
$$;

CREATE INDEX IF NOT EXISTS outbox_published_at_idx ON calendar.outbox (published_at)
	WHERE published_at IS NOT NULL;
