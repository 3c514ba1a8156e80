# consumers.sh -- `./dev bench consumers`: how fast the worker host's
# consumers apply real messages, each against a raw librdkafka
# consumer reading the same topic in the same run (pin-benchconsume).
#
# Per consumer: N envelopes of the real topic (valid payloads, distinct
# messageIds in a bench range, keys spread over the partitions) are produced
# to the dev broker while the worker hosts are stopped (SIGSTOP); the figure
# is N / (time from their SIGCONT until the group's inbox holds all N rows):
# the drain of a backlog, as the raw consumer's anchor is.  The effects are
# counted in PostgreSQL afterwards.  Sourced by suite.sh (b_row, b_psql, b_div, b_ge).
#
#   identity         pin.identity.users.v1 -> calendar-identity-users
#                    (calendar.user_replicas upserts; notify's contact
#                    consumer reads the same topic at the same time)
#   crm booking      pin.crm.booking-created.v1 -> calendar-crm-booking-events
#                    (link + BookingDeadline event + reminders + outbox)
#   notify fan-out   pin.calendar.reminder-due.v1 -> notifications-calendar-events
#                    (owner + client x InApp/Email/Sms rows)
#
# Knobs: PIN_BENCH_IDENTITY_N (30000), PIN_BENCH_CRM_N (10000),
# PIN_BENCH_NOTIFY_N (5000), PIN_BENCH_CONSUMERS (which: "identity crm notify").
#
# Targets (issue 31 item 3): a consumer reaches >= 0.7 of its serial limit,
# 1 / (1/raw consumer + 1/its statements): the raw librdkafka consumer on the
# same topic and one pgbench client running the handler's own statements in
# batches of consumer_batch_set_max (500) messages (identity.sql, crm.sql).
# The absolute rates are printed, never judged.  The notify fan-out has no
# statement anchor yet (its batch sends statements built in several files):
# its row shows the ratio to the raw consumer only, with no target.

BC_TOOL() { echo "$BUILD/tools/pin-benchconsume"; }

# b_consume_run NAME INBOX GROUP TOPIC MIDPREFIX LINES N: produce, wait for
# the inbox, then the raw consumer; sets C_RATE C_RAW C_SECS
b_consume_run() {
	local name=$1 inbox=$2 group=$3 topic=$4 pre=$5 lines=$6 n=$7 t0 t1 got raw out wpid f p0 hosts=()
	[[ -x $(BC_TOOL) ]] || die "pin-benchconsume not built ($(BC_TOOL))"
	say "$name: $n messages to $topic"
	# the worker hosts stopped (SIGSTOP) while the N messages are produced:
	# the figure, like the raw consumer's, is the drain of a backlog of N.
	# Timed from the first produce it carried the producer's own time
	# (30,000 identity messages: 0.45 of the 1.2 s, 2026-12-06).  Stopped
	# well within the session timeout (3.5 s): the groups stay as they are
	# (a longer produce is reported: a rebalance may then be in the figure).
	for f in "$PIDS"/worker*.pid; do is_alive "$f" && hosts+=("$(cat "$f")"); done
	((${#hosts[@]})) || die "$name: no worker host runs"
	# the wait: one connection counting the inbox every 50 ms (a new psql
	# and backend for each poll cost ~10 % of the 2 cores, the relay
	# bench's profile of 2026-12-06), started before the produce
	out=$(mktemp)
	b_psql -tA >"$out" <<-EOF &
		CREATE FUNCTION pg_temp.bc_wait() RETURNS text LANGUAGE plpgsql AS \$\$
		DECLARE got bigint; t0 timestamptz := clock_timestamp();
		BEGIN
		  LOOP
		    SELECT count(*) INTO got FROM $inbox WHERE consumer_group = '$group'
		      AND message_id BETWEEN '$pre-000000000000' AND '$pre-ffffffffffff';
		    IF got >= $n THEN RETURN 'done ' || extract(epoch FROM clock_timestamp()); END IF;
		    IF clock_timestamp() - t0 > interval '600 s' THEN RETURN 'short ' || got; END IF;
		    PERFORM pg_sleep(0.05);
		  END LOOP;
		END \$\$;
		SELECT pg_temp.bc_wait();
	EOF
	wpid=$!
	# whatever ends the bench from here, the hosts run again
	trap 'kill -CONT "${hosts[@]}" 2>/dev/null; kill "$wpid" 2>/dev/null' EXIT
	trap 'exit 130' INT TERM
	p0=$(date +%s.%N)
	kill -STOP "${hosts[@]}" || true
	"$(BC_TOOL)" produce "@$BOOT" "$topic" <"$lines" >/dev/null || die "$name: produce failed"
	t0=$(date +%s.%N)
	kill -CONT "${hosts[@]}" || true
	trap - EXIT INT TERM
	p0=$(awk -v a="$p0" -v b="$t0" 'BEGIN { printf "%.1f", b - a }')
	awk -v s="$p0" 'BEGIN { exit !(s > 2.5) }' &&
		say "$name: the hosts were stopped $p0 s for the produce: near the session timeout"
	wait "$wpid" || die "$name: the wait for the inbox failed"
	read -r got t1 <"$out" || true
	rm -f "$out"
	[[ ${got:-} == done ]] || die "$name: only ${t1:-?} of $n messages applied in 600 s"
	C_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	C_RATE=$(awk -v s="$C_SECS" -v n="$n" 'BEGIN { printf "%.0f", n / s }')
	raw=$("$(BC_TOOL)" consume "@$BOOT" "$topic" "$n") || die "$name: raw consumer failed"
	C_RAW=$(sed -n 's/.*: \([0-9]*\) msgs\/s.*/\1/p' <<<"$raw")
	say "$name: $C_RATE msgs/s ($n in $C_SECS s); raw consumer $C_RAW msgs/s"
}

# b_gen KIND N RUN: lines "key<TAB>envelope" on stdout
b_gen() {
	python3 - "$@" <<-'EOF'
		import json, sys, datetime
		kind, n, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
		now = datetime.datetime.now(datetime.timezone.utc)
		iso = lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (d.microsecond // 1000)
		created = iso(now)
		def u(block, i):
		    return "b0000000-0000-4000-%s-%012x" % (block, i)
		pre = {"identity": "b1000000", "crm": "b2000000", "notify": "b3000000"}[kind]
		out = sys.stdout
		for i in range(n):
		    mid = "%s-%s-4000-8000-%012x" % (pre, run, i)
		    if kind == "identity":
		        user = u("8006", i)
		        key, et, at, agg = user, "pin.identity.user-updated", "User", user
		        pl = {"userId": user, "displayName": "Bench User %d" % i, "avatarUrl": None,
		              "email": None, "phone": None, "locale": "ru", "timeZone": "Europe/Moscow",
		              "status": "Active"}
		    elif kind == "crm":
		        booking = u("8008", i)
		        key, et, at, agg = booking, "pin.crm.booking-created", "Booking", booking
		        pl = {"bookingId": booking, "dealId": u("8007", i % 200),
		              "propertyObjectId": u("8009", i % 500),
		              "reserveExpiresAt": iso(now + datetime.timedelta(days=2, minutes=i % 1440)),
		              "programTerms": {"x": 1}, "paymentAmount": 100}
		    else:
		        ev = u("800a", i)
		        key, et, at, agg = ev, "pin.calendar.reminder-due", "CalendarEvent", ev
		        pl = {"reminderId": u("800b", i), "eventId": ev, "tenantId": "b0000000-0000-4000-8000-00000000000a",
		              "ownerUserId": u("800c", i % 100), "clientUserId": u("800d", i),
		              "kind": "Showing", "startAt": iso(now + datetime.timedelta(days=1)),
		              "timeZone": "Europe/Moscow", "offsetMinutes": 60,
		              "appointmentId": u("800e", i)}
		    env = {"messageId": mid, "eventType": et, "contractVersion": 1, "createdAt": created,
		           "aggregateType": at, "aggregateId": agg, "correlationId": None, "payload": pl}
		    out.write(key + "\t" + json.dumps(env, separators=(",", ":"), ensure_ascii=False) + "\n")
	EOF
}

# The clean-up runs while the worker host's notify dispatcher and in-app
# publisher still work on the fan-out's rows: a DELETE can deadlock with them
# (until 2026-12-03, c5c7e57, the bench died there and left ~45k Pending notifications that
# the worker host then dispatched during the next scenarios).  Retried (b_retry).
b_consumers_clean() {
	b_retry "consumers: the bench rows" b_consumers_clean_once
	b_vacuum calendar.user_replicas notifications.recipient_contacts \
		calendar.event_reminders calendar.calendar_events \
		calendar.booking_deadline_links notifications.notifications \
		notifications.subject_final_states calendar.outbox notifications.outbox \
		calendar.inbox notifications.processed_messages
}

b_consumers_clean_once() {
	b_psql <<-EOF >/dev/null || return 1
		DELETE FROM calendar.user_replicas WHERE user_id::text LIKE 'b0000000-0000-4000-8006-%'
		  OR user_id::text LIKE 'b0000000-0000-4000-8016-%';
		DELETE FROM calendar.inbox WHERE consumer_group = 'calendar-identity-users' AND message_id
		  BETWEEN 'b1f00000-0000-0000-0000-000000000000' AND 'b1f00000-ffff-ffff-ffff-ffffffffffff';
		DELETE FROM notifications.recipient_contacts WHERE user_id::text LIKE 'b0000000-0000-4000-8006-%';
		-- the runs' dedup rows (until 2026-12-03, b760382, they stayed for the 30 days of the
		-- retention, 45k per run plus notify's of the CRM run's event-created
		-- messages): the bench's message ids (b1000000-/b2000000-/b3000000- + run)
		DELETE FROM calendar.inbox WHERE consumer_group IN ('calendar-identity-users',
		    'calendar-crm-booking-events') AND (message_id BETWEEN
		  'b1000000-0000-0000-0000-000000000000' AND 'b1000000-ffff-ffff-ffff-ffffffffffff'
		  OR message_id BETWEEN
		  'b2000000-0000-0000-0000-000000000000' AND 'b2000000-ffff-ffff-ffff-ffffffffffff');
		DELETE FROM notifications.processed_messages WHERE consumer_group IN
		    ('notifications-identity-users', 'notifications-calendar-events') AND (message_id BETWEEN
		  'b1000000-0000-0000-0000-000000000000' AND 'b1000000-ffff-ffff-ffff-ffffffffffff'
		  OR message_id BETWEEN
		  'b3000000-0000-0000-0000-000000000000' AND 'b3000000-ffff-ffff-ffff-ffffffffffff');
		-- and the statement anchors' (crm.sql: bookings 8018-, messages b2f00000-)
		DELETE FROM calendar.inbox WHERE consumer_group = 'calendar-crm-booking-events' AND message_id
		  BETWEEN 'b2f00000-0000-0000-0000-000000000000' AND 'b2f00000-ffff-ffff-ffff-ffffffffffff';
		DELETE FROM calendar.event_reminders WHERE calendar_event_id IN (SELECT id FROM
		  calendar.calendar_events WHERE booking_id::text LIKE 'b0000000-0000-4000-8008-%'
		    OR booking_id::text LIKE 'b0000000-0000-4000-8018-%');
		DELETE FROM calendar.calendar_events WHERE booking_id::text LIKE 'b0000000-0000-4000-8008-%'
		  OR booking_id::text LIKE 'b0000000-0000-4000-8018-%';
		DELETE FROM calendar.booking_deadline_links WHERE booking_id::text LIKE 'b0000000-0000-4000-8008-%'
		  OR booking_id::text LIKE 'b0000000-0000-4000-8018-%';
		DELETE FROM notifications.notifications WHERE source_message_id BETWEEN
		  'b3000000-0000-0000-0000-000000000000' AND 'b3000000-ffff-ffff-ffff-ffffffffffff';
		DELETE FROM notifications.subject_final_states WHERE subject_id::text LIKE 'b0000000-0000-4000-800a-%';
		-- the agents' notifications of the CRM run's events (event-created, via the
		-- relay and notify): Pending e-mails/SMS without a contact, which the
		-- dispatcher would otherwise scan on every pass of every later run
		DELETE FROM notifications.notifications WHERE recipient_user_id::text LIKE 'b0000000-0000-4000-8005-%';
	EOF
	# the published event-created rows of the CRM runs' deadline events (found
	# by the payload's bookingId: the events themselves are deleted above, and
	# a row the relay publishes after this clean-up goes at the next one), with
	# notify's dedup rows of them
	b_drop_published "topic = 'pin.calendar.event-created.v1'
		AND (envelope->'payload'->>'bookingId' LIKE 'b0000000-0000-4000-8008-%'
		  OR envelope->'payload'->>'bookingId' LIKE 'b0000000-0000-4000-8018-%')"
}

# b_consumer_row SCENARIO FIGURE RATE RAW [STATEMENTS]: against the raw
# consumer alone, or (with the statements' msgs/s) against the serial limit
# 1/(1/raw + 1/statements), target >= 0.7
b_consumer_row() {
	local ratio ok=true limit
	if [[ -z ${5:-} ]]; then
		b_row "$1" "$2" "$3" "msgs/s" "raw librdkafka consumer, same topic" "$4" \
			"$(b_div "$3" "$4")" "-" true
		return
	fi
	limit=$(awk -v a="$4" -v b="$5" 'BEGIN { printf "%.0f", 1 / (1 / a + 1 / b) }')
	ratio=$(b_div "$3" "$limit")
	b_ge "$ratio" 0.7 || ok=false
	b_row "$1" "$2" "$3" "msgs/s" "serial limit (raw consumer $4/s, statements $5 msgs/s)" \
		"$limit" "$ratio" ">=0.70" "$ok"
}

# b_stmt_anchor NAME SCRIPT [-D k=v ...]: one pgbench client running a
# handler's statements in batches of 500 (SCRIPT, -M prepared, -r); sets
# C_STMT (msgs/s) = 500 / the summed mean latencies of the statements from
# BEGIN to END -- the script's first, generating SELECT (the handler's C
# work, done in SQL here) is left out
b_stmt_anchor() {
	local name=$1 script=$2 b=500 out
	shift 2
	out=$("$PGBIN/pgbench" -n -r -M prepared -c 1 -j 1 -T "$(b_secs)" -f "$BENCH_DIR/$script" \
		-D n=0 -D b=$b "$@" "$PG_DSN" 2>&1) || die "$name: pgbench failed: $out"
	C_STMT=$(awk -v b=$b '/statement latencies/ { on = 1; next }
		on && $3 == "BEGIN;" { in_tx = 1 }
		on && in_tx { ms += $1 }
		on && in_tx && $3 == "END;" { in_tx = 0 }
		END { if (ms > 0) printf "%.0f", b * 1000 / ms }' <<<"$out")
	[[ -n $C_STMT ]] || die "$name: no statement latencies from pgbench: $out"
	say "$name: the handler's statements alone (1 client, batches of $b, BEGIN..END): $C_STMT msgs/s"
}

bench_consumers() {
	local d=$STATE/bench run n have
	mkdir -p "$d"
	run=$(printf '%04x' $((RANDOM % 65536)))
	b_consumers_clean
	b_psql <<-EOF >/dev/null
		INSERT INTO calendar.crm_deal_replicas (deal_id, agency_company_id, executor_agent_user_id,
		    is_terminal, created_at, updated_at)
		  SELECT ('b0000000-0000-4000-8007-' || lpad(to_hex(i), 12, '0'))::uuid, '$B_T',
		    ('b0000000-0000-4000-8005-' || lpad(i::text, 12, '0'))::uuid, false, now(), now()
		  FROM generate_series(0, 199) AS i
		ON CONFLICT (deal_id) DO NOTHING;
	EOF

	local which=" ${PIN_BENCH_CONSUMERS:-identity crm notify} "
	# The first drain after a stack start ran at half the speed of the
	# ones after it (2026-12-06, 387f39f and c76e0ac: identity 10,989 and
	# 14,286 msgs/s, then 26,549-32,609), while its anchors (the raw
	# consumer, pgbench) are measured after it, on a warmed stack.  One
	# drain of 10,000 identity messages goes first, once per bench, not
	# counted; its rows are removed before the figures.
	if [[ -z ${B_CONS_WARMED:-} ]]; then
		B_CONS_WARMED=1
		b_gen identity 10000 "$run" >"$d/warmup.lines"
		b_consume_run "warm-up (not counted)" calendar.inbox calendar-identity-users \
			pin.identity.users.v1 "b1000000-$run-4000-8000" "$d/warmup.lines" 10000
		# notify's contact consumer reads the same topic: its rows too,
		# before they are removed (at most 60 s)
		local k
		for ((k = 0; k < 300; k++)); do
			(($(b_psql -tA -c "SELECT count(*) FROM notifications.processed_messages
				WHERE consumer_group = 'notifications-identity-users' AND message_id BETWEEN
				'b1000000-$run-4000-8000-000000000000' AND 'b1000000-$run-4000-8000-ffffffffffff'")
				>= 10000)) && break
			sleep 0.2
		done
		b_consumers_clean
		run=$(printf '%04x' $(((0x$run + 1) % 65536)))
	fi
	if [[ $which == *" identity "* ]]; then
	n=${PIN_BENCH_IDENTITY_N:-30000}
	b_gen identity "$n" "$run" >"$d/identity.lines"
	b_consume_run identity calendar.inbox calendar-identity-users pin.identity.users.v1 \
		"b1000000-$run-4000-8000" "$d/identity.lines" "$n"
	have=$(b_psql -tA -c "SELECT count(*) FROM calendar.user_replicas
		WHERE user_id::text LIKE 'b0000000-0000-4000-8006-%'")
	((have == n)) || die "identity: $have user replicas, want $n"
	b_stmt_anchor identity identity.sql -D run="$run"
	b_consumer_row consumers "identity ($n users upserted)" "$C_RATE" "$C_RAW" "$C_STMT"
	fi
	if [[ $which == *" crm "* ]]; then

	n=${PIN_BENCH_CRM_N:-10000}
	b_gen crm "$n" "$run" >"$d/crm.lines"
	b_consume_run "crm booking" calendar.inbox calendar-crm-booking-events \
		pin.crm.booking-created.v1 "b2000000-$run-4000-8000" "$d/crm.lines" "$n"
	have=$(b_psql -tA -c "SELECT count(*) FROM calendar.booking_deadline_links l
		JOIN calendar.calendar_events e ON e.id = l.calendar_event_id
		WHERE l.booking_id::text LIKE 'b0000000-0000-4000-8008-%' AND l.status = 'Open'")
	((have == n)) || die "crm booking: $have Open deadlines, want $n"
	b_stmt_anchor "crm booking" crm.sql -D run="$run" -D tenant="$B_T" \
		-D prefix="Оплата резерва до " -D tz=Europe/Moscow -D offs="{30}"
	b_consumer_row consumers "CRM booking-created ($n deadlines)" "$C_RATE" "$C_RAW" "$C_STMT"
	fi
	if [[ $which == *" notify "* ]]; then

	n=${PIN_BENCH_NOTIFY_N:-5000}
	b_gen notify "$n" "$run" >"$d/notify.lines"
	b_consume_run "notify fan-out" notifications.processed_messages \
		notifications-calendar-events pin.calendar.reminder-due.v1 "b3000000-$run-4000-8000" \
		"$d/notify.lines" "$n"
	have=$(b_psql -tA -c "SELECT count(*) FROM notifications.notifications WHERE
		source_message_id BETWEEN 'b3000000-$run-4000-8000-000000000000'
		AND 'b3000000-$run-4000-8000-ffffffffffff'")
	((have >= n)) || die "notify: $have notifications for $n reminders"
	b_consumer_row consumers "notify fan-out reminder-due ($have rows)" "$C_RATE" "$C_RAW"
	fi

	b_consumers_clean
}
