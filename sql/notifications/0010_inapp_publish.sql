-- Real-time in-app delivery (issue 10 item 4): the worker's inapp-publish job
-- pushes every committed InApp row once to the recipient's nchan channel.
-- published_at: when nchan accepted it (or when the job gave up on a row older
-- than nchan_publish_max_age_s); publish_attempts / publish_next_at: retry
-- with backoff while the publisher location fails.  The feed
-- (GET /api/v1/me/notifications) stays the source of truth; this is a push hint.
ALTER TABLE notifications.notifications
	ADD COLUMN published_at timestamptz,
	ADD COLUMN publish_attempts integer NOT NULL DEFAULT 0,
	ADD COLUMN publish_next_at timestamptz;

-- rows that exist before this migration are history: never pushed live
UPDATE notifications.notifications SET published_at = created_at
	WHERE channel = 'InApp';

-- the job's queue: unpublished InApp rows, oldest first
CREATE INDEX ix_notifications_inapp_unpublished ON notifications.notifications
	(created_at, id) WHERE channel = 'InApp' AND published_at IS NULL;
