-- 0780_outbox_cursor (issue 31 item 3): what the relay's commit-ordered cursor
-- reads (relay_cursor = true; host/worker/relay.c, doc/operating.md "Outbox
-- relay cursor").  Each row carries the id of the transaction that wrote it
-- (xid8, never wraps); the relay reads a shard's rows in (xid, id) order up to
-- the oldest transaction still running, after the shard's cursor
-- (calendar.outbox_cursor), and marks nothing.  Rows written before this file
-- and not yet published get xid 1: the cursor reads them first, in id order;
-- published ones keep NULL and are never read by a cursor.
-- The trigger that keeps a key's rows in order (calendar.outbox_order_xid)
-- lives in calendar/R__functions.sql.
-- Cost on every outbox INSERT: two index entries (the cursor's and the
-- trigger's look-up by key) and the trigger.
-- Upgrade note (doc/operating.md): plain CREATE INDEX; on a large outbox build
-- them beforehand with CREATE INDEX CONCURRENTLY IF NOT EXISTS and the same
-- definitions (after adding the column).
ALTER TABLE notifications.outbox ADD COLUMN IF NOT EXISTS xid xid8;
ALTER TABLE notifications.outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
UPDATE notifications.outbox SET xid = '1'
    WHERE xid IS NULL AND published_at IS NULL AND parked_at IS NULL;
-- the cursor's read for the default relay_shards = 4 (with another count,
-- create the same index with that count, as for migration 0005)
CREATE INDEX IF NOT EXISTS outbox_cursor4_idx
    ON notifications.outbox (((hashtext(key) & 2147483647) % 4), xid, id);
CREATE INDEX IF NOT EXISTS outbox_key_xid_idx ON notifications.outbox (key, xid);
