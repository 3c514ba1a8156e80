-- 0003: a row the relay can never produce (too large for the broker, invalid
-- topic name, unknown topic) is parked with its error instead of holding every
-- row behind it (head-of-line blocking).  Parked rows stay for inspection;
-- re-queue one with: UPDATE calendar.outbox SET parked_at = NULL WHERE id = ...
ALTER TABLE calendar.outbox ADD COLUMN IF NOT EXISTS parked_at timestamptz;
DROP INDEX IF EXISTS calendar.outbox_unpublished_idx;
CREATE INDEX IF NOT EXISTS outbox_unpublished_idx
    ON calendar.outbox (id)
    WHERE published_at IS NULL AND parked_at IS NULL;
