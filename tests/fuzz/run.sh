#!/usr/bin/env bash
# tests/fuzz/run.sh [seconds] [fuzzer...] -- build the libFuzzer harnesses of
# the host's input parsers with clang (-fsanitize=fuzzer,address,undefined)
# straight from host/*/*.c and run each for N seconds (default 45).
#
#   json     pin_json_parse          url     pin_url_decode
#   router   pin_router_match        clock   pin_clock_parse / pin_clock_fmt
#   auth     pin_auth_verify (HS256) config  pin_config_load
#   utf8     pin_utf8_valid vs a reference decoder
#   envelope pin_envelope_parse (consumer decode + validate)
#   fcgi     the event-loop FastCGI server's record parser (fcgi_loop.c)
#
# Seeds: tests/fuzz/corpus/<name>/ (read only).  Regressions:
# tests/fuzz/regress/<name>/<what-it-found> -- every input a fuzzer ever
# crashed on, named, with the fix it led to in tests/fuzz/regress/README.md;
# each runs alone first (a failure names the file), then seeds the run.  Work corpus, binaries and
# crash files: $PIN_FUZZ_DIR (default .dev/fuzz).  A crash or a failed
# property stops that fuzzer, leaves crash-* in $PIN_FUZZ_DIR/<name>/ and
# makes the script exit 1 after the others ran.  Needs clang and
# libclang-rt-<ver>-dev (libFuzzer).  Reproduce: $PIN_FUZZ_DIR/bin/fuzz_<name> FILE
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SECS=${1:-45}
shift || true
ALL=(json url router clock auth config utf8 envelope fcgi)
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=("${ALL[@]}")
OUT=${PIN_FUZZ_DIR:-$ROOT/.dev/fuzz}
CC=${FUZZ_CC:-clang}

command -v "$CC" >/dev/null || { echo "run.sh: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
mkdir -p "$OUT/bin"
# host/*/*.c include "config.h" (autoconf); the harnesses need none of it
# but the install paths the host's config table names as defaults
printf '#define _GNU_SOURCE 1\n#define PIN_PLUGIN_DIR "/nonexistent/plugins"\n#define PIN_SQL_DIR "/nonexistent/sql"\n' \
	>"$OUT/config.h"

CFLAGS=(-std=gnu11 -g -O1 -Wall -Wextra -Werror -fno-omit-frame-pointer
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-I"$OUT" -I"$ROOT/host/include" -I"$ROOT/host/core" -I"$ROOT/host/api" -I"$ROOT/host/worker" -I"$ROOT/tests/fuzz"
	$(pkg-config --cflags json-c libpq))
LIBS=($(pkg-config --libs json-c openssl libpq) -pthread)

sources() {
	local h=$ROOT/host/core a=$ROOT/host/api w=$ROOT/host/worker
	case $1 in
	json|url) echo "$h/json.c" ;;
	router)   echo "$h/router.c $h/json.c" ;;
	clock)    echo "$h/clock.c" ;;
	auth)     echo "$a/auth.c $h/config.c $h/config_keys.c $h/log.c $h/trace.c $h/clock.c $h/uuid.c $h/json.c" ;;
	config)   echo "$h/config.c $h/config_keys.c $h/log.c $h/trace.c $h/clock.c $h/uuid.c $h/json.c" ;;
	utf8)     echo "$h/utf8.c" ;;
	envelope) echo "$w/envelope.c $h/utf8.c $h/uuid.c $h/clock.c $h/log.c $h/trace.c $h/json.c" ;;
	fcgi)     echo "" ;;           # fuzz_fcgi.c includes host/api/fcgi_loop.c
	*) echo "run.sh: unknown fuzzer $1 (${ALL[*]})" >&2; return 1 ;;
	esac
}

failed=()
for f in "${WANT[@]}"; do
	src=$(sources "$f")
	bin=$OUT/bin/fuzz_$f
	# shellcheck disable=SC2086
	if ! "$CC" "${CFLAGS[@]}" -o "$bin" "$ROOT/tests/fuzz/fuzz_$f.c" $src "${LIBS[@]}"; then
		echo "run.sh: fuzz_$f does not build" >&2
		failed+=("$f (build)")
		continue
	fi
	work=$OUT/$f
	mkdir -p "$work/corpus"
	reg=$ROOT/tests/fuzz/regress/$f
	if compgen -G "$reg/*" >/dev/null; then
		if ! ( cd "$work" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
			"$bin" -timeout=10 -rss_limit_mb=1024 "$reg"/* ) >"$work/regress.log" 2>&1; then
			tail -n 40 "$work/regress.log" >&2
			echo "run.sh: fuzz_$f: a regression input fails again ($reg)" >&2
			failed+=("$f")
			continue
		fi
		echo "== fuzz_$f: $(ls "$reg" | wc -l) regression input(s) pass" >&2
	fi
	echo "== fuzz_$f: ${SECS}s" >&2
	if ( cd "$work" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 \
		-max_len=16384 -print_final_stats=1 -artifact_prefix="$work/" \
		corpus "$ROOT/tests/fuzz/corpus/$f" $(compgen -G "$reg/*" >/dev/null && echo "$reg") ) >"$work/log" 2>&1; then
		grep -E '^(stat::number_of_executed_units|Done )' "$work/log" >&2 || true
	else
		tail -n 40 "$work/log" >&2
		failed+=("$f")
	fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "run.sh: failed: ${failed[*]} (logs and crash files in $OUT/<name>/)" >&2
	exit 1
fi
echo "run.sh: all fuzzers ran ${SECS}s without a failure" >&2
