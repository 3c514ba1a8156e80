-- 0700: the pending queue (issue 13, README "Session 6: the pending queue").
-- The relay used to find unpublished rows through partial indexes whose
-- predicate names published_at and parked_at, so marking a ~1 KB row
-- published was a non-HOT update (a new row version, a full WAL image, new
-- entries in the primary key and message_id indexes).  Now a narrow queue
-- holds one row per pending outbox row: outbox_insert writes it in the same
-- statement as the outbox row, the relay reads a shard from it in id order
-- and deletes it in the statement that sets published_at (or parked_at).
-- "published_at IS NULL AND parked_at IS NULL" still means "in the queue".
-- h = hashtext(key) & 2147483647, the relay's shard is h % relay_shards; the
-- index serves the default relay_shards = 4 (another count filters the
-- primary key; create the same index with that count, README "Relay shards
-- and failover").
CREATE TABLE calendar.outbox_pending (
    id  bigint PRIMARY KEY,
    h   int NOT NULL
);
CREATE INDEX outbox_pending_shard4_idx ON calendar.outbox_pending ((h % 4), id);

INSERT INTO calendar.outbox_pending (id, h)
    SELECT id, hashtext(key) & 2147483647 FROM calendar.outbox
    WHERE published_at IS NULL AND parked_at IS NULL;

-- no index may name published_at or parked_at any more: the mark is a HOT
-- update when the page has room for the new version (1 KB rows: 70 % leaves
-- room for most of a page's marks; measured in the README)
DROP INDEX calendar.outbox_shard4_idx;
DROP INDEX calendar.outbox_unpublished_idx;
ALTER TABLE calendar.outbox SET (fillfactor = 70);

-- Hand-made changes keep the queue true: a row put back by hand (parked_at
-- or published_at set to NULL, as migration 0003 tells) joins the queue, a
-- pending row deleted by hand leaves it.  The relay's own statements do not
-- fire these (their WHEN is false).  For every <schema>.outbox with a
-- <schema>.outbox_pending (notifications/0700 uses it too).
CREATE FUNCTION calendar.outbox_pending_sync() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        EXECUTE format('DELETE FROM %I.%I WHERE id = $1', TG_TABLE_SCHEMA,
            TG_TABLE_NAME || '_pending') USING OLD.id;
    ELSE
        EXECUTE format('INSERT INTO %I.%I (id, h) VALUES ($1, hashtext($2) & 2147483647)'
            ' ON CONFLICT (id) DO NOTHING', TG_TABLE_SCHEMA,
            TG_TABLE_NAME || '_pending') USING NEW.id, NEW.key;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_requeue AFTER UPDATE OF published_at, parked_at ON calendar.outbox
    FOR EACH ROW WHEN (NEW.published_at IS NULL AND NEW.parked_at IS NULL
        AND (OLD.published_at IS NOT NULL OR OLD.parked_at IS NOT NULL))
    EXECUTE FUNCTION calendar.outbox_pending_sync();
CREATE TRIGGER outbox_forget AFTER DELETE ON calendar.outbox
    FOR EACH ROW WHEN (OLD.published_at IS NULL AND OLD.parked_at IS NULL)
    EXECUTE FUNCTION calendar.outbox_pending_sync();
