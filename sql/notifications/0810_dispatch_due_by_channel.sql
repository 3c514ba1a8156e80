-- 0810 (issue 31 item 1): the dispatcher's index of the due instant keyed by
-- channel first (plugins/notify/dispatch.c, doc/performance.md "The notify
-- dispatcher").  Each channel's claim takes the oldest due rows of its own
-- channel, and the lag gauge reads the first of each.  Through
-- ix_notifications_due (0040), ordered by the due instant alone, a claim of
-- one channel walked every due row of the other that came before its own,
-- each a heap visit to read its channel: in a reminder burst the e-mails fall
-- behind the SMS, and every SMS claim passed over the whole e-mail backlog
-- (~20,700 e-mails ahead: 30-78 ms a claim of 250 against 11-13 ms here,
-- 2026-12-05).  It replaces ix_notifications_due: one index entry per row, as
-- before (0790 measured what one more costs every row).  A worker host of an
-- earlier build claims with channel = ANY (before 920e64b, the last release
-- among them): through this index it reads every due row and sorts them, as
-- before 0040, until it is restarted; roll the worker hosts right after the
-- migration.
--
-- Upgrade note (doc/operating.md, upgrade notes): a plain CREATE INDEX, so
-- writes to notifications.notifications wait while the table is read once;
-- the DROP INDEX then takes an ACCESS EXCLUSIVE lock for a moment.
-- On a large table build it beforehand, outside any transaction:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_notifications_due_channel ON ...(as below);
-- this file then finds it (IF NOT EXISTS).  An INVALID leftover of a failed
-- concurrent build is dropped and built again here.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_index i
			JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'notifications' AND c.relname = 'ix_notifications_due_channel'
			AND NOT i.indisvalid) THEN
		DROP INDEX notifications.ix_notifications_due_channel;
	END IF;
END
$$;

CREATE INDEX IF NOT EXISTS ix_notifications_due_channel ON notifications.notifications
	(channel, greatest(created_at, not_before, next_attempt_at, lease_until), id)
	WHERE status = 'Pending' AND channel <> 'InApp';

DROP INDEX IF EXISTS notifications.ix_notifications_due;
