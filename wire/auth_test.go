package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

var (
	srcA     = netip.MustParseAddrPort("192.0.2.1:5000")
	srcB     = netip.MustParseAddrPort("192.0.2.2:5000")
	authKey1 = Key{ID: 1, Secret: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	authKey2 = Key{ID: 2, Secret: [16]byte{0: 0xAA, 15: 0x55}}
)

// frame returns a data frame of the given payload size with seq in its
// first 8 bytes, in a buffer with room for a trailer.
func authFrame(seq uint64, size int) []byte {
	b := make([]byte, HeaderSize+size, HeaderSize+size+TrailerSize)
	for i := range b[HeaderSize:] {
		b[HeaderSize+i] = byte(i)
	}
	b[HeaderSize] = byte(seq)
	if err := Seal(b, 1); err != nil {
		panic(err)
	}
	return b
}

func sealed(t testing.TB, s *Sealer, frame []byte) []byte {
	t.Helper()
	buf := make([]byte, len(frame)+TrailerSize)
	copy(buf, frame)
	if n := s.Seal(buf, len(frame)); n != len(buf) {
		t.Fatalf("Seal returned %d, want %d", n, len(buf))
	}
	return buf
}

func mustSealer(t testing.TB, k Key, epoch uint64) *Sealer {
	t.Helper()
	s, err := NewSealer(k, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustOpener(t testing.TB, keys ...Key) *Opener {
	t.Helper()
	o, err := NewOpener(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestAuthRoundTrip(t *testing.T) {
	s, o := mustSealer(t, authKey1, 100), mustOpener(t, authKey1)
	for _, size := range []int{8, 64, 128, 1427} {
		f := authFrame(uint64(size), size)
		d := sealed(t, s, f)
		n, err := o.Open(d, srcA)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(d[:n], f) {
			t.Fatalf("size %d: frames changed", size)
		}
	}
}

// Every single-bit flip anywhere in a sealed datagram is refused, and the
// refusal changes no state: the original datagram is still accepted.
func TestAuthBitFlips(t *testing.T) {
	s := mustSealer(t, authKey1, 7)
	d := sealed(t, s, authFrame(1, 64))
	for i := range d {
		for bit := 0; bit < 8; bit++ {
			o := mustOpener(t, authKey1)
			m := bytes.Clone(d)
			m[i] ^= 1 << bit
			if _, err := o.Open(m, srcA); !errors.Is(err, ErrAuth) {
				t.Fatalf("flip byte %d bit %d: err %v, want ErrAuth", i, bit, err)
			}
			if o.Peers() != 0 {
				t.Fatalf("flip byte %d bit %d: a refused datagram created replay state", i, bit)
			}
			if _, err := o.Open(d, srcA); err != nil {
				t.Fatalf("flip byte %d bit %d: the genuine datagram after it: %v", i, bit, err)
			}
		}
	}
}

func TestAuthReplay(t *testing.T) {
	s, o := mustSealer(t, authKey1, 5), mustOpener(t, authKey1)
	var ds [][]byte
	for i := 0; i < ReplayWindow+10; i++ {
		ds = append(ds, sealed(t, s, authFrame(uint64(i), 16)))
	}
	// Deliver all but #3 and #9 in order.
	for i, d := range ds[:20] {
		if i == 3 || i == 9 {
			continue
		}
		if _, err := o.Open(d, srcA); err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
	}
	if _, err := o.Open(ds[5], srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("replay of #5: %v, want ErrAuthReplay", err)
	}
	if _, err := o.Open(ds[9], srcA); err != nil {
		t.Fatalf("late #9 within the window: %v", err)
	}
	if _, err := o.Open(ds[9], srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("second late #9: %v, want ErrAuthReplay", err)
	}
	for i, d := range ds[20:] {
		if _, err := o.Open(d, srcA); err != nil {
			t.Fatalf("#%d: %v", 20+i, err)
		}
	}
	// #3 is now more than a window behind the newest.
	if _, err := o.Open(ds[3], srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("#3 a window late: %v, want ErrAuthReplay", err)
	}
}

// Replay state is per sending endpoint (epoch): endpoints sharing a key
// interleave freely, a restarted endpoint (new epoch) starts its counter
// again, and a datagram of either is refused a second time.
func TestAuthEndpoints(t *testing.T) {
	o := mustOpener(t, authKey1)
	a, b := mustSealer(t, authKey1, 10), mustSealer(t, authKey1, 20)
	var seen [][]byte
	for i := 0; i < 10; i++ {
		for _, s := range []*Sealer{a, b} {
			d := sealed(t, s, authFrame(uint64(i), 16))
			if _, err := o.Open(d, srcA); err != nil {
				t.Fatalf("endpoint %d datagram %d: %v", s.Epoch(), i, err)
			}
			seen = append(seen, d)
		}
	}
	restarted := mustSealer(t, authKey1, 30)
	if _, err := o.Open(sealed(t, restarted, authFrame(1, 16)), srcA); err != nil {
		t.Fatalf("restarted endpoint: %v", err)
	}
	for i, d := range seen {
		if _, err := o.Open(d, srcA); !errors.Is(err, ErrAuthReplay) {
			t.Fatalf("replay %d: %v, want ErrAuthReplay", i, err)
		}
	}
	if o.Peers() != 3 {
		t.Fatalf("%d endpoints, want 3", o.Peers())
	}
}

func TestAuthKeys(t *testing.T) {
	s := mustSealer(t, authKey1, 1)
	both := mustOpener(t, authKey1, authKey2)
	only2 := mustOpener(t, authKey2)
	d1 := sealed(t, s, authFrame(1, 16))
	if err := s.SetKey(authKey2); err != nil {
		t.Fatal(err)
	}
	d2 := sealed(t, s, authFrame(2, 16))
	for _, d := range [][]byte{d1, d2} {
		if _, err := both.Open(d, srcA); err != nil {
			t.Fatalf("rollover opener: %v", err)
		}
	}
	if _, err := only2.Open(d1, srcA); !errors.Is(err, ErrAuthKeyID) {
		t.Fatalf("retired key: %v, want ErrAuthKeyID", err)
	}
	if _, err := only2.Open(d2, srcA); err != nil {
		t.Fatalf("new key: %v", err)
	}
	// The right id with the wrong secret.
	forged := mustSealer(t, Key{ID: 2}, 99)
	if _, err := only2.Open(sealed(t, forged, authFrame(3, 16)), srcA); !errors.Is(err, ErrAuthTag) {
		t.Fatalf("wrong secret: %v, want ErrAuthTag", err)
	}
	if _, err := NewOpener(authKey1, Key{ID: 1}); err == nil {
		t.Fatal("an Opener took two keys with one id")
	}
	if _, err := NewOpener(); err == nil {
		t.Fatal("an Opener took no key")
	}
}

func TestAuthShortAndUnsealed(t *testing.T) {
	o := mustOpener(t, authKey1)
	for _, d := range [][]byte{nil, make([]byte, TrailerSize), authFrame(1, 64), authFrame(2, 1427)} {
		if _, err := o.Open(d, srcA); !errors.Is(err, ErrAuth) {
			t.Fatalf("unsealed %d bytes: %v", len(d), err)
		}
	}
	if o.Peers() != 0 {
		t.Fatal("unsealed datagrams created replay state")
	}
}

// Only datagrams that verify create replay state, and the table is
// bounded: the endpoint heard from least recently goes.
func TestAuthPeerTableBounded(t *testing.T) {
	o := mustOpener(t, authKey1)
	for i := 0; i < 3*MaxAuthPeers; i++ {
		forged := mustSealer(t, Key{ID: 1}, uint64(1000+i))
		if _, err := o.Open(sealed(t, forged, authFrame(1, 16)), srcA); err == nil {
			t.Fatal("forged datagram accepted")
		}
	}
	if o.Peers() != 0 {
		t.Fatalf("forged datagrams made %d entries", o.Peers())
	}
	keep := mustSealer(t, authKey1, 1)
	first := sealed(t, keep, authFrame(1, 16))
	if _, err := o.Open(first, srcA); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxAuthPeers+10; i++ {
		s := mustSealer(t, authKey1, uint64(2+i))
		if _, err := o.Open(sealed(t, s, authFrame(1, 16)), srcA); err != nil {
			t.Fatal(err)
		}
		if i%16 == 0 { // keep stays recent
			if _, err := o.Open(sealed(t, keep, authFrame(1, 16)), srcA); err != nil {
				t.Fatal(err)
			}
		}
	}
	if o.Peers() != MaxAuthPeers {
		t.Fatalf("%d entries, want %d", o.Peers(), MaxAuthPeers)
	}
	if _, err := o.Open(first, srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("a recent endpoint lost its replay state: %v", err)
	}
}

func TestAuthAllocs(t *testing.T) {
	s, o := mustSealer(t, authKey1, 3), mustOpener(t, authKey1)
	f := authFrame(1, 1427)
	buf := make([]byte, len(f)+TrailerSize)
	allocs := testing.AllocsPerRun(1000, func() {
		copy(buf, f)
		n := s.Seal(buf, len(f))
		if _, err := o.Open(buf[:n], srcA); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Seal+Open allocate %.1f times", allocs)
	}
}

func BenchmarkAuth(b *testing.B) {
	for _, size := range []int{128, 1427} {
		f := authFrame(1, size)
		b.Run(fmt.Sprintf("seal/%dB", HeaderSize+size), func(b *testing.B) {
			s := mustSealer(b, authKey1, 3)
			buf := make([]byte, len(f)+TrailerSize)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				s.Seal(buf, len(f))
			}
		})
		b.Run(fmt.Sprintf("open/%dB", HeaderSize+size), func(b *testing.B) {
			s, o := mustSealer(b, authKey1, 3), mustOpener(b, authKey1)
			ds := make([][]byte, 1024)
			for i := range ds {
				ds[i] = sealed(b, s, f)
			}
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(ds) { // a fresh round of counters
					b.StopTimer()
					for j := range ds {
						ds[j] = sealed(b, s, f)
					}
					i = 0
					b.StartTimer()
				}
				if _, err := o.Open(ds[i], srcA); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// sealAt seals frame as the datagram with counter c of s.
func sealAt(t testing.TB, s *Sealer, c uint64, frame []byte) []byte {
	s.counter = c - 1
	return sealed(t, s, frame)
}

// windowModel is what the replay window must do, kept the obvious way:
// every counter accepted, and the highest.
type windowModel struct {
	seen map[uint64]bool
	top  uint64
}

func (m *windowModel) accepts(c uint64) bool {
	return c != 0 && !m.seen[c] && c+ReplayWindow > m.top
}

func (m *windowModel) accept(c uint64) {
	m.seen[c] = true
	m.top = max(m.top, c)
}

// The window refuses a replay of the oldest counters it still covers
// after the newest counter entered a new 64-bit word: deliver 1…4106,
// then 11…63 (within the window) must all be refused, 10 (one past its
// end) too, and a counter held back at the window's far edge is accepted
// once.
func TestAuthReplayWordBoundary(t *testing.T) {
	s, o := mustSealer(t, authKey1, 5), mustOpener(t, authKey1)
	f := authFrame(1, 16)
	const top = ReplayWindow + 10 // 4106
	for c := uint64(1); c <= top; c++ {
		if c == 11 || c == 12 {
			continue // held back: at the window's far edge
		}
		if _, err := o.Open(sealAt(t, s, c, f), srcA); err != nil {
			t.Fatalf("counter %d: %v", c, err)
		}
	}
	for c := uint64(13); c <= 63; c++ {
		if _, err := o.Open(sealAt(t, s, c, f), srcA); !errors.Is(err, ErrAuthReplay) {
			t.Fatalf("replay of counter %d (window %d…%d): %v, want ErrAuthReplay", c, top-ReplayWindow+1, top, err)
		}
	}
	if _, err := o.Open(sealAt(t, s, 10, f), srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("counter 10, one behind the window: %v, want ErrAuthReplay", err)
	}
	for _, c := range []uint64{11, 12} {
		if _, err := o.Open(sealAt(t, s, c, f), srcA); err != nil {
			t.Fatalf("held-back counter %d inside the window: %v", c, err)
		}
		if _, err := o.Open(sealAt(t, s, c, f), srcA); !errors.Is(err, ErrAuthReplay) {
			t.Fatalf("second counter %d: %v, want ErrAuthReplay", c, err)
		}
	}
	// One more step: 11 leaves the window, 12 is its far edge.
	if _, err := o.Open(sealAt(t, s, top+1, f), srcA); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(sealAt(t, s, 12, f), srcA); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("counter 12 at the far edge, seen: %v", err)
	}
}

// The window against its model over random walks: jumps forward of any
// size (within a word, across words, past the whole bitmap), late and
// replayed counters around every edge.
func TestAuthReplayModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for run := range 20 {
		w := peerWindow{}
		m := windowModel{seen: map[uint64]bool{}}
		for range 20_000 {
			var c uint64
			switch k := rng.IntN(10); {
			case k < 4:
				c = m.top + 1 + rng.Uint64N(70)
			case k == 4:
				c = m.top + 1 + rng.Uint64N(3*ReplayWindow)
			default:
				back := rng.Uint64N(ReplayWindow + 130)
				if back > m.top {
					back = m.top
				}
				c = m.top - back
			}
			got := w.check(c) == nil
			if want := m.accepts(c); got != want {
				t.Fatalf("run %d: counter %d with top %d: accepted %v, want %v", run, c, m.top, got, want)
			}
			if got {
				w.accept(c)
				m.accept(c)
			}
		}
	}
}

// Runs of one endpoint are ordered by their epoch's time half: once a
// source was heard in one run, a datagram of an earlier run from that
// address is refused, even one never seen; a later run replaces it; two
// runs started in the same second are both accepted.
func TestAuthEpochOrder(t *testing.T) {
	o := mustOpener(t, authKey1)
	f := authFrame(1, 16)
	old := mustSealer(t, authKey1, 100<<32|0xFFFF_FFFF)
	cur := mustSealer(t, authKey1, 101<<32|7)
	oldD := [][]byte{sealed(t, old, f), sealed(t, old, f), sealed(t, old, f)}
	if _, err := o.Open(oldD[0], srcA); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(sealed(t, cur, f), srcA); err != nil {
		t.Fatalf("a later run: %v", err)
	}
	if _, err := o.Open(oldD[1], srcA); !errors.Is(err, ErrAuthEpoch) || !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("an earlier run's unseen datagram from the same address: %v, want ErrAuthEpoch", err)
	}
	if _, err := o.Open(oldD[0], srcB); !errors.Is(err, ErrAuthReplay) {
		t.Fatalf("an earlier run's seen datagram from another address: %v, want ErrAuthReplay", err)
	}
	same := mustSealer(t, authKey1, 101<<32|3) // a restart within the second
	if _, err := o.Open(sealed(t, same, f), srcA); err != nil {
		t.Fatalf("a run of the same second: %v", err)
	}
	if _, err := o.Open(sealed(t, cur, f), srcA); err != nil {
		t.Fatalf("the first run of that second goes on: %v", err)
	}
	next := mustSealer(t, authKey1, 102<<32)
	if _, err := o.Open(sealed(t, next, f), srcA); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(sealed(t, cur, f), srcA); !errors.Is(err, ErrAuthEpoch) {
		t.Fatalf("after a later run: %v, want ErrAuthEpoch", err)
	}
}

func TestNewEpoch(t *testing.T) {
	seen := map[uint64]bool{}
	for range 1000 {
		e := NewEpoch()
		if seen[e] {
			t.Fatalf("epoch %#x twice", e)
		}
		seen[e] = true
		if d := int64(EpochSeconds(e)) - int64(uint32(time.Now().Unix())); d < -2 || d > 0 {
			t.Fatalf("epoch %#x: time half %d, now %d", e, EpochSeconds(e), time.Now().Unix())
		}
	}
	// The random half is not the clock's: its low bits vary within one
	// second.
	lows := map[uint32]bool{}
	for e := range seen {
		lows[uint32(e)&0xFF] = true
	}
	if len(lows) < 200 {
		t.Fatalf("%d distinct low bytes in 1000 epochs", len(lows))
	}
}

// FuzzAuthOpen: no input makes Open panic, none but the datagrams the
// sealer made verifies, and a persistent Opener fed a sequence the input
// describes (datagrams of two runs of an endpoint at any counter, from
// two addresses, some altered) accepts exactly what the window's model
// accepts.
func FuzzAuthOpen(f *testing.F) {
	s := mustSealer(f, authKey1, 42)
	genuine := map[string]bool{}
	for i, size := range []int{8, 40, 200} {
		d := sealed(f, s, authFrame(uint64(i), size))
		genuine[string(d)] = true
		f.Add(d)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize+TrailerSize))
	f.Add([]byte{0, 0, 1, 0, 0x10, 0, 0, 0x10, 0x40, 1, 0x3F, 0, 2, 0, 0, 3, 5, 0})
	frame := authFrame(9, 8)
	f.Fuzz(func(t *testing.T, d []byte) {
		o := mustOpener(t, authKey1, authKey2)
		n, err := o.Open(d, srcA)
		if err == nil && !genuine[string(d)] {
			t.Fatalf("a datagram the sealer never made verified (%d bytes, frames %d)", len(d), n)
		}
		if err != nil && !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v does not wrap ErrAuth", err)
		}

		// The same bytes as a script, 3 bytes an op: kind, u16 argument.
		o = mustOpener(t, authKey1)
		runs := []*Sealer{mustSealer(t, authKey1, 10<<32|1), mustSealer(t, authKey1, 11<<32|2)}
		models := []windowModel{{seen: map[uint64]bool{}}, {seen: map[uint64]bool{}}}
		newest := map[netip.AddrPort]int{srcA: -1, srcB: -1} // the newest run accepted from each
		for ; len(d) >= 3; d = d[3:] {
			arg := uint64(binary.LittleEndian.Uint16(d[1:]))
			r := int(d[0]>>4) & 1
			m := &models[r]
			var c uint64
			switch d[0] & 3 {
			case 0:
				c = m.top + arg // forward, or a replay of the top
			case 1:
				c = m.top - min(arg, m.top) // late or replayed
			default:
				c = arg
			}
			from := srcA
			if d[0]&4 != 0 {
				from = srcB
			}
			dg := sealAt(t, runs[r], c, frame)
			flip := d[0]&8 != 0
			if flip {
				dg[int(arg)%len(dg)] ^= 1 << (d[0] >> 5)
			}
			_, err := o.Open(dg, from)
			want := !flip && m.accepts(c) && newest[from] <= r
			if (err == nil) != want {
				t.Fatalf("run %d counter %d from %v (top %d, flip %v, newest run there %d): err %v, want accepted %v", r, c, from, m.top, flip, newest[from], err, want)
			}
			if err == nil {
				m.accept(c)
				newest[from] = max(newest[from], r)
			}
		}
	})
}

// TestAuthGolden pins the trailer's bytes (docs/protocol.md §
// Authentication trailer): key id 1, secret 00 01 … 0f, epoch 1, the first
// datagram (counter 1), over data record seq 1 of type 1 with an 8-byte
// payload.
func TestAuthGolden(t *testing.T) {
	const golden = "0100010008000000adcf14c50000000001000000000000000100000000000000" +
		"01000000000000000101be7316d4bdcd41273a7759ff0a54ec62"
	k := Key{ID: 1}
	for i := range k.Secret {
		k.Secret[i] = byte(i)
	}
	s := mustSealer(t, k, 1)
	b := make([]byte, HeaderSize+8, HeaderSize+8+TrailerSize)
	b[HeaderSize] = 1
	if err := Seal(b, 1); err != nil {
		t.Fatal(err)
	}
	b = b[:cap(b)]
	n := s.Seal(b, HeaderSize+8)
	if got := fmt.Sprintf("%x", b[:n]); got != golden {
		t.Fatalf("sealed datagram\n got %s\nwant %s", got, golden)
	}
	if _, err := mustOpener(t, k).Open(b[:n], srcA); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAuthHMAC is the alternative the trailer's construction was
// chosen against (docs/auth.md): HMAC-SHA-256 over the same datagrams.
func BenchmarkAuthHMAC(b *testing.B) {
	for _, size := range []int{128, 1427} {
		f := authFrame(1, size)
		b.Run(fmt.Sprintf("%dB", HeaderSize+size), func(b *testing.B) {
			m := hmac.New(sha256.New, authKey1.Secret[:])
			sum := make([]byte, 0, sha256.Size)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				m.Reset()
				m.Write(f)
				sum = m.Sum(sum[:0])
			}
		})
	}
}
