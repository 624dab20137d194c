// Package pathtest holds the behaviour tests every socket datapath must
// pass (datapath/udp, datapath/mmsg, and the portable path): send and
// receive connected and not, a port in use, RecvWait's deadline and its
// wake-up on Close, a peer that disappears, and zero allocations. Each
// path's own tests call them through a [Kit]; what only one path does
// (GSO, coalescing, the errno seam) stays in that path's tests.
package pathtest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// Path is a datapath with a parking receive.
type Path interface {
	datapath.Path
	RecvWait(v *batch.Vec, deadline time.Time) (int, error)
}

// Counts are the counters the shared tests check.
type Counts struct{ Sent, Received, Refused uint64 }

// Kit opens paths of one kind for the shared tests.
type Kit struct {
	// Open opens a path bound to local (127.0.0.1 on a free port when
	// invalid) and connected to peer when peer is valid.
	Open func(local, peer netip.AddrPort) (Path, error)
	// Counts reads the path's counters.
	Counts func(Path) Counts
	// ReleasesWait: the path has ReleaseWait (datapath.ReleaseWait),
	// which takes its socket out of the netpoller (Linux: the fd counts
	// of /proc/self/fd show it).
	ReleasesWait bool
}

// Must opens a path that t closes when it ends.
func (k Kit) Must(t testing.TB, local, peer netip.AddrPort) Path {
	t.Helper()
	p, err := k.Open(local, peer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Recv polls p until n datagrams arrived or two seconds passed and
// returns them as strings.
func Recv(t testing.TB, p datapath.Path, n int) []string {
	t.Helper()
	v := batch.New(32, 2048)
	var got []string
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		k, err := p.Recv(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < k; i++ {
			m, _ := v.Msg(i)
			got = append(got, string(m))
		}
	}
	return got
}

// Run runs every shared test as a subtest of t.
func (k Kit) Run(t *testing.T) {
	t.Run("SendRecv", k.TestSendRecv)
	t.Run("PortInUse", k.TestPortInUse)
	t.Run("RecvWaitDeadlineAndClose", k.TestRecvWaitDeadlineAndClose)
	t.Run("DeadPeer", k.TestDeadPeer)
	t.Run("Allocs", k.TestAllocs)
	if k.ReleasesWait {
		t.Run("ReleaseWait", k.TestReleaseWait)
	}
}

// TestReleaseWait: the first RecvWait registers (a dup of) the socket
// with the netpoller, one more open fd; ReleaseWait closes it again
// (twice is harmless); a later RecvWait registers it again and wakes
// with the datagram sent meanwhile; Close closes both fds.
func (k Kit) TestReleaseWait(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	v := batch.New(4, 64)
	warm := k.Must(t, none, none) // the runtime's own netpoller fds, opened once
	if _, err := warm.RecvWait(v, time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	a, err := k.Open(none, none)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := k.Must(t, none, a.LocalAddr())
	n0 := fds()
	if n, err := a.RecvWait(v, time.Now().Add(5*time.Millisecond)); n != 0 || err != nil {
		t.Fatal(n, err)
	}
	if n := fds(); n != n0+1 {
		t.Fatalf("after a RecvWait: %d fds, want %d (the socket's registration)", n, n0+1)
	}
	datapath.ReleaseWait(a)
	datapath.ReleaseWait(a)
	if n := fds(); n != n0 {
		t.Fatalf("after ReleaseWait: %d fds, want %d", n, n0)
	}
	done := make(chan error, 1)
	go func() {
		n, err := a.RecvWait(v, time.Now().Add(time.Minute))
		if m, _ := v.Msg(0); err == nil && (n != 1 || string(m) != "again") {
			err = fmt.Errorf("got %d datagrams, the first %q", n, m)
		}
		done <- err
	}()
	for wait := time.Now().Add(time.Minute); fds() != n0+1; { // the parked RecvWait registers the socket again
		if time.Now().After(wait) {
			t.Fatalf("a parked RecvWait: %d fds, want %d", fds(), n0+1)
		}
		time.Sleep(time.Millisecond)
	}
	out := batch.New(1, 64)
	out.Append([]byte("again"), none)
	if n, err := b.Send(out); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RecvWait after ReleaseWait: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fds(); n != n0-1 {
		t.Fatalf("after Close: %d fds, want %d (socket and registration closed)", n, n0-1)
	}
}

var none netip.AddrPort

// TestSendRecv sends 16 datagrams, unconnected and connected, and a
// reply that must come back from the receiver's address.
func (k Kit) TestSendRecv(t *testing.T) {
	for _, connected := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", connected), func(t *testing.T) {
			b := k.Must(t, none, none)
			peer := none
			if connected {
				peer = b.LocalAddr()
			}
			a := k.Must(t, none, peer)
			v := batch.New(16, 2048)
			for i := 0; i < 16; i++ {
				dst := b.LocalAddr()
				if connected {
					dst = none
				}
				v.Append(fmt.Appendf(nil, "m%02d", i), dst)
			}
			if n, err := a.Send(v); n != 16 || err != nil {
				t.Fatal(n, err)
			}
			got := Recv(t, b, 16)
			if len(got) != 16 || got[0] != "m00" || got[15] != "m15" {
				t.Fatalf("got %v", got)
			}
			// The reply reaches a's socket with b's address as source.
			r := batch.New(1, 64)
			r.Append([]byte("pong"), a.LocalAddr())
			if n, err := b.Send(r); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			w := batch.New(4, 64)
			n, err := a.RecvWait(w, time.Now().Add(2*time.Second))
			if n != 1 || err != nil {
				t.Fatal(n, err)
			}
			if m, from := w.Msg(0); string(m) != "pong" || from != b.LocalAddr() {
				t.Fatalf("%q from %v", m, from)
			}
			if c := k.Counts(a); c.Sent != 16 || c.Received != 1 {
				t.Fatalf("%+v", c)
			}
		})
	}
}

// TestPortInUse binds a port that is taken: the error wraps EADDRINUSE
// and names the address.
func (k Kit) TestPortInUse(t *testing.T) {
	a := k.Must(t, none, none)
	p, err := k.Open(a.LocalAddr(), none)
	if err == nil {
		p.Close()
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(fmt.Sprint(err), a.LocalAddr().String()) {
		t.Fatalf("want EADDRINUSE naming %s, got %v", a.LocalAddr(), err)
	}
}

// TestRecvWaitDeadlineAndClose: RecvWait returns (0, nil) no earlier than
// its deadline, Close wakes a RecvWait without deadline with
// datapath.ErrClosed, and Send after Close returns it too.
func (k Kit) TestRecvWaitDeadlineAndClose(t *testing.T) {
	a := k.Must(t, none, none)
	v := batch.New(4, 64)
	start := time.Now()
	if n, err := a.RecvWait(v, time.Now().Add(20*time.Millisecond)); n != 0 || err != nil {
		t.Fatal(n, err)
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Fatalf("returned after %v", el)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.RecvWait(v, time.Time{})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, datapath.ErrClosed) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake RecvWait")
	}
	if _, err := a.Send(v); !errors.Is(err, datapath.ErrClosed) {
		t.Fatal(err)
	}
}

// TestDeadPeer: a connected peer disappears (ICMP port unreachable comes
// back); Send and Recv go on without error and count the refusals.
func (k Kit) TestDeadPeer(t *testing.T) {
	b := k.Must(t, none, none)
	a := k.Must(t, none, b.LocalAddr())
	b.Close()
	v := batch.New(4, 64)
	for i := 0; i < 4; i++ {
		v.Append([]byte("x"), none)
	}
	r := batch.New(4, 64)
	for i := 0; i < 20; i++ {
		if n, err := a.Send(v); err != nil || n != 4 {
			t.Fatalf("send to a dead peer: %d %v", n, err)
		}
		if _, err := a.Recv(r); err != nil {
			t.Fatalf("recv after a dead peer: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if k.Counts(a).Refused == 0 {
		t.Fatal("ICMP errors not counted")
	}
}

// TestAllocs: a batch of 144-byte datagrams sent and received, an empty
// poll, and a parked receive allocate nothing.
func (k Kit) TestAllocs(t *testing.T) {
	b := k.Must(t, none, none)
	a := k.Must(t, none, b.LocalAddr())
	v := batch.New(64, 2048)
	for i := 0; i < 64; i++ {
		v.Append(make([]byte, 144), none)
	}
	r := batch.New(64, 2048)
	if n := testing.AllocsPerRun(200, func() {
		a.Send(v)
		for {
			if k, _ := b.Recv(r); k == 0 {
				break
			}
		}
		b.Recv(r) // empty poll
	}); n != 0 {
		t.Fatalf("%v allocs per send+recv", n)
	}
	// Parked receive: data ready at once, and a short deadline.
	if n := testing.AllocsPerRun(100, func() {
		a.Send(v)
		b.RecvWait(r, time.Now().Add(time.Millisecond))
	}); n != 0 {
		t.Fatalf("%v allocs per RecvWait", n)
	}
}
