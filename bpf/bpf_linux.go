package bpf

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

var memlock = sync.OnceValue(rlimit.RemoveMemlock)

// prepare lifts RLIMIT_MEMLOCK (needed before 5.11, where BPF memory was
// charged to it; a no-op where memcg accounting is used).
func prepare() error {
	if err := memlock(); err != nil {
		return fmt.Errorf("bpf: remove memlock limit: %w", err)
	}
	return nil
}

func newProgram(name string, s progSpec) (*ebpf.Program, error) {
	typ := ebpf.XDP
	if s.tc {
		typ = ebpf.SchedCLS
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         typ,
		License:      "Dual MIT/GPL",
		Instructions: s.instructions(),
	})
	if err != nil {
		return nil, fmt.Errorf("bpf: load %s program: %w", name, err)
	}
	return p, nil
}

// attacher holds a program and the link that attaches it.
type attacher struct {
	prog *ebpf.Program
	lk   link.Link
	mode Mode
}

// attach links the program to ifindex. ModeAuto tries native mode and falls
// back to generic; the mode used is returned.
func (a *attacher) attach(ifindex int, want Mode) (Mode, error) {
	if a.lk != nil {
		return a.mode, fmt.Errorf("bpf: program already attached (%v mode)", a.mode)
	}
	try := func(m Mode) error {
		flags := link.XDPDriverMode
		if m == ModeGeneric {
			flags = link.XDPGenericMode
		}
		lk, err := link.AttachXDP(link.XDPOptions{Program: a.prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return fmt.Errorf("bpf: attach XDP to ifindex %d in %v mode: %w", ifindex, m, err)
		}
		a.lk, a.mode = lk, m
		return nil
	}
	switch want {
	case ModeNative, ModeGeneric:
		if err := try(want); err != nil {
			return 0, err
		}
	default:
		if errNative := try(ModeNative); errNative != nil {
			if err := try(ModeGeneric); err != nil {
				return 0, errors.Join(errNative, err)
			}
		}
	}
	return a.mode, nil
}

func (a *attacher) detach() error {
	if a.lk == nil {
		return nil
	}
	err := a.lk.Close()
	a.lk = nil
	if err != nil {
		return fmt.Errorf("bpf: detach: %w", err)
	}
	return nil
}

// run executes the program once over frame with BPF_PROG_TEST_RUN and
// returns its verdict.
func (a *attacher) run(frame []byte) (uint32, error) {
	v, err := a.prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return 0, fmt.Errorf("bpf: test run: %w", err)
	}
	return v, nil
}

// impairMaps are the configuration and counter maps the impair logic
// reads and updates, in XDP ([Impair]) and tc ([TCImpair]) alike.
type impairMaps struct {
	cfg, ctr *ebpf.Map
	tcp      bool // the loaded program matches TCP (ImpairConfig.TCP)
}

// newImpairMaps validates c and creates both maps holding it.
func newImpairMaps(c ImpairConfig) (impairMaps, error) {
	m := impairMaps{tcp: c.TCP}
	if err := c.Validate(); err != nil {
		return m, err
	}
	if err := prepare(); err != nil {
		return m, err
	}
	var err error
	m.cfg, err = ebpf.NewMap(&ebpf.MapSpec{Name: "impair_cfg", Type: ebpf.Array, KeySize: 4, ValueSize: impairCfgSize, MaxEntries: 1})
	if err != nil {
		return m, fmt.Errorf("bpf: create impair config map: %w", err)
	}
	m.ctr, err = ebpf.NewMap(&ebpf.MapSpec{Name: "impair_ctr", Type: ebpf.Array, KeySize: 4, ValueSize: impairCtrSize, MaxEntries: 1})
	if err != nil {
		m.close()
		return m, fmt.Errorf("bpf: create impair counter map: %w", err)
	}
	if err := m.Set(c); err != nil {
		m.close()
		return m, err
	}
	return m, nil
}

func (m *impairMaps) spec() progSpec {
	return progSpec{impairCfgFD: m.cfg.FD(), impairCtrFD: m.ctr.FD(), tcp: m.tcp}
}

func (m *impairMaps) close() error {
	var err error
	if m.ctr != nil {
		err = m.ctr.Close()
	}
	if m.cfg != nil {
		err = errors.Join(err, m.cfg.Close())
	}
	return err
}

// Set replaces the configuration; the attached program sees it from the
// next datagram on. Counters are kept.
func (m *impairMaps) Set(c ImpairConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.TCP != m.tcp {
		return fmt.Errorf("bpf: impair TCP is fixed when the program is loaded (%v), not %v", m.tcp, c.TCP)
	}
	if err := m.cfg.Put(uint32(0), c.value()); err != nil {
		return fmt.Errorf("bpf: update impair config: %w", err)
	}
	return nil
}

// Counters reads the counters (all CPUs; updated atomically by the program).
func (m *impairMaps) Counters() (ImpairCounters, error) {
	b := make([]byte, impairCtrSize)
	if err := m.ctr.Lookup(uint32(0), &b); err != nil {
		return ImpairCounters{}, fmt.Errorf("bpf: read impair counters: %w", err)
	}
	return parseCounters(b), nil
}

// Impair is a loaded loss-injection program with its maps.
type Impair struct {
	attacher
	impairMaps
}

// NewImpair loads the impair program configured with c. It is not attached;
// see [Impair.Attach], or embed it with [RedirectConfig.Impair].
func NewImpair(c ImpairConfig) (*Impair, error) {
	if c.TCP {
		return nil, fmt.Errorf("bpf: impair TCP is for the tc program (NewTCImpair) only")
	}
	m, err := newImpairMaps(c)
	if err != nil {
		return nil, err
	}
	im := &Impair{impairMaps: m}
	im.prog, err = newProgram("walcast_impair", m.spec())
	if err != nil {
		im.Close()
		return nil, err
	}
	return im, nil
}

// Attach links the standalone impair program to the interface ifindex (of
// the calling thread's network namespace) and returns the mode used.
func (im *Impair) Attach(ifindex int, m Mode) (Mode, error) { return im.attach(ifindex, m) }

// Mode is the attach mode, or ModeAuto when not attached.
func (im *Impair) Mode() Mode { return im.mode }

// Run executes the standalone program once over an Ethernet frame (for
// tests; BPF_PROG_TEST_RUN) and returns the XDP verdict.
func (im *Impair) Run(frame []byte) (uint32, error) { return im.run(frame) }

// Close detaches the program if attached and frees the program and maps.
// Redirect programs that embed this Impair keep their own references.
func (im *Impair) Close() error {
	err := im.detach()
	if im.prog != nil {
		err = errors.Join(err, im.prog.Close())
	}
	return errors.Join(err, im.impairMaps.close())
}

// Redirect is a loaded redirect program with its XSKMAP (and, when
// port-keyed, its port map).
type Redirect struct {
	attacher
	xsks  *ebpf.Map
	ports *ebpf.Map // PortSlots > 0: u32 port as loaded → u32 slot
	cfg   RedirectConfig
}

// NewRedirect loads the redirect program. It is not attached.
func NewRedirect(c RedirectConfig) (*Redirect, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := prepare(); err != nil {
		return nil, err
	}
	r := &Redirect{cfg: c}
	var err error
	slots := c.Queues
	if c.PortSlots > 0 {
		slots = c.PortSlots
	}
	r.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "walcast_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(slots)})
	if err != nil {
		return nil, fmt.Errorf("bpf: create XSKMAP: %w", err)
	}
	s := progSpec{redirectPort: c.Port, xskFD: r.xsks.FD(), fallback: c.Fallback}
	if c.PortSlots > 0 {
		r.ports, err = ebpf.NewMap(&ebpf.MapSpec{Name: "walcast_ports", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: uint32(c.PortSlots)})
		if err != nil {
			r.xsks.Close()
			return nil, fmt.Errorf("bpf: create port map: %w", err)
		}
		s.portsFD = r.ports.FD()
	}
	if c.Impair != nil {
		s.impairCfgFD, s.impairCtrFD = c.Impair.cfg.FD(), c.Impair.ctr.FD()
	}
	r.prog, err = newProgram("walcast_redir", s)
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// RegisterPort makes socket fd (in slot, 0..PortSlots-1) receive the
// datagrams to port, on a port-keyed redirect (PortSlots > 0).
func (r *Redirect) RegisterPort(port uint16, slot, fd int) error {
	if r.ports == nil {
		return errors.New("bpf: RegisterPort on a queue-keyed redirect (PortSlots 0)")
	}
	if slot < 0 || slot >= r.cfg.PortSlots || port == 0 {
		return fmt.Errorf("bpf: port %d slot %d: want a port and a slot in 0..%d", port, slot, r.cfg.PortSlots-1)
	}
	if err := r.xsks.Put(uint32(slot), uint32(fd)); err != nil {
		return fmt.Errorf("bpf: register socket in slot %d: %w", slot, err)
	}
	if err := r.ports.Put(uint32(be16(port)), uint32(slot)); err != nil {
		return fmt.Errorf("bpf: register port %d: %w", port, err)
	}
	return nil
}

// UnregisterPort removes port and its slot's socket; its datagrams go to
// the kernel again.
func (r *Redirect) UnregisterPort(port uint16, slot int) error {
	if r.ports == nil {
		return errors.New("bpf: UnregisterPort on a queue-keyed redirect (PortSlots 0)")
	}
	if err := r.ports.Delete(uint32(be16(port))); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: unregister port %d: %w", port, err)
	}
	if err := r.xsks.Delete(uint32(slot)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: unregister slot %d: %w", slot, err)
	}
	return nil
}

// Register makes the AF_XDP socket fd receive the datagrams of queue.
func (r *Redirect) Register(queue, fd int) error {
	if queue < 0 || queue >= r.cfg.Queues {
		return fmt.Errorf("bpf: queue %d outside the XSKMAP (0..%d)", queue, r.cfg.Queues-1)
	}
	if err := r.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("bpf: register socket for queue %d: %w", queue, err)
	}
	return nil
}

// Unregister removes the socket of queue; its datagrams get the fallback
// verdict again.
func (r *Redirect) Unregister(queue int) error {
	if err := r.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: unregister queue %d: %w", queue, err)
	}
	return nil
}

// Attach links the program to ifindex (of the calling thread's network
// namespace) and returns the mode used.
func (r *Redirect) Attach(ifindex int, m Mode) (Mode, error) { return r.attach(ifindex, m) }

// Mode is the attach mode, or ModeAuto when not attached.
func (r *Redirect) Mode() Mode { return r.mode }

// Run executes the program once over an Ethernet frame (for tests;
// BPF_PROG_TEST_RUN, rx_queue_index 0) and returns the XDP verdict.
func (r *Redirect) Run(frame []byte) (uint32, error) { return r.run(frame) }

// Close detaches the program if attached and frees the program and map.
func (r *Redirect) Close() error {
	err := r.detach()
	if r.prog != nil {
		if e := r.prog.Close(); e != nil && err == nil {
			err = e
		}
	}
	if r.xsks != nil {
		if e := r.xsks.Close(); e != nil && err == nil {
			err = e
		}
	}
	if r.ports != nil {
		if e := r.ports.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}
