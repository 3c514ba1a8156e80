-- 0050_outbox_purge_index (issue 13): notify's retention job now
-- purges published rows of notifications.outbox older than 7 days (nothing
-- deleted them before: the table kept every row ever written), with the same
-- statement housekeeping uses for calendar.outbox: "published_at < $1 ORDER
-- BY published_at LIMIT n".  Without an index every batch would read the
-- whole table; with this one a batch reads the first entries of the index
-- and a pass with nothing to purge reads one.
-- Its cost: one more index entry per row when the relay marks it published
-- (that UPDATE already writes a new row version and entries in the primary
-- key and message_id indexes); unpublished rows have none.
--
-- Upgrade note (doc/operating.md, upgrade): the migration runner
-- applies a file in one transaction, so this is a plain CREATE INDEX: writes to
-- notifications.outbox -- every business write that emits an event -- wait while
-- the table is read once.  On a large outbox build it beforehand, outside any
-- transaction:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_published_at_idx
--       ON notifications.outbox (published_at) WHERE published_at IS NOT NULL;
-- this file then finds it (IF NOT EXISTS).  An INVALID leftover of a failed
-- concurrent build is dropped and built again here.
-- valid-checksum: bfcb59703d5faa82
-- valid-checksum: 50c9a1764ced2459
--   (its comments reworded only; sql/README.md)
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'notifications' AND c.relname = 'outbox_published_at_idx'
			AND NOT i.indisvalid) THEN
		DROP INDEX notifications.outbox_published_at_idx;
	END IF;
END
$$;

CREATE INDEX IF NOT EXISTS outbox_published_at_idx ON notifications.outbox (published_at)
	WHERE published_at IS NOT NULL;
