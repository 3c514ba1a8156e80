-- 0800 (issue 31 item 1): the dispatcher's index of the due instant keyed by
-- channel first (plugins/notify/dispatch.c, doc/performance.md "The notify
-- dispatcher").  Each channel's claim takes the oldest due rows of its own
-- channel, and the lag gauge reads the first of each.  Through
-- ix_notifications_due (0040), ordered by the due instant alone, a claim of
-- one channel walked every due row of the other that came before its own,
-- each a heap visit to read its channel: in a reminder burst the e-mails fall
-- behind the SMS, and every SMS claim passed over the whole e-mail backlog
-- (20,000 e-mails ahead: 30-78 ms a claim of 250 against 11-13 ms here,
-- 2026-12-05).  It replaces ix_notifications_due: one index entry per row, as
-- before.  A host of the previous release reads this one too (its claim is
-- per channel as well; only its lag read is slower until it is restarted).
--
-- Upgrade note (doc/operating.md, upgrade notes): a plain CREATE INDEX, so
-- writes to notifications.notifications wait while the table is read once.
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
