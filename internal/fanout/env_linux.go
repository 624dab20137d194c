package fanout

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/internal/netns"
)

// Clock is a run's monotonic clock in ns, shared by every goroutine of
// the process (network namespaces share the host's clock), so the send
// time a record carries can be compared with its delivery time at any
// receiver.
type Clock struct{ base time.Time }

// NewClock starts a clock at 0.
func NewClock() Clock { return Clock{base: time.Now()} }

// Now is ns since the clock started.
func (c Clock) Now() int64 { return int64(time.Since(c.base)) }

// Env is the network of one run: a LAN whose host 0 is the sender and
// hosts 1..N the receivers (namespaces tagged "mc"), and one loss
// injector per receiver on its bridge port's egress.
type Env struct {
	LAN   *netns.LAN
	Loss  float64
	Clock Clock
	imps  []*bpf.TCImpair
	load0 [3]float64
}

// NewEnv builds the network for n receivers with independent loss (a
// probability, 0..1) on the way to each. The caller closes it.
func NewEnv(n int, loss float64) (*Env, error) {
	lc := netns.DefaultLANConfig()
	lc.Hosts, lc.Tag = n+1, "mc"
	e := &Env{Loss: loss, imps: make([]*bpf.TCImpair, n), load0: loadavg()}
	lan, err := netns.CreateLAN(lc)
	e.LAN = lan
	if err != nil {
		if lan != nil {
			lan.Close()
		}
		return nil, err
	}
	e.Clock = NewClock()
	return e, nil
}

// Sender is the sending host.
func (e *Env) Sender() netns.Host { return e.LAN.Hosts[0] }

// Receiver is receiving host i (0-based).
func (e *Env) Receiver(i int) netns.Host { return e.LAN.Hosts[i+1] }

// Impair starts the loss on the way to receiver i for datagrams to UDP
// port (what the switch forwards to that host, whoever sent it, one
// datagram at a time: the hosts segment GSO in software). No-op without
// loss.
func (e *Env) Impair(i int, port uint16) error {
	if e.Loss == 0 {
		return nil
	}
	p := e.LAN.Ports[i+1]
	im, _, err := p.AttachTCImpair(bpf.ImpairConfig{Port: port, DropFraction: e.Loss, RecordType: -1}, bpf.Egress, bpf.TCAuto)
	if err != nil {
		return fmt.Errorf("fanout: loss injector on %s: %w", p.Link, err)
	}
	if old := e.imps[i]; old != nil {
		old.Close()
	}
	e.imps[i] = im
	return nil
}

// Dropped is what the injector of receiver i dropped so far.
func (e *Env) Dropped(i int) uint64 {
	if e.imps[i] == nil {
		return 0
	}
	c, err := e.imps[i].Counters()
	if err != nil {
		return 0
	}
	return c.Dropped
}

// Load returns the load average when the Env was built and now.
func (e *Env) Load() [2][3]float64 { return [2][3]float64{e.load0, loadavg()} }

// Close detaches the injectors and deletes the namespaces.
func (e *Env) Close() error {
	for _, im := range e.imps {
		if im != nil {
			im.Close()
		}
	}
	return e.LAN.Close()
}

func loadavg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}
