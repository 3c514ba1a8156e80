# relay.sh -- `./dev bench relay` and `./dev bench relay-scale`:
# the outbox relay of the worker host(s) against a raw librdkafka producer of
# the same rows' bytes to the same dev broker, in the same run.
#
# N rows (PIN_BENCH_RELAY_ROWS, 100000) of event-created envelopes (the
# contract's payload: ids, kind, status, times, no PII; ~960 bytes) are written
# into calendar.outbox in ONE transaction (SQL, topic pin.bench.relay.v1,
# which nothing consumes), so every row becomes visible at the commit; the
# figure is N / (max(published_at) - the commit), or when the worker hosts
# relay by the cursor (relay_cursor, the default) N / (the last move of the
# shards' cursors past their last bench row - the commit); the target: at least 0.5 of the anchor (issue 31).  The anchor,
# tools/pin-benchproduce, reads the same rows (topic, key, envelope)
# into memory first and produces them with the relay's producer settings.
# Printed beside it: the CPU of the relay's read alone (b_relay_read_alone).
# relay-scale repeats the drain with 1, 2 and 3 worker hosts (extra
# `pin-host --mode worker` processes with the stack's config, no metrics
# listener), after the shards were shared out.
# Sourced by suite.sh (helpers b_psql, b_row, b_div, b_ge).

B_RELAY_TOPIC=pin.bench.relay.v1

# b_relay_fill N: writes N bench rows; prints the commit's epoch seconds.
# With relay_cursor, each shard's last bench row (one transaction: one xid)
# goes to $B_RELAY_WANT, computed before the commit so that the drain's
# polls only read the cursors.
B_RELAY_SHARDS=4
B_RELAY_WANT=${TMPDIR:-/tmp}/pin-bench-relay-want.$$
b_relay_fill() {
	b_psql -tA <<-EOF | tee >(sed -n 's/^want://p' >"$B_RELAY_WANT") | tail -n 1
		DELETE FROM calendar.outbox WHERE topic = '$B_RELAY_TOPIC';
		BEGIN;
		INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)
		  SELECT m, '$B_RELAY_TOPIC', e::text, jsonb_build_object(
		    'messageId', m, 'eventType', 'pin.calendar.event-created',
		    'contractVersion', 1, 'createdAt', to_char(now() AT TIME ZONE 'UTC',
		      'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
		    'aggregateType', 'CalendarEvent', 'aggregateId', e,
		    'correlationId', replace(gen_random_uuid()::text, '-', ''),
		    'payload', jsonb_build_object('eventId', e, 'tenantId', gen_random_uuid(),
		      'ownerUserId', gen_random_uuid(), 'kind', 'Showing', 'origin', 'Manual',
		      'status', 'Planned', 'priority', 'Normal',
		      'startAt', '2027-01-15T09:00:00.000Z', 'endAt', '2027-01-15T10:00:00.000Z',
		      'timeZone', 'Europe/Moscow', 'clientUserId', gen_random_uuid(),
		      'leadId', NULL, 'dealId', gen_random_uuid(), 'bookingId', NULL,
		      'projectId', NULL, 'propertyObjectId', gen_random_uuid(),
		      'appointmentId', NULL, 'createdByUserId', gen_random_uuid())),
		    clock_timestamp()
		  FROM (SELECT i, gen_random_uuid() AS m, gen_random_uuid() AS e
		        FROM generate_series(1, $1) AS i) s;
		SELECT 'want:' || coalesce((SELECT string_agg(format('(%s,%L::xid8,%s)', s, x, i), ',')
		  FROM (SELECT (hashtext(key) & 2147483647) % $B_RELAY_SHARDS AS s, max(xid) AS x, max(id) AS i
		        FROM calendar.outbox WHERE topic = '$B_RELAY_TOPIC' GROUP BY 1) t), '')
		  WHERE $( b_relay_cursor && echo true || echo false);
		SELECT extract(epoch FROM clock_timestamp());
		COMMIT;
	EOF
}

# The drains poll once a second: the figure's end is the relay's own time
# (the last published_at, or the cursors' last moved_at), so the poll only
# finds that the drain is over.  Every poll is a new psql process and
# backend: at 5 a second they took ~10 % of the 2-core machine during a
# cursor drain (perf record -a, 2026-12-06, 7d05a28: psql, bash, awk and
# their backends), CPU the relay it measures did not get.
B_RELAY_POLL_S=1

# b_relay_drain_cursor N T0: cursor mode: waits until every shard's cursor
# reached the shard's last bench row (recorded by the fill: b_cursor_wait
# polls only the cursors); sets R_RATE and R_BYTES
b_relay_drain_cursor() {
	local n=$1 t0=$2 t1
	sleep 0.1     # the fill's tee writes the file
	t1=$(b_cursor_wait "$(cat "$B_RELAY_WANT")" "relay bench: $n rows")
	R_BYTES=$(b_psql -tA -c "SELECT round(avg(octet_length(envelope::text))) FROM calendar.outbox
		WHERE topic = '$B_RELAY_TOPIC'")
	R_RATE=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b > a ? n / (b - a) : 0) }')
}

# b_relay_drain N: fills, waits until the relay published every row; sets
# R_RATE (rows/s) and R_BYTES (mean envelope bytes)
b_relay_drain() {
	local n=$1 t0 t1 left deadline=$((SECONDS + 600))
	t0=$(b_relay_fill "$n")
	if b_relay_cursor; then
		b_relay_drain_cursor "$n" "$t0"
		return
	fi
	# "is a row left" (LIMIT 1 over the partial index of unpublished rows),
	# not count(*): the count walked every unpublished row and took 0.25-0.3 s,
	# so polled every 0.2 s it kept a backend busy ~60 % of the drain -- most of
	# a core of a 2-core machine taken from the relay it measures (doc/performance.md
	# "Noise: repeats, settling, alternated runs")
	while :; do
		left=$(b_psql -tA -c "SELECT 1 FROM calendar.outbox WHERE published_at IS NULL
			AND parked_at IS NULL AND topic = '$B_RELAY_TOPIC' LIMIT 1") ||
			die "relay bench: the poll failed"
		[[ -n $left ]] || break
		((SECONDS < deadline)) || die "relay bench: rows of $n unpublished after 600 s"
		sleep "$B_RELAY_POLL_S"
	done
	read -r t1 R_BYTES < <(b_psql -tA -F' ' -c "SELECT extract(epoch FROM max(published_at)),
		round(avg(octet_length(envelope::text))) FROM calendar.outbox WHERE topic = '$B_RELAY_TOPIC'")
	R_RATE=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b > a ? n / (b - a) : 0) }')
}

# b_relay_anchor: the raw producer of the rows just written; sets R_ANCHOR
b_relay_anchor() {
	local out
	out=$("$BUILD/tools/pin-benchproduce" --pg-dsn "$PG_DSN" --bootstrap "@$BOOT" \
		--sql "SELECT topic, key, envelope::text FROM calendar.outbox
		       WHERE topic = '$B_RELAY_TOPIC' ORDER BY id") || die "pin-benchproduce failed: $out"
	R_ANCHOR=$(sed -n 's/.*rows_per_s=\([0-9]*\).*/\1/p' <<<"$out")
}

# b_relay_read_alone: what the relay's own read of 1,000 of these rows costs,
# warm, by pin-benchpq (the relay's statement, shard 0 from its first bench
# row, 300 times after 200 to warm up): CPU a row in the backend and in the
# client, and the rows a second that much CPU allows on this machine's cores
# with nothing else to do.  Printed, not judged (doc/performance.md "The
# relay's commit-ordered cursor").  Cursor mode only (marking has marked
# the rows).  The statement is batch_read's (host/worker/relay_batch.c) for
# calendar.outbox and 4 shards, kept by hand: the code builds it with
# snprintf, which check-sql.sh cannot compare.  Sets R_READ (rows/s, 0: not measured) and R_READ_US ("B + C").
b_relay_read_alone() {
	local x="" id="" f out b c rows
	R_READ=0
	b_relay_cursor || return 0
	read -r x id < <(b_psql -tA -F' ' -c "SELECT xid, min(id) - 1 FROM calendar.outbox
		WHERE topic = '$B_RELAY_TOPIC' GROUP BY xid ORDER BY 2 LIMIT 1") || true
	[[ -n $x && -n $id ]] || { say "relay: no bench rows left for the read alone"; return 0; }
	f=$(mktemp)
	cat >"$f" <<-EOF
		SELECT o.id, o.topic, o.key, o.envelope::text, o.attempts, o.traceparent,
		  o.message_id, o.xid::text AS x FROM calendar.outbox o
		WHERE (hashtext(o.key) & 2147483647) % $B_RELAY_SHARDS = \$4::int
		  AND (o.xid, o.id) > (\$2::xid8, \$3::bigint)
		  AND o.xid < pg_snapshot_xmin(pg_current_snapshot()) AND o.parked_at IS NULL
		  AND o.published_at IS NULL ORDER BY o.xid, o.id LIMIT \$1::int
	EOF
	# the planner settings of the relay's sessions (relay_lead.c)
	out=$(PGOPTIONS="-c enable_seqscan=off -c enable_bitmapscan=off -c enable_sort=off -c plan_cache_mode=force_generic_plan -c jit=off" \
		"$BUILD/tools/pin-benchpq" --pg-dsn "$PG_DSN" --sql-file "$f" -n 300 \
		-- 1000 "$x" "$id" 0) || out=""
	rm -f "$f"
	rows=$(sed -n 's/.*rows=\([0-9]*\).*/\1/p' <<<"$out")
	b=$(sed -n 's/.*backend_us=\([0-9.]*\).*/\1/p' <<<"$out")
	c=$(sed -n 's/.*client_us=\([0-9.]*\).*/\1/p' <<<"$out")
	if [[ -z $rows || $rows == 0 || -z $b || -z $c ]]; then
		say "relay: the read alone was not measured (pin-benchpq: ${out:-failed})"
		return 0
	fi
	R_READ_US=$(awk -v b="$b" -v c="$c" -v n="$rows" 'BEGIN { printf "%.1f + %.1f", b / n, c / n }')
	R_READ=$(awk -v b="$b" -v c="$c" -v n="$rows" -v k="$(nproc)" \
		'BEGIN { printf "%.0f", (b + c > 0 ? k * 1e6 * n / (b + c) : 0) }')
}

b_relay_rows() { echo "${PIN_BENCH_RELAY_ROWS:-100000}"; }

bench_relay() {
	local n ratio ok=true mode
	n=$(b_relay_rows)
	say "relay: $n outbox rows in one transaction, drained by the worker host"
	b_relay_drain "$n"
	b_relay_anchor
	ratio=$(b_div "$R_RATE" "$R_ANCHOR")
	# issue 31 item 3: at least half the raw producer on the same rows
	b_ge "$ratio" 0.5 || ok=false
	mode=marking
	b_relay_cursor && mode=cursor
	b_row relay "drain $n rows (${R_BYTES}-byte envelopes), 1 worker host, $mode" "$R_RATE" "rows/s" \
		"raw librdkafka producer $R_ANCHOR rows/s" "$R_ANCHOR" "$ratio" ">=0.50 of raw" "$ok"
	b_relay_read_alone
	((R_READ > 0)) && b_row relay "drain $n rows against the CPU of its read alone (printed)" \
		"$R_RATE" "rows/s" "the relay's read alone: $R_READ_US µs a row (backend + client); $(nproc) cores allow $R_READ rows/s" \
		"$R_READ" "$(b_div "$R_RATE" "$R_READ")" "-" true
	b_psql -c "DELETE FROM calendar.outbox WHERE topic = '$B_RELAY_TOPIC'" >/dev/null
	b_vacuum calendar.outbox
}

# b_relay_hosts K: extra worker hosts until K run (the stack's is one);
# their pids in B_RELAY_PIDS
B_RELAY_PIDS=()
b_relay_hosts() {
	local want=$1 i
	for ((i = ${#B_RELAY_PIDS[@]} + 1; i < want; i++)); do
		PIN_METRICS_LISTEN="" PIN_METRICS_TEXTFILE="" "$BIN/pin-host" --mode worker \
			--config "$CONF" --plugins "$(worker_plugins)" --plugin-dir "$PLUGDIR" \
			--pg-dsn "$PG_DSN" --kafka-bootstrap "@$BOOT" >>"$LOGS/worker-bench-$i.log" 2>&1 &
		B_RELAY_PIDS+=($!)
	done
	# every host holds its share: calendar.outbox's shard locks held by K
	# hosts (application_name 'pin-relay <pid>' of the relay's sessions)
	local deadline=$((SECONDS + 30)) owners
	while :; do
		owners=$(b_psql -tA -c "SELECT count(DISTINCT a.application_name) FROM pg_locks l
			JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted
			AND l.classid = (hashtext('pin.relay:calendar.outbox') & 2147483647)::oid")
		((owners >= want)) && break
		((SECONDS < deadline)) || { say "relay-scale: only $owners of $want hosts lead shards"; break; }
		sleep 0.5
	done
}

b_relay_hosts_stop() {
	local p
	for p in "${B_RELAY_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${B_RELAY_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	B_RELAY_PIDS=()
}

bench_relay_scale() {
	local n k one="" ratio
	n=$(b_relay_rows)
	trap b_relay_hosts_stop RETURN
	for k in 1 2 3; do
		b_relay_hosts "$k"
		say "relay-scale: $n rows, $k worker host(s)"
		b_relay_drain "$n"
		[[ -n $one ]] || one=$R_RATE
		ratio=$(b_div "$R_RATE" "$one")
		b_row relay-scale "drain $n rows, $k worker host(s)" "$R_RATE" "rows/s" \
			"1 worker host $one rows/s" "$one" "$ratio" "-" true
	done
	b_relay_anchor
	b_row relay-scale "raw librdkafka producer (anchor)" "$R_ANCHOR" "rows/s" "-" "" "" "-" true
	b_psql -c "DELETE FROM calendar.outbox WHERE topic = '$B_RELAY_TOPIC'" >/dev/null
	b_vacuum calendar.outbox
}
