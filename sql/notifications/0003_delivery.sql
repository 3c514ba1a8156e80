-- 0003: delivery (issue 10, seed 001 persist-then-send).
-- The notifications context's own transactional outbox (ABI 1.1: notify.so
-- registers it, the relay of a worker host publishes it like calendar.outbox).
CREATE TABLE notifications.outbox (
    id            bigserial PRIMARY KEY,
    message_id    uuid NOT NULL UNIQUE,
    topic         text NOT NULL,
    key           text NOT NULL,
    envelope      jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    published_at  timestamptz,
    attempts      int NOT NULL DEFAULT 0,
    last_error    text,
    parked_at     timestamptz
);
CREATE INDEX outbox_unpublished_idx ON notifications.outbox (id)
    WHERE published_at IS NULL AND parked_at IS NULL;

-- dispatcher state of an Email / Sms row
ALTER TABLE notifications.notifications
    ADD COLUMN attempts int NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz,       -- NULL: due now
    ADD COLUMN lease_until timestamptz,           -- claimed by a dispatcher until then
    ADD COLUMN lease_owner uuid,                  -- the claiming pass
    ADD COLUMN last_error text,                   -- no PII (codes, provider status)
    ADD COLUMN provider_message_id text,
    ADD COLUMN failed_at timestamptz;

DROP INDEX IF EXISTS notifications.ix_notifications_dispatch;
CREATE INDEX ix_notifications_dispatch ON notifications.notifications
    (coalesce(next_attempt_at, not_before, created_at))
    WHERE status = 'Pending' AND channel <> 'InApp';
