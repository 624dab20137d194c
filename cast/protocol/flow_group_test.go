package protocol

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

func TestFlowPolicies(t *testing.T) {
	// Three receivers with edges 1100, 1500 and 1300.
	st := []wire.Status{
		{ReceiverID: 11, Delivered: 100, Window: 1000, Serial: 1, Flags: wire.StatusSynced},
		{ReceiverID: 12, Delivered: 500, Window: 1000, Serial: 1, Flags: wire.StatusSynced},
		{ReceiverID: 13, Delivered: 300, Window: 1000, Serial: 1, Flags: wire.StatusSynced},
	}
	for _, c := range []struct {
		policy FlowPolicy
		tagged []uint64
		want   uint64
		after  uint64 // once receiver 11 is silent past ReceiverTimeout
	}{
		{FlowMin, nil, 1100, 1300},
		{FlowMax, nil, 1500, 1500},
		{FlowTagged, []uint64{12, 13}, 1300, 1300},
		{FlowTagged, []uint64{11}, 1100, 0},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			sc := DefaultSenderConfig()
			sc.Dest, sc.AcceptAnyNakSource, sc.FlowPolicy, sc.Tagged = netip.MustParseAddrPort("239.0.0.1:3000"), true, c.policy, c.tagged
			s, err := NewSender(sc, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := batch.New(64, 2048)
			for i, x := range st {
				from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), 2000)
				s.Handle(statusFrame(x), from, 1, out)
			}
			if e, lim := s.Limit(); !lim || e != c.want {
				t.Fatalf("limit %d (limited %v), want %d", e, lim, c.want)
			}
			// Receivers 12 and 13 keep talking; 11 falls silent.
			for i, x := range st[1:] {
				x.Serial = 2
				from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 2)}), 2000)
				s.Handle(statusFrame(x), from, int64(sc.ReceiverTimeout)/2, out)
			}
			s.Tick(int64(sc.ReceiverTimeout)+2, out)
			lost := false
			for e, ok := s.NextEvent(); ok; e, ok = s.NextEvent() {
				lost = lost || (e.Kind == ReceiverLost && e.Receiver.ID == 11)
			}
			if !lost {
				t.Fatal("no ReceiverLost event for the silent receiver")
			}
			e, lim := s.Limit()
			if c.after == 0 {
				if lim {
					t.Fatalf("after the only tagged receiver left: limited to %d", e)
				}
				return
			}
			if !lim || e != c.after {
				t.Fatalf("after the timeout: limit %d (limited %v), want %d", e, lim, c.after)
			}
		})
	}
}

func TestFlowPolicyConfig(t *testing.T) {
	for _, c := range []struct {
		policy FlowPolicy
		tagged []uint64
		ok     bool
	}{
		{FlowMin, nil, true}, {FlowMax, nil, true}, {FlowTagged, []uint64{1}, true},
		{FlowTagged, nil, false}, {FlowMin, []uint64{1}, false}, {FlowTagged, []uint64{0}, false}, {7, nil, false},
	} {
		sc := DefaultSenderConfig()
		sc.FlowPolicy, sc.Tagged = c.policy, c.tagged
		if err := sc.Validate(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("%v %v: %v", c.policy, c.tagged, err)
		}
	}
	for _, s := range []string{"min", "max", "tagged"} {
		if p, err := ParseFlowPolicy(s); err != nil || p.String() != s {
			t.Errorf("%q: %v %v", s, p, err)
		}
	}
	if _, err := ParseFlowPolicy("avg"); err == nil {
		t.Error("avg accepted")
	}
}
