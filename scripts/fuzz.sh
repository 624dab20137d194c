#!/usr/bin/env bash
# Runs every Go fuzz target of the module (and of bench/ when present) for
# FUZZTIME each (default 3s): a smoke run for `make test`, a longer one
# with FUZZTIME=5m for `make fuzz`; FUZZMINTIME (default 5s) bounds the
# minimization of each new input.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-3s}"
# Minimizing a new interesting input runs the target without counting it
# and by default for up to 60 s each: in a short run that is most of the
# time. Keep it short so the budget goes to fuzzing.
minimize="${FUZZMINTIME:-5s}"
run_module() {
	local dir=$1
	(
		cd "$dir"
		go list -f '{{.Dir}} {{.ImportPath}}' ./... | while read -r pdir pkg; do
			targets=$(cat "$pdir"/*_test.go 2>/dev/null | grep -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/^func //' || true)
			for t in $targets; do
				echo "fuzz: $pkg $t ($fuzztime)"
				go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >/dev/null
			done
		done
	)
}
run_module .
if [ -f bench/go.mod ]; then run_module bench; fi
echo "fuzz: all targets ran"
