#!/bin/sh
# dashboard-metrics.sh DASHBOARD.json EXPOSITION-FILE...
# Every metric the Grafana dashboard queries must be one the hosts expose
# (the sample names of the given /metrics outputs); `up` is Prometheus's own.
# Prints the missing names; exit 1 when any is missing or none was queried.
set -eu
dash=$1
shift
queried=$(grep -o '"expr": *"[^"]*\(\\"[^"]*\)*"' "$dash" |
	grep -oE '\b(pin|process|notifications|calendar)_[a-z0-9_]+' | sort -u)
[ -n "$queried" ] || { echo "no metric queried in $dash"; exit 1; }
exposed=$(cat "$@" | grep -v '^#' | sed -E 's/[{ ].*//' | sort -u)
missing=$(printf '%s\n' "$queried" | while read -r m; do
	printf '%s\n' "$exposed" | grep -qx "$m" || echo "$m"
done)
if [ -n "$missing" ]; then
	echo "dashboard queries metrics no host exposes:"
	echo "$missing"
	exit 1
fi
echo "dashboard: $(echo "$queried" | wc -l) metrics queried, all exposed"
