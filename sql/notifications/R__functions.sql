-- R__functions.sql -- every function and trigger of the notifications schema,
-- each defined here and nowhere else (sql/README.md; calendar.outbox_order_xid,
-- which notifications.outbox also runs, lives in calendar/R__functions.sql).
-- Re-runnable as it stands: CREATE OR REPLACE FUNCTION, CREATE OR REPLACE
-- TRIGGER.

-- The dispatcher's leases moved to notifications.dispatch_leases (0800).
-- During a rolling upgrade a worker host of the previous release still claims
-- by setting lease_owner and lease_until on the notification row, and does not
-- look at that table: its claim of a row that a host of this release holds
-- would send the message twice.  This guard drops such an update (the row is
-- not returned to that claim).  Hosts of this release never set lease_owner,
-- so the WHEN clause keeps the function off their updates.  Goes with the two
-- columns in the contract step.
CREATE OR REPLACE FUNCTION notifications.lease_guard() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
	IF EXISTS (SELECT 1 FROM notifications.dispatch_leases l
			WHERE l.notification_id = NEW.id AND l.lease_until > now()) THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER notifications_lease_guard
	BEFORE UPDATE OF lease_owner ON notifications.notifications
	FOR EACH ROW WHEN (NEW.lease_owner IS NOT NULL
		AND NEW.lease_owner IS DISTINCT FROM OLD.lease_owner)
	EXECUTE FUNCTION notifications.lease_guard();
