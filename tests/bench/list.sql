-- pgbench -M prepared script: the agent event list's own statement
-- (plugins/calendar/team_api.c, list_stmts[0]: one owner, no owner names, no
-- kind / status filter; PC_EVENT_COLS_TS of plugins/caldomain/event.h) with
-- $n replaced by pgbench variables (-D);
-- $3/$6/$7 NULL, $10 false, $8 = from - 24 h, $9 the nil uuid as the handler
-- sends them without a cursor.  tests/bench/check-sql.sh keeps it in step.
-- stmt: cal_events_list_owner plugins/calendar/team_api.c
SELECT e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority,
  e.title, e.description, e.location, e.start_at, e.end_at,
  e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id,
  e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason,
  e.started_at, e.completed_at, e.cancelled_at,
  e.created_at, e.updated_at, e.version, e.created_by_user_id,
  NULL::text, NULL::text
FROM calendar.calendar_events e
WHERE NOT :withowner::bool AND e.owner_user_id = :owner::uuid AND e.tenant_id = :tenant
  AND NULL::uuid[] IS NULL
  AND e.start_at < :upper::timestamptz
  AND e.start_at > :lower::timestamptz - interval '24 hours'
  AND (e.start_at >= :lower::timestamptz OR e.end_at > :lower::timestamptz)
  AND NULL::text IS NULL
  AND NULL::text IS NULL
  AND (e.start_at, e.id) > (:cursor::timestamptz, :curid::uuid)
ORDER BY e.start_at, e.id LIMIT :lim::int;
