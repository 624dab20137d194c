#!/usr/bin/env bash
# Installs what the tests, benchmarks and lint need on a fresh Debian
# machine of this kind, idempotently: Debian packages (only the missing
# ones, and apt-get update only when something is missing), Go modules,
# and staticcheck. Safe to run any number of times.
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package that provides it
declare -A pkgs=(
	[ip]=iproute2
	[tc]=iproute2
	[ethtool]=ethtool
	[shellcheck]=shellcheck
	[tshark]=tshark
)
missing=()
for cmd in "${!pkgs[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkgs[$cmd]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing ${missing[*]}; run as root to install them" >&2
	else
		mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
		echo "setup: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		# tshark asks whether non-root users may capture; answer no.
		echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

go mod download
if [ -f bench/go.mod ]; then (cd bench && go mod download); fi

# staticcheck, pinned, built from the module proxy into GOPATH/bin.
sc="$(go env GOPATH)/bin/staticcheck"
if ! [ -x "$sc" ] || ! "$sc" -version 2>/dev/null | grep -q '0\.8\.2\|2026\.'; then
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
echo "setup: ok"
