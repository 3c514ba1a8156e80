-- 0006: the relay's cost per row (issue 13, README "Outbox relay figures").
-- Measured in PostgreSQL on 100k rows of ~1 KB: reading jsonb as text
-- (jsonb_out) was ~40 % of the batch read, and marking a full page's row
-- published wrote its new version on another page (full-row WAL, a new
-- page, an insert into the primary key and the message_id index).
--  * envelope is json, not jsonb: json keeps the text the writer sent
--    (checked as JSON on insert, as before) and hands it out unchanged, so
--    the relay reads the bytes it produces without a conversion.  ->, ->>,
--    json_* functions work on it; jsonb functions need envelope::jsonb.
--    Rows already in the table keep jsonb's text form.
--  * fillfactor 50: a new row leaves room on its page for its published
--    version, so the mark is a same-page update (WAL of the changed bytes
--    only).  The ALTER TYPE below rewrites the table with it.
ALTER TABLE calendar.outbox SET (fillfactor = 50);
ALTER TABLE calendar.outbox ALTER COLUMN envelope TYPE json USING envelope::json;
