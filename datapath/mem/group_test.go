package mem

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
)

func TestFanoutDelivery(t *testing.T) {
	f := NewFanout(1, 3)
	// Receiver 0 loses datagram 1, receiver 2 datagram 3, all lose 4
	// upstream; receiver 1 gets 2 ms more latency.
	f.Net.Impair(FanoutSender, FanoutReceiver(0), Impairment{Drop: []int{1}})
	f.Net.Impair(FanoutSender, FanoutReceiver(1), Impairment{Latency: 2 * time.Millisecond})
	f.Net.Impair(FanoutSender, FanoutReceiver(2), Impairment{Drop: []int{3}})
	f.Net.Impair(FanoutSender, FanoutGroup, Impairment{Drop: []int{4}, Latency: time.Millisecond})
	sendSeq(t, f.S, 0, 6)
	if got := fmt.Sprint(recvAll(t, f.R[0])); got != "[]" {
		t.Fatalf("before the upstream latency: %s", got)
	}
	f.Advance(time.Millisecond)
	want := []string{"[0 2 3 5]", "[]", "[0 1 2 5]"}
	for i, w := range want {
		if got := fmt.Sprint(recvAll(t, f.R[i])); got != w {
			t.Errorf("receiver %d got %s, want %s", i, got, w)
		}
	}
	f.Advance(2 * time.Millisecond)
	if got := fmt.Sprint(recvAll(t, f.R[1])); got != "[0 1 2 3 5]" {
		t.Errorf("late receiver got %s", got)
	}
	if got := fmt.Sprint(recvAll(t, f.S)); got != "[]" {
		t.Errorf("the sender heard its own group send: %s", got)
	}
	if st := f.Net.Stats(FanoutSender, FanoutGroup); st.Sent != 6 || st.Dropped != 1 || st.Delivered != 5 {
		t.Errorf("upstream stats %+v", st)
	}
	if st := f.Net.Stats(FanoutSender, FanoutReceiver(0)); st.Sent != 5 || st.Dropped != 1 || st.Delivered != 4 {
		t.Errorf("receiver 0 link stats %+v", st)
	}
}

func TestFanoutControlGroup(t *testing.T) {
	f := NewFanout(1, 3)
	// A receiver's control frame reaches the sender and the other
	// receivers, with their source address, never itself.
	v := batch.New(1, 64)
	v.Append([]byte("nak"), netip.AddrPort{})
	if _, err := f.R[1].Send(v); err != nil {
		t.Fatal(err)
	}
	for i, e := range []*End{f.S, f.R[0], f.R[2]} {
		rv := batch.New(4, 64)
		n, _ := e.Recv(rv)
		if n != 1 {
			t.Fatalf("end %d got %d datagrams", i, n)
		}
		if b, from := rv.Msg(0); string(b) != "nak" || from != FanoutReceiver(1) {
			t.Fatalf("end %d got %q from %v", i, b, from)
		}
	}
	if n := f.R[1].Pending(); n != 0 {
		t.Fatalf("the NAKing receiver heard itself (%d)", n)
	}
	// Leave and Close remove members.
	f.Net.Leave(FanoutControl, f.R[0])
	f.R[2].Close()
	if _, err := f.R[1].Send(v); err != nil {
		t.Fatal(err)
	}
	if f.R[0].Pending() != 0 || f.S.Pending() != 1 {
		t.Fatalf("after Leave: r0 %d, sender %d", f.R[0].Pending(), f.S.Pending())
	}
	if err := f.Net.Join(netip.MustParseAddrPort("10.0.0.9:1"), f.R[0]); err == nil {
		t.Fatal("joined a unicast address")
	}
	if err := f.Net.Join(FanoutControl, f.R[2]); err == nil {
		t.Fatal("a closed end joined")
	}
}

func TestFanoutSeededIndependence(t *testing.T) {
	// Same seed and calls → same deliveries; different receivers with
	// different seeds lose different datagrams.
	run := func() []string {
		f := NewFanout(1, 2)
		for i := range 2 {
			f.Net.Impair(FanoutSender, FanoutReceiver(i), Impairment{Seed: uint64(i + 1), DropProb: 0.3})
		}
		sendSeq(t, f.S, 0, 40)
		return []string{fmt.Sprint(recvAll(t, f.R[0])), fmt.Sprint(recvAll(t, f.R[1]))}
	}
	a, b := run(), run()
	if a[0] != b[0] || a[1] != b[1] {
		t.Fatal("not deterministic")
	}
	if a[0] == a[1] {
		t.Fatal("independent seeds lost the same datagrams")
	}
}

func TestFanoutZeroAllocs(t *testing.T) {
	f := NewFanout(1, 8)
	v := batch.New(8, 64)
	for range 8 {
		v.Append(make([]byte, 48), netip.AddrPort{})
	}
	rv := batch.New(8, 64)
	step := func() {
		f.S.Send(v)
		for _, r := range f.R {
			r.Recv(rv)
		}
	}
	step()
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Fatalf("%v allocs per fan-out round", a)
	}
}
