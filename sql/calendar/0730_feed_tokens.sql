-- 0730_feed_tokens (issue 32 item 1): the secret of each agent's iCalendar
-- subscription feed (GET /calendar/feeds/<token>.ics, doc/api.md "Calendar
-- feed").  Only SHA-256 of the token is stored: the token itself is shown
-- once, in the answer of POST /api/v1/agent/calendar/feed-token, and a copy
-- of this table (a backup, a replica) cannot open anyone's feed.
--
-- One token per agent: POST replaces the hash (rotation, the old URL is dead
-- in the same commit), DELETE removes the row (revocation).  The feed looks
-- the hash up through the unique index; user and tenant say whose events.
CREATE TABLE IF NOT EXISTS calendar.feed_tokens (
	user_id      uuid PRIMARY KEY,
	tenant_id    uuid NOT NULL,
	token_sha256 bytea NOT NULL CHECK (octet_length(token_sha256) = 32),
	created_at   timestamptz NOT NULL,
	CONSTRAINT ux_feed_tokens_sha256 UNIQUE (token_sha256)
);
