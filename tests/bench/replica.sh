# replica.sh -- `./dev bench replica`: the public showcase with
# its reads on the hot standby (./dev up --replica, pg_dsn_read) against the
# same API host with the standby stopped (every read falls back to the
# primary).  Sourced by suite.sh.  Both runs share the machine's 2 cores with
# both PostgreSQL servers, so the figure shows what the standby costs and
# how much of the read load leaves the primary, not the capacity a second
# machine adds.  PIN_BENCH_REPLICA_ROUNDS (2): alternated rounds with and without.
# Each "with" run starts only once the API host's own metric
# (pin_db_replica_up) says it uses the standby again: the time from the
# standby streaming to that is printed ("host back ... after"); before
# 2026-12-05 a fixed 2 s pause let a run begin while the host still sent its
# reads to the primary (share 0.001 in the worst run).

# b_metric NAME_WITH_LABELS: the API host's sample (through nginx), 0 if absent
b_metric() {
	curl -sf "$BASE_URL/metrics" | awk -v n="$1" '$1 == n { v = $2 } END { print v + 0 }'
}

# b_ticks PID: CPU clock ticks (user + system) of the process, or with
# --backends of a postmaster's backends on the database pin (not WAL replay,
# walsender, checkpointer, autovacuum: the queries' own cost)
b_ticks() {
	local p c all=()
	if [[ $1 == --backends ]]; then
		[[ -n ${2:-} ]] || { echo 0; return; }
		while read -r c; do
			tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -qE '^postgres: [^ ]+ pin ' &&
				all+=("$c")
		done < <(pgrep -P "$2" || true)
	else
		[[ -n ${1:-} ]] && all+=("$1")
	fi
	((${#all[@]})) || { echo 0; return; }
	for p in "${all[@]}"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
		sed 's/^.*) //' | awk '{ s += $12 + $13 + $14 + $15 } END { print s + 0 }'
}

b_pm() { head -n 1 "$1/postmaster.pid" 2>/dev/null || true; }

# b_replica_run FIGURE: wrk on the showcase; sets R_SHARE (share of the
# requests the standby answered, from the host's counters)
b_replica_run() {
	local r0 f0 r1 f1
	# warm-up: every API thread opens its link and prepares the statement
	PIN_BENCH_DURATION=1s b_wrk "$BASE_URL/api/public/calendar/slots?agentUserId=$B_SHOW&limit=20"
	local a0 p0 s0 n hz
	hz=$(getconf CLK_TCK)
	a0=$(b_ticks "$(cat "$PIDS/api.pid")")
	p0=$(b_ticks --backends "$(b_pm "$RUN/pg")")
	s0=$(b_ticks --backends "$(b_pm "$RUN/pg-replica")")
	r0=$(b_metric pin_db_replica_reads_total)
	f0=$(curl -sf "$BASE_URL/metrics" | awk '/^pin_db_read_fallback_total/ { s += $2 } END { print s + 0 }')
	b_wrk "$BASE_URL/api/public/calendar/slots?agentUserId=$B_SHOW&limit=20"
	n=$(awk '/requests in/ { print $1 }' <<<"$W_OUT")
	R_API_MS=$(awk -v a="$a0" -v b="$(b_ticks "$(cat "$PIDS/api.pid")")" -v n="$n" -v hz="$hz" \
		'BEGIN { printf "%.2f", (b - a) * 1000 / hz / n }')
	R_PRI_MS=$(awk -v a="$p0" -v b="$(b_ticks --backends "$(b_pm "$RUN/pg")")" -v n="$n" -v hz="$hz" \
		'BEGIN { printf "%.2f", (b - a) * 1000 / hz / n }')
	R_SBY_MS=$(awk -v a="$s0" -v b="$(b_ticks --backends "$(b_pm "$RUN/pg-replica")")" -v n="$n" -v hz="$hz" \
		'BEGIN { v = (b - a) * 1000 / hz / n; printf "%.2f", (v > 0 ? v : 0) }')
	r1=$(b_metric pin_db_replica_reads_total)
	f1=$(curl -sf "$BASE_URL/metrics" | awk '/^pin_db_read_fallback_total/ { s += $2 } END { print s + 0 }')
	R_SHARE=$(awk -v r="$((r1 - r0))" -v f="$((f1 - f0))" 'BEGIN { printf "%.3f", (r + f > 0 ? r / (r + f) : 0) }')
}

b_mean() { echo "$@" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.0f", s / NF }'; }
b_min() { echo "$@" | awk '{ m = $1; for (i = 2; i <= NF; i++) if ($i < m) m = $i; print m }'; }

# b_replica_back T0_NS: waits until the API host's own pin_db_replica_up
# says 1, with one showcase read every 50 ms (the host looks at the standby
# only when a marked read comes, at most once a second: READ_CHECK_US);
# sets R_BACK_S, the seconds from T0_NS (date +%s%N, taken once the
# standby streams) to that answer.  Fails after 60 s.
b_replica_back() {
	local t0=$1 until=$((SECONDS + 60))
	while (($(b_metric pin_db_replica_up) != 1)); do
		((SECONDS < until)) || return 1
		curl -sf -o /dev/null "$BASE_URL/api/public/calendar/slots?agentUserId=$B_SHOW&limit=20" || true
		sleep 0.05
	done
	R_BACK_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
}

b_replica_caught_up() {
	[[ -n $("$PGBIN/psql" -X -qtA "$PG_DSN_READ" -c \
		"SELECT 1 WHERE pg_last_wal_replay_lsn() >= '$B_LSN'" 2>/dev/null) ]]
}

bench_replica() {
	local with="" with50 with99 without="" ok=true share_with="" share mw mo i
	local cpu_with cpu_without rounds=${PIN_BENCH_REPLICA_ROUNDS:-2} t0 backs=""
	if ! grep -q '^pg_dsn_read' "$CONF" 2>/dev/null; then
		say "replica: the stack runs without a standby: ./dev up --replica"
		cmd_up --replica >&2
		profile_up
	fi
	b_background
	b_showcase_seed
	# the standby replayed it (ANALYZE's statistics included)
	B_LSN=$(b_psql -tA -c "SELECT pg_current_wal_lsn()")
	wait_for "standby catching up" 60 "" b_replica_caught_up || die "the standby does not replay"
	b_replica_back "$(date +%s%N)" || die "the API host does not use the standby"
	# alternating runs (with, without, with, without, ...): on a shared
	# machine the load drifts between runs; the means compare
	for ((i = 1; i <= rounds; i++)); do
		b_replica_run
		with+=" $W_RPS" with50=$W_P50 with99=$W_P99
		cpu_with="host $R_API_MS, primary $R_PRI_MS, standby $R_SBY_MS"
		share_with+=" $R_SHARE"
		((W_BAD == 0)) || ok=false
		say "replica: the standby stops (reads fall back to the primary)"
		replica_stop
		b_replica_run
		without+=" $W_RPS"
		cpu_without="host $R_API_MS, primary $R_PRI_MS"
		((W_BAD == 0)) || ok=false
		b_ge "$R_SHARE" 0.01 && ok=false
		t0=$(date +%s%N)
		replica_start >&2 || die "the standby did not start again"
		R_UP_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
		# from the standby streaming again to the host's own pin_db_replica_up
		b_replica_back "$(date +%s%N)" || die "the API host did not return to the standby in 60 s"
		backs+=" $R_BACK_S"
		say "replica: the standby streamed ${R_UP_S} s after its start; the API host back on it ${R_BACK_S} s later"
	done
	mw=$(b_mean $with)
	mo=$(b_mean $without)
	share=$(b_min $share_with)
	b_ge "$share" 0.99 || ok=false
	say "replica: CPU ms per request of the host and of the database backends (last round): with the standby: $cpu_with; standby stopped: $cpu_without"
	b_row replica "showcase limit 20, reads on the standby (share >= $share; runs:$with; CPU ms/request $cpu_with; host back on a standby streaming again after:${backs:- -} s)" \
		"$mw" "req/s" "same host, standby stopped: all reads on the primary (runs:$without; CPU ms/request $cpu_without)" "$mo" \
		"$(b_div "$mw" "$mo")" "0 errors, share>=0.99" "$ok" "$with50" "$with99"
}
