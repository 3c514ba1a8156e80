-- pgbench -M prepared script: one batch of the identity consumer
-- (calendar-identity-users, a set-based handler: plugins/workers/identity.c
-- through plugins/sdk/replica.c), the statements its transaction sends for :b
-- fresh messages of :b distinct users -- the claim of the messageIds in the
-- inbox, one upsert of the run -- as the handler sends them.  What the handler
-- computes in C (the ids, the JSON of the run) the first, table-free SELECT
-- computes; consumers.sh times the statements from BEGIN to END only
-- (pgbench -r).  Needs -D n=0 -D b=<batch> -D run=<4 hex digits>:
-- client c, transaction n upserts users b0000000-0000-4000-8016-<c,n,i>.
-- Both statements are built at run time from the group's inbox table and the
-- replica's column list (host/worker/consumer_group.c claim_sql,
-- plugins/sdk/replica.c make_sql), so check-sql.sh cannot compare them; the
-- text below is that of the identity replica, kept by hand.
\set n :n + 1
SELECT '{' || string_agg(('b1f00000-' || :run || '-4000-8000-' || lpad(to_hex((:client_id * 1000000 + :n) * 1000 + i), 12, '0')), ',') || '}' AS ids,
  json_agg(json_build_object('user_id', 'b0000000-0000-4000-8016-' || lpad(to_hex((:client_id * 1000000 + :n) * 1000 + i), 12, '0'),
    'display_name', 'Bench User ' || i, 'avatar_url', NULL, 'status', 'Active',
    'last_event_at', clock_timestamp()))::text AS rows,
  clock_timestamp() AS now
  FROM generate_series(1, :b) AS i \gset
BEGIN;
-- stmt: - host/worker/consumer_group.c claim_sql with calendar.inbox
INSERT INTO calendar.inbox (consumer_group, message_id, processed_at)
  SELECT 'calendar-identity-users', m, :now::timestamptz FROM unnest(:ids::uuid[]) AS m
  ON CONFLICT DO NOTHING RETURNING message_id;
-- stmt: - plugins/sdk/replica.c make_sql (the run's statement) of identity.c's replica
INSERT INTO calendar.user_replicas AS r (user_id, display_name, avatar_url, status, last_event_at, created_at, updated_at)
  SELECT x.user_id, x.display_name, x.avatar_url, x.status, x.last_event_at, :now::timestamptz, :now::timestamptz
  FROM json_to_recordset(:rows::json) AS x(user_id uuid, display_name text, avatar_url text, status text, last_event_at timestamptz)
  ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, avatar_url = EXCLUDED.avatar_url,
    status = EXCLUDED.status, last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at
  WHERE (r.last_event_at IS NULL OR r.last_event_at < EXCLUDED.last_event_at) AND r.status IS DISTINCT FROM 'Deleted'
  RETURNING r.user_id, r.status;
END;
