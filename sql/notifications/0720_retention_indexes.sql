-- 0720_retention_indexes (issue 30 item 6): retention of the notifications
-- a recipient has read, and of those still Pending, which nothing deleted
-- before (an unread in-app notification stayed forever):
--   Read (in-app) rows created more than notifications.housekeeping.read_days
--   ago, and Pending rows (unread in-app; e-mail or SMS never delivered)
--   created more than notifications.housekeeping.unread_days ago, are
--   deleted by notifications-housekeeping (plugins/notify/retention.c), each
--   through the first entries of its partial index on created_at.
-- ix_notifications_done_created (0020) keeps serving the Sent and Failed
-- rows (180 days).
-- Cost: one more index entry per notification written (every row starts
-- Pending) and one when a row is read (that UPDATE changes status and
-- already writes new entries).
-- Upgrade note (doc/operating.md): a plain CREATE INDEX; on a large table
-- build them beforehand with CREATE INDEX CONCURRENTLY IF NOT EXISTS and
-- the same definitions.
CREATE INDEX IF NOT EXISTS ix_notifications_read_created
	ON notifications.notifications (created_at) WHERE status = 'Read';
CREATE INDEX IF NOT EXISTS ix_notifications_pending_created
	ON notifications.notifications (created_at) WHERE status = 'Pending';
