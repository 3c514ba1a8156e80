#!/bin/bash
# check-includes.sh -- the layering of doc/developing.md is a compile error
# to break.  Each target is compiled with only the include directories it
# may see (Makefile.am); this compiles one-line sources with those same
# directories and expects each forbidden include to fail and each allowed
# one to build.  Run by `make check` (the *_INC variables come from
# AM_TESTS_ENVIRONMENT).
set -u
CC=${CC:-cc}
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#define _GNU_SOURCE 1\n' >"$tmp/config.h"

# try WHO FLAGS HEADER EXPECT(ok|refused)
try() {
	local who=$1 flags=$2 header=$3 want=$4 got
	printf '#include "config.h"\n#include "%s"\nint pin_layering_probe;\n' "$header" >"$tmp/t.c"
	# shellcheck disable=SC2086
	if $CC -fsyntax-only -I"$tmp" $flags $DEP_INC "$tmp/t.c" 2>/dev/null; then
		got=ok
	else
		got=refused
	fi
	if [[ $got == "$want" ]]; then
		printf 'ok   %-10s #include "%s": %s\n' "$who" "$header" "$got"
	else
		printf 'FAIL %-10s #include "%s": %s, expected %s\n' "$who" "$header" "$got" "$want"
		fails=$((fails + 1))
	fi
}

for h in core.h api.h worker.h pgarr.h; do
	try plugin "$SDK_INC" "$h" refused
	try calplugin "$CAL_INC" "$h" refused
done
try plugin "$SDK_INC" pin/plugin.h ok
try plugin "$SDK_INC" sdk/sdk.h ok
try notify "$SDK_INC" caldomain/event.h refused
try calplugin "$CAL_INC" caldomain/event.h ok
try sdk "$SDK_INC" caldomain/schema.h refused
try core "$CORE_INC" core.h ok
try core "$CORE_INC" api.h refused
try core "$CORE_INC" worker.h refused
try core "$CORE_INC" sdk/sdk.h refused
try api "$API_INC" api.h ok
try api "$API_INC" worker.h refused
try worker "$WORKER_INC" worker.h ok
try worker "$WORKER_INC" api.h refused

# quote includes that climb out of their directory get around the include
# path: none in host/ or plugins/ reaches into another layer that way
if grep -rnE '#include "\.\./' "$SRCDIR/host" "$SRCDIR/plugins" --include='*.[ch]'; then
	echo "FAIL: a relative include climbs out of its directory (above)"
	fails=$((fails + 1))
fi
((fails == 0)) && echo "layering: every forbidden include refused" || echo "layering: $fails failure(s)"
exit $((fails > 0))
