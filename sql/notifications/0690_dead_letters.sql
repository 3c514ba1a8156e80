-- Dead letters (issue 30): one row per message a consumer group of this
-- schema sent to its DLQ topic (<group>.dlq), written by the worker host
-- before the DLQ produce and the offset commit (host/worker/dead_letters.c):
-- idempotent per (consumer_group, topic, kafka_partition, kafka_offset), so a
-- redelivery after a crash does not count twice, and a message dead-lettered
-- again after it was handled is pending again.  handled_at is set by
-- `pin-host --dlq replay|ack`; pin_dlq_pending{group} counts the rows
-- without it (alert PinDeadLetters).  Handled rows are deleted after
-- dlq_handled_retention_days (90) by the group's worker host.
CREATE TABLE notifications.dead_letters (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group   text NOT NULL,
    topic            text NOT NULL,
    kafka_partition  int NOT NULL,
    kafka_offset     bigint NOT NULL,
    msg_key          bytea,
    -- the message's Kafka headers, in order: [{"name": ..., "value": text}
    -- or {"name": ..., "hex": ...} for a value that is not UTF-8, or
    -- {"name": ...} for a null value]
    headers          jsonb NOT NULL DEFAULT '[]',
    payload          bytea,
    error_code       text NOT NULL,
    error_detail     text NOT NULL DEFAULT '',
    dead_at          timestamptz NOT NULL,
    handled_at       timestamptz,
    handled_how      text CHECK (handled_how IN ('replayed', 'acked')),
    handled_note     text,
    CHECK ((handled_at IS NULL) = (handled_how IS NULL)),
    UNIQUE (consumer_group, topic, kafka_partition, kafka_offset)
);
-- the gauge's count and --dlq list: the pending rows of a group
CREATE INDEX dead_letters_pending ON notifications.dead_letters (consumer_group, id)
    WHERE handled_at IS NULL;
-- the purge of handled rows (a probe every 5 s per group)
CREATE INDEX dead_letters_handled ON notifications.dead_letters (consumer_group, handled_at)
    WHERE handled_at IS NOT NULL;
