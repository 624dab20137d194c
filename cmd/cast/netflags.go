package main

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/datapath/mmsg"
	"github.com/walcast/walcast/datapath/udp"
)

// netFlags are the datapath and thread flags every networked command takes.
type netFlags struct {
	path     string
	pin      int
	idle     string
	batch    int
	noGSO    bool
	coalesce bool
	drop     float64
	mc       datapath.Multicast // group options (multicast.go); the socket is then never connected
	keyFile  string
	keys     *cast.Keys // loaded from keyFile by check; nil: unauthenticated
	kw       *keyWatch  // SIGHUP reloads keyFile (nil without it); the command calls done
}

func (nf *netFlags) add(fs *flag.FlagSet, defPath string, withDrop bool) {
	fs.StringVar(&nf.path, "path", defPath, "datapath: udp (one syscall per datagram) or mmsg (sendmmsg/recvmmsg with GSO/GRO)")
	fs.IntVar(&nf.pin, "pin", -1, "pin the loop thread to this CPU (-1: no pin)")
	fs.StringVar(&nf.idle, "idle", "spin", "idle strategy: spin, yield, backoff or park (netpoller)")
	fs.IntVar(&nf.batch, "batch", 64, "datagrams per poll and per flush")
	fs.BoolVar(&nf.noGSO, "nogso", false, "mmsg: never use UDP GSO")
	fs.BoolVar(&nf.coalesce, "coalesce", false, "pack consecutive frames into one datagram of up to 1472 bytes")
	if withDrop {
		fs.Float64Var(&nf.drop, "drop", 0, "lose this percent of received datagrams (testing)")
	}
	fs.StringVar(&nf.keyFile, "key-file", "", "authenticate every datagram with the keys in FILE (lines \"ID HEX32\"; the first tags what is sent, all are accepted; mode 0600 or 0640; SIGHUP reloads it): both ends need it, docs/auth.md")
}

// check range-checks the flags.
func (nf *netFlags) check() error {
	if nf.path != "udp" && nf.path != "mmsg" {
		return usagef("-path %q: want udp or mmsg", nf.path)
	}
	if _, err := affinity.ParseStrategy(nf.idle); err != nil {
		return usagef("-idle: %v", err)
	}
	if err := checkRange("pin", nf.pin, -1, 4095); err != nil {
		return err
	}
	if err := checkRange("batch", nf.batch, 1, 1024); err != nil {
		return err
	}
	if nf.keyFile != "" {
		k, err := cast.LoadKeyFile(nf.keyFile)
		if err != nil {
			return usagef("-key-file: %v", err)
		}
		nf.keys = k
		nf.kw = watchKeys(nf.keyFile, k)
	}
	return checkPct("drop", nf.drop)
}

// done releases what check set up (the SIGHUP handler).
func (nf *netFlags) done() { nf.kw.stop() }

// open opens the datapath bound to local and, when peer is valid,
// connected to it; with -drop it loses received datagrams.
func (nf *netFlags) open(local, peer netip.AddrPort) (datapath.Path, error) {
	if nf.mc.Enabled() {
		peer = netip.AddrPort{} // a group member talks to many addresses
	}
	var p datapath.Path
	switch nf.path {
	case "udp":
		c := udp.DefaultConfig()
		c.Local, c.Peer, c.Multicast = local, peer, nf.mc
		u, err := udp.New(c)
		if err != nil {
			return nil, err
		}
		p = u
	case "mmsg":
		c := mmsg.DefaultConfig()
		c.Local, c.Peer, c.Batch, c.NoGSO, c.Multicast = local, peer, nf.batch, nf.noGSO, nf.mc
		m, err := mmsg.New(c)
		if err != nil {
			return nil, err
		}
		p = m
	default:
		return nil, fmt.Errorf("-path %q: want udp or mmsg", nf.path)
	}
	if nf.drop > 0 {
		p = drop.New(p, drop.Config{RecvPct: nf.drop, Seed: uint64(time.Now().UnixNano())}, nf.batch, protocol.DefaultMaxFrame)
	}
	return p, nil
}

// loop returns a loop config for p with the thread and idle flags applied.
func (nf *netFlags) loop(p datapath.Path) (cast.LoopConfig, error) {
	c := cast.DefaultLoopConfig()
	c.Path, c.Batch, c.Keys = p, nf.batch, nf.keys
	c.RaiseGOMAXPROCS = true // the CLI's loops spin: leave the runtime its Ps
	c.Thread = affinity.OnCPU(nf.pin)
	s, err := affinity.ParseStrategy(nf.idle)
	if err != nil {
		return c, err
	}
	c.Idle.Strategy = s
	return c, nil
}

// senderLoop opens nf's path to peer and a loop config on it with a
// Sender of the default config (no WAL); on error the path is closed.
func (nf *netFlags) senderLoop(peer netip.AddrPort) (datapath.Path, cast.LoopConfig, error) {
	p, err := nf.open(netip.AddrPort{}, peer)
	if err != nil {
		return nil, cast.LoopConfig{}, err
	}
	lc, err := nf.loop(p)
	if err != nil {
		p.Close()
		return nil, lc, err
	}
	if lc.Sender, err = protocol.NewSender(protocol.DefaultSenderConfig(), nil); err != nil {
		p.Close()
		return nil, lc, err
	}
	return p, lc, nil
}

// producerConfig opens nf's path from local to peer and returns a
// producer config on it with the thread, idle and batch flags applied;
// the Producer built from it owns the path (close it yourself if you
// build none).
func (nf *netFlags) producerConfig(local, peer netip.AddrPort) (cast.ProducerConfig, error) {
	s, err := affinity.ParseStrategy(nf.idle)
	if err != nil {
		return cast.ProducerConfig{}, err
	}
	p, err := nf.open(local, peer)
	if err != nil {
		return cast.ProducerConfig{}, err
	}
	pc := cast.ProducerConfig{To: peer, Path: p, Thread: affinity.OnCPU(nf.pin), Keys: nf.keys}
	pc.Advanced.Batch = nf.batch
	pc.Idle.Strategy = s
	pc.Advanced.RaiseGOMAXPROCS = true // as nf.loop
	return pc, nil
}

// features describes the datapath for summaries.
func features(p datapath.Path) string {
	if d, ok := p.(*drop.Path); ok {
		p = d.Inner()
	}
	switch v := p.(type) {
	case *mmsg.Path:
		f := v.Features()
		return fmt.Sprintf("mmsg (GSO %s, GRO %s, NAPI id %d)", onOff(f.GSO), onOff(f.GRO), v.NAPIID())
	case *udp.Path:
		return fmt.Sprintf("udp (NAPI id %d)", v.NAPIID())
	}
	return "?"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// parseAddr resolves HOST:PORT (HOST may be empty: all addresses, or a
// name) to an address.
func parseAddr(s string) (netip.AddrPort, error) {
	if s == "" {
		return netip.AddrPort{}, nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	ua, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	ap := ua.AddrPort()
	if !ap.Addr().IsValid() {
		ap = netip.AddrPortFrom(netip.IPv4Unspecified(), ap.Port())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}
