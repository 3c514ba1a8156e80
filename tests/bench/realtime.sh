# realtime.sh -- `./dev bench realtime`: in-app notifications in real time
# under 1,000 EventSource subscribers (issue 31 item 2).  Sourced by
# suite.sh (b_row, b_psql, b_ge).
#
#   1. PIN_BENCH_RT_SUBS (1000) users b0000000-0000-4000-8020-<k>, new ones
#      each run (k from a per-run base: a user of an earlier run would first
#      be sent the up to 50 messages its channel still buffers), a JWT each
#      (mint.py: the claims of ./dev token), subscribed through the client
#      path of doc/api.md by tools/pin-benchsse (one libcurl multi, one
#      thread): POST /api/v1/me/notifications/stream-ticket, then GET the
#      streamUrl with Accept: text/event-stream through nginx (nchan, its
#      auth subrequest to the API host);
#   2. once every stream is open: pgbench -R PIN_BENCH_RT_RATE (200/s) for
#      PIN_BENCH_RT_SECS (30 s) commits one InApp row per transaction for a
#      random subscribed user (realtime.sql; created_at = clock_timestamp()
#      at the INSERT, the commit follows within the same autocommit
#      statement); the running worker host's inapp-publish job pushes them;
#   3. half-way, the reconnect step: every 10th subscriber (100) closes its
#      stream and after PIN_BENCH_RT_GAP_MS (3000) reopens the same streamUrl
#      with Last-Event-ID: <its last id>, as EventSource does;
#   4. once every row is published (and 2 s more), the subscriber program
#      writes each event it got: subscriber, arrival (unix us), notification
#      id.  SQL over those and the rows: commit -> arrival p50/p99/max of the
#      first arrival of each row at its own recipient's stream (rows committed
#      while their recipient was closed for the reconnect step are counted
#      apart: those not received before the close and committed before the
#      reopen wait for the reopen by design), delivered / expected
#      (duplicates counted, not failures), the missed rows of the reconnect
#      step and how many of them arrived on the resumed stream, and the part
#      of the latency spent before the publisher's pass took the row
#      (published_at is the pass's start).
# The subscriber program's CPU time against the wall time is printed with
# the figures: a share well below one core means the client kept up.
# Knobs: PIN_BENCH_RT_SUBS (1000), PIN_BENCH_RT_RATE (200 rows/s),
# PIN_BENCH_RT_SECS (30), PIN_BENCH_RT_GAP_MS (3000).
# Targets (--check): p99 < 1 s, nothing lost, every missed event resumed.

B_RT_USER='b0000000-0000-4000-8020-'

b_rt_clean() {
	b_psql <<-EOF >/dev/null
		DELETE FROM notifications.outbox o WHERE calendar.outbox_sent(o) AND key IN
		  (SELECT id::text FROM notifications.notifications WHERE source_event_type = 'bench-rt');
		DELETE FROM notifications.notifications WHERE source_event_type = 'bench-rt';
	EOF
	b_vacuum notifications.notifications
}

bench_realtime() {
	local n=${PIN_BENCH_RT_SUBS:-1000} rate=${PIN_BENCH_RT_RATE:-200} secs=${PIN_BENCH_RT_SECS:-30}
	local gap=${PIN_BENCH_RT_GAP_MS:-3000} d=$STATE/bench sse pid t0 ready summary got first
	first=$(($(date +%s) % 100000 * 10000))
	local exp deliv lost dups p50 p99 pmax w50 w99 gmiss gdel gres cpu wall share ok=true
	mkdir -p "$d"
	b_rt_clean
	say "realtime: $n subscribers (ticket + EventSource through nginx)"
	python3 "$BENCH_DIR/mint.py" "$(secret_file)" agent "$n" --tenant "$B_T" \
		--sub-prefix "$B_RT_USER" --sub-first "$first" >"$d/rt.tokens"
	rm -f "$d/rt.events" "$d/rt.events.gaps" "$d/rt.ready"
	"$BUILD/tools/pin-benchsse" "$BASE_URL" "$d/rt.tokens" "$d/rt.events" \
		--gap-ms "$gap" >"$d/rt.ready" 2>"$d/rt.log" &
	sse=$!
	t0=$SECONDS
	until grep -q '^ready' "$d/rt.ready" 2>/dev/null; do
		kill -0 "$sse" 2>/dev/null || die "realtime: pin-benchsse ended: $(tail -n 5 "$d/rt.log")"
		((SECONDS - t0 < 180)) || { kill "$sse"; die "realtime: streams not open after 180 s"; }
		sleep 0.2
	done
	ready=$(cat "$d/rt.ready")
	say "realtime: $ready streams open after $((SECONDS - t0)) s; $rate rows/s for $secs s"
	cat >"$d/realtime.sql" <<-EOF
		\\set k random($first, $((first + n - 1)))
		INSERT INTO notifications.notifications (id, recipient_user_id, tenant_id, kind, channel,
		  urgency, role, title, body, deep_link, payload, locale, source_message_id,
		  source_event_type, created_at)
		VALUES (gen_random_uuid(), ('$B_RT_USER' || lpad(:k::text, 12, '0'))::uuid, '$B_T',
		  'CalendarReminder', 'InApp', 'Normal', 'Owner', 'Bench reminder',
		  'Showing at 10:00', '/calendar', '{}', 'ru', gen_random_uuid(), 'bench-rt',
		  clock_timestamp());
	EOF
	"$PGBIN/pgbench" -n -c 4 -j 2 -R "$rate" -T "$secs" -f "$d/realtime.sql" "$PG_DSN" \
		>"$d/rt.pgbench" 2>&1 &
	pid=$!
	sleep $((secs / 2))
	kill -USR1 "$sse"
	wait "$pid" || die "realtime: pgbench failed: $(tail -n 5 "$d/rt.pgbench")"
	t0=$SECONDS
	while [[ -n $(b_psql -tA -c "SELECT 1 FROM notifications.notifications WHERE channel = 'InApp'
			AND published_at IS NULL AND source_event_type = 'bench-rt' LIMIT 1") ]]; do
		((SECONDS - t0 < 120)) || break
		sleep 0.2
	done
	sleep 2
	kill -TERM "$sse"
	wait "$sse" || true
	summary=$(tail -n 1 "$d/rt.log")
	say "realtime: $summary"
	read -r cpu wall < <(sed -n 's/.* cpu \([0-9.]*\) s wall \([0-9.]*\) s$/\1 \2/p' <<<"$summary")
	share=$(awk -v c="${cpu:-0}" -v w="${wall:-1}" 'BEGIN { printf "%.3f", c / w }')
	read -r exp deliv lost dups p50 p99 pmax w50 w99 gmiss gdel gres < <(b_psql -tA -F' ' <<-EOF
		CREATE TEMP TABLE rt_arr (idx int, usr uuid, at_us bigint, ntf uuid, resumed int);
		CREATE TEMP TABLE rt_gap (idx int, usr uuid, closed_us bigint, reopen_us bigint);
		\\copy rt_arr FROM '$d/rt.events'
		\\copy rt_gap FROM '$d/rt.events.gaps'
		CREATE TEMP TABLE rt_row AS
		  SELECT n.id, (extract(epoch FROM n.created_at) * 1e6)::bigint AS c_us,
		    (extract(epoch FROM n.published_at) * 1e6)::bigint AS p_us,
		    min(a.at_us) AS first_us, count(a.ntf) AS cnt,
		    bool_or(a.resumed = 1) AS got_resumed,
		    -- away: its recipient's stream was closed for the reconnect step
		    -- before the row reached it and the row committed before the reopen
		    EXISTS (SELECT 1 FROM rt_gap g WHERE g.usr = n.recipient_user_id
		      AND (extract(epoch FROM n.created_at) * 1e6)::bigint < g.reopen_us
		      AND coalesce(min(a.at_us), g.closed_us) >= g.closed_us) AS in_gap
		  FROM notifications.notifications n
		  LEFT JOIN rt_arr a ON a.ntf = n.id AND a.usr = n.recipient_user_id
		  WHERE n.source_event_type = 'bench-rt'
		  GROUP BY n.id;
		SELECT count(*), count(*) FILTER (WHERE cnt > 0), count(*) FILTER (WHERE cnt = 0),
		  coalesce(sum(greatest(cnt - 1, 0)), 0),
		  round((percentile_cont(0.5) WITHIN GROUP (ORDER BY (first_us - c_us) / 1000.0)
		    FILTER (WHERE NOT in_gap))::numeric, 1),
		  round((percentile_cont(0.99) WITHIN GROUP (ORDER BY (first_us - c_us) / 1000.0)
		    FILTER (WHERE NOT in_gap))::numeric, 1),
		  round((max((first_us - c_us) / 1000.0) FILTER (WHERE NOT in_gap))::numeric, 1),
		  round((percentile_cont(0.5) WITHIN GROUP (ORDER BY (p_us - c_us) / 1000.0)
		    FILTER (WHERE NOT in_gap))::numeric, 1),
		  round((percentile_cont(0.99) WITHIN GROUP (ORDER BY (p_us - c_us) / 1000.0)
		    FILTER (WHERE NOT in_gap))::numeric, 1),
		  count(*) FILTER (WHERE in_gap), count(*) FILTER (WHERE in_gap AND cnt > 0),
		  count(*) FILTER (WHERE in_gap AND got_resumed)
		FROM rt_row;
	EOF
	)
	say "realtime: commit -> event p50 $p50 ms, p99 $p99 ms, max $pmax ms (publisher's pass began after p50 $w50 / p99 $w99 ms); delivered $deliv of $exp, $dups duplicates; reconnect: $gres of $gmiss missed events resumed ($gdel delivered); subscriber program $cpu s CPU in $wall s"
	[[ -n $exp && $exp -gt 0 ]] || die "realtime: no rows measured"
	got=$(awk -v e="$exp" -v s="$secs" 'BEGIN { printf "%.0f", e / s }')
	b_ge 1000 "$p99" && ! b_ge "$p99" 1000 || ok=false
	b_row realtime "commit -> event at the subscriber, $n subscribers, $got rows/s committed (asked $rate) x $secs s, max $pmax ms (publisher's pass after p50 $w50 / p99 $w99 ms)" \
		"$p99" "ms p99" "-" "" "" "p99<1000ms" "$ok" "$p50" "$p99"
	ok=true
	((lost == 0)) || ok=false
	b_row realtime "delivered / committed ($dups duplicates, not failures)" "$deliv" "events" \
		"committed rows" "$exp" "$(b_div "$deliv" "$exp")" "lost=0" "$ok"
	ok=true
	((gmiss > 0 && gres == gmiss && gdel == gmiss)) || ok=false
	b_row realtime "reconnect: $((n / 10)) subscribers away ${gap} ms, back with Last-Event-ID: missed events resumed" \
		"$gres" "events" "missed while away" "$gmiss" "$(b_div "$gres" "$gmiss")" "all resumed" "$ok"
	b_row realtime "subscriber program (one thread): CPU s / wall s" "$share" "cores" "-" "" "" "-" true
	b_rt_clean
}
