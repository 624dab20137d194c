#!/usr/bin/env bash
# A/B of the casting RTT between cast binaries (built at two commits, say):
# SETS sets, each running `cast bench rtt -mode spin -json` once with every
# binary of CASTS, in an order that alternates from set to set. Per binary
# it prints, over all its runs (every run interleaves floor-loop, raw-udp,
# casting-udp and casting-mmsg), the median with min–max of
#   cu-raw   casting-udp p50 − raw-udp p50 of the same run, ns: what the
#            protocol adds on top of the datapath, the floor's noise
#            cancelled
#   cu/floor casting-udp p50 ÷ floor-loop p50 (issue 26 item 4's ratio)
#   cm-raw   casting-mmsg p50 − raw-udp p50 of the same run, ns
#   cm/floor casting-mmsg p50 ÷ floor-loop p50
# and the per-set medians of cu-raw, so that a difference can be checked
# against the spread between sets.
#
# Usage (takes the bench lock for each invocation):
#   git worktree add /tmp/old HEAD~1 && (cd /tmp/old && go build -o /tmp/cast-old ./cmd/cast)
#   go build -o /tmp/cast-new ./cmd/cast
#   CASTS="/tmp/cast-old /tmp/cast-new" scripts/rttab.sh
# Environment: CASTS (required, two or more binaries), SETS (10), RUNS
# (15 runs a set), N (20000 round trips a row; warm-up N/10).
set -euo pipefail

CASTS=${CASTS:?CASTS: the cast binaries to compare, space-separated}
SETS=${SETS:-10}
RUNS=${RUNS:-15}
N=${N:-20000}
for c in $CASTS; do
	[ -x "$c" ] || { echo "rttab.sh: $c not found" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

read -r -a bins <<<"$CASTS"
for s in $(seq 1 "$SETS"); do
	order=("${bins[@]}")
	if [ $((s % 2)) = 0 ]; then
		order=()
		for ((i = ${#bins[@]} - 1; i >= 0; i--)); do order+=("${bins[i]}"); done
	fi
	for c in "${order[@]}"; do
		flock /tmp/walcast-bench.lock "$c" bench rtt -mode spin -runs "$RUNS" -n "$N" -warmup $((N / 10)) -json >"$work/out" 2>"$work/err" ||
			{ cat "$work/err" >&2; echo "rttab.sh: $c bench rtt failed" >&2; exit 1; }
		# One line per row of a run: binary set run name p50_ns.
		awk -v c="$c" -v s="$s" '/"run":/ {
			match($0, /"name":"[^"]*"/); name = substr($0, RSTART + 8, RLENGTH - 9)
			match($0, /"p50_ns":[0-9]+/); p50 = substr($0, RSTART + 9, RLENGTH - 9)
			match($0, /"run":[0-9]+/); run = substr($0, RSTART + 6, RLENGTH - 6)
			print c, s, run, name, p50 }' "$work/out" >>"$work/rows"
	done
	echo "set $s of $SETS done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

awk '
function med(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function stat(k, fmt,    n, i, a) {
	n = cnt[k]; for (i = 1; i <= n; i++) a[i] = v[k, i]
	return sprintf(fmt " (" fmt "–" fmt ")", med(a, n), a[1], a[n])
}
function add(k, x) { v[k, ++cnt[k]] = x }
{ p[$1, $2, $3, $4] = $5; key[$1 SUBSEP $2 SUBSEP $3] = 1; if (!($1 in seen)) { seen[$1] = 1; order[++nb] = $1 }; if ($2 > sets) sets = $2 }
END {
	for (k in key) {
		split(k, f, SUBSEP); b = f[1]
		fl = p[k, "floor-loop"]; raw = p[k, "raw-udp"]; cu = p[k, "casting-udp"]; cm = p[k, "casting-mmsg"]
		if (fl == "" || raw == "" || cu == "") continue
		add(b SUBSEP "d", cu - raw); add(b SUBSEP "r", cu / fl)
		if (cm != "") { add(b SUBSEP "md", cm - raw); add(b SUBSEP "m", cm / fl) }
		add(b SUBSEP "d" SUBSEP f[2], cu - raw)
	}
	printf "%-28s %6s %24s %22s %24s %22s\n", "binary", "runs", "cu-raw ns", "cu/floor", "cm-raw ns", "cm/floor"
	for (i = 1; i <= nb; i++) {
		b = order[i]
		printf "%-28s %6d %24s %22s %24s %22s\n", b, cnt[b SUBSEP "d"], stat(b SUBSEP "d", "%.0f"), stat(b SUBSEP "r", "%.3f"), stat(b SUBSEP "md", "%.0f"), stat(b SUBSEP "m", "%.3f")
	}
	for (i = 1; i <= nb; i++) {
		b = order[i]; line = ""
		for (s = 1; s <= sets; s++) {
			n = cnt[b SUBSEP "d" SUBSEP s]; delete a
			for (j = 1; j <= n; j++) a[j] = v[b SUBSEP "d" SUBSEP s, j]
			line = line sprintf(" %.0f", med(a, n))
		}
		printf "%s cu-raw by set:%s\n", b, line
	}
}' "$work/rows"
