package tune

import (
	"errors"
	"fmt"
	"time"

	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is returned (wrapped) by a [Prober] on platforms or
// kernels without the feature; checks report it as [Skip].
var ErrNotSupported = feature.ErrNotSupported

// Severity grades one check's outcome. Order matters: the worst result of
// a run is the maximum.
type Severity int

const (
	Pass Severity = iota // setting is as wanted
	Info                 // reported for the record; nothing to change
	Skip                 // the host does not expose it (missing file, VM, no flag given)
	Warn                 // costs latency; fix when you can
	Fail                 // breaks an assumption the loops rely on; `cast tune check` exits 1
)

var severityNames = [...]string{"pass", "info", "skip", "warn", "fail"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// MarshalText encodes s as its name ("warn").
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (s *Severity) UnmarshalText(b []byte) error {
	for i, n := range severityNames {
		if n == string(b) {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("tune: unknown severity %q", b)
}

// Result is the outcome of one check.
type Result struct {
	ID       string   `json:"id"`                // stable name, e.g. "net.rmem_max"
	Reads    string   `json:"reads"`             // the file(s) or probe consulted
	Found    string   `json:"found"`             // value found ("" when unreadable)
	Want     string   `json:"want"`              // value wanted
	Severity Severity `json:"severity"`          // outcome
	Why      string   `json:"why"`               // one line: why it matters for latency
	Fix      string   `json:"fix,omitempty"`     // shell command that fixes it
	Reboot   bool     `json:"reboot,omitempty"`  // the fix needs a reboot; Apply never does it
	Changes  []Change `json:"changes,omitempty"` // what Apply would write (empty: nothing at run time)
}

// Bad reports whether r asks for a change (warn or fail).
func (r Result) Bad() bool { return r.Severity >= Warn }

// Worst returns the highest severity in rs (Pass for none).
func Worst(rs []Result) Severity {
	w := Pass
	for _, r := range rs {
		w = max(w, r.Severity)
	}
	return w
}

// ChangeKind says how a [Change] is applied.
type ChangeKind string

const (
	KindFile     ChangeKind = "file"     // write Value to the file Target (sysctl, sysfs, procfs)
	KindFeature  ChangeKind = "feature"  // ethtool feature Name on interface Target: "on"/"off"
	KindCoalesce ChangeKind = "coalesce" // ethtool coalescing parameter Name on Target: a number, or on/off for adaptive-*
)

// Change is one run-time setting. Prev is filled in by [Apply] with the
// value read just before writing, which is what [Undo] restores.
type Change struct {
	Kind   ChangeKind `json:"kind"`
	Target string     `json:"target"`         // file path or interface name
	Name   string     `json:"name,omitempty"` // feature or coalescing parameter
	Value  string     `json:"value"`          // value to set
	Prev   string     `json:"prev,omitempty"` // value before Apply changed it
}

func (c Change) String() string {
	if c.Name == "" {
		return fmt.Sprintf("%s %s", c.Kind, c.Target)
	}
	return fmt.Sprintf("%s %s %s", c.Kind, c.Target, c.Name)
}

// Config says what the loops will use; the checks compare the host with
// it. Build it with [DefaultConfig].
type Config struct {
	Proc string // root of procfs, "/proc" outside tests
	Sys  string // root of sysfs, "/sys" outside tests

	CPUs   []int  // CPUs the datapath loops are pinned to; nil: the isolated ones, if any
	Iface  string // NIC the loops use; "": the default route's interface
	WALDir string // directory of WAL segments; "": not checked
	FIFO   bool   // the loops run SCHED_FIFO
	PID    int    // process whose timer slack is checked (and set by Apply); 0: not checked

	SockBuf        int           // socket buffer the datapath asks for, bytes (default 8 MiB)
	BusyPoll       int           // busy-poll budget wanted for net.core.busy_read/busy_poll, µs (default 50)
	MaxIdleLatency int           // idle states with a larger exit latency should be off on loop CPUs, µs (default 10)
	NapiListen     string        // "host:port" to wait on for one datagram and report its NAPI id; "": skipped
	NapiWait       time.Duration // how long to wait on NapiListen (default 5 s)

	Probe Prober // live probes; nil: the platform's own ([NewProber])
}

// DefaultConfig returns the settings of a walcast deployment with no
// explicit pinning: real /proc and /sys, 8 MiB socket buffers, 50 µs busy
// poll.
func DefaultConfig() Config {
	return Config{
		Proc:           "/proc",
		Sys:            "/sys",
		SockBuf:        8 << 20,
		BusyPoll:       50,
		MaxIdleLatency: 10,
		NapiWait:       5 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Proc == "" || c.Sys == "":
		return errors.New("tune: Proc and Sys roots must be set")
	case c.SockBuf <= 0:
		return fmt.Errorf("tune: SockBuf %d must be > 0", c.SockBuf)
	case c.BusyPoll < 0:
		return fmt.Errorf("tune: BusyPoll %d must be >= 0", c.BusyPoll)
	case c.MaxIdleLatency < 0:
		return fmt.Errorf("tune: MaxIdleLatency %d must be >= 0", c.MaxIdleLatency)
	case c.PID < 0:
		return fmt.Errorf("tune: PID %d must be >= 0", c.PID)
	case c.NapiListen != "" && c.NapiWait <= 0:
		return errors.New("tune: NapiWait must be > 0 with NapiListen")
	}
	for _, cpu := range c.CPUs {
		if cpu < 0 {
			return fmt.Errorf("tune: CPU %d must be >= 0", cpu)
		}
	}
	return nil
}
