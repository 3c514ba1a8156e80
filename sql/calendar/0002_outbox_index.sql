-- 0002: the outbox relay reads unpublished rows in id order; keep that cheap
-- however many published rows housekeeping has not deleted yet.
CREATE INDEX IF NOT EXISTS outbox_unpublished_idx
    ON calendar.outbox (id)
    WHERE published_at IS NULL;
