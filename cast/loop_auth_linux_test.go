package cast

import (
	"encoding/binary"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/wire"
	"golang.org/x/sys/unix"
)

// spoofer sends UDP datagrams with any source address over a raw IPv4
// socket (IP_HDRINCL): the kernel fills in the header checksum and the
// packet id; a zero UDP checksum means none (IPv4).
type spoofer struct {
	t  *testing.T
	fd int
}

func newSpoofer(t *testing.T) *spoofer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("spoofing a source address needs a raw socket (CAP_NET_RAW): run as root")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &spoofer{t: t, fd: fd}
}

func (s *spoofer) send(from, to netip.AddrPort, payload []byte) {
	s.t.Helper()
	b := make([]byte, 28+len(payload))
	b[0], b[8], b[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	f, d := from.Addr().As4(), to.Addr().As4()
	copy(b[12:], f[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[20:], from.Port())
	binary.BigEndian.PutUint16(b[22:], to.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	if err := unix.Sendto(s.fd, b, 0, &unix.SockaddrInet4{Addr: d}); err != nil {
		s.t.Fatalf("spoofed send: %v", err)
	}
}

// Over real sockets, with keys on both ends and 1 % of datagrams lost at
// the receiver (data and repairs alike), every record arrives once and in
// order and no genuine datagram is refused.
func TestLoopAuthLoss(t *testing.T) {
	for _, path := range []string{"udp", "mmsg"} {
		t.Run(path, func(t *testing.T) {
			const n = 20000
			res := runRig(t, rigOpts{path: path, n: n, recvDrop: 1, sendDrop: 1, keys: testKeys, coalesce: path == "mmsg"})
			res.complete(t, n)
			if res.rAuth.Refused() != 0 || res.sAuth.Refused() != 0 {
				t.Fatalf("genuine datagrams refused: receiver %+v, sender %+v", res.rAuth, res.sAuth)
			}
			if res.sAuth.Sealed == 0 || res.rAuth.Sealed == 0 {
				t.Fatalf("nothing sealed: sender %+v, receiver %+v", res.sAuth, res.rAuth)
			}
			if res.rStats.NaksSent == 0 || res.sStats.RetxHot == 0 {
				t.Fatalf("no loss repaired: receiver %+v, sender %+v", res.rStats, res.sStats)
			}
		})
	}
}

// Over real sockets: forged frames of every type, sent from a third
// socket to both keyed loops mid-stream, are refused and counted and
// change nothing; the stream completes.
func TestLoopAuthForgeriesUDP(t *testing.T) {
	pa, pb := openPair(t, "udp", false)
	k := startKeyedPair(t, pa, pb)
	rloop, sloop, got, inOrder, target, waitFor := k.rloop, k.sloop, &k.got, &k.inOrder, &k.target, k.waitFor
	target.Store(1000)
	waitFor(1000)

	// The sockets are connected: the forger spoofs each one's peer
	// address, as an attacker on the LAN would.
	spoof := newSpoofer(t)
	toR, toS := forgeries(1001)
	wrong := wire.Key{ID: testKeys.Send.ID}
	var nR, nS int
	for _, d := range toR {
		for _, b := range [][]byte{d, sealAs(t, wrong, NewEpoch(), d)} {
			spoof.send(pa.LocalAddr(), pb.LocalAddr(), b)
			nR++
		}
	}
	for _, d := range toS {
		for _, b := range [][]byte{d, sealAs(t, wrong, NewEpoch(), d)} {
			spoof.send(pb.LocalAddr(), pa.LocalAddr(), b)
			nS++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if rloop.AuthStats().Refused() >= uint64(nR) && sloop.AuthStats().Refused() >= uint64(nS) {
			break
		}
	}
	ra, sa := rloop.AuthStats(), sloop.AuthStats()
	if ra.Refused() != uint64(nR) || sa.Refused() != uint64(nS) {
		t.Fatalf("refused %d of %d at the receiver (%+v), %d of %d at the sender (%+v)", ra.Refused(), nR, ra, sa.Refused(), nS, sa)
	}
	if got.Load() != 1000 {
		t.Fatalf("forgeries delivered records: %d", got.Load())
	}
	if s := sloop.SenderStats(); s.Naks != 0 || s.RetxHot != 0 {
		t.Fatalf("a forged NAK was served: %+v", s)
	}
	if rs := sloop.Receivers(); len(rs) != 1 {
		t.Fatalf("a forged Status joined: %+v", rs)
	}
	target.Store(2000)
	waitFor(2000)
	if !inOrder.Load() {
		t.Fatal("records out of order")
	}
}

// keyedPair is a keyed sending and a keyed receiving Loop over two
// connected paths, the receiver checking that records arrive in order;
// the sender sends 64-byte records until it has sent target.
type keyedPair struct {
	rloop, sloop *Loop
	got          atomic.Int64
	inOrder      atomic.Bool
	target       atomic.Int64
	t            *testing.T
}

func startKeyedPair(t *testing.T, sendPath, recvPath datapath.Path) *keyedPair {
	t.Helper()
	k := &keyedPair{t: t}
	k.inOrder.Store(true)
	snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
	rcv, _ := protocol.NewReceiver(protocol.DefaultReceiverConfig())
	rl := DefaultLoopConfig()
	rl.Path, rl.Receiver, rl.Keys = recvPath, rcv, testKeys
	rl.OnRecord = func(_ *Loop, _ wire.Header, p []byte) {
		if wire.Seq(p) != uint64(k.got.Add(1)) {
			k.inOrder.Store(false)
		}
	}
	payload := make([]byte, 64)
	sl := DefaultLoopConfig()
	sl.Path, sl.Sender, sl.Keys = sendPath, snd, testKeys
	var sent int64
	sl.OnPoll = func(l *Loop, _ int64) {
		for sent < k.target.Load() {
			if _, err := l.Send(1, payload); err != nil {
				return
			}
			sent++
		}
	}
	var err error
	if k.rloop, err = StartLoop(rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.rloop.Close() })
	if k.sloop, err = StartLoop(sl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.sloop.Close() })
	return k
}

// waitFor waits (a generous budget: CI shares the machine) until n
// records were delivered, and fails unless exactly n were.
func (k *keyedPair) waitFor(n int64) {
	k.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for k.got.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if k.got.Load() != n {
		k.t.Fatalf("delivered %d of %d", k.got.Load(), n)
	}
}
