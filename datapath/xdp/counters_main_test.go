package xdp

import (
	"os"
	"testing"

	"github.com/walcast/walcast/counters/counterstest"
)

// TestMain keeps the counters files of this package's loops out of the
// host's counters directory (see counterstest).
func TestMain(m *testing.M) { os.Exit(counterstest.Main(m)) }
