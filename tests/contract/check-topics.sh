#!/bin/bash
# check-topics.sh -- one list of Kafka topics (plugins/sdk/include/sdk/topics.h).
#  1. api/asyncapi.yaml's channel addresses are exactly the contract topics
#     of the list (PC_TOPICS), no more, no fewer;
#  2. every PC_TOPIC_* / PC_GROUP_* the header defines is in one of its
#     lists (PC_TOPICS, PC_DEV_TOPICS, PC_GROUPS, PC_DEV_GROUPS), except the
#     test consumer's batch topic and group, which the broker auto-creates;
#  3. no file of plugins/, tests/fixtures/ or tools/ other than the header
#     spells a topic ("pin.<context>.<name>.v<N>") or a consumer group of
#     the list out: code names them through the macros, so the list is all
#     there is.  (The benchmark programs tools/bench*.c take their topics as
#     arguments; a topic in them is sample text of a log line.)
# Run by `make check` (CC and SRCDIR from AM_TESTS_ENVIRONMENT).
set -u
CC=${CC:-cc}
SRCDIR=${SRCDIR:-.}
hdr=$SRCDIR/plugins/sdk/include/sdk/topics.h
yaml=$SRCDIR/api/asyncapi.yaml
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
	printf 'FAIL %s\n' "$*"
	fails=$((fails + 1))
}

# the lists, by the compiler (the header is the only source)
cat >"$tmp/lists.c" <<'C'
#include <stdio.h>
#include "sdk/topics.h"
#define P(tag) static void print_##tag(const char *s) { printf(#tag " %s\n", s); }
P(topic) P(dev_topic) P(group) P(dev_group)
#define T(x) print_topic(x);
#define DT(x) print_dev_topic(x);
#define G(x) print_group(x);
#define DG(x) print_dev_group(x);
int main(void)
{
	PC_TOPICS(T) PC_DEV_TOPICS(DT) PC_GROUPS(G) PC_DEV_GROUPS(DG)
	return 0;
}
C
if ! $CC -I"$SRCDIR/plugins/sdk/include" -o "$tmp/lists" "$tmp/lists.c"; then
	echo "FAIL cannot compile the lists of sdk/topics.h"
	exit 1
fi
"$tmp/lists" >"$tmp/lists.txt"
awk '$1 == "topic" { print $2 }' "$tmp/lists.txt" | sort >"$tmp/topics"
awk '{ print $2 }' "$tmp/lists.txt" | sort >"$tmp/listed"

# 1. asyncapi channels <-> PC_TOPICS
awk '/^channels:/ { c = 1; next } /^[^ ]/ { c = 0 }
	c && $1 == "address:" { print $2 }' "$yaml" | sort >"$tmp/channels"
[[ -s $tmp/channels ]] || fail "no channel address found in $yaml"
while read -r t; do
	fail "api/asyncapi.yaml: channel $t is not in PC_TOPICS of sdk/topics.h"
done < <(comm -13 "$tmp/topics" "$tmp/channels")
while read -r t; do
	fail "sdk/topics.h: contract topic $t has no channel in api/asyncapi.yaml"
done < <(comm -23 "$tmp/topics" "$tmp/channels")

# 2. every defined name is listed
$CC -dM -E -I"$SRCDIR/plugins/sdk/include" -x c "$hdr" |
	sed -n 's/^#define PC_\(TOPIC\|GROUP\)_[A-Z0-9_]* "\(.*\)"$/\2/p' | sort >"$tmp/defined"
[[ -s $tmp/defined ]] || fail "no PC_TOPIC_/PC_GROUP_ define found in $hdr"
while read -r t; do
	case $t in
	pin.test.batch.v1 | test-consumer-batch) ;;
	*) fail "sdk/topics.h: $t is defined but in none of its lists" ;;
	esac
done < <(comm -23 "$tmp/defined" "$tmp/listed")

# 3. nobody else spells them out
pat=$(sed 's/[.]/\\./g' "$tmp/defined" | paste -sd'|')
while IFS= read -r hit; do
	fail "spelt out (use sdk/topics.h): $hit"
done < <(cd "$SRCDIR" && grep -rnE --include='*.[ch]' \
	"\"(pin\\.[a-z]+\\.[a-z0-9.-]+\\.v[0-9]+|$pat)(\\.dlq)?\"" \
	plugins tests/fixtures tools |
	grep -v -e '^plugins/sdk/include/sdk/topics\.h:' -e '^tools/bench[a-z]*\.c:' |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')  # comments may name them

n=$(wc -l <"$tmp/topics")
if ((fails)); then
	printf '%d problem(s) with the topic list\n' "$fails"
	exit 1
fi
printf 'ok   %d contract topics = the channels of api/asyncapi.yaml; no copy in plugins/, tests/fixtures/, tools/\n' "$n"
exit 0
