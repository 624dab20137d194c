package cast

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/internal/netns"
	"github.com/walcast/walcast/wire"
)

// The group test of loop_auth_group_test.go over real multicast (root:
// network namespaces): a keyed sender and two keyed receivers on three
// hosts of a bridged LAN, and a forger on a fourth that joined the data
// and control groups (a tap: it hears every member). Forged NAK and
// Status frames sent to the control group, the same under a wrong
// secret, and the genuine datagrams the tap heard (data, heartbeats,
// probes, Status), replayed to the group they were heard on, are refused
// by every member and counted by reason; no NAK is served, no receiver
// joins or leaves, no record is delivered twice, and the genuine stream
// completes in order at both receivers.
func TestLoopAuthGroupNetns(t *testing.T) {
	c := netns.DefaultLANConfig()
	c.Hosts, c.Tag = 4, "ag"
	lan := netns.NewLAN(t, c)
	group := netip.MustParseAddrPort("239.199.2.1:9411")
	ctrl := datapath.ControlGroup(group)
	open := func(h netns.Host, groups ...netip.Addr) datapath.Path {
		t.Helper()
		var p datapath.Path
		err := h.Do(func() error {
			cfg := udp.DefaultConfig()
			cfg.Local = netip.AddrPortFrom(netip.IPv4Unspecified(), group.Port())
			cfg.Multicast = datapath.Multicast{Iface: h.Link, Groups: groups, TTL: 1}
			u, err := udp.New(cfg)
			p = u
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sp := open(lan.Hosts[0], ctrl.Addr())
	rps := []datapath.Path{open(lan.Hosts[1], group.Addr(), ctrl.Addr()), open(lan.Hosts[2], group.Addr(), ctrl.Addr())}
	fp := open(lan.Hosts[3], group.Addr(), ctrl.Addr())
	defer fp.Close()
	source := netip.AddrPortFrom(lan.Hosts[0].Addr, group.Port())

	// The tap: every datagram the forger hears, by source address.
	var tapMu sync.Mutex
	heard := map[netip.AddrPort][][]byte{}
	tapDone := make(chan struct{})
	var tapStop atomic.Bool
	go func() {
		defer close(tapDone)
		v := batch.New(64, protocol.MaxDatagram)
		for !tapStop.Load() {
			n, err := fp.Recv(v)
			if err != nil {
				if !errors.Is(err, datapath.ErrClosed) {
					t.Error(err)
				}
				return
			}
			tapMu.Lock()
			for i := range n {
				d, from := v.Msg(i)
				heard[from] = append(heard[from], bytes.Clone(d))
			}
			tapMu.Unlock()
			if n == 0 {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	// A datapath is owned by one goroutine: the tap stops before the
	// forger sends on the same socket.
	stopTap := sync.OnceFunc(func() { tapStop.Store(true); <-tapDone })
	defer stopTap()

	got := make([]atomic.Int64, 2)
	inOrder := make([]atomic.Bool, 2)
	var rloops []*Loop
	for i, p := range rps {
		rc := protocol.DefaultReceiverConfig()
		rc.Sender, rc.ID = ctrl, uint64(1000+i)
		tolerateStalls(&rc)
		rcv, err := protocol.NewReceiver(rc)
		if err != nil {
			t.Fatal(err)
		}
		inOrder[i].Store(true)
		l := DefaultLoopConfig()
		l.Path, l.Receiver, l.Keys, l.Source = p, rcv, testKeys, source
		l.OnRecord = func(_ *Loop, _ wire.Header, p []byte) {
			if wire.Seq(p) != uint64(got[i].Add(1)) {
				inOrder[i].Store(false)
			}
		}
		rl, err := StartLoop(l)
		if err != nil {
			t.Fatal(err)
		}
		defer rl.Close()
		rloops = append(rloops, rl)
	}
	sc := protocol.DefaultSenderConfig()
	sc.Dest, sc.AcceptAnyNakSource, sc.MaxReceivers = group, true, 8
	sc.ReceiverTimeout = stallBudget
	snd, err := protocol.NewSender(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	var target atomic.Int64
	var sent int64
	payload := make([]byte, 64)
	sl := DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Keys = sp, snd, testKeys
	sl.OnPoll = func(l *Loop, _ int64) {
		for sent < target.Load() {
			if _, err := l.Send(1, payload); err != nil {
				return
			}
			sent++
		}
	}
	sloop, err := StartLoop(sl)
	if err != nil {
		t.Fatal(err)
	}
	defer sloop.Close()
	waitFor := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for (got[0].Load() < n || got[1].Load() < n) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got[0].Load() != n || got[1].Load() != n {
			t.Fatalf("delivered %d and %d of %d", got[0].Load(), got[1].Load(), n)
		}
	}
	target.Store(1000)
	waitFor(1000)
	// The blast of 1000 may have lost datagrams in a socket buffer (a
	// receiver repairs them by NAK): one that a member never received is
	// new to it, not a replay. What the tap hears from now on, with the
	// stream nearly idle (10 more records, heartbeats, probes, Status),
	// reaches every member.
	r0, r1 := netip.AddrPortFrom(lan.Hosts[1].Addr, group.Port()), netip.AddrPortFrom(lan.Hosts[2].Addr, group.Port())
	time.Sleep(100 * time.Millisecond)
	tapMu.Lock()
	mark := map[netip.AddrPort]int{r0: len(heard[r0]), r1: len(heard[r1]), source: len(heard[source])}
	tapMu.Unlock()
	target.Store(1010)
	waitFor(1010)
	// Both receivers in the sender's table, and datagrams from each
	// member heard by the tap since the mark.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tapMu.Lock()
		n0, n1, ns := len(heard[r0])-mark[r0], len(heard[r1])-mark[r1], len(heard[source])-mark[source]
		tapMu.Unlock()
		if n0 > 0 && n1 > 0 && ns > 0 && len(sloop.Receivers()) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tap heard %d/%d/%d datagrams, the sender's table %+v", n0, n1, ns, sloop.Receivers())
		}
	}
	time.Sleep(20 * time.Millisecond) // what the tap heard last reaches the members too
	stopTap()
	ctl := append(append([][]byte(nil), heard[r0][mark[r0]:]...), heard[r1][mark[r1]:]...)
	data := append([][]byte(nil), heard[source][mark[source]:]...)

	fresh := [][]byte{
		frame(128, func(b []byte) int { return wire.PutNakFrame(b, wire.Nak{From: 1, Count: 1000}) }),
		frame(128, func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: 1000, Highest: 1000, ReceiverID: 77, Window: 1 << 20, Serial: 1, Flags: wire.StatusSynced})
		}),
		frame(128, func(b []byte) int {
			return wire.PutStatusFrame(b, wire.Status{Delivered: 1000, Highest: 1000, ReceiverID: 1000, Serial: 1 << 30, Flags: wire.StatusSynced | wire.StatusClosing})
		}),
	}
	toCtl := append([][]byte(nil), fresh...)
	wrong := wire.Key{ID: testKeys.Send.ID}
	for _, d := range fresh {
		toCtl = append(toCtl, sealAs(t, wrong, NewEpoch(), d))
	}
	nFresh := len(toCtl)
	toCtl = append(toCtl, ctl...)

	s0 := sloop.SenderStats()
	var rs0 []protocol.ReceiverStats
	for _, l := range rloops {
		rs0 = append(rs0, l.ReceiverStats())
	}
	send := func(to netip.AddrPort, ds [][]byte) {
		for len(ds) > 0 {
			v := batch.New(32, protocol.MaxDatagram)
			for len(ds) > 0 && !v.Full() {
				v.Append(ds[0], to)
				ds = ds[1:]
			}
			for v.Len() > 0 {
				n, err := fp.Send(v)
				if err != nil {
					t.Fatal(err)
				}
				if v.Drop(n); n == 0 {
					time.Sleep(time.Millisecond) // the socket buffer is full
				}
			}
		}
	}
	send(ctrl, toCtl)
	send(group, data)
	// Every member gets what went to the control group; the receivers get
	// the data replays too. A receiver heard its own control datagrams
	// (multicast loops them back to the host): replays to it as well.
	wantS := uint64(len(toCtl))
	wantR := uint64(len(toCtl) + len(data))
	refused := func() (uint64, []uint64) {
		var r []uint64
		for _, l := range rloops {
			r = append(r, l.AuthStats().Refused())
		}
		return sloop.AuthStats().Refused(), r
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s, r := refused(); s >= wantS && r[0] >= wantR && r[1] >= wantR {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // a tick or more: the stats below are snapshots
	sa := sloop.AuthStats()
	if sa.Refused() != wantS || sa.Replay != uint64(len(ctl)) || sa.Tag != 3 {
		t.Fatalf("the sender refused %+v; want %d in all, %d replays, 3 on the tag", sa, wantS, len(ctl))
	}
	for i, l := range rloops {
		if a := l.AuthStats(); a.Refused() != wantR || a.Replay != uint64(len(ctl)+len(data)) || a.Tag != 3 {
			t.Fatalf("receiver %d refused %+v; want %d in all, %d replays, 3 on the tag (fresh forgeries %d)", i, a, wantR, len(ctl)+len(data), nFresh)
		}
	}
	s1 := sloop.SenderStats()
	if s1.Naks != s0.Naks || s1.RetxHot != s0.RetxHot || s1.StaleStatus != s0.StaleStatus || s1.StatusRejected != s0.StatusRejected ||
		s1.ReceiversJoined != s0.ReceiversJoined || s1.ReceiversLost != s0.ReceiversLost || len(sloop.Receivers()) != 2 {
		t.Fatalf("forgeries on the control group changed the sender:\nbefore %+v\nafter  %+v\nreceivers %+v", s0, s1, sloop.Receivers())
	}
	for i, l := range rloops {
		r := l.ReceiverStats()
		if got[i].Load() != 1010 || r.Delivered != rs0[i].Delivered || r.Duplicates != rs0[i].Duplicates || r.GroupNaks != rs0[i].GroupNaks ||
			r.OwnNaks != rs0[i].OwnNaks || r.StaleHeartbeats != rs0[i].StaleHeartbeats || r.NaksSent != rs0[i].NaksSent {
			t.Fatalf("forgeries changed receiver %d:\nbefore %+v\nafter  %+v", i, rs0[i], r)
		}
	}
	target.Store(2000)
	waitFor(2000)
	for i := range inOrder {
		if !inOrder[i].Load() {
			t.Fatalf("receiver %d: records out of order", i)
		}
	}
}
