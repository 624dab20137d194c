package affinity

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is returned (wrapped) on platforms without thread
// affinity or SCHED_FIFO. It is walcast's one "not supported" value;
// errors.Is(err, errors.ErrUnsupported) holds too.
var ErrNotSupported = feature.ErrNotSupported

// Config places a thread. The zero Config is a locked, unpinned
// SCHED_OTHER thread; [OnCPU] builds a pinned one.
type Config struct {
	// Pin pins the thread to CPU. Off, the thread is still locked to its
	// OS thread, and the kernel places it.
	Pin bool
	// CPU is the CPU to pin to, with Pin.
	CPU int
	// FIFO, when 1..99, switches the thread to SCHED_FIFO at that
	// priority. Opt-in and risky: a thread spinning at 100% under FIFO
	// starves ksoftirqd and kworkers on its CPU (network softirqs stall),
	// and RT throttling (sched_rt_runtime_us, 950 ms per 1 s by default)
	// or the fair server can then freeze it for up to 50 ms each second.
	// Use it only on an isolated CPU with a non-spinning idle strategy
	// or with throttling understood. Needs CAP_SYS_NICE or RLIMIT_RTPRIO.
	FIFO int
}

// DefaultConfig is an unpinned, SCHED_OTHER thread: the zero Config.
func DefaultConfig() Config { return Config{} }

// OnCPU is a thread pinned to cpu, or the unpinned zero Config when cpu
// is negative (the -1 of a "-pin" flag).
func OnCPU(cpu int) Config {
	if cpu < 0 {
		return Config{}
	}
	return Config{Pin: true, CPU: cpu}
}

// ErrConfig matches every error of [Config.Validate].
var ErrConfig = cfgerr.Sentinel("affinity")

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Pin && c.CPU < 0:
		return cfgerr.New("affinity", ErrConfig, "CPU", "%d is negative", c.CPU)
	case !c.Pin && c.CPU > 0:
		return cfgerr.New("affinity", ErrConfig, "CPU", "%d set without Pin (use affinity.OnCPU)", c.CPU)
	case c.CPU >= runtime.NumCPU() && c.CPU >= 1024:
		return cfgerr.New("affinity", ErrConfig, "CPU", "%d beyond the 1024 a CPU set holds", c.CPU)
	case c.FIFO < 0 || c.FIFO > 99:
		return cfgerr.New("affinity", ErrConfig, "FIFO", "priority %d outside 0..99", c.FIFO)
	}
	return nil
}

// Thread is a goroutine locked to its own OS thread, started by [Go].
type Thread struct {
	done chan struct{}
}

// Done is closed when the function has returned (the OS thread is then
// retired by the runtime).
func (t *Thread) Done() <-chan struct{} { return t.done }

// Wait blocks until the function has returned.
func (t *Thread) Wait() { <-t.done }

// Go starts f on a new goroutine locked to its own OS thread and placed
// per c. It returns once placement is done; if it fails, f does not run
// and the error says why.
func Go(c Config, f func()) (*Thread, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t := &Thread{done: make(chan struct{})}
	setup := make(chan error, 1)
	go func() {
		defer close(t.done)
		err := Lock(c)
		setup <- err
		if err != nil {
			return
		}
		f()
	}()
	if err := <-setup; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

// GoFor starts f the way an idle strategy wants it: busy-polling
// strategies get a locked, pinned thread ([Go]); Park gets an ordinary
// goroutine, unlocked and unpinned, because a locked goroutine that parks
// on the netpoller pays two thread hand-offs per wake-up (the runtime's
// stoplockedm/startlockedm futex round trip, tens of µs here), which is
// exactly the latency parking is meant to keep low.
func GoFor(s Strategy, c Config, f func()) (*Thread, error) {
	if s != Park {
		return Go(c, f)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t := &Thread{done: make(chan struct{})}
	go func() {
		defer close(t.done)
		f()
	}()
	return t, nil
}

// ErrTooFewProcs means GOMAXPROCS leaves no P for the runtime and the
// application beside the spinning threads.
var ErrTooFewProcs = errors.New("affinity: GOMAXPROCS too low for the spinning threads")

// CheckGOMAXPROCS reports whether GOMAXPROCS leaves at least two Ps
// beside spinners busy-polling threads: each spinning locked goroutine
// holds a P for good, and the GC, the WAL's I/O goroutine and the
// application need the rest.
func CheckGOMAXPROCS(spinners int) error {
	if n := runtime.GOMAXPROCS(0); n < spinners+2 {
		return fmt.Errorf("%w: GOMAXPROCS=%d, spinners=%d; set GOMAXPROCS >= %d (it may exceed the CPU count)", ErrTooFewProcs, n, spinners, spinners+2)
	}
	return nil
}

// EnsureGOMAXPROCS raises GOMAXPROCS to spinners+2 when it is lower and
// returns the previous value. Setting it explicitly also stops the
// runtime from re-deriving it from the affinity mask.
func EnsureGOMAXPROCS(spinners int) int {
	n := runtime.GOMAXPROCS(0)
	if n < spinners+2 {
		runtime.GOMAXPROCS(spinners + 2)
	}
	return n
}

// ParseCPUList parses a kernel CPU list ("0-3,8,10-11"); an empty or
// blank string is the empty list.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var out []int
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		// isolcpus= may carry flags ("domain,managed_irq,2-3"): skip words.
		if part == "" || (part[0] < '0' || part[0] > '9') {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("affinity: CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("affinity: CPU list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// Isolation is what the kernel says about CPUs kept free of other work.
type Isolation struct {
	Isolated []int // /sys/devices/system/cpu/isolated
	NohzFull []int // /sys/devices/system/cpu/nohz_full (absent without CONFIG_NO_HZ_FULL)
	Cmdline  string
}

// Strategy says what a polling loop does when a poll found nothing.
type Strategy int

const (
	// Spin polls again at once: lowest latency, one CPU at 100%.
	Spin Strategy = iota
	// SpinYield spins Spins times, then yields the P (runtime.Gosched)
	// between polls.
	SpinYield
	// Backoff spins, yields, then sleeps with an exponential backoff
	// between MinSleep and MaxSleep: for idle-heavy links.
	Backoff
	// Park blocks on Go's netpoller until the socket is readable (the
	// loop calls the datapath's RecvWait instead of Idle): for hosts with
	// no spare core. It trades some round-trip latency for the CPU
	// (docs/datapath.md gives both modes' figures).
	Park
)

var strategyNames = [...]string{Spin: "spin", SpinYield: "yield", Backoff: "backoff", Park: "park"}

func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// ParseStrategy parses spin, yield, backoff or park ("netpoll" is an alias of park).
func ParseStrategy(s string) (Strategy, error) {
	for i, n := range strategyNames {
		if s == n {
			return Strategy(i), nil
		}
	}
	if s == "netpoll" {
		return Park, nil
	}
	return 0, fmt.Errorf("affinity: unknown idle strategy %q (spin, yield, backoff, park)", s)
}

// Idler paces a polling loop. Call Idle after each empty poll and Reset
// after a poll that found work. The zero value spins. Not safe for
// concurrent use; allocation-free.
type Idler struct {
	Strategy Strategy
	Spins    int           // empty polls before yielding (default 2000)
	Yields   int           // yields before sleeping, Backoff only (default 200)
	MinSleep time.Duration // first Backoff sleep (default 50 µs)
	MaxSleep time.Duration // longest Backoff sleep (default 1 ms)

	n     int
	sleep time.Duration
}

// Idle is called after a poll that found nothing.
func (d *Idler) Idle() {
	switch d.Strategy {
	case Spin, Park:
		return
	}
	d.n++
	spins := d.Spins
	if spins <= 0 {
		spins = 2000
	}
	if d.n <= spins {
		return
	}
	if d.Strategy == SpinYield {
		runtime.Gosched()
		return
	}
	yields := d.Yields
	if yields <= 0 {
		yields = 200
	}
	if d.n <= spins+yields {
		runtime.Gosched()
		return
	}
	lo, hi := d.MinSleep, d.MaxSleep
	if lo <= 0 {
		lo = 50 * time.Microsecond
	}
	if hi < lo {
		hi = max(lo, time.Millisecond)
	}
	if d.sleep < lo {
		d.sleep = lo
	}
	time.Sleep(d.sleep)
	d.sleep = min(2*d.sleep, hi)
}

// Reset is called after a poll that found work.
func (d *Idler) Reset() {
	d.n = 0
	d.sleep = 0
}

// Parks reports whether the loop should block in the datapath's RecvWait
// instead of calling Idle.
func (d *Idler) Parks() bool { return d.Strategy == Park }
