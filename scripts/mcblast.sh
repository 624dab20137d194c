#!/usr/bin/env bash
# A multicast group producer as a user runs one: `cast send -to
# GROUP:PORT -iface` unpaced in one network namespace, one `cast recv
# -group` in another, joined by a veth pair; N records of 128-byte
# payloads, each binary of CASTS in turn, RUNS rounds. Prints, per
# transfer, the sender's records/s and each process's CPU time (user and
# system) per record. Every transfer must deliver seq 1..N once and in
# order, both processes exiting 0; the script exits 1 if one did not
# (its output is printed). Needs root (network namespaces).
#
# A spinning loop's CPU time is its wall time, work or not: to see a
# side's work per record, park it (RECV_FLAGS="-idle park"); the sender,
# unpaced, is busy throughout either way.
#
# Usage (under the bench lock; sender pinned to CPU 0, receiver to 1):
#   make build && flock /tmp/walcast-bench.lock scripts/mcblast.sh
# Environment: CASTS ("bin/cast"; several binaries, space-separated, are
# interleaved), N (10000000), RUNS (3), RECV_FLAGS / SEND_FLAGS (extra
# flags for either side, default none).
set -euo pipefail

CASTS=${CASTS:-bin/cast}
N=${N:-10000000}
RUNS=${RUNS:-3}
RECV_FLAGS=${RECV_FLAGS:-}
SEND_FLAGS=${SEND_FLAGS:-}
GROUP=239.199.7.7:9411
for c in $CASTS; do
	[ -x "$c" ] || { echo "mcblast.sh: $c not found (make build)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "mcblast.sh: needs root (ip netns)" >&2; exit 2; }

a=mcblast-a-$$ b=mcblast-b-$$
work=$(mktemp -d)
rpid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$rpid" ]; then kill "$rpid" 2>/dev/null || true; fi
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add vmA netns "$a" type veth peer name vmB netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev vmA
ip -n "$b" addr add 10.77.0.2/24 dev vmB
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set vmA up
ip -n "$b" link set vmB up

fail=0
echo "mcblast: $N records of 128 B to $GROUP over a veth pair, $RUNS rounds, send flags '$SEND_FLAGS', recv flags '$RECV_FLAGS', $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU per record, ns: the sender's (send) and the receiver's (recv) process, user and system time"
printf '%-4s %-32s %10s %10s %10s %10s %10s\n' run binary "rec/s" "send user" "send sys" "recv user" "recv sys"
for run in $(seq "$RUNS"); do
	for c in $CASTS; do
		# Each process is timed by a shell of its own: a child of this
		# one reaped meanwhile would count.
		# shellcheck disable=SC2016,SC2086 # $@ is expanded by that shell; the flags split into words
		ip netns exec "$b" bash -c 'TIMEFORMAT="%U %S"; out=$1; shift; time "$@" >"$out" 2>&1' _ "$work/recv" \
			"$c" recv -group "$GROUP" -iface vmB -n "$N" -pin 1 -reorder 32768 $RECV_FLAGS 2>"$work/rtime" &
		rpid=$!
		sleep 0.5
		set +e
		# shellcheck disable=SC2016,SC2086 # as for the receiver
		ip netns exec "$a" bash -c 'TIMEFORMAT="%U %S"; out=$1; shift; time "$@" >"$out" 2>&1' _ "$work/send" \
			"$c" send -to "$GROUP" -iface vmA -n "$N" -pin 0 -linger 5s $SEND_FLAGS 2>"$work/time"
		src=$?
		wait "$rpid"
		rrc=$?
		set -e
		rpid=
		rate=$(sed -n 's/^sent [0-9]* records .* s: \([0-9]*\) rec\/s.*/\1/p' "$work/send")
		read -r user sys <"$work/time"
		read -r ruser rsys <"$work/rtime"
		if [ "$src" != 0 ] || [ "$rrc" != 0 ] || [ -z "$rate" ] ||
			! grep -q "^received $N records (seq 1\.\.$N, in order: true)" "$work/recv"; then
			echo "mcblast.sh: run $run of $c: send exit $src, recv exit $rrc" >&2
			cat "$work/send" "$work/recv" >&2
			fail=1
			continue
		fi
		awk -v r="$run" -v c="$c" -v rate="$rate" -v u="$user" -v s="$sys" -v ru="$ruser" -v rs="$rsys" -v n="$N" \
			'BEGIN { printf "%-4s %-32s %10s %10.1f %10.1f %10.1f %10.1f\n", r, c, rate, u * 1e9 / n, s * 1e9 / n, ru * 1e9 / n, rs * 1e9 / n }'
	done
done
exit $fail
