# reminders.sh -- `./dev bench reminders`: the reminder dispatcher end to end
# (issue 13), against the relay alone draining the same number of rows in
# the same run.  Sourced by suite.sh (b_row, b_psql, b_div, b_ge).
#
#   1. N due Pending reminders (N/2 events x 2, written in SQL; the events
#      started an hour ago, so notify's consumer skips the reminder-due
#      messages as stale and does not load the machine with a fan-out);
#   2. one `reminder-dispatch` pass in a --once worker host while the
#      running worker host's relay publishes: "dispatch" = until every
#      reminder is Sent, "end to end" = until every outbox row of them is
#      published; lateness p99 = sent_at - due_at over the rows (a pass
#      takes them all, so it must stay within one dispatch cycle,
#      job.reminder-dispatch.interval_ms, 60 s by default);
#   3. anchor: N copies of those outbox rows (new messageIds) inserted in
#      SQL, the relay alone draining them.
#
# Knob: PIN_BENCH_REMINDERS_N (100000).  Target: end to end >= 20k/s.

b_rem_wait() {    # b_rem_wait SQL N T0: polls SQL (a count) until >= N; prints seconds
	local got
	while :; do
		got=$(b_psql -tA -c "$1")
		((got >= $2)) && break
		awk -v a="$3" -v b="$(date +%s.%N)" 'BEGIN { exit !(b - a > 900) }' &&
			die "reminders: only $got of $2 after 900 s ($1)"
		sleep 0.1
	done
	awk -v a="$3" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

b_rem_clean() {
	b_psql <<-EOF >/dev/null
		DELETE FROM calendar.calendar_events WHERE owner_user_id::text LIKE 'b0000000-0000-4000-800f-%';
		DELETE FROM calendar.outbox WHERE key LIKE 'b0000000-0000-4000-8010-%'
		  AND published_at IS NOT NULL;
	EOF
}

bench_reminders() {
	local n=${PIN_BENCH_REMINDERS_N:-100000} ev t0 s_disp s_e2e s_relay lat_p99 cycle
	local r_disp r_e2e r_relay ratio ok=true once
	ev=$((n / 2))
	b_rem_clean
	say "reminders: $ev events x 2 due reminders (SQL)"
	b_psql <<-EOF >/dev/null
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin,
		    title, start_at, end_at, time_zone, created_at, updated_at)
		  SELECT ('b0000000-0000-4000-8010-' || lpad(to_hex(i), 12, '0'))::uuid, '$B_T',
		    ('b0000000-0000-4000-800f-' || lpad((i % 500)::text, 12, '0'))::uuid,
		    'Meeting', 'Manual', 'Reminder bench', now() - interval '1 hour',
		    now() - interval '30 minutes', 'Europe/Moscow', now(), now()
		  FROM generate_series(1, $ev) AS i;
		INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes, due_at,
		    status, created_at, updated_at)
		  SELECT gen_random_uuid(), ('b0000000-0000-4000-8010-' || lpad(to_hex(i), 12, '0'))::uuid,
		    o, now() - interval '1 hour' - o * interval '1 minute' + (i % 1000) * interval '1 ms',
		    'Pending', now(), now()
		  FROM generate_series(1, $ev) AS i, unnest(ARRAY[60, 1440]) AS o;
		ANALYZE calendar.event_reminders;
	EOF
	say "reminders: one dispatch pass (--once host) while the worker host's relay runs"
	t0=$(date +%s.%N)
	"$BIN/pin-host" --mode worker --once --config "$CONF" --plugins "$(worker_plugins)" \
		--plugin-dir "$PLUGDIR" --pg-dsn "$PG_DSN" --kafka-bootstrap "@$BOOT" \
		>"$LOGS/bench-reminders-once.log" 2>&1 &
	once=$!
	s_disp=$(b_rem_wait "SELECT count(*) FROM calendar.event_reminders r JOIN
		calendar.calendar_events e ON e.id = r.calendar_event_id
		WHERE e.owner_user_id::text LIKE 'b0000000-0000-4000-800f-%' AND r.status = 'Sent'" "$n" "$t0")
	s_e2e=$(b_rem_wait "SELECT count(*) FROM calendar.outbox WHERE key LIKE
		'b0000000-0000-4000-8010-%' AND topic = 'pin.calendar.reminder-due.v1'
		AND published_at IS NOT NULL" "$n" "$t0")
	# only the --once host: a stack this shell started is its child too
	wait "$once" || true
	# the reminders were due 1 h + offset ago when inserted: lateness counted from
	# the insert (t0), the moment they became due for this bench
	lat_p99=$(b_psql -tA -c "SELECT round(percentile_cont(0.99) WITHIN GROUP (ORDER BY
		extract(epoch FROM r.sent_at) - $t0)::numeric, 2)
		FROM calendar.event_reminders r JOIN calendar.calendar_events e ON e.id = r.calendar_event_id
		WHERE e.owner_user_id::text LIKE 'b0000000-0000-4000-800f-%'")
	cycle=$(sed -n 's/^job\.reminder-dispatch\.interval_ms *= *\([0-9]*\).*/\1/p' "$CONF")
	cycle=$(awk -v ms="${cycle:-60000}" 'BEGIN { printf "%.0f", ms / 1000 }')
	r_disp=$(awk -v n="$n" -v s="$s_disp" 'BEGIN { printf "%.0f", n / s }')
	r_e2e=$(awk -v n="$n" -v s="$s_e2e" 'BEGIN { printf "%.0f", n / s }')

	say "reminders: anchor, the relay alone on $n copies of the outbox rows"
	t0=$(date +%s.%N)
	b_psql <<-EOF >/dev/null
		INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)
		  SELECT m, topic, key, jsonb_set(envelope, '{messageId}', to_jsonb(m::text)), now()
		  FROM (SELECT gen_random_uuid() AS m, * FROM calendar.outbox
		        WHERE key LIKE 'b0000000-0000-4000-8010-%' AND topic = 'pin.calendar.reminder-due.v1'
		        ORDER BY id LIMIT $n) AS x;
	EOF
	s_relay=$(b_rem_wait "SELECT count(*) FROM calendar.outbox WHERE key LIKE
		'b0000000-0000-4000-8010-%' AND topic = 'pin.calendar.reminder-due.v1'
		AND published_at IS NOT NULL" $((2 * n)) "$t0")
	r_relay=$(awk -v n="$n" -v s="$s_relay" 'BEGIN { printf "%.0f", n / s }')
	say "reminders: dispatch $r_disp/s, end to end $r_e2e/s, relay alone $r_relay/s, lateness p99 ${lat_p99}s"

	ratio=$(b_div "$r_e2e" "$r_relay")
	b_ge "$r_e2e" 20000 || ok=false
	b_ge "$cycle" "$lat_p99" || ok=false
	b_row reminders "end to end, $n due (dispatch + relay), lateness p99 ${lat_p99} s" "$r_e2e" \
		"reminders/s" "relay alone, same rows" "$r_relay" "$ratio" \
		">=20000/s, lateness p99<=${cycle}s" "$ok"
	b_row reminders "dispatch job alone ($s_disp s)" "$r_disp" "reminders/s" \
		"relay alone, same rows" "$r_relay" "$(b_div "$r_disp" "$r_relay")" "-" true
	b_rem_clean
}
