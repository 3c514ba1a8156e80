-- 0700: the pending queue of notifications.outbox, as calendar/0700 (read
-- its comments): a narrow queue written with the outbox row, read and
-- emptied by the relay; the outbox loses its partial indexes so that the
-- mark is a HOT update; the same triggers keep the queue true for changes
-- made by hand.
CREATE TABLE notifications.outbox_pending (
    id  bigint PRIMARY KEY,
    h   int NOT NULL
);
CREATE INDEX outbox_pending_shard4_idx ON notifications.outbox_pending ((h % 4), id);

INSERT INTO notifications.outbox_pending (id, h)
    SELECT id, hashtext(key) & 2147483647 FROM notifications.outbox
    WHERE published_at IS NULL AND parked_at IS NULL;

DROP INDEX notifications.outbox_shard4_idx;
DROP INDEX notifications.outbox_unpublished_idx;
ALTER TABLE notifications.outbox SET (fillfactor = 70);

CREATE TRIGGER outbox_requeue AFTER UPDATE OF published_at, parked_at ON notifications.outbox
    FOR EACH ROW WHEN (NEW.published_at IS NULL AND NEW.parked_at IS NULL
        AND (OLD.published_at IS NOT NULL OR OLD.parked_at IS NOT NULL))
    EXECUTE FUNCTION calendar.outbox_pending_sync();
CREATE TRIGGER outbox_forget AFTER DELETE ON notifications.outbox
    FOR EACH ROW WHEN (OLD.published_at IS NULL AND OLD.parked_at IS NULL)
    EXECUTE FUNCTION calendar.outbox_pending_sync();
