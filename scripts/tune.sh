#!/usr/bin/env bash
# tune.sh — walcast's host checks and run-time fixes for hosts without Go.
# The same check ids, table and undo-file format as `cast tune` (tune/), so
# an undo file written by either tool is restored by either.
#
#   scripts/tune.sh check [flags]   table of pass/info/skip/warn/fail; exit 1 on any fail
#   scripts/tune.sh apply [flags]   apply the run-time fixes, log each with its previous
#                                   value, append them to an undo file; reboot-only
#                                   fixes (kernel command line) are printed, not applied
#   scripts/tune.sh undo FILE       restore an undo file, last change first
#
# flags: --cpus LIST (loop CPUs; default: the isolated ones) --iface DEV (default:
# the default route's) --wal-dir DIR --fifo --pid PID --sockbuf BYTES (8388608)
# --busy-poll US (50) --max-idle-latency US (10) --undo FILE --only ID,ID -n (dry run)
# TUNE_PROC and TUNE_SYS move the /proc and /sys roots (for fixture trees).
#
# Idempotent: apply skips what already holds, so running it twice changes
# nothing the second time. Needs bash 4, coreutils, and ethtool(8) for NIC checks.
set -euo pipefail

PROC=${TUNE_PROC:-/proc}
SYS=${TUNE_SYS:-/sys}
CPUS_ARG="" IFACE="" WALDIR="" FIFO=0 PID="" SOCKBUF=8388608 BUSY=50 MAXLAT=10
UNDO="" ONLY="" DRY=0
BQ='`'
UNDO_HEADER=$(printf '# walcast tune undo file: kind\ttarget\tname\tprev\tnew; restore with %scast tune undo FILE%s or %sscripts/tune.sh undo FILE%s' \
	"$BQ" "$BQ" "$BQ" "$BQ")

usage() {
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
}

die() {
	echo "tune.sh: $*" >&2
	exit 2
}

# ---- small helpers -------------------------------------------------------

# rd FILE: print the file's content trimmed; fail (status 1) when unreadable.
rd() {
	local v=
	[ -r "$1" ] || return 1
	# read, not $(cat): no fork (this runs hundreds of times per check).
	{ IFS= read -r -d '' v || [ -n "$v" ] || true; } 2>/dev/null <"$1" || return 1
	v="${v#"${v%%[![:space:]]*}"}"
	v="${v%"${v##*[![:space:]]}"}"
	printf '%s' "$v"
}

# bracketed "always [madvise] never" -> madvise
bracketed() {
	local v=$1
	if [[ $v =~ \[([^]]*)\] ]]; then
		printf '%s' "${BASH_REMATCH[1]}"
	else
		printf '%s' "$v"
	fi
}

# expand "0-3,5" -> "0 1 2 3 5" (sorted, unique); fails on bad input
expand_cpus() {
	local s=$1 part lo hi c
	local -a cpuset=() # indexed by CPU: "${!cpuset[*]}" is sorted and unique, no sort(1) fork
	s=${s//[[:space:]]/}
	[ -z "$s" ] || [ "$s" = "(null)" ] && return 0
	IFS=, read -ra parts <<<"$s"
	for part in "${parts[@]}"; do
		[ -z "$part" ] && continue
		part=${part%%:*}
		if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
			lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
			((lo <= hi)) || return 1
		elif [[ $part =~ ^[0-9]+$ ]]; then
			lo=$part hi=$part
		else
			return 1
		fi
		for ((c = lo; c <= hi; c++)); do cpuset[c]=1; done
	done
	local IFS=' '
	((${#cpuset[@]})) && printf '%s' "${!cpuset[*]}"
	return 0
}

# format "0 1 2 3 5" -> "0-3,5"
format_cpus() {
	local list="" start="" prev="" c
	for c in $1; do
		if [ -z "$start" ]; then
			start=$c prev=$c
		elif ((c == prev + 1)); then
			prev=$c
		else
			list+="${list:+,}$start"
			((prev > start)) && list+="-$prev"
			start=$c prev=$c
		fi
	done
	if [ -n "$start" ]; then
		list+="${list:+,}$start"
		((prev > start)) && list+="-$prev"
	fi
	printf '%s' "$list"
}

# missing_cpus WANT HAVE: members of WANT (expanded) not in HAVE (expanded)
missing_cpus() {
	local c h found out=()
	for c in $1; do
		found=0
		for h in $2; do [ "$c" = "$h" ] && found=1 && break; done
		((found)) || out+=("$c")
	done
	printf '%s' "${out[*]:-}"
}

# cmdline_param NAME: the kernel's value of NAME= (last wins, nothing after "--");
# prints "absent" status via return 1
cmdline_param() {
	local line f val="" found=1
	line=$(rd "$PROC/cmdline") || return 2
	for f in $line; do
		[ "$f" = "--" ] && break
		if [ "$f" = "$1" ]; then
			val="" found=0
		elif [[ $f == "$1="* ]]; then
			val=${f#"$1="} found=0
		fi
	done
	printf '%s' "$val"
	return $found
}

# ---- results ---------------------------------------------------------------

R_SEV=() R_ID=() R_FOUND=() R_WANT=() R_WHY=() R_FIX=() R_REBOOT=()
C_ID=() C_KIND=() C_TARGET=() C_NAME=() C_VALUE=()

# res SEV ID FOUND WANT WHY [FIX] [reboot]
res() {
	R_SEV+=("$1") R_ID+=("$2") R_FOUND+=("$3") R_WANT+=("$4") R_WHY+=("$5")
	R_FIX+=("${6:-}") R_REBOOT+=("${7:-}")
}

# change ID KIND TARGET NAME VALUE: a run-time fix of check ID
change() {
	C_ID+=("$1") C_KIND+=("$2") C_TARGET+=("$3") C_NAME+=("$4") C_VALUE+=("$5")
}

# ---- checks ------------------------------------------------------------------

ONLINE="" LOOP="" HK="" LOOPFMT=""

setup() {
	local v
	ONLINE=$(expand_cpus "$(rd "$SYS/devices/system/cpu/online" || true)") || ONLINE=""
	if [ -n "$CPUS_ARG" ]; then
		LOOP=$(expand_cpus "$CPUS_ARG") || die "bad --cpus $CPUS_ARG"
	else
		LOOP=$(expand_cpus "$(rd "$SYS/devices/system/cpu/isolated" || true)") || LOOP=""
	fi
	LOOPFMT=$(format_cpus "$LOOP")
	HK=$(missing_cpus "$ONLINE" "$LOOP")
	if [ -z "$IFACE" ] && [ -r "$PROC/net/route" ]; then
		IFACE=$(awk 'NR > 1 && $2 == "00000000" && $8 == "00000000" { print $1; exit }' "$PROC/net/route")
	fi
	v=$LOOPFMT
	[ -n "$v" ] || v=CPUS
	REBOOT_FIX="add \"isolcpus=domain,managed_irq,$v nohz_full=$v rcu_nocbs=$v\" to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot"
}

want_cpus() {
	if [ -n "$LOOP" ]; then printf 'contains %s' "$LOOPFMT"; else printf 'contains the loop CPUs (none given: pass --cpus)'; fi
}

check_online() {
	local why="a loop pinned to an offline or missing CPU fails to start" v off
	if ! v=$(rd "$SYS/devices/system/cpu/online"); then
		res skip cpu.online absent "loop CPUs online" "$why"
		return
	fi
	if [ -z "$LOOP" ]; then
		res info cpu.online "$v" "loop CPUs online (none given: pass --cpus)" "$why"
		return
	fi
	off=$(missing_cpus "$LOOP" "$ONLINE")
	if [ -n "$off" ]; then
		res fail cpu.online "$v" "$LOOPFMT online" "$why" "pin to online CPUs, or: echo 1 > /sys/devices/system/cpu/cpuN/online for $(format_cpus "$off")"
	elif [ -z "$HK" ]; then
		res warn cpu.online "$v" "$LOOPFMT online" "$why" "leave at least one CPU for the kernel, IRQs and the Go runtime"
	else
		res pass cpu.online "$v" "$LOOPFMT online" "$why"
	fi
}

check_cmdline() { # PARAM ID WHY
	local v rc=0 list cpus
	v=$(cmdline_param "$1") || rc=$?
	if ((rc == 2)); then
		res skip "$2" absent "$(want_cpus)" "$3"
		return
	fi
	if ((rc == 1)); then
		v=absent list=""
	else
		list=$v
		if [ "$1" = isolcpus ]; then
			# drop the flags (nohz, domain, managed_irq) before the list
			list=$(printf '%s' "$v" | tr ',' '\n' | grep -E '^[0-9]' | paste -sd, - || true)
		fi
	fi
	if [[ $list == *all ]]; then
		cpus=$ONLINE # cpulist_parse accepts "all"
	elif ! cpus=$(expand_cpus "$list"); then
		res warn "$2" "$v" "$(want_cpus)" "$3" "fix the kernel command line: bad CPU list $list" reboot
		return
	fi
	if [ -z "$LOOP" ]; then
		res info "$2" "$v" "$(want_cpus)" "$3"
	elif [ -n "$(missing_cpus "$LOOP" "$cpus")" ]; then
		res warn "$2" "$v" "$(want_cpus)" "$3" "$REBOOT_FIX" reboot
	else
		res pass "$2" "$v" "$(want_cpus)" "$3"
	fi
}

check_syslist() { # ID FILE WHY MISSING
	local v cpus
	if [ ! -e "$2" ]; then
		res skip "$1" "absent ($4)" "$(want_cpus)" "$3"
		return
	fi
	if ! v=$(rd "$2") || ! cpus=$(expand_cpus "$v"); then
		res skip "$1" unreadable "$(want_cpus)" "$3"
		return
	fi
	v=$(format_cpus "$cpus")
	[ -n "$v" ] || v=none
	if [ -z "$LOOP" ]; then
		res info "$1" "$v" "$(want_cpus)" "$3"
	elif [ -n "$(missing_cpus "$LOOP" "$cpus")" ]; then
		res warn "$1" "$v" "$(want_cpus)" "$3" "$REBOOT_FIX" reboot
	else
		res pass "$1" "$v" "$(want_cpus)" "$3"
	fi
}

nic_irqs() {
	local dev d
	dev="$SYS/class/net/$IFACE/device"
	{
		for d in "$dev/msi_irqs" "$(dirname "$(readlink -f "$dev" 2>/dev/null || echo /nonexistent/x)")/msi_irqs"; do
			[ -d "$d" ] && ls "$d"
		done
		if [ -r "$PROC/interrupts" ]; then
			awk -v ifc="$IFACE" '{ n = $1; sub(":", "", n); if (n !~ /^[0-9]+$/) next;
				for (i = 2; i <= NF; i++) if ($i == ifc || index($i, ifc "-") == 1) { print n; break } }' "$PROC/interrupts"
		fi
	} 2>/dev/null | grep -E '^[0-9]+$' | sort -nu | tr '\n' ' ' | sed 's/ $//' || true
}

check_irq() {
	local why="a NIC interrupt on a loop CPU preempts the loop for the whole softirq"
	local irqs irq f cpus eff found="" bad=0 changed=0 hkfmt want
	if [ -z "$IFACE" ]; then
		res skip irq.affinity "no interface (no default route; pass --iface)" - "$why"
		return
	fi
	irqs=$(nic_irqs)
	if [ -z "$irqs" ]; then
		res skip irq.affinity "$IFACE: no IRQs (virtual interface)" - "$why"
		return
	fi
	hkfmt=$(format_cpus "$HK")
	want="off the loop CPUs"
	[ -n "$LOOP" ] && want="on $hkfmt"
	for irq in $irqs; do
		f="$PROC/irq/$irq/smp_affinity_list"
		if ! cpus=$(expand_cpus "$(rd "$f")"); then
			found+=" $irq:absent"
			continue
		fi
		eff=""
		if e=$(rd "$PROC/irq/$irq/effective_affinity_list"); then
			eff="(eff $e)"
			[ -n "$LOOP" ] && [ "$(missing_cpus "$(expand_cpus "$e")" "$LOOP")" != "$(expand_cpus "$e")" ] && bad=1
		fi
		found+=" $irq:$(format_cpus "$cpus")$eff"
		if [ -n "$LOOP" ] && [ -n "$HK" ] && [ "$(missing_cpus "$cpus" "$LOOP")" != "$cpus" ]; then
			bad=1 changed=1
			change irq.affinity file "$f" - "$hkfmt"
		fi
	done
	found="$IFACE$found"
	if [ -z "$LOOP" ]; then
		res info irq.affinity "$found" "$want" "$why"
	elif [ -z "$HK" ]; then
		res warn irq.affinity "$found" "$want" "$why" "no housekeeping CPU left for IRQs; pin fewer loops"
	elif ((bad && !changed)); then
		res warn irq.affinity "$found" "$want" "$why" "managed IRQs follow isolcpus=managed_irq,CPUS on the kernel command line" reboot
	elif ((bad)); then
		res warn irq.affinity "$found" "$want" "$why" "for i in $irqs; do echo $hkfmt > /proc/irq/\$i/smp_affinity_list; done"
	else
		res pass irq.affinity "$found" "$want" "$why"
	fi
}

check_irqbalance() {
	local why="irqbalance moves NIC interrupts back onto the loop CPUs every 10 s" c running=0
	local name
	for c in "$PROC"/[0-9]*/comm; do
		# read, not $(rd): one fork per process made this the slowest check
		name=
		{ IFS= read -r name || true; } 2>/dev/null <"$c" || continue
		[ "$name" = irqbalance ] && running=1 && break
	done
	if ((!running)); then
		res pass irq.balance "not running" "not running, or banned from the loop CPUs" "$why"
	elif [ -n "$LOOP" ]; then
		res warn irq.balance running "not running, or banned from the loop CPUs" "$why" \
			"echo IRQBALANCE_BANNED_CPULIST=$LOOPFMT >> /etc/default/irqbalance && systemctl restart irqbalance"
	else
		res info irq.balance running "not running, or banned from the loop CPUs" "$why"
	fi
}

check_cpus() { if [ -n "$LOOP" ]; then printf '%s' "$LOOP"; else printf '%s' "$ONLINE"; fi; }

check_governor() {
	local why="ondemand/powersave clock the CPU down between bursts; the first packets after idle run slow"
	local c d g found="" bad=0 seen=0
	for c in $(check_cpus); do
		d="$SYS/devices/system/cpu/cpu$c/cpufreq"
		g=$(rd "$d/scaling_governor") || continue
		seen=1
		found+="${found:+ }cpu$c:$g"
		if [ "$g" != performance ]; then
			bad=1
			if [[ " $(rd "$d/scaling_available_governors" || true) " == *" performance "* ]]; then
				change cpu.governor file "$d/scaling_governor" - performance
			fi
		fi
	done
	if ((!seen)); then
		res skip cpu.governor "absent (no cpufreq: VM or no driver)" performance "$why"
	elif ((bad)); then
		res warn cpu.governor "$found" performance "$why" \
			"for c in $(check_cpus); do echo performance > /sys/devices/system/cpu/cpu\$c/cpufreq/scaling_governor; done"
	else
		res pass cpu.governor "$found" performance "$why"
	fi
}

check_idle() {
	local why="waking from a deep C-state adds its exit latency to the first packet after a pause"
	local want="states with exit latency > $MAXLAT us disabled" c st name lat dis found="" fix="" seen=0 drv
	for c in $(check_cpus); do
		for st in "$SYS/devices/system/cpu/cpu$c/cpuidle"/state[0-9]*; do
			[ -d "$st" ] || continue
			if ! { name=$(rd "$st/name") && lat=$(rd "$st/latency") && dis=$(rd "$st/disable"); }; then
				continue
			fi
			seen=1
			if ((lat > MAXLAT)) && [ "$dis" = 0 ]; then
				found+="${found:+ }cpu$c:$name(${lat}us)"
				fix+="${fix:+; }echo 1 > /sys/devices/system/cpu/cpu$c/cpuidle/${st##*/}/disable"
				change cpu.idle file "$st/disable" - 1
			fi
		done
	done
	if ((!seen)); then
		drv=$(rd "$SYS/devices/system/cpu/cpuidle/current_driver" || echo absent)
		res skip cpu.idle "no idle states exposed (driver $drv)" "$want" "$why"
	elif [ -n "$found" ]; then
		res warn cpu.idle "$found enabled" "$want" "$why" "$fix"
	else
		res pass cpu.idle "no deep state enabled" "$want" "$why"
	fi
}

check_choice() { # ID REL OKLIST SET WHY
	local f="$SYS/$2" v
	if ! v=$(rd "$f"); then
		res skip "$1" absent "${3// /|}" "$5"
		return
	fi
	v=$(bracketed "$v")
	if [[ " $3 " == *" $v "* ]]; then
		res pass "$1" "$v" "${3// /|}" "$5"
	else
		res warn "$1" "$v" "${3// /|}" "$5" "echo $4 > /sys/$2"
		change "$1" file "$f" - "$4"
	fi
}

check_swap() {
	local why="a swapped-out page of the ring costs a disk read on the hot path" devs
	if [ ! -r "$PROC/swaps" ]; then
		res skip mm.swap absent "no swap (or mlockall)" "$why"
		return
	fi
	devs=$(awk 'NR > 1 && NF >= 3 { printf "%s%s(%sKiB)", sep, $1, $3; sep = " " }' "$PROC/swaps")
	if [ -z "$devs" ]; then
		res pass mm.swap none "no swap (or mlockall)" "$why"
	else
		res warn mm.swap "$devs" "no swap (or mlockall)" "$why" "swapoff -a and remove swap from /etc/fstab (or make sure the process calls mlockall)"
	fi
}

# sysctl_fix ID FILE NAME VALUE: sets FIX, and records a change unless the
# file is read-only here (net.core.*mem_* in a child network namespace on 6.x)
FIX=""
sysctl_fix() {
	FIX="sysctl -w $3=$4"
	if [ "$(stat -c %a "$2")" = 444 ]; then
		FIX+=" on the host (read-only in this network namespace)"
	else
		change "$1" file "$2" - "$4"
	fi
}

check_sysctl_min() { # ID NAME WANT WHY
	local f="$PROC/sys/${2//.//}" v
	if [ ! -e "$f" ]; then
		if [[ $2 == net.* ]]; then
			res skip "$1" "absent (global sysctl: not visible in this network namespace)" ">= $3" "$4"
		else
			res skip "$1" absent ">= $3" "$4"
		fi
		return
	fi
	v=$(rd "$f") || { res skip "$1" unreadable ">= $3" "$4"; return; }
	if [[ $v =~ ^-?[0-9]+$ ]] && ((v >= $3)); then
		res pass "$1" "$v" ">= $3" "$4"
	else
		sysctl_fix "$1" "$f" "$2" "$3"
		res warn "$1" "$v" ">= $3" "$4" "$FIX"
	fi
}

check_sysctl_eq() { # ID NAME WANT WHY
	local f="$PROC/sys/${2//.//}" v
	v=$(rd "$f") || { res skip "$1" absent "$3" "$4"; return; }
	if [ "$v" = "$3" ]; then
		res pass "$1" "$v" "$3" "$4"
	else
		sysctl_fix "$1" "$f" "$2" "$3"
		res warn "$1" "$v" "$3" "$4" "$FIX"
	fi
}

check_sockbuf() {
	# Without Go there is no socket to probe: the grant is min(request, *mem_max).
	local why="the buffer the kernel really grants is what absorbs a burst while the loop is busy" r w
	if ! { r=$(rd "$PROC/sys/net/core/rmem_max") && w=$(rd "$PROC/sys/net/core/wmem_max"); }; then
		res skip net.sockbuf "absent" "rcv>=$SOCKBUF snd>=$SOCKBUF" "$why"
		return
	fi
	((r > SOCKBUF)) && r=$SOCKBUF
	((w > SOCKBUF)) && w=$SOCKBUF
	if ((r < SOCKBUF || w < SOCKBUF)); then
		res warn net.sockbuf "rcv=$r snd=$w" "rcv>=$SOCKBUF snd>=$SOCKBUF" "$why" \
			"sysctl -w net.core.rmem_max=$SOCKBUF net.core.wmem_max=$SOCKBUF (or run with CAP_NET_ADMIN: SO_RCVBUFFORCE)"
	else
		res pass net.sockbuf "rcv=$r snd=$w" "rcv>=$SOCKBUF snd>=$SOCKBUF" "$why"
	fi
}

ETHK="" ETHC="" ETHERR=""
load_ethtool() {
	[ -n "$IFACE" ] || return 0
	if ! command -v ethtool >/dev/null 2>&1; then
		ETHERR="ethtool not installed"
		return 0
	fi
	ETHK=$(ethtool -k "$IFACE" 2>&1) || { ETHERR=$(printf '%s' "$ETHK" | head -1); ETHK=""; }
	ETHC=$(ethtool -c "$IFACE" 2>/dev/null) || ETHC=""
}

# feature_state LABEL: on/off from ethtool -k, or nothing
feature_state() {
	printf '%s\n' "$ETHK" | awk -v l="$1:" '$1 == l { print $2; exit }'
}

check_feature() { # ID FEATURE LABEL WHY [veth-only]
	local st drv
	if [ -z "$IFACE" ]; then
		res skip "$1" "no interface (no default route; pass --iface)" on "$4"
		return
	fi
	if [ -n "$ETHERR" ]; then
		res skip "$1" "$IFACE: $ETHERR" on "$4"
		return
	fi
	st=$(feature_state "$3")
	if [ -z "$st" ]; then
		res skip "$1" "$IFACE: no feature $2" on "$4"
	elif [ "$st" = on ]; then
		res pass "$1" "$IFACE: on" on "$4"
	else
		drv=$(ethtool -i "$IFACE" 2>/dev/null | awk '$1 == "driver:" { print $2 }' || true)
		if [ -n "${5:-}" ] && [ -n "$drv" ] && [ "$drv" != veth ]; then
			res info "$1" "$IFACE: $st" "on for veth; any for $drv" "$4"
		else
			res warn "$1" "$IFACE: $st" on "$4" "ethtool -K $IFACE $2 on"
			change "$1" feature "$IFACE" "$2" on
		fi
	fi
}

check_napi() {
	local why="deferred hard IRQs let the busy-polling loop, not softirq, drain the queue" n f=""
	local want="with SO_PREFER_BUSY_POLL: napi_defer_hard_irqs>=2 gro_flush_timeout>=200000"
	if [ -z "$IFACE" ]; then
		res skip nic.napi "no interface (pass --iface)" "$want" "$why"
		return
	fi
	for n in threaded napi_defer_hard_irqs gro_flush_timeout; do
		f+=" $n=$(rd "$SYS/class/net/$IFACE/$n" || echo absent)"
	done
	res info nic.napi "$IFACE:$f" "$want" "$why"
}

# coalesce_value NAME: numeric value from ethtool -c ("adaptive-rx" -> 0/1)
coalesce_value() {
	case $1 in
	adaptive-rx) printf '%s\n' "$ETHC" | awk '$1 == "Adaptive" && $2 == "RX:" { print ($3 == "on") ? 1 : ($3 == "off" ? 0 : ""); exit }' ;;
	*) printf '%s\n' "$ETHC" | awk -v l="$1:" '$1 == l && $2 ~ /^[0-9]+$/ { print $2; exit }' ;;
	esac
}

check_coalesce() {
	local why="interrupt coalescing holds received packets back for rx-usecs before anyone sees them"
	local n v found="" fix=""
	if [ -z "$IFACE" ] || [ -z "$ETHC" ]; then
		res skip nic.coalesce "${IFACE:-no interface}: coalescing not reported" "adaptive-rx=0 rx-usecs=0" "$why"
		return
	fi
	for n in adaptive-rx rx-usecs rx-frames; do
		v=$(coalesce_value "$n")
		[ -n "$v" ] || continue
		found+="${found:+ }$n=$v"
		if [ "$n" != rx-frames ] && [ "$v" != 0 ]; then
			change nic.coalesce coalesce "$IFACE" "$n" 0
			if [ "$n" = adaptive-rx ]; then fix+=" $n off"; else fix+=" $n 0"; fi
		fi
	done
	if [ -n "$fix" ]; then
		res warn nic.coalesce "$IFACE: $found" "adaptive-rx=0 rx-usecs=0" "$why" "ethtool -C $IFACE$fix"
	else
		res pass nic.coalesce "$IFACE: $found" "adaptive-rx=0 rx-usecs=0" "$why"
	fi
}

check_rt() {
	local f="$PROC/sys/kernel/sched_rt_runtime_us" v
	local why="RT throttling parks a spinning SCHED_FIFO loop for up to 50 ms every second"
	v=$(rd "$f") || { res skip sched.rt_runtime absent "-1 when the loops run SCHED_FIFO" "$why"; return; }
	if ((!FIFO)); then
		res info sched.rt_runtime "$v" "-1 when the loops run SCHED_FIFO" "$why"
	elif [ "$v" = -1 ]; then
		res pass sched.rt_runtime "$v" -1 "$why"
	else
		res fail sched.rt_runtime "$v" -1 "$why" "sysctl -w kernel.sched_rt_runtime_us=-1"
		change sched.rt_runtime file "$f" - -1
	fi
}

check_slack() {
	local why="the default 50 us slack rounds every timed sleep and timeout up by as much" f v
	f="$PROC/${PID:-self}/timerslack_ns"
	v=$(rd "$f") || { res skip proc.timerslack absent "1 on the loop process" "$why"; return; }
	if [ -z "$PID" ]; then
		res info proc.timerslack "$v" "1 on the loop process (pass --pid to check it)" "$why"
	elif [ "$v" = 1 ]; then
		res pass proc.timerslack "$v" "1 on the loop process" "$why"
	else
		res warn proc.timerslack "$v" "1 on the loop process" "$why" "echo 1 > /proc/$PID/timerslack_ns (or prctl(PR_SET_TIMERSLACK, 1) in the loop)"
		change proc.timerslack file "$f" - 1
	fi
}

check_wal() {
	local why="without O_DIRECT every segment write goes through the page cache and writeback stalls"
	local want="O_DIRECT works, misaligned writes rejected, durable filesystem" fs p found
	if [ -z "$WALDIR" ]; then
		res skip wal.dir "not probed (pass --wal-dir)" "$want" "$why"
		return
	fi
	if ! fs=$(stat -f -c %T "$WALDIR" 2>/dev/null) || [ ! -d "$WALDIR" ]; then
		res fail wal.dir "$WALDIR: not a directory" "$want" "$why" "mkdir -p $WALDIR on a local ext4 or xfs filesystem"
		return
	fi
	[ "$fs" = ext2/ext3 ] && fs=ext4
	p="$WALDIR/.tune-sh-probe-$$"
	if dd if=/dev/zero of="$p" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
		found="$fs, O_DIRECT ok"
		if dd if=/dev/zero of="$p" bs=1 count=1 seek=4096 oflag=direct conv=notrunc status=none 2>/dev/null; then
			found+=", misaligned accepted"
		else
			found+=", misaligned rejected"
		fi
		rm -f -- "$p"
		case $fs in
		tmpfs | ramfs) res warn wal.dir "$found" "$want" "$why" "tmpfs loses the WAL at reboot: put --wal-dir on ext4 or xfs" ;;
		*) res pass wal.dir "$found" "$want" "$why" ;;
		esac
	else
		rm -f -- "$p"
		res warn wal.dir "$fs, O_DIRECT failed" "$want" "$why" "the WAL falls back to buffered writes + fdatasync: put --wal-dir on ext4 or xfs"
	fi
}

check_clock() {
	local d="$SYS/devices/system/clocksource/clocksource0" cur av
	local why="time.Now runs in the vDSO only on tsc (and a few paravirt clocks); hpet/acpi_pm make it a ~1 us syscall"
	cur=$(rd "$d/current_clocksource") || { res skip clock.source absent tsc "$why"; return; }
	av=$(rd "$d/available_clocksource" || true)
	if [ "$cur" = tsc ]; then
		res pass clock.source "$cur" tsc "$why"
	elif [[ " $av " == *" tsc "* ]]; then
		res warn clock.source "$cur" tsc "$why" "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
		change clock.source file "$d/current_clocksource" - tsc
	else
		case $cur in
		kvm-clock | hyperv_clocksource_tsc_page | arch_sys_counter) res info clock.source "$cur" tsc "$why" ;;
		*) res warn clock.source "$cur" tsc "$why" "boot with tsc=reliable if the TSC is invariant" reboot ;;
		esac
	fi
}

run_checks() {
	setup
	load_ethtool
	check_online
	check_cmdline isolcpus cmdline.isolcpus "the scheduler keeps other tasks off the loop CPUs only if they are isolated"
	check_cmdline nohz_full cmdline.nohz_full "without nohz_full a spinning loop still takes a timer tick (up to 1000/s)"
	check_cmdline rcu_nocbs cmdline.rcu_nocbs "RCU callbacks otherwise run on the loop CPUs in softirq"
	check_syslist cpu.isolated "$SYS/devices/system/cpu/isolated" \
		"what the running kernel isolated (the command line may differ from what took effect)" none
	check_syslist cpu.nohz_full "$SYS/devices/system/cpu/nohz_full" \
		"ticks stop on a CPU running one task only if the kernel runs it nohz_full" "kernel built without CONFIG_NO_HZ_FULL"
	check_irq
	check_irqbalance
	check_governor
	check_idle
	check_choice mm.thp kernel/mm/transparent_hugepage/enabled "madvise never" madvise \
		"THP=always lets khugepaged and page faults compact memory under the loop (ms stalls)"
	check_choice mm.thp_defrag kernel/mm/transparent_hugepage/defrag "madvise defer defer+madvise never" madvise \
		"defrag=always makes a page fault wait for direct compaction"
	check_swap
	check_sysctl_min net.rmem_max net.core.rmem_max "$SOCKBUF" "caps SO_RCVBUF: a small cap drops bursts before the loop drains them"
	check_sysctl_min net.wmem_max net.core.wmem_max "$SOCKBUF" "caps SO_SNDBUF: a small cap turns send bursts into ENOBUFS/EAGAIN"
	check_sysctl_min net.rmem_default net.core.rmem_default "$SOCKBUF" "what UDP sockets that never set SO_RCVBUF (peers, tools) get"
	check_sysctl_min net.busy_read net.core.busy_read "$BUSY" "default SO_BUSY_POLL: recv polls the NIC queue instead of waiting for the IRQ"
	check_sysctl_min net.busy_poll net.core.busy_poll "$BUSY" "busy polling for poll/epoll users (the netpoller path)"
	check_sockbuf
	check_sysctl_eq net.udp_early_demux net.ipv4.udp_early_demux 1 \
		"early demux finds a connected UDP socket before the route lookup (per network namespace)"
	check_feature nic.gro rx-gro generic-receive-offload "GRO on veth switches the receive side to NAPI, which busy polling needs"
	check_feature nic.gso tx-generic-segmentation generic-segmentation-offload \
		"UDP GSO sends of the mmsg datapath fall back to per-datagram sends without it"
	check_feature nic.udp_gro_fwd rx-udp-gro-forwarding rx-udp-gro-forwarding \
		"on veth, GRO with rx-udp-gro-forwarding receives UDP through NAPI, so SO_BUSY_POLL has a queue to poll" veth-only
	check_napi
	res skip nic.napi_id "not probed by tune.sh (use: cast tune check -napi-listen ADDR:PORT)" "> 0 (received through NAPI)" \
		"busy polling is a no-op on a socket whose packets carry no NAPI id (loopback, backlog veth)"
	check_coalesce
	check_rt
	check_slack
	check_wal
	check_clock
}

print_table() {
	local i w_id=5 w_found=5 pass=0 info=0 skip=0 warn=0 fail=0 how f
	for i in "${!R_ID[@]}"; do
		((${#R_ID[i]} > w_id)) && w_id=${#R_ID[i]}
		f=${#R_FOUND[i]}
		((f > 44)) && f=44
		((f > w_found)) && w_found=$f
	done
	printf "%-6s %-${w_id}s %-${w_found}s %s\n" STATUS CHECK FOUND WANT
	for i in "${!R_ID[@]}"; do
		case ${R_SEV[i]} in
		pass) pass=$((pass + 1)) ;; info) info=$((info + 1)) ;; skip) skip=$((skip + 1)) ;;
		warn) warn=$((warn + 1)) ;; fail) fail=$((fail + 1)) ;;
		esac
		printf "%-6s %-${w_id}s %-${w_found}s %s\n" "${R_SEV[i]}" "${R_ID[i]}" "${R_FOUND[i]}" "${R_WANT[i]}"
		if [ "${R_SEV[i]}" = warn ] || [ "${R_SEV[i]}" = fail ]; then
			printf '       why: %s\n' "${R_WHY[i]}"
			if [ -n "${R_FIX[i]}" ]; then
				how=fix
				if [ -n "${R_REBOOT[i]}" ]; then
					how="fix (reboot)"
				elif has_change "${R_ID[i]}"; then
					how="fix (apply)"
				fi
				printf '       %s: %s\n' "$how" "${R_FIX[i]}"
			fi
		fi
	done
	printf '%d pass, %d info, %d skip, %d warn, %d fail\n' "$pass" "$info" "$skip" "$warn" "$fail"
	FAILS=$fail
}

has_change() {
	local j
	for j in "${!C_ID[@]}"; do [ "${C_ID[j]}" = "$1" ] && return 0; done
	return 1
}

# ---- apply / undo ---------------------------------------------------------------

# current KIND TARGET NAME: the value now, in the undo file's form
current() {
	case $1 in
	file) bracketed "$(rd "$2")" ;;
	feature)
		local label=$3
		case $3 in rx-gro) label=generic-receive-offload ;; tx-generic-segmentation) label=generic-segmentation-offload ;; esac
		ETHK=$(ethtool -k "$2") || return 1
		feature_state "$label" | grep -E '^(on|off)$'
		;;
	coalesce)
		ETHC=$(ethtool -c "$2") || return 1
		coalesce_value "$3" | grep -E '^[0-9]+$'
		;;
	*) return 1 ;;
	esac
}

# set_value KIND TARGET NAME VALUE
set_value() {
	case $1 in
	file) printf '%s\n' "$4" >"$2" ;;
	feature) ethtool -K "$2" "$3" "$4" ;;
	coalesce)
		local v=$4
		if [[ $3 == adaptive-* ]]; then
			case $v in 0 | off) v=off ;; *) v=on ;; esac
		fi
		ethtool -C "$2" "$3" "$v"
		;;
	*) return 1 ;;
	esac
}

in_only() {
	[ -z "$ONLY" ] && return 0
	[[ ",$ONLY," == *",$1,"* ]]
}

do_apply() {
	local i j prev errs=0 n=0 id
	if [ -n "$ONLY" ]; then
		IFS=, read -ra want_ids <<<"$ONLY"
		for id in "${want_ids[@]}"; do
			[[ " ${R_ID[*]} " == *" $id "* ]] || die "--only: unknown check $id"
		done
	fi
	for i in "${!R_ID[@]}"; do
		in_only "${R_ID[i]}" || continue
		[ "${R_SEV[i]}" = warn ] || [ "${R_SEV[i]}" = fail ] || continue
		if [ -n "${R_REBOOT[i]}" ]; then
			printf 'reboot   %-18s %s\n' "${R_ID[i]}" "${R_FIX[i]}"
		elif ! has_change "${R_ID[i]}" && [ -n "${R_FIX[i]}" ]; then
			printf 'manual   %-18s %s\n' "${R_ID[i]}" "${R_FIX[i]}"
		fi
	done
	if [ -z "$UNDO" ]; then
		UNDO="tune-undo-$(date -u +%Y%m%dT%H%M%SZ).tsv"
	fi
	for j in "${!C_ID[@]}"; do
		in_only "${C_ID[j]}" || continue
		local k=${C_KIND[j]} t=${C_TARGET[j]} nm=${C_NAME[j]} v=${C_VALUE[j]}
		if ! prev=$(current "$k" "$t" "$nm"); then
			echo "tune.sh: ${C_ID[j]}: cannot read $k $t $nm" >&2
			errs=$((errs + 1))
			continue
		fi
		[ "$prev" = "$v" ] && continue
		if ((DRY)); then
			printf 'would    %-18s %s %s%s: %s -> %s\n' "${C_ID[j]}" "$k" "$t" "${nm/#-/}" "$prev" "$v"
			continue
		fi
		if ! set_value "$k" "$t" "$nm" "$v" 2>/dev/null; then
			echo "tune.sh: ${C_ID[j]}: setting $k $t $nm to $v failed" >&2
			errs=$((errs + 1))
			continue
		fi
		[ -s "$UNDO" ] || printf '%s\n' "$UNDO_HEADER" >>"$UNDO"
		printf '%s\t%s\t%s\t%s\t%s\n' "$k" "$t" "$nm" "$prev" "$v" >>"$UNDO"
		printf 'changed  %s %s%s: %s -> %s\n' "$k" "$t" "$([ "$nm" = - ] || printf ' %s' "$nm")" "$prev" "$v"
		n=$((n + 1))
	done
	((DRY)) && return 0
	if ((n)); then
		echo "$n changes; undo with: scripts/tune.sh undo $UNDO"
	else
		echo "nothing to apply at run time"
	fi
	((errs == 0))
}

do_undo() {
	local file=$1 k t nm prev new now errs=0
	[ -r "$file" ] || die "cannot read undo file $file"
	while IFS=$'\t' read -r k t nm prev new; do
		case $k in '' | '#'*) continue ;; file | feature | coalesce) ;; *) die "undo file: unknown kind $k" ;; esac
		if [ -z "$t" ] || [ -z "${new+x}" ]; then
			die "undo file: short line for $k $t"
		fi
		now=$(current "$k" "$t" "$nm" || echo '?')
		if set_value "$k" "$t" "$nm" "$prev" 2>/dev/null; then
			printf 'restored %s %s%s: %s -> %s\n' "$k" "$t" "$([ "$nm" = - ] || printf ' %s' "$nm")" "$now" "$prev"
		else
			echo "tune.sh: undo: setting $k $t $nm to $prev failed" >&2
			errs=$((errs + 1))
		fi
	done < <(tac -- "$file")
	((errs == 0))
}

# ---- main -----------------------------------------------------------------------

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
check | apply) ;;
undo)
	[ $# -eq 1 ] || die "usage: tune.sh undo FILE"
	do_undo "$1"
	exit
	;;
-h | --help | help)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac

while [ $# -gt 0 ]; do
	case $1 in
	--cpus) CPUS_ARG=${2:?}; shift ;;
	--iface) IFACE=${2:?}; shift ;;
	--wal-dir) WALDIR=${2:?}; shift ;;
	--fifo) FIFO=1 ;;
	--pid) PID=${2:?}; shift ;;
	--sockbuf) SOCKBUF=${2:?}; shift ;;
	--busy-poll) BUSY=${2:?}; shift ;;
	--max-idle-latency) MAXLAT=${2:?}; shift ;;
	--undo) UNDO=${2:?}; shift ;;
	--only) ONLY=${2:?}; shift ;;
	-n) DRY=1 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown flag $1 (try --help)" ;;
	esac
	shift
done
[[ $SOCKBUF =~ ^[0-9]+$ && $BUSY =~ ^[0-9]+$ && $MAXLAT =~ ^[0-9]+$ ]] || die "--sockbuf, --busy-poll and --max-idle-latency take numbers"
[ -z "$PID" ] || [[ $PID =~ ^[0-9]+$ ]] || die "--pid takes a number"

FAILS=0
run_checks
if [ "$cmd" = check ]; then
	print_table
	((FAILS == 0)) || exit 1
	exit 0
fi
do_apply
