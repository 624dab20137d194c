#!/usr/bin/env bash
# Test hosts on veth: two network namespaces joined by a single-queue veth
# pair, for trying walcast by hand (the Go tests build their own pairs with
# internal/netns, with unique names). Idempotent: `up` twice leaves one pair,
# `down` on nothing is fine. Touches nothing outside the two namespaces.
#
#   scripts/netns.sh up     create (or repair) the pair and print how to use it
#   scripts/netns.sh down   delete both namespaces (and with them the veth pair)
#   scripts/netns.sh status show the pair
#
#   scripts/netns.sh bridge-up [N]   N hosts (default 3) on one Linux bridge, for
#                                    multicast fan-out: host i is 10.198.0.(i+1)/24
#                                    and fd00:198::(i+1)/64 on its veth <LINK>h<i>
#   scripts/netns.sh bridge-down     delete the bridge and its hosts
#   scripts/netns.sh bridge-status   show them
#
# Environment (defaults): NS_A=walcast-a NS_B=walcast-b LINK_A=wca LINK_B=wcb
# ADDR_A=10.199.0.1/24 ADDR_B=10.199.0.2/24 QUEUES=1 GRO=off (on|off) MTU=1500
# Bridge: FAN=walcast-fan (namespaces $FAN-sw, $FAN-h0 …; veths fanh0 … in the
# hosts, fanp0 … on the bridge) FAN_NET=10.198.0 FAN_NET6=fd00:198: GRO MTU as above.
set -euo pipefail

NS_A=${NS_A:-walcast-a}
NS_B=${NS_B:-walcast-b}
LINK_A=${LINK_A:-wca}
LINK_B=${LINK_B:-wcb}
ADDR_A=${ADDR_A:-10.199.0.1/24}
ADDR_B=${ADDR_B:-10.199.0.2/24}
QUEUES=${QUEUES:-1}
GRO=${GRO:-off}
MTU=${MTU:-1500}

die() { echo "netns.sh: $*" >&2; exit 1; }

have_ns() { [ -e "/run/netns/$1" ]; }

mac_of() { ip -n "$1" -br link show dev "$2" | awk '{print $3}'; }

up() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	command -v ip >/dev/null || die "needs ip(8) (iproute2; run scripts/setup.sh)"
	have_ns "$NS_A" || ip netns add "$NS_A"
	have_ns "$NS_B" || ip netns add "$NS_B"
	if ! ip -n "$NS_A" link show dev "$LINK_A" >/dev/null 2>&1; then
		# A half-built pair (only B's end left) would make `link add` fail.
		ip -n "$NS_B" link del dev "$LINK_B" 2>/dev/null || true
		ip link add "$LINK_A" netns "$NS_A" numtxqueues "$QUEUES" numrxqueues "$QUEUES" \
			type veth peer name "$LINK_B" netns "$NS_B" numtxqueues "$QUEUES" numrxqueues "$QUEUES"
	fi
	local ns link addr peer_addr peer_ns peer_link
	for side in a b; do
		if [ "$side" = a ]; then
			ns=$NS_A link=$LINK_A addr=$ADDR_A peer_ns=$NS_B peer_link=$LINK_B peer_addr=$ADDR_B
		else
			ns=$NS_B link=$LINK_B addr=$ADDR_B peer_ns=$NS_A peer_link=$LINK_A peer_addr=$ADDR_A
		fi
		ip -n "$ns" link set lo up
		ip -n "$ns" addr replace "$addr" dev "$link"
		ip -n "$ns" link set dev "$link" mtu "$MTU" up
		if command -v ethtool >/dev/null; then
			ip netns exec "$ns" ethtool -K "$link" gro "$GRO" >/dev/null
		fi
		ip -n "$ns" neigh replace "${peer_addr%/*}" lladdr "$(mac_of "$peer_ns" "$peer_link")" \
			dev "$link" nud permanent
	done
	status
	cat <<USAGE
Use it, for example:
  ip netns exec $NS_B ./bin/cast recv ...   # on ${ADDR_B%/*}
  ip netns exec $NS_A ./bin/cast send ...   # to ${ADDR_B%/*}
  scripts/netns.sh down                     # when done
USAGE
}

down() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	for ns in "$NS_A" "$NS_B"; do
		if have_ns "$ns"; then ip netns del "$ns"; fi
	done
	echo "netns.sh: $NS_A and $NS_B removed"
}

status() {
	for ns in "$NS_A" "$NS_B"; do
		if have_ns "$ns"; then
			echo "== $ns"
			ip -n "$ns" -br addr show
		else
			echo "== $ns (absent)"
		fi
	done
}

FAN=${FAN:-walcast-fan}
FAN_NET=${FAN_NET:-10.198.0}
FAN_NET6=${FAN_NET6:-fd00:198:}

fan_hosts() { ip netns list | awk '{print $1}' | grep -E "^$FAN-h[0-9]+$" | sort -V || true; }

bridge_up() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	command -v ip >/dev/null || die "needs ip(8) (iproute2; run scripts/setup.sh)"
	local n=${1:-3} i ns
	case "$n" in '' | *[!0-9]*) die "bridge-up N: N must be a number" ;; esac
	if [ "$n" -lt 2 ] || [ "$n" -gt 32 ]; then die "bridge-up N: N must be 2..32"; fi
	have_ns "$FAN-sw" || ip netns add "$FAN-sw"
	ip -n "$FAN-sw" link set lo up
	if ! ip -n "$FAN-sw" link show dev fanbr >/dev/null 2>&1; then
		# mcast_snooping 0: flood multicast to every port, like an
		# unmanaged switch, so delivery never waits for an IGMP report.
		ip -n "$FAN-sw" link add fanbr type bridge mcast_snooping 0
	fi
	ip -n "$FAN-sw" link set fanbr up
	for ((i = 0; i < n; i++)); do
		ns=$FAN-h$i
		have_ns "$ns" || ip netns add "$ns"
		if ! ip -n "$ns" link show dev "fanh$i" >/dev/null 2>&1; then
			ip -n "$FAN-sw" link del dev "fanp$i" 2>/dev/null || true
			ip link add "fanh$i" netns "$ns" numtxqueues 1 numrxqueues 1 \
				type veth peer name "fanp$i" netns "$FAN-sw" numtxqueues 1 numrxqueues 1
		fi
		ip -n "$FAN-sw" link set "fanp$i" master fanbr mtu "$MTU" up
		ip -n "$ns" link set lo up
		ip -n "$ns" addr replace "$FAN_NET.$((i + 1))/24" dev "fanh$i"
		ip -n "$ns" -6 addr replace "$FAN_NET6:$((i + 1))/64" dev "fanh$i" nodad
		ip -n "$ns" link set dev "fanh$i" mtu "$MTU" up
		if command -v ethtool >/dev/null; then
			ip netns exec "$ns" ethtool -K "fanh$i" gro "$GRO" >/dev/null
		fi
	done
	bridge_status
	cat <<USAGE
Use it, for example (group 239.198.0.1, port 9000):
  ip netns exec $FAN-h1 ./bin/cast recv -group 239.198.0.1:9000 -iface fanh1 &
  ip netns exec $FAN-h2 ./bin/cast recv -group 239.198.0.1:9000 -iface fanh2 &
  ip netns exec $FAN-h0 ./bin/cast send -to 239.198.0.1:9000 -iface fanh0 -n 100000
  scripts/netns.sh bridge-down              # when done
USAGE
}

bridge_down() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	local ns
	for ns in $(fan_hosts) "$FAN-sw"; do
		if have_ns "$ns"; then ip netns del "$ns"; fi
	done
	echo "netns.sh: $FAN-sw and its hosts removed"
}

bridge_status() {
	if ! have_ns "$FAN-sw"; then
		echo "== $FAN-sw (absent)"
		return
	fi
	echo "== $FAN-sw"
	ip -n "$FAN-sw" -br link show master fanbr
	local ns
	for ns in $(fan_hosts); do
		echo "== $ns"
		ip -n "$ns" -br addr show
	done
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
bridge-up) bridge_up "${2:-3}" ;;
bridge-down) bridge_down ;;
bridge-status) bridge_status ;;
*) die "usage: $0 up|down|status|bridge-up [N]|bridge-down|bridge-status" ;;
esac
