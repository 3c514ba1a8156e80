-- 0005: relay shards (issue 15).  The relay reads one shard of the outbox,
-- (hashtext(key) & 2147483647) % relay_shards, in id order; this index gives
-- it exactly that shard's unpublished rows in order, for the default
-- relay_shards = 4 (with another count the relay filters the id index: it
-- works, it is slower -- create the same index with that count, doc/operating.md,
-- relay shards).
-- valid-checksum: 724093e6a17607bd
--   (its comments reworded only; sql/README.md)
CREATE INDEX IF NOT EXISTS outbox_shard4_idx
    ON notifications.outbox (((hashtext(key) & 2147483647) % 4), id)
    WHERE published_at IS NULL AND parked_at IS NULL;
