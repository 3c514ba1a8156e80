-- 0400_crm_projections.sql -- consumer-owned CRM projections (domain.md
-- "CRM projections"): the deal replica of the deal consumer and the
-- booking -> deadline-event links of the booking consumer (seed 004).
-- Applied once by pin-host --migrate inside a transaction.

-- CrmDealReplica: routing of CRM deadlines (whose calendar, which tenant).
-- last_event_at is the envelope createdAt of the message that wrote the
-- routing fields (an older message never overwrites a newer one);
-- is_terminal is sticky (deal-closed), whatever the order of arrival.
CREATE TABLE calendar.crm_deal_replicas (
	deal_id                uuid PRIMARY KEY,
	agency_company_id      uuid,
	executor_agent_user_id uuid,
	is_terminal            boolean NOT NULL DEFAULT false,
	last_event_at          timestamptz,
	created_at             timestamptz NOT NULL,
	updated_at             timestamptz NOT NULL
);

-- BookingDeadlineLinkEntity (seed 004): at most one deadline event per
-- (booking, phase).  deal_id is NULL only on a tombstone written by
-- booking-expired / booking-cancelled before any other message of the
-- booking (those payloads carry no DealId); a link with an event always
-- has it.
CREATE TABLE calendar.booking_deadline_links (
	booking_id        uuid NOT NULL,
	phase             varchar(16) NOT NULL CHECK (phase IN ('Reserve', 'Booking')),
	deal_id           uuid,
	tenant_id         uuid,
	calendar_event_id uuid,
	status            varchar(16) NOT NULL CHECK (status IN ('Open', 'Completed', 'Cancelled')),
	created_at        timestamptz NOT NULL,
	updated_at        timestamptz NOT NULL,
	PRIMARY KEY (booking_id, phase),
	CONSTRAINT ck_booking_deadline_links_event CHECK (
		calendar_event_id IS NULL OR (deal_id IS NOT NULL AND tenant_id IS NOT NULL)),
	CONSTRAINT ck_booking_deadline_links_open CHECK (
		status <> 'Open' OR calendar_event_id IS NOT NULL)
);
CREATE INDEX ix_booking_deadline_links_deal_id
	ON calendar.booking_deadline_links (deal_id);
CREATE UNIQUE INDEX ux_booking_deadline_links_event_id
	ON calendar.booking_deadline_links (calendar_event_id)
	WHERE calendar_event_id IS NOT NULL;
