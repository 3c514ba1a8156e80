# burst.sh -- `./dev bench burst`: the reminder burst, end to end to people
# (issue 31 item 1; seed 000 rule 4, seed 001: reminders are time-critical,
# the source's SLA is under a minute).  At 09:00 on a Monday every agent's
# 10:00 viewing sends its 60-minute reminder: N appointments whose reminders
# fall due at the same instant, measured from that instant to the e-mail in
# the dev SMTP server's Maildir, the SMS at the dev SMS sink and the in-app
# event at a subscriber.  Sourced by suite.sh (b_row, b_psql, b_div, b_ge).
#
#   1. Data in SQL (fixed uuids 8020- agents, 8021- investors, 8022- slots,
#      8023- appointments, 8024- events): N agents and N investors with a
#      contact row each (notifications.recipient_contacts: name, e-mail
#      @bench-burst.example, phone +7997 agents / +7996 investors, as the
#      identity consumer writes it; no settings row, so InApp, Email and Sms
#      are on by the defaults of AppointmentReminder); N Booked slots, N
#      Confirmed appointments, N Planned Showing events starting at DUE + 60
#      min, one Pending 60-minute reminder each, written a day ahead and then
#      moved in one transaction to due_at = DUE = now + PIN_BENCH_BURST_LEAD s
#      (the seed's own length does not eat into the lead).  From DUE on everything is the real path: the
#      stack's worker host's reminder-dispatch job (its own cadence,
#      job.reminder-dispatch.interval_ms, 10 s since 2026-12-05, 60 s before) -> calendar.outbox -> relay ->
#      broker -> notify's consumer fan-out (owner = agent and client =
#      investor, 3 channels each: 6N notification rows) -> the e-mail/SMS
#      dispatcher -> the dev SMTP server and SMS sink, and the inapp-publish
#      job -> nginx's nchan publisher -> subscribers.
#   2. Before the seed, PIN_BENCH_BURST_SUBS (100) of the recipients (half agents,
#      half investors, spread evenly over the N) subscribe through the client path of doc/api.md
#      (tests/bench/sse.py: JWT -> stream ticket -> EventSource URL via nginx).
#   3. Arrival times (tests/bench/burst.py): e-mail = the Maildir file's mtime
#      (aiosmtpd's Mailbox handler writes the file before answering 250 and
#      adds no time header; the bench's files are told by the X-RcptTo header
#      it adds), SMS = the sink's "ts" of the request's JSON line, in-app =
#      the subscriber's clock when the event's data line arrived (events from
#      the channel's buffer, delivered on connect before DUE, are not counted).  Per
#      channel p50/p99/max from DUE, delivered vs expected, and the rate =
#      delivered / (last - first arrival).  Also from the rows: when the
#      reminder pass ran (sent_at - DUE), when the fan-out had written every
#      row (max created_at - DUE), when every InApp row was pushed
#      (published_at), and each channel's p99 counted from the pass (what the
#      path after the reminder job adds: the job's 60 s cadence alone puts the
#      pass 0-60 s after DUE).  Waits at most PIN_BENCH_BURST_TIMEOUT s (900 +
#      N / 20) after DUE.
#   4. Anchors, after the burst, one at a time: pin-benchsend
#      (tools/benchsend.c, libcurl like the dispatcher, one easy handle and
#      connection per thread) sends 2N messages of the burst's mean size to
#      the same SMTP server, then 2N to the same sink, over as many
#      connections as the dispatcher uses: notify.dispatch_senders of the
#      host's configuration (pin-host --print-config) when the key exists,
#      else 1 (the dispatcher's one handle per channel).  Ratio = the
#      dispatcher's rate / the raw sender's, per channel.
#   4b. Before the anchors, the dispatcher on a backlog, one channel at a
#      time: the burst's Sent e-mails (then SMS), 2N when all were sent,
#      inserted again as new Pending rows in one transaction (new ids and
#      source message ids, no reminder id); rate = arrived / (COMMIT -> last
#      arrival).  Both the raw sender and this start with all their messages
#      to send; in the burst the rows come at the fan-out's pace (6N rows of
#      the three channels, 120,000 at N = 20,000, in ~20-25 s on 2 cores),
#      so the burst's rate is printed against the raw sender and the
#      backlog's is judged.
#   5. The SMTP server's and the sink's own CPU seconds (/proc/PID/stat utime +
#      stime of the whole process) over the burst and over each anchor: on a
#      2-core machine a reader sees whether the Python servers saturate a core.
#
# Knobs: PIN_BENCH_BURST_N (20000 appointments = the capacity plan's 20k
# agents; 2000 for a quick run), PIN_BENCH_BURST_SUBS (100), PIN_BENCH_BURST_LEAD
# (15 s from the moving transaction to DUE), PIN_BENCH_BURST_TIMEOUT (900 + N / 20).
# Targets: p99 < 60 s per channel and everything delivered (the burst), the
# dispatcher >= 0.5 of each raw sender (the backlog, 4b).

B_BU_AGENT='b0000000-0000-4000-8020-'
B_BU_INV='b0000000-0000-4000-8021-'
B_BU_SLOT='b0000000-0000-4000-8022-'
B_BU_APT='b0000000-0000-4000-8023-'
B_BU_EVENT='b0000000-0000-4000-8024-'
B_BU_DOMAIN=bench-burst.example
# the recipients' numbers (+7997 agents, +7996 investors), as burst.py takes them
B_BU_PHONES=+7996,+7997

# b_bu_cpu PID: CPU seconds of the whole process (utime + stime), 0 when gone
b_bu_cpu() {
	awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' \
		"/proc/$1/stat" 2>/dev/null || echo 0
}

# b_bu_senders: the dispatcher's connections per channel per worker host
b_bu_senders() {
	local k
	k=$("$BIN/pin-host" --print-config --mode worker --config "$CONF" \
		--plugins "$(worker_plugins)" --plugin-dir "$PLUGDIR" 2>/dev/null |
		sed -n 's/^notify\.dispatch_senders *= *\([0-9][0-9]*\).*/\1/p')
	echo "${k:-1}"
}

# b_bu_clean: the bench's rows (events with their reminders, appointments,
# slots, notifications with their published outcome messages, contacts) and
# the published reminder-due messages with their dedup rows
b_bu_clean() {
	b_psql <<-EOF >/dev/null
		DELETE FROM notifications.outbox o WHERE calendar.outbox_sent(o) AND key IN (
		  SELECT id::text FROM notifications.notifications
		  WHERE recipient_user_id::text LIKE '$B_BU_AGENT%' OR recipient_user_id::text LIKE '$B_BU_INV%');
		DELETE FROM notifications.notifications
		  WHERE recipient_user_id::text LIKE '$B_BU_AGENT%' OR recipient_user_id::text LIKE '$B_BU_INV%';
		DELETE FROM notifications.recipient_contacts
		  WHERE user_id::text LIKE '$B_BU_AGENT%' OR user_id::text LIKE '$B_BU_INV%';
		DELETE FROM calendar.calendar_events WHERE id::text LIKE '$B_BU_EVENT%';
		DELETE FROM calendar.appointments WHERE id::text LIKE '$B_BU_APT%';
		DELETE FROM calendar.availability_slots WHERE id::text LIKE '$B_BU_SLOT%';
	EOF
	b_drop_published "key LIKE '$B_BU_EVENT%'"
	b_vacuum notifications.notifications notifications.outbox notifications.recipient_contacts \
		notifications.processed_messages calendar.outbox calendar.calendar_events \
		calendar.event_reminders calendar.appointments calendar.availability_slots
}

b_bu_id() { echo "'$1' || lpad(i::text, 12, '0')"; }

# b_bu_row FIGURE RATE UNIT ANCHOR RAW GOT WANT P50_S P99_S: the burst's row
# of one channel (e-mail, SMS), judged: p99 under 60 s (60.00 is the
# timeout's value for a channel that never completed), all WANT delivered.
# The ratio to the raw sender is printed: in the burst a channel's rate is
# also the fan-out's pace (the rows come at it), so the dispatcher's own
# rate is judged on the backlog (b_bu_brow).
b_bu_row() {
	local ok=true ratio
	ratio=$(b_div "$2" "$5")
	b_ge 60 "$9" && (($6 == $7)) || ok=false
	[[ $9 == 60.00 ]] && ok=false
	b_row burst "$1" "$2" "$3" "$4" "${5:-0}" "$ratio" "p99<60s, all" "$ok" \
		"$(awk -v v="$8" 'BEGIN { printf "%.0f", v * 1000 }')" \
		"$(awk -v v="$9" 'BEGIN { printf "%.0f", v * 1000 }')"
}

# b_bu_brow FIGURE RATE UNIT ANCHOR RAW GOT WANT: the dispatcher on a
# backlog of one channel, judged: all WANT delivered, at least 0.50 of the
# raw sender's rate
b_bu_brow() {
	local ok=true ratio
	ratio=$(b_div "$2" "$5")
	(($6 == $7)) && b_ge "$ratio" 0.5 || ok=false
	b_row burst "$1" "$2" "$3" "$4" "${5:-0}" "$ratio" ">=0.50 of raw, all" "$ok"
}

# b_bu_backlog CHANNEL TIMEOUT: the dispatcher on a backlog (step 4b of the
# head): the burst's Sent rows of CHANNEL (Email, Sms) again as new Pending
# rows, in one transaction; waits until they have arrived (at most TIMEOUT
# s) and prints "arrived seconds rate rows": seconds from the COMMIT to the
# last arrival, rate = arrived / seconds, rows = the rows inserted
b_bu_backlog() {
	local ch=$1 tmo=$2 n since off t0 out want_e=0 want_s=0
	since=$(date +%s.%N)
	off=$(stat -c %s "$SMS_LOG")
	n=$(b_psql -tA <<-EOF
		WITH ins AS (
		  INSERT INTO notifications.notifications (id, recipient_user_id, tenant_id, kind,
		      channel, urgency, status, role, title, body, deep_link, payload, locale,
		      source_message_id, source_event_type, subject_id, created_at, address)
		    SELECT gen_random_uuid(), recipient_user_id, tenant_id, kind, channel, urgency,
		      'Pending', role, title, body, deep_link, payload, locale, gen_random_uuid(),
		      source_event_type, subject_id, now(), address
		    FROM notifications.notifications WHERE channel = '$ch' AND status = 'Sent'
		      AND reminder_id IS NOT NULL
		      AND (recipient_user_id::text LIKE '$B_BU_AGENT%' OR recipient_user_id::text LIKE '$B_BU_INV%')
		    RETURNING 1)
		SELECT count(*) FROM ins;
	EOF
	)
	t0=$(date +%s.%N)
	[[ $ch == Email ]] && want_e=$n || want_s=$n
	python3 "$BENCH_DIR/burst.py" wait "$MAIL_DIR" "$since" "$B_BU_DOMAIN" "$want_e" "$SMS_LOG" \
		"$off" "$B_BU_PHONES" "$want_s" /dev/null 0 "$t0" "$(b_bu_plus "$t0" "$tmo")" >/dev/null
	if [[ $ch == Email ]]; then
		out=$(python3 "$BENCH_DIR/burst.py" email "$MAIL_DIR" "$since" "$B_BU_DOMAIN" "$t0" --delete)
	else
		out=$(python3 "$BENCH_DIR/burst.py" sms "$SMS_LOG" "$off" "$B_BU_PHONES" "$t0")
	fi
	# "n p50 p99 max first last rate size": max is the last arrival after t0
	awk -v rows="$n" '{ printf "%d %.2f %.1f %d\n", $1, $4, ($4 > 0 ? $1 / $4 : 0), rows }' <<<"$out"
}

b_bu_plus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", a + b }'; }

bench_burst() {
	local n=${PIN_BENCH_BURST_N:-20000} subs=${PIN_BENCH_BURST_SUBS:-100}
	local lead=${PIN_BENCH_BURST_LEAD:-15} tmo=${PIN_BENCH_BURST_TIMEOUT:-$((900 + ${PIN_BENCH_BURST_N:-20000} / 20))}
	local d=$STATE/bench/burst senders due since sms_off sse_pid ready smtp_pid sms_pid
	local c_smtp0 c_sms0 c_smtp1 c_sms1 t_end k half e s a got ok
	local e_n e_p50 e_p99 e_max e_first e_last e_rate e_size
	local s_n s_p50 s_p99 s_max s_first s_last s_rate s_size
	local i_n i_p50 i_p99 i_max i_first i_last
	local pass fan push_n push_p50 push_p99 push_max sent_e sent_s fail_e fail_s
	local raw_e raw_s cr_smtp cr_sms out span
	smtp_pid=$(cat "$PIDS/smtp.pid")
	sms_pid=$(cat "$PIDS/sms.pid")
	senders=$(b_bu_senders)
	mkdir -p "$d"
	rm -f "$d"/*
	b_bu_clean
	((subs > 2 * n)) && subs=$((2 * n))
	half=$(((subs + 1) / 2))
	since=$(date +%s.%N)
	sms_off=$(stat -c %s "$SMS_LOG")
	# the subscribers first (they need only a JWT): half agents, half
	# investors, spread evenly over 1..N (the fan-out writes the rows in
	# appointment order: the first ones alone would be pushed first)
	{
		python3 "$BENCH_DIR/mint.py" "$(secret_file)" agent "$half" --tenant "$B_T" \
			--sub-seq "$B_BU_AGENT" --sub-step $((n / half))
		python3 "$BENCH_DIR/mint.py" "$(secret_file)" investor $((subs - half)) \
			--sub-seq "$B_BU_INV" --sub-step $((n / half))
	} >"$d/subs.lines"
	python3 "$BENCH_DIR/sse.py" "$BASE_URL" "$d/subs.lines" "$d/inapp.lines" "$d/ready" \
		$((tmo + 900)) 2>"$d/sse.err" &
	sse_pid=$!
	for ((k = 0; k < 600; k++)); do
		[[ -s $d/ready ]] && break
		sleep 0.1
	done
	ready=$(cat "$d/ready" 2>/dev/null)
	say "burst: in-app subscribers ${ready:-not ready}"
	# the data, due a day ahead (P); then one short transaction moves every
	# time by DUE - P, so the seed's own length (minutes on a loaded machine)
	# does not eat into the lead
	local p
	p=$(($(date +%s) + 86400))
	say "burst: $n appointments with a 60-minute reminder each (SQL); dispatcher senders $senders"
	b_psql <<-EOF >/dev/null
		INSERT INTO notifications.recipient_contacts (user_id, display_name, email, phone,
		    locale, time_zone, status, last_event_at, updated_at)
		  SELECT ($(b_bu_id "$B_BU_AGENT"))::uuid, 'Агент ' || i,
		    'burst-a' || i || '@$B_BU_DOMAIN', '+7997' || lpad(i::text, 7, '0'),
		    'ru', 'Europe/Moscow', 'Active', now(), now() FROM generate_series(1, $n) AS i
		  UNION ALL
		  SELECT ($(b_bu_id "$B_BU_INV"))::uuid, 'Инвестор ' || i,
		    'burst-i' || i || '@$B_BU_DOMAIN', '+7996' || lpad(i::text, 7, '0'),
		    'ru', 'Europe/Moscow', 'Active', now(), now() FROM generate_series(1, $n) AS i;
		INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, kind, status,
		    start_at, end_at, time_zone, created_at, updated_at)
		  SELECT ($(b_bu_id "$B_BU_SLOT"))::uuid, '$B_T', ($(b_bu_id "$B_BU_AGENT"))::uuid,
		    'Showing', 'Booked', to_timestamp($p) + interval '60 minutes',
		    to_timestamp($p) + interval '90 minutes', 'Europe/Moscow', now(), now()
		  FROM generate_series(1, $n) AS i;
		INSERT INTO calendar.appointments (id, tenant_id, slot_id, calendar_event_id,
		    agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,
		    auto_confirmed, confirm_deadline_at, decided_at, created_at, updated_at)
		  SELECT ($(b_bu_id "$B_BU_APT"))::uuid, '$B_T', ($(b_bu_id "$B_BU_SLOT"))::uuid,
		    ($(b_bu_id "$B_BU_EVENT"))::uuid, ($(b_bu_id "$B_BU_AGENT"))::uuid,
		    ($(b_bu_id "$B_BU_INV"))::uuid, 'Showing', to_timestamp($p) + interval '60 minutes',
		    to_timestamp($p) + interval '90 minutes', 'Europe/Moscow', 'Confirmed', false,
		    to_timestamp($p), now(), now(), now()
		  FROM generate_series(1, $n) AS i;
		INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin,
		    title, start_at, end_at, time_zone, client_user_id, appointment_id,
		    reminder_offsets_minutes, created_at, updated_at)
		  SELECT ($(b_bu_id "$B_BU_EVENT"))::uuid, '$B_T', ($(b_bu_id "$B_BU_AGENT"))::uuid,
		    'Showing', 'Appointment', 'Показ (забронирован инвестором)',
		    to_timestamp($p) + interval '60 minutes', to_timestamp($p) + interval '90 minutes',
		    'Europe/Moscow', ($(b_bu_id "$B_BU_INV"))::uuid, ($(b_bu_id "$B_BU_APT"))::uuid,
		    '{60}', now(), now()
		  FROM generate_series(1, $n) AS i;
		INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes, due_at,
		    status, created_at, updated_at)
		  SELECT gen_random_uuid(), ($(b_bu_id "$B_BU_EVENT"))::uuid, 60, to_timestamp($p),
		    'Pending', now(), now()
		  FROM generate_series(1, $n) AS i;
		ANALYZE calendar.event_reminders;
		ANALYZE notifications.recipient_contacts;
	EOF
	due=$(($(date +%s) + lead))
	b_psql <<-EOF >/dev/null
		BEGIN;
		UPDATE calendar.availability_slots SET start_at = start_at - interval '$((p - due)) s',
		  end_at = end_at - interval '$((p - due)) s' WHERE id::text LIKE '$B_BU_SLOT%';
		UPDATE calendar.appointments SET start_at = start_at - interval '$((p - due)) s',
		  end_at = end_at - interval '$((p - due)) s',
		  confirm_deadline_at = confirm_deadline_at - interval '$((p - due)) s'
		  WHERE id::text LIKE '$B_BU_APT%';
		UPDATE calendar.calendar_events SET start_at = start_at - interval '$((p - due)) s',
		  end_at = end_at - interval '$((p - due)) s' WHERE id::text LIKE '$B_BU_EVENT%';
		UPDATE calendar.event_reminders SET due_at = to_timestamp($due)
		  WHERE calendar_event_id::text LIKE '$B_BU_EVENT%';
		COMMIT;
	EOF
	if (($(date +%s) < due)); then
		say "burst: all due at $(b_iso "$due")"
	else
		say "burst: committed only after the due moment $(b_iso "$due") (PIN_BENCH_BURST_LEAD $lead s too short on this machine now)"
	fi
	while (($(date +%s) < due)); do sleep 0.2; done
	c_smtp0=$(b_bu_cpu "$smtp_pid")
	c_sms0=$(b_bu_cpu "$sms_pid")
	say "burst: due; waiting for $((2 * n)) e-mails, $((2 * n)) SMS, $subs in-app events (at most $tmo s)"
	read -r e s a < <(python3 "$BENCH_DIR/burst.py" wait "$MAIL_DIR" "$since" "$B_BU_DOMAIN" \
		$((2 * n)) "$SMS_LOG" "$sms_off" "$B_BU_PHONES" $((2 * n)) "$d/inapp.lines" "$subs" \
		"$due" $((due + tmo)))
	t_end=$(date +%s.%N)
	c_smtp1=$(b_bu_cpu "$smtp_pid")
	c_sms1=$(b_bu_cpu "$sms_pid")
	kill "$sse_pid" 2>/dev/null || true
	wait "$sse_pid" 2>/dev/null || true
	say "burst: arrived e-mail $e, SMS $s, in-app $a (subscribers)"
	# every InApp row pushed (the subscribers' sample aside), at most 60 s more
	for ((k = 0; k < 300; k++)); do
		[[ -z $(b_psql -tA -c "SELECT 1 FROM notifications.notifications WHERE channel = 'InApp'
			AND published_at IS NULL AND (recipient_user_id::text LIKE '$B_BU_AGENT%'
			OR recipient_user_id::text LIKE '$B_BU_INV%') LIMIT 1") ]] && break
		sleep 0.2
	done

	read -r e_n e_p50 e_p99 e_max e_first e_last e_rate e_size < <(python3 "$BENCH_DIR/burst.py" \
		email "$MAIL_DIR" "$since" "$B_BU_DOMAIN" "$due" --delete)
	read -r s_n s_p50 s_p99 s_max s_first s_last s_rate s_size < <(python3 "$BENCH_DIR/burst.py" \
		sms "$SMS_LOG" "$sms_off" "$B_BU_PHONES" "$due")
	read -r i_n i_p50 i_p99 i_max i_first i_last _ _ < <(python3 "$BENCH_DIR/burst.py" \
		inapp "$d/inapp.lines" "$due")
	read -r pass fan push_n push_p50 push_p99 push_max sent_e sent_s fail_e fail_s < <(b_psql -tA -F' ' <<-EOF
		SELECT
		  (SELECT round(extract(epoch FROM min(sent_at))::numeric - $due, 2) || '..' ||
		          round(extract(epoch FROM max(sent_at))::numeric - $due, 2)
		   FROM calendar.event_reminders WHERE calendar_event_id::text LIKE '$B_BU_EVENT%'),
		  round(extract(epoch FROM max(created_at))::numeric - $due, 2),
		  count(*) FILTER (WHERE channel = 'InApp' AND published_at IS NOT NULL),
		  round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at))
		    FILTER (WHERE channel = 'InApp'))::numeric - $due, 2),
		  round((percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at))
		    FILTER (WHERE channel = 'InApp'))::numeric - $due, 2),
		  round(extract(epoch FROM max(published_at) FILTER (WHERE channel = 'InApp'))::numeric - $due, 2),
		  count(*) FILTER (WHERE channel = 'Email' AND status = 'Sent'),
		  count(*) FILTER (WHERE channel = 'Sms' AND status = 'Sent'),
		  count(*) FILTER (WHERE channel = 'Email' AND status = 'Failed'),
		  count(*) FILTER (WHERE channel = 'Sms' AND status = 'Failed')
		FROM notifications.notifications
		WHERE recipient_user_id::text LIKE '$B_BU_AGENT%' OR recipient_user_id::text LIKE '$B_BU_INV%'
	EOF
	)
	span=$(awk -v a="$due" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')
	say "burst: reminder pass at +${pass} s, fan-out done +${fan} s; rows Sent e-mail $sent_e (Failed $fail_e), SMS $sent_s (Failed $fail_s); InApp pushed $push_n, p50 +$push_p50 p99 +$push_p99 max +$push_max s"
	say "burst: e-mail $e_n, +$e_first..+$e_last s, p50 $e_p50 p99 $e_p99 max $e_max s, $e_rate/s; SMS $s_n, +$s_first..+$s_last s, p50 $s_p50 p99 $s_p99 max $s_max s, $s_rate/s; in-app $i_n of $subs, +$i_first..+$i_last s, p50 $i_p50 p99 $i_p99 s"
	# from the pass: what the path after the reminder job adds (the job's
	# cadence alone puts the pass 0-60 s after DUE)
	local p0 e_pp s_pp i_pp
	p0=${pass%%..*}
	e_pp=$(awk -v a="$e_p99" -v b="$p0" 'BEGIN { printf "%.1f", a - b }')
	s_pp=$(awk -v a="$s_p99" -v b="$p0" 'BEGIN { printf "%.1f", a - b }')
	i_pp=$(awk -v a="$i_p99" -v b="$p0" 'BEGIN { printf "%.1f", a - b }')
	cr_smtp=$(awk -v a="$c_smtp0" -v b="$c_smtp1" 'BEGIN { printf "%.1f", b - a }')
	cr_sms=$(awk -v a="$c_sms0" -v b="$c_sms1" 'BEGIN { printf "%.1f", b - a }')

	# the dispatcher on a backlog, one channel at a time (as the anchors)
	local be_n be_s be_rate be_c bs_n bs_s bs_rate bs_c
	say "burst: backlog: the burst's Sent e-mails again, Pending in one transaction"
	read -r be_n be_s be_rate be_c < <(b_bu_backlog Email "$tmo")
	say "burst: backlog: the burst's Sent SMS again, Pending in one transaction"
	read -r bs_n bs_s bs_rate bs_c < <(b_bu_backlog Sms "$tmo")
	say "burst: backlog: e-mail $be_n of $be_c in $be_s s ($be_rate/s), SMS $bs_n of $bs_c in $bs_s s ($bs_rate/s)"

	# anchors: the same number of messages of the burst's mean size, same
	# servers, the dispatcher's number of connections
	((${e_size%.*} >= 64)) || e_size=1100
	((${s_size%.*} >= 64)) || s_size=300
	say "burst: anchor, raw SMTP sender: $((2 * n)) messages of ${e_size} bytes over $senders connection(s)"
	c_smtp0=$(b_bu_cpu "$smtp_pid")
	out=$("$BUILD/tools/pin-benchsend" smtp "smtp://127.0.0.1:$SMTP_PORT" $((2 * n)) "$senders" \
		"${e_size%.*}") || say "burst: raw SMTP sender: $out"
	raw_e=$(sed -n 's/.* seconds \([0-9.]*\) rate \([0-9.]*\)$/\2 \1/p' <<<"$out")
	c_smtp1=$(b_bu_cpu "$smtp_pid")
	local re_cpu re_s
	re_s=${raw_e#* }
	raw_e=${raw_e%% *}
	re_cpu=$(awk -v a="$c_smtp0" -v b="$c_smtp1" 'BEGIN { printf "%.1f", b - a }')
	python3 "$BENCH_DIR/burst.py" email "$MAIL_DIR" "$since" bench-raw.example 0 --delete >/dev/null
	say "burst: anchor, raw HTTP sender to the SMS sink: $((2 * n)) requests of ${s_size} bytes over $senders connection(s)"
	c_sms0=$(b_bu_cpu "$sms_pid")
	out=$("$BUILD/tools/pin-benchsend" sms "http://127.0.0.1:$SMS_PORT/sms" $((2 * n)) "$senders" \
		"${s_size%.*}" "$STATE/sms.token") || say "burst: raw SMS sender: $out"
	raw_s=$(sed -n 's/.* seconds \([0-9.]*\) rate \([0-9.]*\)$/\2 \1/p' <<<"$out")
	c_sms1=$(b_bu_cpu "$sms_pid")
	local rs_cpu rs_s
	rs_s=${raw_s#* }
	raw_s=${raw_s%% *}
	rs_cpu=$(awk -v a="$c_sms0" -v b="$c_sms1" 'BEGIN { printf "%.1f", b - a }')
	say "burst: raw SMTP $raw_e/s (${re_s} s, server CPU $re_cpu s), raw SMS $raw_s/s (${rs_s} s, sink CPU $rs_cpu s)"

	b_bu_row "e-mail, $n appointments due at once: $e_n of $((2 * n)) in the Maildir, max ${e_max} s, p99 ${e_pp} s after the reminder pass (+${pass} s; fan-out done +${fan} s), server CPU ${cr_smtp} s in ${span} s" \
		"$e_rate" "e-mails/s" "raw SMTP sender, $senders conn., server CPU ${re_cpu} s in ${re_s} s" \
		"$raw_e" "$e_n" $((2 * n)) "$e_p50" "$e_p99"
	b_bu_row "SMS, $n appointments due at once: $s_n of $((2 * n)) at the sink, max ${s_max} s, p99 ${s_pp} s after the pass, sink CPU ${cr_sms} s in ${span} s" \
		"$s_rate" "SMS/s" "raw HTTP sender, $senders conn., sink CPU ${rs_cpu} s in ${rs_s} s" \
		"$raw_s" "$s_n" $((2 * n)) "$s_p50" "$s_p99"
	b_bu_brow "e-mail, the dispatcher on a backlog: the burst's $be_c e-mails again as Pending rows, $be_n of $be_c in the Maildir in ${be_s} s" \
		"$be_rate" "e-mails/s" "raw SMTP sender, $senders conn." "$raw_e" "$be_n" "$be_c"
	b_bu_brow "SMS, the dispatcher on a backlog: the burst's $bs_c SMS again as Pending rows, $bs_n of $bs_c at the sink in ${bs_s} s" \
		"$bs_rate" "SMS/s" "raw HTTP sender, $senders conn." "$raw_s" "$bs_n" "$bs_c"
	ok=true
	got=${ready#connected }
	got=${got%% *}
	b_ge 60 "$i_p99" && ((i_n == subs && ${got:-0} == subs)) || ok=false
	[[ $i_p99 == 60.00 ]] && ok=false
	# nchan keeps each message nchan_message_timeout in shared memory
	# (nchan_max_reserved_memory, nginx/pin-calendar.conf)
	say "burst: nchan after the burst: $(curl -s -m 5 "http://127.0.0.1:$PUB_PORT/_pin/nchan-status" |
		sed -n 's/^\(total published messages\|stored messages\|shared memory used\|channels\): */\1 /p' |
		paste -sd, | sed 's/,/, /g')"
	b_row burst "in-app at $subs subscribers: $i_n received, max ${i_max} s, p99 ${i_pp} s after the pass; all $((2 * n)) InApp rows: $push_n pushed, p50 ${push_p50} p99 ${push_p99} max ${push_max} s" \
		"$i_n" "events" "-" "" "" "p99<60s, all" "$ok" \
		"$(awk -v v="$i_p50" 'BEGIN { printf "%.0f", v * 1000 }')" \
		"$(awk -v v="$i_p99" 'BEGIN { printf "%.0f", v * 1000 }')"
	b_bu_clean
}
