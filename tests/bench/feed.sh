# feed.sh -- `./dev bench feed`: the agent's iCalendar feed (issue 32;
# doc/performance.md "Calendar feed").  Sourced by suite.sh.  An agent with
# 2,000 events in the feed's window (60 days back .. 366 ahead; one every 4 h
# from 50 days back, a fifth of them with a location and a description), a
# feed token through the API, then through nginx (its per-token limit lifted,
# as ./dev bench lifts the public area's):
#   - time to first byte and size of a full answer (200, the text built with
#     libical): PIN_BENCH_FEED_FETCHES (20) sequential fetches with curl, the
#     median and the worst;
#   - the 304 rate: wrk with If-None-Match = the feed's ETag (one token lookup
#     and one aggregate query per request, no text);
#   - the 200 rate: wrk without it at 4 connections (each request builds the
#     whole feed).
B_FEED=b0000000-0000-4000-8000-0000000000f1   # feed agent

bench_feed() {
	local tok url etag n=${PIN_BENCH_FEED_FETCHES:-20} i t s out=$STATE/bench/feed
	mkdir -p "$out"
	grep -q "zone=pin_feed:10m rate=${PIN_FEED_RATE:-x};" "$STATE/nginx.conf" 2>/dev/null ||
		die "the running nginx limits the feeds: ./dev down, then ./dev bench"
	say "feed: 2000 events of one agent in the feed's window (SQL)"
	b_psql <<-EOF
		DELETE FROM calendar.feed_tokens WHERE user_id = '$B_FEED';
		DELETE FROM calendar.calendar_events WHERE owner_user_id = '$B_FEED';
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin,
		    title, description, location, start_at, end_at, time_zone, created_at, updated_at,
		    status, cancelled_at)
		  SELECT gen_random_uuid(), '$B_T', '$B_FEED', 'Meeting', 'Manual',
		    'Показ квартиры ' || i || ', корпус 2',
		    CASE WHEN i % 5 = 0 THEN 'Встреча с клиентом; обсудить условия, ипотеку и сроки сделки' END,
		    CASE WHEN i % 5 = 0 THEN 'Москва, Тверская ул., д. ' || i END,
		    date_trunc('hour', now()) - interval '50 days' + i * interval '4 hours',
		    date_trunc('hour', now()) - interval '50 days' + i * interval '4 hours' + interval '1 hour',
		    'Europe/Moscow', now(), now(), CASE WHEN i % 50 = 0 THEN 'Cancelled' ELSE 'Planned' END,
		    CASE WHEN i % 50 = 0 THEN now() END
		  FROM generate_series(1, 2000) AS i;
		ANALYZE calendar.calendar_events;
	EOF
	tok=$(python3 "$BENCH_DIR/mint.py" "$(secret_file)" agent 1 --sub "$B_FEED" \
		--tenant "$B_T" --perm calendar.events.view | cut -d' ' -f2)
	url=$(curl -sf -X POST -H "Authorization: Bearer $tok" \
		"$BASE_URL/api/v1/agent/calendar/feed-token" | python3 -c 'import json,sys; print(json.load(sys.stdin)["feedUrl"])') ||
		die "feed-token: POST failed"
	url=$BASE_URL/calendar/feeds/${url##*/calendar/feeds/}
	curl -sf -D "$out/headers" -o "$out/feed.ics" "$url" || die "feed: GET failed"
	etag=$(awk 'tolower($1) == "etag:" { print $2 }' "$out/headers" | tr -d '\r')
	[[ $(grep -c '^BEGIN:VEVENT' "$out/feed.ics") == 2000 ]] ||
		die "feed: $(grep -c '^BEGIN:VEVENT' "$out/feed.ics") VEVENTs, not 2000"
	: >"$out/ttfb"
	for ((i = 0; i < n; i++)); do
		curl -sf -o /dev/null -w '%{time_starttransfer} %{size_download}\n' "$url" >>"$out/ttfb" ||
			die "feed: GET failed"
	done
	t=$(awk '{ print $1 * 1000 }' "$out/ttfb" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] }')
	local worst
	worst=$(awk '{ print $1 * 1000 }' "$out/ttfb" | sort -n | tail -n 1 | awk '{ printf "%.1f", $1 }')
	s=$(awk 'NR == 1 { print $2 }' "$out/ttfb")
	say "feed: $n fetches: time to first byte median $t ms, worst $worst ms; $s bytes"
	b_row feed "time to first byte, 2000 events (median of $n; worst $worst ms)" "$t" ms \
		"-" null null "-" true
	b_row feed "size of the feed, 2000 events" "$s" bytes "-" null null "-" true
	b_wrk "$url" -H "If-None-Match: $etag"
	say "feed: 304 rate $W_RPS/s (p50 $W_P50 ms, p99 $W_P99 ms, bad $W_BAD)"
	b_row feed "If-None-Match -> 304, 2000 events" "$W_RPS" "req/s" "-" null null "-" \
		"$([[ $W_BAD == 0 ]] && echo true || echo false)" "$W_P50" "$W_P99"
	# each answer is ~0.6 MB built on the spot: 4 connections, not 32 (at 32 the
	# queue behind the two cores passes wrk's 2 s timeout)
	PIN_BENCH_CONNECTIONS=4 b_wrk "$url" --timeout 10s
	say "feed: 200 rate $W_RPS/s (p50 $W_P50 ms, p99 $W_P99 ms, bad $W_BAD)"
	b_row feed "full answer (200), 2000 events" "$W_RPS" "req/s" "-" null null "-" \
		"$([[ $W_BAD == 0 ]] && echo true || echo false)" "$W_P50" "$W_P99"
	curl -sf -X DELETE -H "Authorization: Bearer $tok" "$BASE_URL/api/v1/agent/calendar/feed-token" >/dev/null || true
}
