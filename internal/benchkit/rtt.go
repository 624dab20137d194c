package benchkit

import (
	"errors"
	"fmt"
	"github.com/walcast/walcast/cast"
	"time"

	"github.com/walcast/walcast/affinity"
)

// RTTConfig configures a ping-pong run.
type RTTConfig struct {
	Size   int               // bytes per ping (default 144: one 128-byte record frame plus header)
	N      int               // measured round trips (default 100000)
	Warmup int               // round trips before measuring (default 10000)
	Mode   affinity.Strategy // affinity.Spin (pinned busy-poll) or affinity.Park (netpoller)
	CPUs   [2]int            // CPUs of the client and the echo thread; -1 = unpinned (default 0, 1)
	// Timeout is how long the client waits for a reply before counting
	// the ping lost and sending the next (default 1 s).
	Timeout time.Duration
	// Batch is the datagrams per receive and per flush of the casting
	// loops (default 1: one ping is in flight, and a bigger receive
	// vector only adds a recvfrom that finds nothing).
	Batch int
	// Keys, when set, authenticate every datagram of the casting rows
	// (docs/auth.md); their rows are named with "+auth".
	Keys *cast.Keys
	// NoCounters runs the casting rows' loops without counters
	// (cast.Counters.Off; docs/operate.md); their rows are named with
	// "+nocounters".
	NoCounters bool
}

// DefaultRTTConfig is 100 000 pings of 144 bytes, spinning, pinned to CPUs 0 and 1.
func DefaultRTTConfig() RTTConfig {
	return RTTConfig{Size: 144, N: 100_000, Warmup: 10_000, Mode: affinity.Spin, CPUs: [2]int{0, 1}, Timeout: time.Second, Batch: 1}
}

// Validate reports a config that cannot run.
func (c RTTConfig) Validate() error {
	if c.Size < 16 || c.Size > 1472 {
		return fmt.Errorf("benchkit: rtt size %d outside 16..1472", c.Size)
	}
	if c.N < 1 || c.Warmup < 0 {
		return errors.New("benchkit: rtt needs N >= 1 and Warmup >= 0")
	}
	if c.Mode != affinity.Spin && c.Mode != affinity.Park {
		return fmt.Errorf("benchkit: rtt mode %v: use spin or park", c.Mode)
	}
	if c.Batch < 1 || c.Batch > 1024 {
		return fmt.Errorf("benchkit: rtt batch %d outside 1..1024", c.Batch)
	}
	if c.Timeout <= 0 {
		return errors.New("benchkit: rtt Timeout must be > 0")
	}
	return nil
}

func (c RTTConfig) pin(i int) affinity.Config {
	return affinity.OnCPU(c.CPUs[i])
}
