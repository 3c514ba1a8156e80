-- notifications context (notify.so): notifications.md, seed 001.
-- notify.so never reads or writes schema calendar; only Kafka between.
CREATE SCHEMA IF NOT EXISTS notifications;

-- consumer inbox (host-managed: consumer group + messageId)
CREATE TABLE notifications.processed_messages (
	consumer_group text NOT NULL,
	message_id uuid NOT NULL,
	processed_at timestamptz NOT NULL,
	PRIMARY KEY (consumer_group, message_id)
);

CREATE TABLE notifications.notifications (
	id uuid PRIMARY KEY,
	recipient_user_id uuid NOT NULL,
	tenant_id uuid,                       -- the recipient's company, NULL for investors
	kind text NOT NULL CHECK (kind IN ('AppointmentCreated', 'AppointmentConfirmed',
		'AppointmentCancelled', 'AppointmentReminder', 'CalendarReminder',
		'CalendarEventRescheduled', 'CalendarEventOwnerChanged')),
	channel text NOT NULL CHECK (channel IN ('InApp', 'Email', 'Sms')),
	urgency text NOT NULL CHECK (urgency IN ('Normal', 'Critical')),
	status text NOT NULL DEFAULT 'Pending'
		CHECK (status IN ('Pending', 'Sent', 'Failed', 'Read')),
	role text NOT NULL,                   -- template role the text came from
	title text NOT NULL,
	body text NOT NULL,
	deep_link text,
	payload jsonb NOT NULL,               -- ids, times, offsets: no PII
	locale text NOT NULL,
	not_before timestamptz,               -- quiet-hours deferral (INV-NTF-4)
	source_message_id uuid NOT NULL,
	source_event_type text NOT NULL,
	subject_id uuid,                      -- EventId (event-*, reminder-due) / AppointmentId
	reminder_id uuid,
	created_at timestamptz NOT NULL,
	sent_at timestamptz,
	read_at timestamptz,
	CONSTRAINT uq_notifications_source                  -- INV-NTF-1
		UNIQUE (source_message_id, recipient_user_id, channel, kind),
	CONSTRAINT ck_notifications_read CHECK ((status = 'Read') = (read_at IS NOT NULL)),
	CONSTRAINT ck_notifications_read_inapp CHECK (read_at IS NULL OR channel = 'InApp')
);
-- one reminder per reminder row, recipient and channel (seed 001)
CREATE UNIQUE INDEX uq_notifications_reminder ON notifications.notifications
	(reminder_id, recipient_user_id, channel) WHERE reminder_id IS NOT NULL;
-- the /me feed (newest first, keyset) and its unread filter
CREATE INDEX ix_notifications_feed ON notifications.notifications
	(recipient_user_id, created_at DESC, id DESC) WHERE channel = 'InApp';
CREATE INDEX ix_notifications_unread ON notifications.notifications
	(recipient_user_id, created_at DESC, id DESC) WHERE channel = 'InApp' AND read_at IS NULL;
-- after-final guard: notifications of one event / appointment
CREATE INDEX ix_notifications_subject ON notifications.notifications (subject_id, kind)
	WHERE subject_id IS NOT NULL;
-- dispatcher (later step): due Pending external deliveries
CREATE INDEX ix_notifications_dispatch ON notifications.notifications (not_before, created_at)
	WHERE status = 'Pending' AND channel <> 'InApp';

CREATE TABLE notifications.user_notification_settings (
	user_id uuid PRIMARY KEY,
	locale text,                          -- NULL: contact replica, else 'ru'
	time_zone text,                       -- NULL: contact replica, else 'Europe/Moscow'
	quiet_from time,                      -- local; both or neither; may wrap midnight
	quiet_to time,
	global_mute boolean NOT NULL DEFAULT false,
	overrides jsonb NOT NULL DEFAULT '{}'::jsonb,   -- {Kind: {Channel: bool}}
	version integer NOT NULL DEFAULT 1,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	CONSTRAINT ck_uns_quiet CHECK ((quiet_from IS NULL) = (quiet_to IS NULL)
		AND (quiet_from IS NULL OR quiet_from <> quiet_to)),
	CONSTRAINT ck_uns_overrides CHECK (jsonb_typeof(overrides) = 'object')
);

CREATE TABLE notifications.notification_templates (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind text NOT NULL,
	locale text NOT NULL,
	channel text NOT NULL CHECK (channel IN ('InApp', 'Email', 'Sms')),
	role text NOT NULL,
	status text NOT NULL DEFAULT 'Active' CHECK (status IN ('Active', 'Draft')),
	title_template text NOT NULL,
	body_template text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT uq_notification_templates UNIQUE (kind, locale, channel, role)
);

-- replica of pin.identity.users.v1 (consumer notifications-identity-users)
CREATE TABLE notifications.recipient_contacts (
	user_id uuid PRIMARY KEY,
	display_name text NOT NULL,
	email text,
	phone text,
	locale text,
	time_zone text,
	status text NOT NULL,
	last_event_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);
