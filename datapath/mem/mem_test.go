package mem

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

func sendSeq(t *testing.T, e *End, from, n int) {
	t.Helper()
	v := batch.New(n, 64)
	for i := 0; i < n; i++ {
		v.Append([]byte(fmt.Sprint(from+i)), netip.AddrPort{})
	}
	if k, err := e.Send(v); err != nil || k != n {
		t.Fatalf("send %d: %v", k, err)
	}
}

func recvAll(t *testing.T, e *End) []string {
	t.Helper()
	v := batch.New(4, 64)
	var got []string
	for {
		n, err := e.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			b, _ := v.Msg(i)
			got = append(got, string(b))
		}
		if n == 0 {
			return got
		}
	}
}

func TestImpairments(t *testing.T) {
	for _, tc := range []struct {
		name string
		imp  Impairment
		want string
	}{
		{"clean", Impairment{}, "[0 1 2 3 4 5 6 7 8 9]"},
		{"drop by index", Impairment{Drop: []int{0, 5}}, "[1 2 3 4 6 7 8 9]"},
		{"drop all", Impairment{DropProb: 1}, "[]"},
		{"duplicate all", Impairment{DupProb: 1}, "[0 0 1 1 2 2 3 3 4 4 5 5 6 6 7 7 8 8 9 9]"},
		{"reorder by 2 by script", Impairment{ReorderBy: 2, Script: func(i int, _ []byte) Action {
			if i == 3 {
				return Reorder
			}
			return Pass
		}}, "[0 1 2 4 5 3 6 7 8 9]"},
		{"script drop and duplicate", Impairment{Script: func(i int, _ []byte) Action {
			switch i {
			case 1:
				return Drop
			case 2:
				return Duplicate
			}
			return Pass
		}}, "[0 2 2 3 4 5 6 7 8 9]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPair(0)
			p.Net.Impair(AddrA, AddrB, tc.imp)
			sendSeq(t, p.A, 0, 10)
			if got := fmt.Sprint(recvAll(t, p.B)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			if back := recvAll(t, p.A); len(back) != 0 {
				t.Fatalf("A received %v", back)
			}
		})
	}
}

func TestCorruptFlipsOneByte(t *testing.T) {
	p := NewPair(0)
	p.Net.Impair(AddrA, AddrB, Impairment{Seed: 1, CorruptProb: 1})
	v := batch.New(1, 64)
	orig := []byte("abcdefgh")
	v.Append(orig, netip.AddrPort{})
	_, _ = p.A.Send(v)
	got := recvAll(t, p.B)
	diff := 0
	for i := range orig {
		if got[0][i] != orig[i] {
			diff++
		}
	}
	if len(got) != 1 || diff != 1 {
		t.Fatalf("got %q: %d bytes differ", got, diff)
	}
}

func TestLatencyBlackoutAndHold(t *testing.T) {
	p := NewPair(0)
	p.Net.Impair(AddrA, AddrB, Impairment{
		Latency:   time.Millisecond,
		Blackouts: []Window{{From: int64(10 * time.Millisecond), To: int64(20 * time.Millisecond)}},
	})
	sendSeq(t, p.A, 0, 1)
	if got := recvAll(t, p.B); len(got) != 0 {
		t.Fatalf("delivered before the latency: %v", got)
	}
	p.Clock.Advance(time.Millisecond)
	if got := recvAll(t, p.B); len(got) != 1 {
		t.Fatalf("after latency: %v", got)
	}
	p.Clock.Set(int64(15 * time.Millisecond))
	sendSeq(t, p.A, 1, 1)
	p.Clock.Set(int64(20 * time.Millisecond))
	sendSeq(t, p.A, 2, 1)
	p.Clock.Advance(time.Millisecond)
	if got := fmt.Sprint(recvAll(t, p.B)); got != "[2]" {
		t.Fatalf("blackout: got %s", got)
	}
	// A reordered datagram with nothing behind it is released by time.
	p.Net.Impair(AddrA, AddrB, Impairment{ReorderProb: 1, ReorderMaxHold: 5 * time.Millisecond})
	sendSeq(t, p.A, 3, 1)
	if got := recvAll(t, p.B); len(got) != 0 {
		t.Fatalf("held datagram delivered early: %v", got)
	}
	p.Clock.Advance(5 * time.Millisecond)
	if got := fmt.Sprint(recvAll(t, p.B)); got != "[3]" {
		t.Fatalf("hold release: got %s", got)
	}
}

func TestSeededDeterminism(t *testing.T) {
	run := func() string {
		p := NewPair(0)
		p.Net.Impair(AddrA, AddrB, Impairment{Seed: 42, DropProb: 0.3, DupProb: 0.1, ReorderProb: 0.2, ReorderBy: 3})
		sendSeq(t, p.A, 0, 200)
		p.Clock.Advance(time.Second)
		return fmt.Sprint(recvAll(t, p.B))
	}
	a, b := run(), run()
	if a != b {
		t.Fatal("same seed, different deliveries")
	}
}

func TestAddressingAndClose(t *testing.T) {
	c := NewClock(0)
	n := NewNetwork(c)
	a, _ := n.Listen(AddrA, AddrB)
	b, _ := n.Listen(AddrB, AddrA)
	third := netip.MustParseAddrPort("10.0.0.3:3000")
	x, _ := n.Listen(third, AddrA)
	if _, err := n.Listen(AddrA, AddrB); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second listen: %v", err)
	}
	v := batch.New(2, 64)
	v.Append([]byte("to-x"), third)
	v.Append([]byte("to-b"), netip.AddrPort{})
	_, _ = a.Send(v)
	vb := batch.New(4, 64)
	if k, _ := x.Recv(vb); k != 1 {
		t.Fatalf("x got %d", k)
	}
	if _, from := vb.Msg(0); from != AddrA {
		t.Fatalf("source %v", from)
	}
	if k, _ := b.Recv(vb); k != 1 {
		t.Fatalf("b got %d", k)
	}
	_ = b.Close()
	_, _ = a.Send(v)
	if st := n.Stats(AddrA, AddrB); st.Unreachable != 1 || st.Sent != 2 || st.Delivered != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := b.Recv(vb); !errors.Is(err, datapath.ErrClosed) {
		t.Fatalf("recv after close: %v", err)
	}
}

func TestZeroAllocs(t *testing.T) {
	p := NewPair(0)
	out := batch.New(8, 256)
	in := batch.New(8, 256)
	for i := 0; i < 8; i++ {
		out.Append(make([]byte, 100), netip.AddrPort{})
	}
	f := func() {
		_, _ = p.A.Send(out)
		_, _ = p.B.Recv(in)
	}
	f()
	if n := testing.AllocsPerRun(1000, f); n != 0 {
		t.Fatalf("%v allocs per send+recv", n)
	}
}

// TestConcurrentEnds drives the two ends from two goroutines (as two
// loops would) while a third moves the clock; run it with -race.
func TestConcurrentEnds(t *testing.T) {
	p := NewPair(0)
	p.Net.Impair(AddrA, AddrB, Impairment{Seed: 1, DropProb: 0.1, DupProb: 0.1, ReorderProb: 0.1, Latency: time.Microsecond})
	const n = 5000
	sent := make(chan struct{})
	done := make(chan int)
	go func() {
		v := batch.New(16, 64)
		for i := 0; i < n; i++ {
			v.Reset()
			v.Append([]byte("x"), netip.AddrPort{})
			_, _ = p.A.Send(v)
		}
		close(sent)
	}()
	go func() {
		v := batch.New(16, 64)
		got := 0
		// Until the sender has finished and everything it sent has been
		// read (an iteration budget fails on a loaded machine, where the
		// sender may not run for a while).
		for got < n/2 {
			m, _ := p.B.Recv(v)
			got += m
			p.Clock.Advance(time.Microsecond)
			if m > 0 {
				continue
			}
			select {
			case <-sent:
				p.Clock.Advance(20 * time.Millisecond) // release held datagrams
				if p.B.Pending() == 0 {
					m, _ = p.B.Recv(v)
					if got += m; m == 0 {
						done <- got
						return
					}
				}
			default:
				runtime.Gosched()
			}
		}
		done <- got
	}()
	<-sent
	if got := <-done; got < n/2 {
		t.Fatalf("received %d", got)
	}
}
