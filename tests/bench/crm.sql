-- pgbench -M prepared script: one batch of the CRM booking-created consumer
-- (calendar-crm-booking-events, the set path of plugins/workers/crm_booking.c
-- run_apply) for :b fresh booking-created messages of distinct bookings on
-- the bench's 200 routed deals: the claim of the messageIds in the inbox, the
-- deals' replicas (FOR SHARE), the bookings' links (FOR UPDATE), the one
-- statement that writes links, events and reminders, the event-created
-- outbox rows (one INSERT of arrays), in the order the handler sends them.
-- What the handler computes in C (ids, instants, the rows' JSON, the
-- envelopes) the first, table-free SELECT computes, the ids time-ordered
-- (UUIDv7, as pc_api->uuid_v7 makes them: random ones would split the
-- indexes' pages all over); consumers.sh times the statements from BEGIN to
-- END only (pgbench -r).
-- Needs -D n=0 -D b=<batch> -D run=<4 hex digits> -D tenant=<uuid>: client c,
-- transaction n writes bookings b0000000-0000-4000-8018-<c,n,i>.
-- check-sql.sh compares crmb_set_insert; the others are built at run time or
-- not prepared (marked).  pgbench's prepared mode turns every ":name" into a
-- parameter, inside string literals too, so the literal 'HH24:MI' is written
-- 'HH24' || ':' || 'MI' (PostgreSQL folds it to the same constant;
-- check-sql.sh reads it back as the code's literal).
\set n :n + 1
SELECT '{' || string_agg('b2f00000-' || :run || '-4000-8000-' || lpad(to_hex(k), 12, '0'), ',') || '}' AS mids,
  '{' || string_agg('b0000000-0000-4000-8018-' || lpad(to_hex(k), 12, '0'), ',') || '}' AS bids,
  '{' || string_agg(DISTINCT 'b0000000-0000-4000-8007-' || lpad(to_hex(i % 200), 12, '0'), ',') || '}' AS dids,
  json_agg(json_build_object('i', i - 1, 'booking_id', 'b0000000-0000-4000-8018-' || lpad(to_hex(k), 12, '0'),
    'deal_id', 'b0000000-0000-4000-8007-' || lpad(to_hex(i % 200), 12, '0'), 'last_event_at', now,
    'tenant_id', :tenant::text, 'event_id', ev, 'owner_id', 'b0000000-0000-4000-8005-' || lpad((i % 200)::text, 12, '0'),
    'property_id', 'b0000000-0000-4000-8009-' || lpad(to_hex(i % 500), 12, '0'), 'at', at))::text AS rows,
  json_agg(json_build_object('id', rid, 'event_id', ev, 'off', 30,
    'due', at - interval '30 minutes', 'st', 'Pending'))::text AS rems,
  array_agg(oid)::text AS oids, array_agg('pin.calendar.event-created.v1'::text)::text AS otopics,
  array_agg(ev)::text AS okeys,
  array_agg(json_build_object('messageId', gen_random_uuid(), 'eventType', 'pin.calendar.event-created',
    'contractVersion', 1, 'createdAt', now, 'aggregateType', 'CalendarEvent', 'aggregateId', ev,
    'correlationId', NULL, 'payload', json_build_object('eventId', ev, 'tenantId', :tenant::text,
      'ownerUserId', 'b0000000-0000-4000-8005-' || lpad((i % 200)::text, 12, '0'), 'kind', 'BookingDeadline',
      'origin', 'CrmBooking', 'status', 'Planned', 'priority', 'Critical',
      'title', 'Оплата резерва до ' || to_char(at AT TIME ZONE 'Europe/Moscow', 'DD.MM.YYYY HH24' || ':' || 'MI'),
      'description', NULL, 'location', NULL, 'startAt', at, 'endAt', NULL, 'timeZone', 'Europe/Moscow',
      'clientUserId', NULL, 'leadId', NULL, 'dealId', 'b0000000-0000-4000-8007-' || lpad(to_hex(i % 200), 12, '0'),
      'bookingId', 'b0000000-0000-4000-8018-' || lpad(to_hex(k), 12, '0'), 'projectId', NULL,
      'propertyObjectId', 'b0000000-0000-4000-8009-' || lpad(to_hex(i % 500), 12, '0'),
      'appointmentId', NULL, 'reminderOffsetsMinutes', json_build_array(30), 'version', 1,
      'createdAt', now, 'updatedAt', now)))::text AS oenvs,
  min(now) AS now
  FROM (SELECT i, (:client_id::bigint * 1000000 + :n::bigint) * 1000 + i AS k,
    (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(gen_random_uuid()::text, 16, 3) || '-' || substr(gen_random_uuid()::text, 20, 4) || '-' || substr(gen_random_uuid()::text, 25, 12))::uuid AS ev, (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(gen_random_uuid()::text, 16, 3) || '-' || substr(gen_random_uuid()::text, 20, 4) || '-' || substr(gen_random_uuid()::text, 25, 12))::uuid AS rid, (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(gen_random_uuid()::text, 16, 3) || '-' || substr(gen_random_uuid()::text, 20, 4) || '-' || substr(gen_random_uuid()::text, 25, 12))::uuid AS oid,
    clock_timestamp() AS now, clock_timestamp() + interval '2 days' + (i % 1440) * interval '1 minute' AS at
    FROM generate_series(1, :b::int) AS i,
      lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') AS h) AS g \gset
BEGIN;
-- stmt: - host/worker/consumer_group.c claim_sql with calendar.inbox
INSERT INTO calendar.inbox (consumer_group, message_id, processed_at)
  SELECT 'calendar-crm-booking-events', m, :now::timestamptz FROM unnest(:mids::uuid[]) AS m
  ON CONFLICT DO NOTHING RETURNING message_id;
-- the handler plans these two at each execution (not prepared: a generic plan
-- of "= ANY (array parameter)" scans the table); pgbench prepares every
-- statement, so custom plans are forced around them
SET LOCAL plan_cache_mode = force_custom_plan;
-- stmt: - crm_booking.c run_apply sql_route (planned at each execution, not prepared)
SELECT deal_id, agency_company_id, executor_agent_user_id, is_terminal
  FROM calendar.crm_deal_replicas WHERE deal_id = ANY (:dids::uuid[]) ORDER BY deal_id FOR SHARE;
-- stmt: - crm_booking.c run_apply sql_links (planned at each execution, not prepared)
SELECT booking_id, calendar_event_id IS NOT NULL FROM calendar.booking_deadline_links
  WHERE booking_id = ANY (:bids::uuid[]) AND phase = 'Reserve' ORDER BY booking_id FOR UPDATE;
SET LOCAL plan_cache_mode = auto;
-- stmt: crmb_set_insert plugins/workers/crm_booking.c
WITH x AS (SELECT * FROM json_to_recordset(:rows::json) AS x(i int, booking_id uuid,
    deal_id uuid, tenant_id uuid, event_id uuid, owner_id uuid, property_id uuid,
    at timestamptz, last_event_at timestamptz)),
l AS (INSERT INTO calendar.booking_deadline_links (booking_id, phase, deal_id,
    tenant_id, calendar_event_id, status, created_at, updated_at, last_event_at)
  SELECT booking_id, 'Reserve', deal_id, tenant_id, event_id,
    CASE WHEN event_id IS NULL THEN 'Cancelled' ELSE 'Open' END,
    :now::timestamptz, :now::timestamptz, last_event_at FROM x ORDER BY i
  ON CONFLICT (booking_id, phase) DO NOTHING RETURNING calendar_event_id),
e AS (INSERT INTO calendar.calendar_events AS e (id, tenant_id, owner_user_id,
    kind, origin, status, priority, title, start_at, time_zone, deal_id,
    booking_id, property_object_id, reminder_offsets_minutes, created_at,
    updated_at, version)
  SELECT x.event_id, x.tenant_id, x.owner_id, 'BookingDeadline', 'CrmBooking',
    'Planned', 'Critical', :prefix || to_char(x.at AT TIME ZONE :tz, 'DD.MM.YYYY HH24' || ':' || 'MI'),
    x.at, :tz, x.deal_id, x.booking_id, x.property_id, :offs::int[], :now::timestamptz,
    :now::timestamptz, 1
  FROM x JOIN l ON l.calendar_event_id = x.event_id ORDER BY x.i RETURNING e.*),
r AS (INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes,
    due_at, status, created_at, updated_at)
  SELECT m.id, m.event_id, m.off, m.due, m.st, :now::timestamptz, :now::timestamptz
  FROM json_to_recordset(:rems::json) AS m(id uuid, event_id uuid, off int,
    due timestamptz, st text) JOIN l ON l.calendar_event_id = m.event_id)
SELECT e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority,
  e.title, e.description, e.location, calendar.us(e.start_at), calendar.us(e.end_at),
  e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id,
  e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason,
  calendar.us(e.started_at), calendar.us(e.completed_at), calendar.us(e.cancelled_at),
  calendar.us(e.created_at), calendar.us(e.updated_at), e.version, e.created_by_user_id, x.i
FROM e JOIN x ON x.event_id = e.id ORDER BY x.i;
-- stmt: - pin_outbox_put_many:calendar.outbox, host/core/outbox.c formats it (table name; arrays in binary there)
INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at, traceparent)
  SELECT u.*, :now::timestamptz, NULL::text
  FROM unnest(:oids::uuid[], :otopics::text[], :okeys::text[], :oenvs::jsonb[]) AS u;
END;
