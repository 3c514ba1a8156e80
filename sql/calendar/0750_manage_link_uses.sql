-- The investors' manage links (issue 32 item 3): one row per link that
-- was used (appointments.so, POST /manage/<token>), written in the
-- transaction that cancels the appointment, so a link works once and a
-- second POST (or a GET after it) answers 410 "already used" with nothing
-- changed.  jti is the token's random 64 bits (as a signed bigint).
-- expires_at is the token's expiry: a row is needed only until then (the
-- token is refused as expired afterwards); the housekeeping job deletes
-- rows whose expires_at is older than housekeeping.terminal_days.
CREATE TABLE calendar.manage_link_uses (
    appointment_id  uuid NOT NULL,
    jti             bigint NOT NULL,
    purpose         text NOT NULL CHECK (purpose IN ('cancel', 'reschedule')),
    used_at         timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (appointment_id, jti)
);
CREATE INDEX manage_link_uses_expires ON calendar.manage_link_uses (expires_at);
