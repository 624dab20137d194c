// Package counterstest points the counters files of a test binary, and of
// every process it starts, at a directory of their own, so that no test
// writes into the host's counters directory (/dev/shm/walcast), where a
// test process that crashes or is killed would leave stale files behind.
//
// Every package whose tests run a cast.Loop (directly, through a
// Producer or Consumer, or by starting `cast` processes) calls [Main]
// from its TestMain; TestIsolated checks that each one does.
package counterstest

import (
	"fmt"
	"os"
	"testing"

	"github.com/walcast/walcast/counters"
)

// Env is the environment variable cmd/cast maps onto
// [counters.SetDefault]; Main sets it for the processes the tests start.
const Env = "WALCAST_COUNTERS"

// Main runs m's tests with the process's default counters directory
// (counters.SetDefault) and WALCAST_COUNTERS set to a fresh temporary
// directory, removes it afterwards and returns m.Run's exit code. A test
// may still set its own directory (Counters.Dir, t.Setenv(Env, …)).
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walcast-counters-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "counterstest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	counters.SetDefault(counters.Config{Dir: dir})
	if err := os.Setenv(Env, dir); err != nil {
		fmt.Fprintf(os.Stderr, "counterstest: %v\n", err)
		return 1
	}
	return m.Run()
}
