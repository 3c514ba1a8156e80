-- pgbench -M prepared script: the statements of one booking transaction
-- (POST /api/public/calendar/appointments, no Idempotency-Key, a slot without
-- auto-confirm: plugins/appointments/book.c -> apt_book in
-- plugins/caldomain/appointment.c, pc_event_create in plugins/caldomain/event.c,
-- the outbox put of host/core/outbox.c), in the order the handler sends them.
-- $n are pgbench variables; what the handler computes in C (ids, instants,
-- the envelope) the first, table-free SELECT computes -- one extra round trip
-- the handler does not make, so the anchor is slightly conservative.
-- Needs -D n=0 -D base=<timestamptz> -D tenant=<uuid>, the slots of
-- bench_booking_anchor (tests/bench/suite.sh): client c, transaction n books
-- slot b0000000-0000-4000-8002-<c*1000000+n>, owner 8004-<c*100+n%100>, start
-- base + (n/100) x 30 min, as a fresh investor 8003-<c*1000000+n>.
-- tests/bench/check-sql.sh keeps every "stmt:" statement in step with the code.
\set n :n + 1
\set k :client_id * 1000000 + :n
\set row :n / 100
SELECT 'b0000000-0000-4000-8002-' || lpad(:k::text, 12, '0') AS slot,
  'b0000000-0000-4000-8003-' || lpad(:k::text, 12, '0') AS inv,
  gen_random_uuid() AS evid, gen_random_uuid() AS aptid, clock_timestamp() AS now,
  :base::timestamptz + :row * interval '30 minutes' AS st,
  :base::timestamptz + (:row + 1) * interval '30 minutes' AS en,
  least(clock_timestamp() + interval '24 hours',
    :base::timestamptz + :row * interval '30 minutes' - interval '30 minutes') AS deadline,
  '{' || gen_random_uuid() || ',' || gen_random_uuid() || '}' AS remids,
  '{"' || (:base::timestamptz + :row * interval '30 minutes' - interval '1440 minutes') || '","'
    || (:base::timestamptz + :row * interval '30 minutes' - interval '60 minutes') || '"}' AS remdues,
  json_build_object('messageId', gen_random_uuid(), 'eventType', 'bench', 'contractVersion', 1,
    'payload', json_build_object('pad', repeat('x', 600)))::text AS env \gset
BEGIN;

-- stmt: apt_investor_lock plugins/caldomain/appointment.c
SELECT pg_advisory_xact_lock(hashtext('calendar.appointments.investor:' || :inv));

-- stmt: apt_rate plugins/caldomain/appointment.c
SELECT count(*) FROM calendar.appointments WHERE investor_user_id = :inv::uuid
  AND created_at >= :now::timestamptz - interval '1 hour'
  AND rescheduled_from_appointment_id IS NULL;

-- stmt: apt_slot_get plugins/caldomain/appointment.c
SELECT s.status, s.owner_user_id, s.kind, calendar.us(s.start_at),
       NOT EXISTS (SELECT 1 FROM calendar.user_replicas u
                   WHERE u.user_id = s.owner_user_id AND u.status <> 'Active') AS owner_active,
       EXISTS (SELECT 1 FROM calendar.time_off t
               WHERE t.owner_user_id = s.owner_user_id
                 AND tstzrange(t.start_at, t.end_at) && tstzrange(s.start_at, s.end_at))
         AS in_time_off
FROM calendar.availability_slots s WHERE s.id = :slot::uuid \gset s_

-- stmt: apt_antispam plugins/caldomain/appointment.c
SELECT count(*) FILTER (WHERE agent_user_id = :s_owner_user_id::uuid AND kind = :s_kind), count(*)
FROM calendar.appointments
WHERE investor_user_id = :inv::uuid AND status IN ('Pending', 'Confirmed')
  AND start_at > :now::timestamptz AND (NULL::uuid IS NULL OR id <> NULL::uuid);

-- stmt: apt_slot_book plugins/caldomain/appointment.c
UPDATE calendar.availability_slots s SET status = 'Booked',
  version = s.version + 1, updated_at = :now::timestamptz
WHERE s.id = :slot::uuid AND s.status = 'Available'
  AND s.start_at >= :now::timestamptz + interval '60 minutes'
RETURNING s.tenant_id, s.owner_user_id, s.kind, calendar.us(s.start_at),
  calendar.us(s.end_at), s.time_zone, s.auto_confirm, s.project_id,
  s.property_object_id, s.location;

-- stmt: pc_event_insert plugins/caldomain/event.c
INSERT INTO calendar.calendar_events AS e (id, tenant_id, owner_user_id, kind,
  origin, status, priority, title, description, location, start_at, end_at,
  time_zone, client_user_id, lead_id, deal_id, booking_id, project_id,
  property_object_id, appointment_id, reminder_offsets_minutes,
  created_by_user_id, created_at, updated_at, version)
VALUES (:evid, :tenant, :s_owner_user_id, :s_kind, :origin, 'Planned', :prio, :title, NULL, NULL, :st, :en, :tz, :inv, NULL,
  NULL, NULL, NULL, NULL, :aptid, :offs::int[], :inv, :now, :now, 1)
RETURNING e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority,
  e.title, e.description, e.location, calendar.us(e.start_at), calendar.us(e.end_at),
  e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id,
  e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason,
  calendar.us(e.started_at), calendar.us(e.completed_at), calendar.us(e.cancelled_at),
  calendar.us(e.created_at), calendar.us(e.updated_at), e.version, e.created_by_user_id;

-- stmt: pc_rem_insert plugins/caldomain/event.c
INSERT INTO calendar.event_reminders
  (id, calendar_event_id, offset_minutes, due_at, status, created_at, updated_at)
SELECT u.id, :evid::uuid, u.off, u.due, u.st, :now::timestamptz, :now::timestamptz
FROM unnest(:remids::uuid[], :offs::int[], :remdues::timestamptz[], :remsts::text[])
  AS u(id, off, due, st);

-- stmt: - pin_outbox_put:calendar.outbox, host/core/outbox.c formats it (table name): event-created
INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at) VALUES (gen_random_uuid(), 'pin.calendar.event-created.v1', :evid, :env::jsonb, :now);

-- stmt: apt_insert plugins/caldomain/appointment.c
INSERT INTO calendar.appointments AS a (id, tenant_id, slot_id, calendar_event_id,
  agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,
  auto_confirmed, comment, project_id, property_object_id, consultation_request_id,
  confirm_deadline_at, rescheduled_from_appointment_id, decided_at, created_at,
  updated_at, version, original_appointment_id, reschedule_count)
VALUES (:aptid, :tenant, :slot, :evid, :s_owner_user_id, :inv, :s_kind, :st, :en, :tz, :pending, :autoc::boolean, NULL, NULL, NULL,
  NULL, :deadline, NULL, NULL::timestamptz, :now::timestamptz, :now::timestamptz, 1,
  coalesce((SELECT coalesce(o.original_appointment_id, o.id)
    FROM calendar.appointments o WHERE o.id = NULL::uuid), :aptid::uuid),
  coalesce((SELECT o.reschedule_count + 1
    FROM calendar.appointments o WHERE o.id = NULL::uuid), 0))
RETURNING a.id, a.tenant_id, a.slot_id, a.calendar_event_id, a.agent_user_id,
  a.investor_user_id, a.kind, calendar.us(a.start_at), calendar.us(a.end_at),
  a.time_zone, a.status, a.auto_confirmed, a.comment, a.project_id,
  a.property_object_id, a.consultation_request_id, calendar.us(a.confirm_deadline_at),
  a.cancelled_by, a.cancel_reason, a.outcome, a.outcome_note,
  a.rescheduled_from_appointment_id, a.rescheduled_to_appointment_id,
  calendar.us(a.decided_at), calendar.us(a.cancelled_at), calendar.us(a.completed_at),
  calendar.us(a.created_at), calendar.us(a.updated_at), a.version,
  coalesce(a.original_appointment_id, a.id), a.reschedule_count;

-- stmt: - pin_outbox_put:calendar.outbox, host/core/outbox.c formats it (table name): appointment-created
INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at) VALUES (gen_random_uuid(), 'pin.calendar.appointment-created.v1', :aptid, :env::jsonb, :now);

-- stmt: apt_fetch plugins/caldomain/appointment.c
SELECT a.id, a.tenant_id, a.slot_id, a.calendar_event_id, a.agent_user_id,
  a.investor_user_id, a.kind, calendar.us(a.start_at), calendar.us(a.end_at),
  a.time_zone, a.status, a.auto_confirmed, a.comment, a.project_id,
  a.property_object_id, a.consultation_request_id, calendar.us(a.confirm_deadline_at),
  a.cancelled_by, a.cancel_reason, a.outcome, a.outcome_note,
  a.rescheduled_from_appointment_id, a.rescheduled_to_appointment_id,
  calendar.us(a.decided_at), calendar.us(a.cancelled_at), calendar.us(a.completed_at),
  calendar.us(a.created_at), calendar.us(a.updated_at), a.version,
  coalesce(a.original_appointment_id, a.id), a.reschedule_count, s.status, e.status, s.cancellation_cutoff_minutes
FROM calendar.appointments a
JOIN calendar.availability_slots s ON s.id = a.slot_id
LEFT JOIN calendar.calendar_events e ON e.id = a.calendar_event_id
WHERE a.id = :aptid::uuid AND (NULL::uuid IS NULL OR a.tenant_id = NULL::uuid)
  AND (NULL::uuid IS NULL OR a.agent_user_id = NULL::uuid)
  AND (:inv::uuid IS NULL OR a.investor_user_id = :inv::uuid);

COMMIT;
