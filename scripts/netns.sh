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
# Environment (defaults): NS_A=walcast-a NS_B=walcast-b LINK_A=wca LINK_B=wcb
# ADDR_A=10.199.0.1/24 ADDR_B=10.199.0.2/24 QUEUES=1 GRO=off (on|off) MTU=1500
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

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status" ;;
esac
