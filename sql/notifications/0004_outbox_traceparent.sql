-- 0004: the W3C traceparent of the writer (issue 11), as in calendar.outbox;
-- the relay sends it as the Kafka header "traceparent".
ALTER TABLE notifications.outbox ADD COLUMN IF NOT EXISTS traceparent text;
