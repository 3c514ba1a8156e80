-- 0040 (issue 13): an index path for the e-mail/SMS dispatcher's
-- claim and lag (plugins/notify/dispatch.c).  A row is due since
--   greatest(created_at, not_before, next_attempt_at, lease_until)
-- (greatest ignores NULLs; created_at is never NULL): the claim takes the
-- rows due since the longest time first (ORDER BY due, id LIMIT n), the lag
-- gauge is now - the first of them.  Both were full scans of the Pending rows
-- (their expression matched no index); now each reads the first entries of
-- this partial index.  It replaces ix_notifications_dispatch (0003), which no
-- statement used.
--
-- Upgrade note (doc/operating.md, upgrade): the migration runner
-- applies a file in one transaction, so this is a plain CREATE INDEX: writes to
-- notifications.notifications wait while the whole table is read once.  On a
-- large table build it beforehand, outside any transaction:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_notifications_due ON ...(as below);
-- this file then finds it (IF NOT EXISTS).  An INVALID leftover of a failed
-- concurrent build is dropped and built again here.
-- valid-checksum: 83281cc854ad83fa
--   (its comments reworded only; sql/README.md)
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'notifications' AND c.relname = 'ix_notifications_due'
			AND NOT i.indisvalid) THEN
		DROP INDEX notifications.ix_notifications_due;
	END IF;
END
$$;

CREATE INDEX IF NOT EXISTS ix_notifications_due ON notifications.notifications
	(greatest(created_at, not_before, next_attempt_at, lease_until), id)
	WHERE status = 'Pending' AND channel <> 'InApp';

DROP INDEX IF EXISTS notifications.ix_notifications_dispatch;
