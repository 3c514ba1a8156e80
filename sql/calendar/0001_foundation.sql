-- Foundation: the calendar schema, the transactional outbox and the inbox.
CREATE SCHEMA IF NOT EXISTS calendar;

-- Integration events written in the business transaction, published by the
-- relay of a worker host (events.md).  Published rows are purged after 7 days.
CREATE TABLE calendar.outbox (
    id            bigserial PRIMARY KEY,
    message_id    uuid NOT NULL UNIQUE,
    topic         text NOT NULL,
    key           text NOT NULL,
    envelope      jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    published_at  timestamptz,
    attempts      int NOT NULL DEFAULT 0,
    last_error    text
);

-- Consumer idempotency: one row per (consumer group, messageId), written in
-- the same transaction as the consumer's effects.
CREATE TABLE calendar.inbox (
    consumer_group  text NOT NULL,
    message_id      uuid NOT NULL,
    processed_at    timestamptz NOT NULL,
    PRIMARY KEY (consumer_group, message_id)
);
