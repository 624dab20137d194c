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
# fuzz_one runs one target. A failure that wrote a crasher into
# testdata/fuzz is the code's and fails at once, with the output. A failure
# without one is the fuzzing engine's own (on a loaded machine a worker can
# be declared hung: "fuzzing process hung or terminated unexpectedly"); it
# is printed and the target is run once more, and a second such failure
# fails too.
fuzz_one() {
	local pdir=$1 pkg=$2 t=$3 out try
	out=$(mktemp)
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >"$out" 2>&1; then
			rm -f "$out"
			return 0
		fi
		tail -n 30 "$out" | sed 's/^/  | /'
		if [ -n "$(git -C "$pdir" status --porcelain -- "testdata/fuzz/$t" 2>/dev/null)" ] || [ "$try" = 2 ]; then
			echo "fuzz: $pkg $t FAILED (a new input in $pdir/testdata/fuzz/$t is the crasher when one was written)"
			rm -f "$out"
			return 1
		fi
		echo "fuzz: $pkg $t: the engine failed without a crasher; running it once more"
	done
}
run_module() {
	local dir=$1
	(
		cd "$dir"
		go list -f '{{.Dir}} {{.ImportPath}}' ./... | while read -r pdir pkg; do
			targets=$(cat "$pdir"/*_test.go 2>/dev/null | grep -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/^func //' || true)
			for t in $targets; do
				echo "fuzz: $pkg $t ($fuzztime)"
				fuzz_one "$pdir" "$pkg" "$t"
			done
		done
	)
}
run_module .
if [ -f bench/go.mod ]; then run_module bench; fi
echo "fuzz: all targets ran"
