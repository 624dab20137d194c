package cast

import (
	"os"
	"testing"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/counters/counterstest"
)

// TestMain gives the tests' spinning loops room: a Loop leaves
// GOMAXPROCS alone unless asked (LoopConfig.RaiseGOMAXPROCS), and a test
// here runs up to four spinning loops beside its own goroutines on a
// machine that may have two CPUs. Its loops write their counters into a
// directory of the test binary's own (counterstest).
func TestMain(m *testing.M) {
	affinity.EnsureGOMAXPROCS(4)
	os.Exit(counterstest.Main(m))
}
