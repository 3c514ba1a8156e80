-- pgbench -M prepared script: the public showcase's own statement
-- (plugins/slots/showcase.c, SHOWCASE_OWNER_SQL without optional filters:
-- owner_stmts[0]), with $n replaced by pgbench variables (-D) and the unused
-- filters' parameters ($2-$4) by NULL.  tests/bench/check-sql.sh keeps it in
-- step with the C source.
-- stmt: slots_showcase_owner plugins/slots/showcase.c
SELECT s.id, s.owner_user_id, s.kind, s.status, s.start_at,
       s.end_at, s.time_zone, s.auto_confirm,
       s.cancellation_cutoff_minutes, s.project_id, s.property_object_id,
       s.location, s.version,
       (SELECT u.display_name FROM calendar.user_replicas u
        WHERE u.user_id = :agent::uuid)
FROM calendar.availability_slots s
WHERE s.status = 'Available' AND s.owner_user_id = :agent::uuid
  AND NOT EXISTS (SELECT 1 FROM calendar.user_replicas u
                  WHERE u.user_id = :agent::uuid AND u.status <> 'Active')
  AND NULL::uuid IS NULL
  AND NULL::uuid IS NULL
  AND NULL::text IS NULL
  AND s.start_at >= :lower::timestamptz AND s.start_at < :upper::timestamptz
  AND (s.start_at, s.id) > (:lower::timestamptz, :curid::uuid)
ORDER BY s.start_at, s.id LIMIT :lim::int;
