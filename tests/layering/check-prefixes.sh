#!/bin/bash
# check-prefixes.sh -- one name prefix per library: every global symbol the
# SDK defines starts with pc_, every one of the calendar domain library with
# cd_ (a plugin exports pin_plugin_* only: its -export-symbols-regex).  Run
# by `make check` in the build tree, after the libraries are built.
set -u
NM=${NM:-nm}
fails=0

# check ARCHIVE PREFIX
check() {
	local a=$1 p=$2 bad
	if [[ ! -f $a ]]; then
		printf 'FAIL %s: not built\n' "$a"
		fails=$((fails + 1))
		return
	fi
	# the sanitizers' own symbols (an ASan build adds __odr_asan.<name>
	# beside each global) are the compiler's, not the library's
	bad=$($NM -g --defined-only "$a" | awk -v p="$p" 'NF == 3 && index($3, p) != 1 &&
		$3 !~ /^__(odr_asan|asan|ubsan|sancov)/ { print $3 }')
	if [[ -n $bad ]]; then
		printf 'FAIL %s: symbols without the prefix %s: %s\n' "$a" "$p" "$(echo $bad)"
		fails=$((fails + 1))
	else
		printf 'ok   %s: every symbol is %s*\n' "$a" "$p"
	fi
}

check plugins/sdk/.libs/libpinsdk.a pc_
check plugins/caldomain/.libs/libpincal.a cd_
exit $((fails > 0))
