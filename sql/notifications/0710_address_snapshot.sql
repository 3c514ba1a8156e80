-- Seed 001 step 5: the recipient's delivery address is a snapshot taken when
-- the notification is enqueued (the e-mail address of an Email row, the phone
-- of an Sms row, from notifications.recipient_contacts; NULL for InApp and when
-- the replica has none yet).  The dispatcher sends to the snapshot; a row
-- without one takes the replica's address when it is claimed (the catch-up of
-- seed 001: "адрес email/sms догоняется на retry") and keeps it from then on.
-- PII like the replica: never logged, never in a Kafka payload, removed with
-- the user's rows by the erasure (contacts.c).
ALTER TABLE notifications.notifications
	ADD COLUMN address text;
