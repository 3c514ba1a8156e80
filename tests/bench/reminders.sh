# reminders.sh -- `./dev bench reminders`: the reminder dispatcher end to end
# against the relay alone draining the same number of rows in
# the same run.  Sourced by suite.sh (b_row, b_psql, b_div, b_ge).
#
#   1. N due Pending reminders over ~N/2 events with 1, 2 or 3 reminders each
#      (offsets 15, 60, 1440 min; written in SQL; the events started an hour
#      ago, so notify's consumer skips the reminder-due messages as stale and
#      does not load the machine with a fan-out);
#   2. one `reminder-dispatch` pass in a --once worker host while the
#      running worker host's relay publishes: "dispatch" = until the last
#      batch's outbox rows (their created_at, taken by the host just before
#      the batch's INSERT and COMMIT), "end to end" = until the last of them is
#      published (max(published_at)), both from t0 = the host's start;
#      lateness p99 = sent_at - due_at over the rows (a pass takes them all,
#      so it must stay within the seed's minute; the dispatch cycle is
#      job.reminder-dispatch.interval_ms, 10 s by default);
#   3. anchor: N copies of those outbox rows (new messageIds) inserted in
#      SQL in one transaction, the relay alone draining them, measured as in
#      `./dev bench relay`: max(published_at) - the moment before COMMIT.
#
# The figures come from the rows' own timestamps (or the cursors'); the
# script only polls a cheap "is anything left" query (LIMIT 1, 0.2 s apart;
# by the cursor the four cursor rows, once a second) to know when to read
# them.  Until 2026-12-02 (6665f66) it polled count(*) of every bench row (a join over
# the reminders and events, 0.3-1.8 s per poll at load 17, back to
# back) and to time the anchor from before its 100k-row INSERT: on 2 cores the
# poller took a large share of the CPU the dispatcher and the relay measure.
#
# Knobs: PIN_BENCH_REMINDERS_N (100000); PIN_BENCH_ONCE_BIN and
# PIN_BENCH_ONCE_PLUGDIR: the --once host's binary and plugin directory (an
# A/B of the dispatcher against another build on the same stack).
# Target: lateness p99 within the dispatch interval; the rate is printed against the relay alone on the same rows, never judged (issue 31).

B_REM_EVENT='b0000000-0000-4000-8010-'    # event ids = outbox keys of the bench rows
B_REM_OWNER='b0000000-0000-4000-800f-'

b_rem_wait() {    # b_rem_wait SQL WHAT: polls SQL (LIMIT 1: a row while work is left) until it returns nothing
	local t0=$SECONDS
	while [[ -n $(b_psql -tA -c "$1") ]]; do
		((SECONDS - t0 < 900)) || die "reminders: $2 not done after 900 s"
		sleep 0.2
	done
}

# b_rem_clean [start]: deletes the bench's events (their reminders go with
# them).  At the start of a run also the outbox rows of the previous run and
# notify's dedup rows of those messages: notify consumes the 2 x N reminder-due
# messages of a run (the dispatch's and the anchor's copies) for a minute
# after it, so they are deleted only before the next run (b_settle waited for
# that tail; a message consumed after this clean-up keeps its row until the
# retention's 30 days).  Before 2026-12-03 (b760382) each run's 200k rows stayed
# for those 30 days (7.2M, 1.26 GB, in one dev database).  Then
# VACUUM (ANALYZE) of what it deleted from (b_vacuum).
b_rem_clean() {
	b_psql <<-EOF >/dev/null
		DELETE FROM calendar.calendar_events WHERE owner_user_id::text LIKE '$B_REM_OWNER%';
	EOF
	if [[ ${1:-} == start ]]; then
		b_drop_published "key LIKE '$B_REM_EVENT%'"
		b_vacuum calendar.outbox notifications.processed_messages
	fi
	b_vacuum calendar.calendar_events calendar.event_reminders
}

# b_rem_pub_end: epoch of the last publish of the bench's reminder-due rows
b_rem_pub_end() {
	b_psql -tA -c "SELECT extract(epoch FROM max(published_at)) FROM calendar.outbox
		WHERE key LIKE '$B_REM_EVENT%' AND topic = 'pin.calendar.reminder-due.v1'"
}

# b_rem_unpublished: a row while a bench row waits for the relay (the partial
# index of unpublished rows: cheap however many rows are published)
B_REM_UNPUBLISHED="SELECT 1 FROM calendar.outbox WHERE published_at IS NULL AND parked_at IS NULL
	AND key LIKE '$B_REM_EVENT%' LIMIT 1"

# b_rem_pub_wait WHAT: waits until the relay has published every bench
# reminder-due row written so far; prints the epoch it was done: the last
# published_at when the relay marks, the last move of the cursors past the
# rows when it relays by the cursor (b_cursor_wait: one query over the rows
# for each shard's last, then only the cursors are polled)
b_rem_pub_wait() {
	if b_relay_cursor; then
		b_cursor_wait "$(b_cursor_want "key LIKE '$B_REM_EVENT%'
			AND topic = 'pin.calendar.reminder-due.v1'")" "reminders: $1"
		return
	fi
	b_rem_wait "$B_REM_UNPUBLISHED" "$1"
	b_rem_pub_end
}

bench_reminders() {
	local n=${PIN_BENCH_REMINDERS_N:-100000} ev t0 t1 s_disp s_e2e s_relay lat_p99 cycle
	local r_disp r_e2e r_relay ratio ok=true once
	ev=$((n / 2 + 1))
	b_rem_clean start
	say "reminders: $n due reminders over ~$ev events, 1-3 each (SQL)"
	b_psql <<-EOF >/dev/null
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin,
		    title, start_at, end_at, time_zone, created_at, updated_at)
		  SELECT ('$B_REM_EVENT' || lpad(to_hex(i), 12, '0'))::uuid, '$B_T',
		    ('$B_REM_OWNER' || lpad((i % 500)::text, 12, '0'))::uuid,
		    'Meeting', 'Manual', 'Reminder bench', now() - interval '1 hour',
		    now() - interval '30 minutes', 'Europe/Moscow', now(), now()
		  FROM generate_series(1, $ev) AS i;
		-- event i has 1 + i % 3 reminders (15, 60, 1440 min), N in all
		INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes, due_at,
		    status, created_at, updated_at)
		  SELECT gen_random_uuid(), ('$B_REM_EVENT' || lpad(to_hex(i), 12, '0'))::uuid,
		    o, now() - interval '1 hour' - o * interval '1 minute' + (i % 1000) * interval '1 ms',
		    'Pending', now(), now()
		  FROM generate_series(1, $ev) AS i,
		    unnest(ARRAY[60, 1440, 15]) WITH ORDINALITY AS x(o, k)
		  WHERE k <= 1 + i % 3
		  ORDER BY i, k LIMIT $n;
		ANALYZE calendar.event_reminders;
	EOF
	say "reminders: one dispatch pass (--once host) while the worker host's relay runs"
	t0=$(date +%s.%N)
	"${PIN_BENCH_ONCE_BIN:-$BIN/pin-host}" --mode worker --once --config "$CONF" \
		--plugins "$(worker_plugins)" --plugin-dir "${PIN_BENCH_ONCE_PLUGDIR:-$PLUGDIR}" \
		--pg-dsn "$PG_DSN" --kafka-bootstrap "@$BOOT" \
		>"$LOGS/bench-reminders-once.log" 2>&1 &
	once=$!
	b_rem_wait "SELECT 1 FROM calendar.event_reminders r JOIN calendar.calendar_events e
		ON e.id = r.calendar_event_id WHERE r.status = 'Pending' AND r.due_at < now()
		AND e.owner_user_id::text LIKE '$B_REM_OWNER%' LIMIT 1" "dispatch"
	t1=$(b_rem_pub_wait "end to end")
	# only the --once host: a stack this shell started is its child too
	wait "$once" || true
	read -r s_disp s_e2e < <(b_psql -tA -F' ' -c "SELECT
		round((extract(epoch FROM max(created_at)) - $t0)::numeric, 2),
		round(($t1 - $t0)::numeric, 2)
		FROM calendar.outbox WHERE key LIKE '$B_REM_EVENT%' AND topic = 'pin.calendar.reminder-due.v1'")
	[[ $(b_psql -tA -c "SELECT count(*) FROM calendar.outbox o WHERE key LIKE '$B_REM_EVENT%'
		AND topic = 'pin.calendar.reminder-due.v1' AND o.parked_at IS NULL
		AND calendar.outbox_sent(o)") -eq $n ]] ||
		die "reminders: not $n published reminder-due rows"
	# the reminders were due 1 h + offset ago when inserted: lateness counted from
	# the insert (t0), the moment they became due for this bench
	lat_p99=$(b_psql -tA -c "SELECT round(percentile_cont(0.99) WITHIN GROUP (ORDER BY
		extract(epoch FROM r.sent_at) - $t0)::numeric, 2)
		FROM calendar.event_reminders r JOIN calendar.calendar_events e ON e.id = r.calendar_event_id
		WHERE e.owner_user_id::text LIKE '$B_REM_OWNER%'")
	# judged against the seed's minute (seed 001: the source SLA of a
	# reminder is under a minute), not the cycle: the pass here starts at
	# t0, so lateness is the pass's own length
	cycle=60
	r_disp=$(awk -v n="$n" -v s="$s_disp" 'BEGIN { printf "%.0f", n / s }')
	r_e2e=$(awk -v n="$n" -v s="$s_e2e" 'BEGIN { printf "%.0f", n / s }')

	say "reminders: anchor, the relay alone on $n copies of the outbox rows"
	t0=$(b_psql -tA <<-EOF | tail -n 1
		BEGIN;
		INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at, traceparent)
		  SELECT m, topic, key, jsonb_set(envelope, '{messageId}', to_jsonb(m::text)), now(),
		    traceparent
		  FROM (SELECT gen_random_uuid() AS m, * FROM calendar.outbox
		        WHERE key LIKE '$B_REM_EVENT%' AND topic = 'pin.calendar.reminder-due.v1'
		        ORDER BY id LIMIT $n) AS x;
		SELECT extract(epoch FROM clock_timestamp());
		COMMIT;
	EOF
	)
	t1=$(b_rem_pub_wait "relay anchor")
	s_relay=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	r_relay=$(awk -v n="$n" -v s="$s_relay" 'BEGIN { printf "%.0f", n / s }')
	say "reminders: dispatch $r_disp/s (${s_disp} s), end to end $r_e2e/s (${s_e2e} s), relay alone $r_relay/s (${s_relay} s), lateness p99 ${lat_p99}s"

	ratio=$(b_div "$r_e2e" "$r_relay")
	b_ge "$cycle" "$lat_p99" || ok=false
	b_row reminders "end to end, $n due (dispatch + relay), lateness p99 ${lat_p99} s" "$r_e2e" \
		"reminders/s" "relay alone, same rows" "$r_relay" "$ratio" \
		"lateness p99<=${cycle}s" "$ok"
	b_row reminders "dispatch job alone ($s_disp s)" "$r_disp" "reminders/s" \
		"relay alone, same rows" "$r_relay" "$(b_div "$r_disp" "$r_relay")" "-" true
	b_rem_clean
}
