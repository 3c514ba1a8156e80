-- 0004: the W3C traceparent of the request / job / message that wrote the
-- row (issue 11); the relay sends it as the Kafka header "traceparent".
-- NULL for rows written before, and when there was no trace.
ALTER TABLE calendar.outbox ADD COLUMN IF NOT EXISTS traceparent text;
