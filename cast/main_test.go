package cast

import (
	"os"
	"testing"

	"github.com/walcast/walcast/affinity"
)

// TestMain gives the tests' spinning loops room: a Loop leaves
// GOMAXPROCS alone unless asked (LoopConfig.RaiseGOMAXPROCS), and a test
// here runs up to four spinning loops beside its own goroutines on a
// machine that may have two CPUs.
func TestMain(m *testing.M) {
	affinity.EnsureGOMAXPROCS(4)
	os.Exit(m.Run())
}
