-- 0800_dispatch_leases (issue 31 item 1): the notify dispatcher's leases in a
-- table of their own (plugins/notify/dispatch.c, doc/performance.md "The
-- notify dispatcher").  A claim locks its due rows (FOR UPDATE SKIP LOCKED)
-- and inserts one small row here for each; the notification row itself is
-- not written until its outcome.  Before, the claim set lease_until and
-- lease_owner on the notification: a new version of every e-mail and SMS row
-- with all its index entries (lease_until is in ix_notifications_due's key),
-- one of the three each such row was written.
--
-- Rolling upgrade: hosts of the previous release still lease through the two
-- columns, and the claim of this release honours them (their due instant,
-- ix_notifications_due's key, is the lease's end); a previous host's claim of
-- a row leased here is refused by the trigger notifications_lease_guard
-- (R__functions.sql).  The columns, that trigger and lease_until in the
-- index key go in a contract step once no host of the previous release runs.
--
-- A lease belongs to no foreign key: the notification's retention deletes do
-- not look here, and the outcome deletes its own leases.  Housekeeping drops
-- what is left (a row that became final by other means, a host that died)
-- once the lease ended more than notify.dispatch_lease_s ago.
CREATE TABLE IF NOT EXISTS notifications.dispatch_leases (
	notification_id uuid PRIMARY KEY,
	lease_owner uuid NOT NULL,            -- the claiming pass
	lease_until timestamptz NOT NULL      -- the row is due again after it
);
