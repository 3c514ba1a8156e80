-- 0680 (issue 30 item 1): a deleted user's replica row is a tombstone.
-- pin.identity.users.v1 with status Deleted may carry displayName null (the
-- identity contract); the identity consumer of workers.so then keeps the
-- user id, status 'Deleted' and the instants (newest-wins and the agent's
-- unavailability rest on them) and erases the name and the avatar.  Every
-- other row still has a name, as before.
--
-- ADD CONSTRAINT checks the existing rows under the table's lock: one row
-- per user, and no row has status 'Deleted' before this version (an
-- unknown status was stored as 'Deactivated').  Rows of users deleted
-- before the upgrade keep their name until their Deleted message is applied
-- (doc/events.md, "Consumed: identity users": replaying it from the
-- calendar-identity-users DLQ).
ALTER TABLE calendar.user_replicas ALTER COLUMN display_name DROP NOT NULL;
ALTER TABLE calendar.user_replicas ADD CONSTRAINT ck_user_replicas_name
	CHECK (CASE WHEN status = 'Deleted'
		THEN display_name IS NULL AND avatar_url IS NULL
		ELSE display_name IS NOT NULL END);
