# growth.sh -- `./dev bench growth`: the hot paths at the
# size the ADR plans for.  Sourced by tests/bench/suite.sh (uses its helpers).
#
# 1. the small-data figures of showcase (limit 1 / 20 / 100), agent list and
#    booking: taken from this run when those scenarios ran before (`./dev
#    bench` runs growth last), else measured here first;
# 2. loads, in SQL (not through the API), 20,000 agents x 100 slots (2M slot
#    rows), 1M calendar events and 1M appointments over 50 tenants of skewed
#    sizes (tenant t holds agents in proportion to ~1/(t+1)), 150 days of
#    time (60 past, 90 ahead), all under bench uuids (..-8006-..800b-, tenants
#    8007-) so that it can be removed;
# 3. settles (g_settle: VACUUM ANALYZE, CHECKPOINT, autovacuum quiet), then
#    reruns the three scenarios and prints each figure next to its small-data
#    figure with the ratio (target: growth figure >= small / 1.5, i.e. within
#    1.5x), plus EXPLAIN (ANALYZE, BUFFERS) of each hot statement
#    (tests/bench/explain.py over showcase.sql, list.sql, booking.sql) into
#    .dev/bench/growth-explain.txt;
# 4. removes the growth rows again (PIN_BENCH_GROWTH_KEEP=1 keeps them: a
#    rerun then skips the load).  PIN_BENCH_GROWTH_AGENTS (20000) scales it.
#
# Load time and database size are printed and recorded as rows.

G_AGENTS=${PIN_BENCH_GROWTH_AGENTS:-20000}
G_TENANTS=50

# g_uuid PREFIX EXPR: SQL of the bench uuid b0000000-0000-4000-PREFIX-<EXPR, 12 digits>
g_uuid() { echo "('b0000000-0000-4000-$1-' || lpad(($2)::text, 12, '0'))::uuid"; }
# g_agent EXPR: SQL of growth agent EXPR's uuid <8 hex of md5>-0000-4000-8006-<EXPR>.
# The first group varies as in real (random) ids.  Before 0640_slots_publish.sql
# it had to: btree_gist's uuid penalty sees only the first 64 bits, so owners
# that shared them (b0000000-0000-4000-..) left the exclusion index
# ex_availability_slots_owner_active unclustered by owner (measured: 4,127
# pages, 620 ms for one owner's overlap scan at 2M slots).  The index is now
# keyed by a hash of the owner first, which any id spreads.
g_agent() { echo "(substr(md5('growth-' || ($1)), 1, 8) || '-0000-4000-8006-' || lpad(($1)::text, 12, '0'))::uuid"; }

# g_val SCENARIO FIGURE_PREFIX: the value of the first row of this run whose
# scenario and figure match (empty when none)
g_val() {
	local r
	for r in "${B_ROWS[@]}"; do
		[[ $r == *"\"scenario\":\"$1\",\"figure\":\"$2"* ]] || continue
		[[ $r =~ \"value\":([0-9.]+) ]] && echo "${BASH_REMATCH[1]}"
		return 0
	done
}

# g_small: the small-data figures (this run's, or measured now)
g_small() {
	[[ -n $(g_val showcase "limit 1") ]] || bench_showcase
	[[ -n $(g_val list "100 per page") ]] || bench_list
	[[ -n $(g_val booking "POST appointments") ]] || bench_booking
	G_SMALL=("$(g_val showcase "limit 1")" "$(g_val showcase "limit 20")"
		"$(g_val showcase "limit 100")" "$(g_val list "100 per page")"
		"$(g_val booking "POST appointments")")
}

g_have() {
	b_psql -tA -c "SELECT count(*) FROM calendar.availability_slots
		WHERE tenant_id = $(g_uuid 8007 0)"
}

# g_load: the growth rows (SQL; ~4M rows with their indexes).  Agent a
# (0-based) belongs to tenant floor(50 * (a/N)^2) (tenant 0 the largest);
# slot i of agent a starts at day0 + i x 36 h + (8 + a % 10) h (+30 min for
# odd agents), 30 or 60 minutes long: i < 40 lie in the past (Archived),
# later ones are Booked (even i) or Available (odd i).  Appointment of slot
# (a, 2j): investor (a x 7919 + j) % 200000; past ones Completed / Cancelled /
# NoShow, future ones Confirmed / Pending, but Confirmed when the slot starts
# within a day: the first future slots start today, and a Pending appointment
# past its confirmation deadline is expired by the worker (until 2026-12-05:
# 6,000 expirations, their events and notifications, while the runs at 2M
# were timed).  Events: the appointment events of
# the first 25 booked slots of each agent plus 25 manual events (Meeting /
# Task) spread over the 150 days: 50 per agent, 1M in all.
g_load() {
	local n=$G_AGENTS tz
	tz=$(g_uuid 8007 "floor($G_TENANTS * power(a::float8 / $G_AGENTS, 2))::int")
	say "growth: loading $n agents x 100 slots, $((n * 50)) events, $((n * 50)) appointments (SQL)"
	b_psql <<-EOF
		SET synchronous_commit = off;
		SET maintenance_work_mem = '256MB';
		-- the appointments' FK to their slots: the rows are consistent by
		-- construction; skipping the 1M RI checks halves the load
		SET session_replication_role = replica;
		BEGIN;
		-- bulk load: the secondary indexes are dropped and built again
		-- afterwards, in the same transaction (sorted builds instead of 4M
		-- incremental inserts: minutes less); constraints' indexes stay
		CREATE TEMP TABLE g_idx ON COMMIT DROP AS
		  SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
		  FROM pg_index i
		  WHERE i.indrelid IN ('calendar.availability_slots'::regclass,
		      'calendar.appointments'::regclass, 'calendar.calendar_events'::regclass)
		    AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid);
		DO \$\$ DECLARE r record; BEGIN
		  FOR r IN SELECT name FROM g_idx LOOP EXECUTE 'DROP INDEX ' || r.name; END LOOP;
		END \$\$;
		CREATE TEMP TABLE g_slot AS
		  SELECT a, i, $tz AS tenant,
		    date_trunc('day', now()) - interval '60 days' + i * interval '36 hours'
		      + (8 + a % 10) * interval '1 hour' + (a % 2) * interval '30 minutes' AS st,
		    CASE WHEN a % 3 = 0 THEN interval '60 minutes' ELSE interval '30 minutes' END AS dur
		  FROM generate_series(0, $((n - 1))) AS a, generate_series(0, 99) AS i;
		INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, kind, start_at,
		    end_at, time_zone, status, auto_confirm, cancellation_cutoff_minutes, created_at,
		    updated_at)
		  SELECT $(g_uuid 800b "a * 100 + i"), tenant, $(g_agent a),
		    CASE WHEN a % 5 = 0 THEN 'Consultation' ELSE 'Showing' END, st, st + dur,
		    (ARRAY['Europe/Moscow', 'Asia/Yekaterinburg', 'Europe/Kaliningrad'])[1 + a % 3],
		    CASE WHEN i < 40 THEN 'Archived' WHEN i % 2 = 0 THEN 'Booked' ELSE 'Available' END,
		    a % 4 = 0, 120, st - interval '30 days', st - interval '30 days'
		  FROM g_slot ORDER BY a, i;
		INSERT INTO calendar.appointments (id, tenant_id, slot_id, calendar_event_id,
		    agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,
		    auto_confirmed, confirm_deadline_at, cancelled_by, cancelled_at, outcome,
		    completed_at, decided_at, created_at, updated_at)
		  SELECT $(g_uuid 8009 "a * 100 + i"), tenant, $(g_uuid 800b "a * 100 + i"),
		    $(g_uuid 800a "a * 100 + i"), $(g_agent a),
		    $(g_uuid 8008 "(a * 7919 + i / 2) % 200000"),
		    CASE WHEN a % 5 = 0 THEN 'Consultation' ELSE 'Showing' END, st, st + dur,
		    'Europe/Moscow', x.status, a % 4 = 0, st - interval '1 hour',
		    CASE WHEN x.status = 'Cancelled' THEN 'Investor' END,
		    CASE WHEN x.status = 'Cancelled' THEN st - interval '1 day' END,
		    CASE WHEN x.status IN ('Completed', 'NoShow') THEN x.status END,
		    CASE WHEN x.status IN ('Completed', 'NoShow') THEN st + dur END,
		    CASE WHEN x.status <> 'Pending' THEN st - interval '2 days' END,
		    st - interval '3 days', st - interval '2 days'
		  FROM g_slot,
		    LATERAL (SELECT CASE WHEN i >= 40 THEN (CASE WHEN (a + i) % 10 < 7
		                           OR st < now() + interval '1 day' THEN 'Confirmed' ELSE 'Pending' END)
		                         WHEN (a + i) % 20 < 13 THEN 'Completed'
		                         WHEN (a + i) % 20 < 18 THEN 'Cancelled' ELSE 'NoShow' END AS status) x
		  WHERE i % 2 = 0 ORDER BY a, i;
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin, status,
		    title, start_at, end_at, time_zone, client_user_id, appointment_id, created_at,
		    updated_at, completed_at, cancelled_at)
		  SELECT $(g_uuid 800a "a * 100 + i"), tenant, $(g_agent a),
		    CASE WHEN a % 5 = 0 THEN 'Consultation' ELSE 'Showing' END, 'Appointment',
		    CASE WHEN i < 40 THEN 'Completed' ELSE 'Planned' END,
		    'Showing (booked by an investor)', st, st + dur, 'Europe/Moscow',
		    $(g_uuid 8008 "(a * 7919 + i / 2) % 200000"), $(g_uuid 8009 "a * 100 + i"),
		    st - interval '3 days', st - interval '3 days',
		    CASE WHEN i < 40 THEN st + dur END, NULL
		  FROM g_slot WHERE i % 2 = 0 AND i < 50 ORDER BY a, i;
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin, status,
		    title, start_at, end_at, time_zone, created_at, updated_at, completed_at)
		  SELECT $(g_uuid 800a "2000000 + a * 50 + j"), $tz, $(g_agent a),
		    CASE WHEN j % 3 = 0 THEN 'Task' ELSE 'Meeting' END, 'Manual',
		    CASE WHEN j < 10 THEN 'Completed' ELSE 'Planned' END, 'Meeting ' || j,
		    date_trunc('day', now()) - interval '60 days' + j * interval '6 days'
		      + (9 + (a + j) % 9) * interval '1 hour',
		    CASE WHEN j % 3 = 0 THEN NULL ELSE date_trunc('day', now()) - interval '60 days'
		      + j * interval '6 days' + (10 + (a + j) % 9) * interval '1 hour' END,
		    'Europe/Moscow', now() - interval '61 days', now() - interval '61 days',
		    CASE WHEN j < 10 THEN now() - interval '61 days' END
		  FROM generate_series(0, $((n - 1))) AS a, generate_series(0, 24) AS j ORDER BY a, j;
		DO \$\$ DECLARE r record; BEGIN
		  FOR r IN SELECT def FROM g_idx LOOP EXECUTE r.def; END LOOP;
		END \$\$;
		COMMIT;
		RESET session_replication_role;
		VACUUM ANALYZE calendar.availability_slots;
		VACUUM ANALYZE calendar.appointments;
		VACUUM ANALYZE calendar.calendar_events;
	EOF
}

# g_unload: the growth rows out again (by tenant: the tenant_start indexes)
g_unload() {
	say "growth: removing the growth rows"
	b_psql <<-EOF
		SET synchronous_commit = off;
		DELETE FROM calendar.appointments WHERE tenant_id IN
		  (SELECT $(g_uuid 8007 t) FROM generate_series(0, $((G_TENANTS - 1))) AS t);
		DELETE FROM calendar.calendar_events WHERE tenant_id IN
		  (SELECT $(g_uuid 8007 t) FROM generate_series(0, $((G_TENANTS - 1))) AS t);
		DELETE FROM calendar.availability_slots WHERE tenant_id IN
		  (SELECT $(g_uuid 8007 t) FROM generate_series(0, $((G_TENANTS - 1))) AS t);
		VACUUM ANALYZE calendar.availability_slots;
		VACUUM ANALYZE calendar.appointments;
		VACUUM ANALYZE calendar.calendar_events;
	EOF
}

# g_settle: the load's after-effects done before anything is measured
# (issue 31 item 4): VACUUM ANALYZE of every calendar table (the load's
# tables are vacuumed in g_load; the rest see its side effects too), a
# CHECKPOINT (the load's dirty pages written now, not during the runs), then
# a wait, at most PIN_BENCH_GROWTH_SETTLE_S (300), until no autovacuum
# worker runs in this database for 5 s in a row.  Prints how long it took.
# Until 2026-12-05 the runs began right after the load, while its vacuum
# and checkpoint still ran (showcase 0.41-0.74 of its serial limit then).
# Then b_settle: the undeliverable bench notifications deleted (b_ntf_quiet),
# and the machine below 35 % busy (the worker host's work on what the load
# set off).
g_settle() {
	local t0=$SECONDS quiet=0 max=${PIN_BENCH_GROWTH_SETTLE_S:-300}
	b_psql -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
	while ((quiet < 5 && SECONDS - t0 < max)); do
		if [[ $(b_psql -tA -c "SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'autovacuum worker' AND datname = current_database()") == 0 ]]; then
			quiet=$((quiet + 1))
		else
			quiet=0
		fi
		sleep 1
	done
	b_settle
	G_SETTLE_S=$((SECONDS - t0))
	say "growth: settled in ${G_SETTLE_S} s (VACUUM ANALYZE, CHECKPOINT, autovacuum quiet 5 s, machine quiet)"
}

# g_psql: psql that goes on after an error (an EXPLAIN that fails is
# recorded in the file, the bench goes on)
g_psql() { "$PGBIN/psql" -X -q "$PG_DSN" 2>&1 || true; }

# g_explain: EXPLAIN (ANALYZE, BUFFERS) of the hot statements at this size
g_explain() {
	local out=$STATE/bench/growth-explain.txt now lower upper slot owner
	now=$(date +%s)
	lower=$(b_iso $((now + 3660)))
	upper=$(b_iso $((now + 92 * 86400)))
	# a bookable slot of the booking anchor's set, and a growth agent's
	read -r slot owner < <(b_psql -tA -F' ' -c "SELECT id, owner_user_id FROM calendar.availability_slots
		WHERE tenant_id = '$B_T' AND status = 'Available'
		  AND owner_user_id::text LIKE 'b0000000-0000-4000-8004-%' LIMIT 1")
	{
		echo "# showcase (limit 20) of the showcase agent"
		python3 "$BENCH_DIR/explain.py" "$BENCH_DIR/showcase.sql" agent="$B_SHOW" \
			lower="$lower" upper="$upper" lim=21 curid=00000000-0000-0000-0000-000000000000 |
			g_psql
		echo "# showcase (limit 20) of a growth agent (tenant 0)"
		python3 "$BENCH_DIR/explain.py" "$BENCH_DIR/showcase.sql" \
			agent="$(b_psql -tA -c "SELECT $(g_agent 2)")" lower="$lower" upper="$upper" lim=21 \
			curid=00000000-0000-0000-0000-000000000000 | g_psql
		echo "# agent list (100 per page)"
		python3 "$BENCH_DIR/explain.py" "$BENCH_DIR/list.sql" owner="$B_LIST" tenant="$B_T" \
			lower="$(b_iso "$now")" upper="$(b_iso $((now + 30 * 86400)))" \
			cursor="$(b_iso $((now - 86400)))" lim=101 withowner=false \
			curid=00000000-0000-0000-0000-000000000000 | g_psql
		echo "# booking (its statements, rolled back)"
		python3 "$BENCH_DIR/explain.py" "$BENCH_DIR/booking.sql" --rollback \
			slot="$slot" inv=b0000000-0000-4000-8003-999999999999 now="$(b_iso "$now")" \
			s_owner_user_id="$owner" s_kind=Showing evid=b0000000-0000-4000-8003-999999999998 \
			aptid=b0000000-0000-4000-8003-999999999997 tenant="$B_T" origin=Appointment \
			prio=Normal title="Showing (booked by an investor)" st="$(b_iso $((now + 86400)))" \
			en="$(b_iso $((now + 88200)))" tz=Europe/Moscow offs="{1440,60}" \
			remids="{b0000000-0000-4000-8003-999999999996,b0000000-0000-4000-8003-999999999995}" \
			remdues="{$(b_iso "$now"),$(b_iso $((now + 82800)))}" remsts="{Pending,Pending}" \
			env='{"bench":true}' pending=Pending autoc=false \
			deadline="$(b_iso $((now + 3600)))" | g_psql
	} >"$out"
	say "growth: EXPLAIN (ANALYZE, BUFFERS) of the hot statements in ${out#"$ROOT"/}"
}

bench_growth() {
	local t0 t1 secs size figs i ratio ok names
	g_small
	if ((${PIN_BENCH_GROWTH_KEEP:-0})) && (($(g_have) > 0)); then
		say "growth: rows already loaded (PIN_BENCH_GROWTH_KEEP=1)"
		secs=0
	else
		g_unload >/dev/null 2>&1 || true
		t0=$(date +%s)
		g_load
		t1=$(date +%s)
		secs=$((t1 - t0))
	fi
	size=$(b_psql -tA -c "SELECT pg_database_size(current_database())")
	b_row growth "load: 2M slots, 1M events, 1M appointments (SQL)" "$secs" "s" \
		"database size after the load" "$size" "" "-" true
	say "growth: loaded in ${secs}s; database $(b_psql -tA -c "SELECT pg_size_pretty($size::bigint)")"
	g_settle
	b_row growth "settle before the runs: VACUUM ANALYZE, CHECKPOINT, autovacuum quiet" \
		"$G_SETTLE_S" "s" "-" "" "" "-" true
	# the same scenarios at size: their rows are tagged "@2M"
	B_TAG="@2M"
	bench_showcase
	bench_list
	bench_booking
	g_explain
	figs=("$(g_val "showcase$B_TAG" "limit 1")" "$(g_val "showcase$B_TAG" "limit 20")"
		"$(g_val "showcase$B_TAG" "limit 100")" "$(g_val "list$B_TAG" "100 per page")"
		"$(g_val "booking$B_TAG" "POST appointments")")
	B_TAG=""
	names=("showcase limit 1" "showcase limit 20" "showcase limit 100" "agent list 100/page" "booking")
	for i in "${!names[@]}"; do
		ok=true
		ratio=$(b_div "${G_SMALL[$i]}" "${figs[$i]}")
		b_ge 1.5 "$ratio" || ok=false
		b_row growth "${names[$i]} at 2M slots (req/s)" "${figs[$i]}" "req/s" \
			"small-data figure of this run" "${G_SMALL[$i]}" "$ratio" "small/growth <= 1.5" "$ok"
	done
	((${PIN_BENCH_GROWTH_KEEP:-0})) || g_unload
}
