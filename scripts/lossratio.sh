#!/usr/bin/env bash
# Issue 11's throughput-under-loss acceptance, as a user runs it: two
# processes on loopback at default flags, `cast recv -drop P` receiving N
# unpaced records from `cast send -wal DIR`. Each run pairs a lossless
# transfer with one at every drop rate, RUNS times interleaved, and prints
# the received rec/s of each, the ratio of the medians to the lossless
# median and each run's own ratio. Every transfer must deliver seq 1..N
# once and in order with outcome live and both processes exiting 0; the
# script exits 1 if one did not (its output is kept and printed).
#
# Usage (on a shared machine, under the bench lock):
#   make build && flock /tmp/walcast-bench.lock scripts/lossratio.sh
# Environment: CAST (bin/cast), N (1000000), DROPS ("10"), RUNS (3),
# RECV_FLAGS / SEND_FLAGS (extra flags for either side, default none).
set -euo pipefail

CAST=${CAST:-bin/cast}
N=${N:-1000000}
DROPS=${DROPS:-10}
RUNS=${RUNS:-3}
RECV_FLAGS=${RECV_FLAGS:-}
SEND_FLAGS=${SEND_FLAGS:-}
[ -x "$CAST" ] || command -v "$CAST" >/dev/null || { echo "lossratio.sh: $CAST not found (make build)" >&2; exit 2; }

work=$(mktemp -d)
rpid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$rpid" ]; then kill "$rpid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# one DROP: prints the receiver's rec/s, or "FAIL" with the outputs on stderr.
one() {
	local drop=$1 d="$work/run" port _ src=0 rrc=0
	rm -rf "$d" && mkdir -p "$d"
	# shellcheck disable=SC2086
	"$CAST" recv -listen 127.0.0.1:0 -n "$N" -drop "$drop" $RECV_FLAGS >"$d/recv.out" 2>"$d/recv.err" &
	rpid=$!
	port=
	for _ in $(seq 1 200); do
		if grep -q 'listening on' "$d/recv.err" 2>/dev/null; then
			port=$(grep -o 'listening on [^ ,]*' "$d/recv.err" | head -1 | sed 's/.*://')
			break
		fi
		sleep 0.02
	done
	if [ -z "$port" ]; then
		echo "lossratio.sh: the receiver did not listen" >&2
		cat "$d/recv.err" >&2
		echo FAIL
		return
	fi
	# shellcheck disable=SC2086
	"$CAST" send -to "127.0.0.1:$port" -wal "$d/wal" -n "$N" $SEND_FLAGS >"$d/send.out" 2>"$d/send.err" || src=$?
	wait "$rpid" || rrc=$?
	rpid=
	local line
	line=$(grep '^received ' "$d/recv.out" || true)
	if [ "$src" != 0 ] || [ "$rrc" != 0 ] || ! grep -q '^outcome: live' "$d/recv.out" ||
		! grep -q "seq 1\.\.$N, in order: true" <<<"$line"; then
		echo "lossratio.sh: -drop $drop: send exit $src, recv exit $rrc" >&2
		cat "$d/send.err" "$d/send.out" "$d/recv.err" "$d/recv.out" >&2
		echo FAIL
		return
	fi
	sed 's/.*: \([0-9]*\) rec\/s.*/\1/' <<<"$line"
}

median() { tr ' ' '\n' | awk '$1 ~ /^[0-9]+$/' | sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $N records, default flags${RECV_FLAGS:+, recv $RECV_FLAGS}${SEND_FLAGS:+, send $SEND_FLAGS}"
failed=0
declare -A got
for r in $(seq 1 "$RUNS"); do
	for p in 0 $DROPS; do
		v=$(one "$p")
		[ "$v" = FAIL ] && failed=1
		got[$p]="${got[$p]:-} $v"
		echo "run $r -drop $p: $v rec/s"
	done
done
base=$(echo "${got[0]}" | median)
for p in $DROPS; do
	m=$(echo "${got[$p]}" | median)
	pairs=$(paste -d' ' <(echo "${got[0]}" | tr ' ' '\n' | awk 'NF') <(echo "${got[$p]}" | tr ' ' '\n' | awk 'NF') |
		awk '$1 != "FAIL" && $2 != "FAIL" {printf "%s%.2f", (n++ ? " · " : ""), $2/$1}')
	echo "-drop $p / lossless: medians $m / $base = $(awk -v a="$m" -v b="$base" 'BEGIN {if (a != "-" && b != "-" && b > 0) printf "%.2f", a/b; else print "-"}'); per run: $pairs"
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
