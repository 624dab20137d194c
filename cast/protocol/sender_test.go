package protocol

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

var rogue = netip.MustParseAddrPort("10.9.9.9:999")

func newTestSender(t testing.TB, cfg SenderConfig, log Log) (*Sender, *batch.Vec) {
	t.Helper()
	s, err := NewSender(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	return s, batch.New(8192, 2048)
}

func sendN(t testing.TB, s *Sender, out *batch.Vec, n int) {
	t.Helper()
	p := make([]byte, 64)
	for i := 0; i < n; i++ {
		if out.Full() {
			out.Reset()
		}
		if _, err := s.Send(100, p, 0, out); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
}

// senderCfg is the config of the unit tests that drive a Sender alone,
// at one instant, with no receiver: the initial window (which waits for
// a first Status up to 100 ms) is off.
func senderCfg() SenderConfig {
	c := DefaultSenderConfig()
	c.Dest = mem.AddrB
	c.InitialWindow = -1
	return c
}

// retransmitted returns the seqs of the data datagrams in out and resets it.
func retransmitted(t testing.TB, out *batch.Vec) []uint64 {
	var seqs []uint64
	for i := 0; i < out.Len(); i++ {
		b, to := out.Msg(i)
		if to != mem.AddrB {
			t.Fatalf("retransmit to %v, want the configured destination", to)
		}
		for len(b) > 0 {
			h, p, n, err := wire.DecodeFrame(b)
			if err != nil || wire.UDPControl(h.Type) {
				t.Fatalf("bad retransmit % x", b)
			}
			seqs = append(seqs, wire.Seq(p))
			b = b[n:]
		}
	}
	out.Reset()
	return seqs
}

func TestSenderNakService(t *testing.T) {
	t.Run("NAK from the receiver is served from the hot ring to Dest", func(t *testing.T) {
		s, out := newTestSender(t, senderCfg(), newFakeLog(1))
		sendN(t, s, out, 10)
		s.Handle(nakFrame(3, 2), mem.AddrB, 0, out)
		if got := retransmitted(t, out); len(got) != 2 || got[0] != 3 || got[1] != 4 {
			t.Fatalf("retransmitted %v", got)
		}
	})
	t.Run("five NAKs within the dedup window give one retransmit", func(t *testing.T) {
		cfg := senderCfg()
		cfg.RetxDedupWindow = 50 * time.Millisecond
		s, out := newTestSender(t, cfg, nil)
		sendN(t, s, out, 3)
		for i := 0; i < 5; i++ {
			s.Handle(nakFrame(2, 1), mem.AddrB, int64(i)*int64(ms), out)
		}
		if got := retransmitted(t, out); len(got) != 1 {
			t.Fatalf("%d retransmits, want 1", len(got))
		}
		s.Handle(nakFrame(2, 1), mem.AddrB, int64(51*ms), out)
		if got := retransmitted(t, out); len(got) != 1 {
			t.Fatalf("%d retransmits after the window, want 1", len(got))
		}
		if st := s.Stats(); st.RetxDedup != 4 || st.RetxHot != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("NAK for a never-sent seq is ignored", func(t *testing.T) {
		s, out := newTestSender(t, senderCfg(), newFakeLog(1))
		sendN(t, s, out, 5)
		for _, n := range []wire.Nak{{From: 6, Count: 1}, {From: 100, Count: 5}, {From: 0, Count: 1}, {From: math.MaxUint64, Count: math.MaxUint64}} {
			s.Handle(nakFrame(n.From, n.Count), mem.AddrB, 0, out)
		}
		if out.Len() != 0 || s.ColdPending() {
			t.Fatalf("answered a NAK for never-sent seqs: %d datagrams", out.Len())
		}
		if st := s.Stats(); st.NakNeverSent != 4 {
			t.Fatalf("stats %+v", st)
		}
		s.Handle(nakFrame(4, 10), mem.AddrB, 0, out) // partly sent: serves 4, 5
		if got := retransmitted(t, out); len(got) != 2 {
			t.Fatalf("retransmitted %v", got)
		}
	})
}

func TestSenderDefersRetransmitsWhenTheBatchIsFull(t *testing.T) {
	s, out := newTestSender(t, senderCfg(), nil)
	sendN(t, s, out, 3000)
	small := batch.New(64, 2048)
	s.Handle(nakFrame(1, 1000), mem.AddrB, 0, small)
	s.Handle(nakFrame(2001, 10), mem.AddrB, 0, small) // queued behind the first
	var got []uint64
	for i := 0; i < 100 && (small.Len() > 0 || s.RetxPending()); i++ {
		got = append(got, retransmitted(t, small)...)
		s.Tick(0, small)
	}
	if len(got) != 1010 || got[0] != 1 || got[999] != 1000 || got[1000] != 2001 || got[1009] != 2010 {
		t.Fatalf("%d retransmits: %v…", len(got), got[:min(len(got), 5)])
	}
	for i := 1; i < 1000; i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("retransmit %d after %d", got[i], got[i-1])
		}
	}
	// More waiting ranges than maxDeferred: the excess is dropped, counted.
	tiny := batch.New(1, 2048)
	for i := 0; i < maxDeferred+10; i++ {
		s.Handle(nakFrame(uint64(1+2*i), 1), mem.AddrB, int64(time.Hour), tiny)
	}
	if st := s.Stats(); st.RetxDropped != 9 { // the first fits, 64 wait, 9 are dropped
		t.Fatalf("stats %+v", st)
	}
}

// TestHostileNak: no NAK can stall the sender or make it amplify.
func TestHostileNak(t *testing.T) {
	crcBad := nakFrame(1, 1)
	crcBad[20] ^= 0xff
	lenBad := nakFrame(1, 1)[:40]
	verBad := nakFrame(1, 1)
	verBad[0] = 2
	for _, tc := range []struct {
		name     string
		b        []byte
		from     netip.AddrPort
		maxRetx  int
		maxCold  int
		counters func(SenderStats) bool
	}{
		{"count 2^64−1", nakFrame(1, math.MaxUint64), mem.AddrB, 4096, 1, func(st SenderStats) bool { return st.NakClamped == 1 }},
		{"count 2^64−1 from 2^64−1", nakFrame(math.MaxUint64, math.MaxUint64), mem.AddrB, 0, 0, func(st SenderStats) bool { return st.NakNeverSent == 1 }},
		{"wrong CRC", crcBad, mem.AddrB, 0, 0, func(st SenderStats) bool { return st.Bad.CRC == 1 && st.Naks == 0 }},
		{"wrong len", lenBad, mem.AddrB, 0, 0, func(st SenderStats) bool { return st.Bad.Len == 1 }},
		{"wrong version", verBad, mem.AddrB, 0, 0, func(st SenderStats) bool { return st.Bad.Version == 1 }},
		{"wrong source", nakFrame(1, 10), rogue, 0, 0, func(st SenderStats) bool { return st.BadSource == 1 && st.Naks == 0 }},
		{"short", []byte{1, 0, 0x11}, mem.AddrB, 0, 0, func(st SenderStats) bool { return st.Bad.Short == 1 }},
		{"NAK with a short payload", func() []byte { f := make([]byte, 16+16); _ = wire.Seal(f, wire.TypeNak); return f }(), mem.AddrB, 0, 0,
			func(st SenderStats) bool { return st.Bad.ShortPayload == 1 }},
		{"heartbeat to the sender", hbFrame(5), mem.AddrB, 0, 0, func(st SenderStats) bool { return st.Ignored == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, out := newTestSender(t, senderCfg(), newFakeLog(1))
			sendN(t, s, out, 5000) // seqs 1..903 are out of the 4096-slot ring
			start := time.Now()
			s.Handle(tc.b, tc.from, 0, out)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Handle took %v", d)
			}
			if out.Len() > tc.maxRetx {
				t.Fatalf("%d retransmits, at most %d allowed", out.Len(), tc.maxRetx)
			}
			var reqs [16]ColdRequest
			if n := s.ColdRequests(reqs[:]); n > tc.maxCold*DefaultMaxColdInFlight {
				t.Fatalf("%d cold requests", n)
			}
			if !tc.counters(s.Stats()) {
				t.Fatalf("stats %+v", s.Stats())
			}
		})
	}
	t.Run("repeated huge NAKs cap the cold reads in flight", func(t *testing.T) {
		s, out := newTestSender(t, senderCfg(), newFakeLog(1))
		sendN(t, s, out, 10000)
		for i := 0; i < 100; i++ {
			s.Handle(nakFrame(uint64(1+i*100), math.MaxUint64), mem.AddrB, int64(i), out)
			out.Reset()
		}
		var reqs [64]ColdRequest
		n := s.ColdRequests(reqs[:])
		if n > DefaultMaxColdInFlight {
			t.Fatalf("%d cold reads in flight, cap %d", n, DefaultMaxColdInFlight)
		}
		total := 0
		for _, r := range reqs[:n] {
			total += r.Count
		}
		if total > DefaultMaxColdInFlight*DefaultMaxColdRecords {
			t.Fatalf("%d cold records requested", total)
		}
	})
	t.Run("AcceptAnyNakSource serves other sources, still to Dest", func(t *testing.T) {
		cfg := senderCfg()
		cfg.AcceptAnyNakSource = true
		s, out := newTestSender(t, cfg, nil)
		sendN(t, s, out, 3)
		s.Handle(nakFrame(1, 1), rogue, 0, out)
		if got := retransmitted(t, out); len(got) != 1 {
			t.Fatalf("retransmitted %v", got)
		}
	})
	t.Run("IPv4-mapped source matches", func(t *testing.T) {
		s, out := newTestSender(t, senderCfg(), nil)
		sendN(t, s, out, 3)
		mapped := netip.AddrPortFrom(netip.AddrFrom16(mem.AddrB.Addr().As16()), mem.AddrB.Port())
		s.Handle(nakFrame(1, 1), mapped, 0, out)
		if got := retransmitted(t, out); len(got) != 1 {
			t.Fatalf("retransmitted %v", got)
		}
	})
}

func TestSenderCold(t *testing.T) {
	log := newFakeLog(1)
	cfg := senderCfg()
	cfg.RingSlots = 64
	cfg.MaxColdRecords = 10
	s, out := newTestSender(t, cfg, log)
	sendN(t, s, out, 200)
	s.Handle(nakFrame(5, 25), mem.AddrB, 0, out) // 5..29 are cold: three requests
	s.Handle(nakFrame(5, 25), mem.AddrB, 0, out) // same again: deduplicated
	var reqs [8]ColdRequest
	n := s.ColdRequests(reqs[:])
	want := []ColdRequest{{5, 10}, {15, 10}, {25, 5}}
	if n != 3 || reqs[0] != want[0] || reqs[1] != want[1] || reqs[2] != want[2] {
		t.Fatalf("requests %v", reqs[:n])
	}
	if st := s.Stats(); st.ColdDedup != 25 {
		t.Fatalf("stats %+v", st)
	}
	buf := make([]byte, 64*1024)
	small := batch.New(4, 2048)
	log.drop = map[uint64]bool{7: true}
	_, nb, _ := log.ReadRange(5, 10, buf)
	rest := s.ColdDone(reqs[0], buf[:nb], 0, small)
	if small.Len() != 4 || len(rest) == 0 {
		t.Fatalf("first ColdDone: %d sent, %d bytes left", small.Len(), len(rest))
	}
	var got []uint64
	for len(rest) > 0 {
		got = append(got, retransmittedTo(t, small)...)
		rest = s.ColdDone(reqs[0], rest, 0, small)
	}
	got = append(got, retransmittedTo(t, small)...)
	if len(got) != 9 || got[0] != 5 || got[2] != 8 {
		t.Fatalf("cold retransmits %v", got)
	}
	s.ColdFailed(reqs[1])
	s.ColdDone(reqs[2], nil, 0, out)
	checkColdWaiting(t, &s.retx.cold)
	if st := s.Stats(); st.RetxCold != 9 || st.ColdMissing != 1+5 || st.ColdErrors != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Served at 0: within the dedup window a new NAK is not read again.
	s.Handle(nakFrame(5, 1), mem.AddrB, int64(cfg.RetxDedupWindow)-1, out)
	if n := s.ColdRequests(reqs[:]); n != 0 {
		t.Fatalf("%d requests within the dedup window", n)
	}
	// After it, with all slots free again, a new NAK queues.
	s.Handle(nakFrame(5, 1), mem.AddrB, int64(cfg.RetxDedupWindow), out)
	if n := s.ColdRequests(reqs[:]); n != 1 {
		t.Fatalf("%d requests after completion", n)
	}
}

var coldBuf [DefaultMaxColdRecords * 128]byte

// serveColdNow plays the loop's part at time now: it reads every cold
// request the Sender hands out from log and finishes it, so the next NAK
// finds the slots free. It returns the records retransmitted.
func serveColdNow(t testing.TB, s *Sender, log *fakeLog, now int64, out *batch.Vec) int {
	t.Helper()
	var reqs [64]ColdRequest
	sent := 0
	for {
		n := s.ColdRequests(reqs[:])
		if n == 0 {
			return sent
		}
		for _, r := range reqs[:n] {
			_, nb, _ := log.ReadRange(r.From, r.Count, coldBuf[:])
			for rest := coldBuf[:nb]; ; {
				rest = s.ColdDone(r, rest, now, out)
				sent += out.Len()
				out.Reset()
				if len(rest) == 0 {
					break
				}
			}
		}
	}
}

// TestSenderColdBudget: cold retransmits are de-duplicated across NAKs
// and budgeted, so a flood of NAKs for old seqs cannot amplify from the
// WAL (a flood of {1, 2^64−1} from the peer's address).
func TestSenderColdBudget(t *testing.T) {
	t.Run("flood of {1, 2^64-1} for one second", func(t *testing.T) {
		log := newFakeLog(1)
		s, out := newTestSender(t, senderCfg(), log)
		sendN(t, s, out, 10000) // 1..5904 are out of the 4096-slot ring
		const naks = 20_000     // one every 50 µs
		retx := 0
		for i := 0; i < naks; i++ {
			now := int64(i) * 50_000
			s.Handle(nakFrame(1, math.MaxUint64), mem.AddrB, now, out)
			retx += out.Len() // hot part (none here: all cold)
			out.Reset()
			retx += serveColdNow(t, s, log, now, out)
		}
		st := s.Stats()
		bound := DefaultColdBurst + DefaultColdRate // one second of budget
		if st.RetxCold > uint64(bound) || uint64(retx) != st.RetxCold {
			t.Fatalf("%d cold retransmits (%d counted) for %d NAKs, budget %d: %+v", retx, st.RetxCold, naks, bound, st)
		}
		if st.ColdDedup == 0 || st.ColdOverBudget == 0 {
			t.Fatalf("neither de-duplicated nor budgeted: %+v", st)
		}
		t.Logf("%d NAKs → %d cold retransmits (%.3f per NAK); dedup %d, over budget %d seqs", naks, st.RetxCold, float64(st.RetxCold)/naks, st.ColdDedup, st.ColdOverBudget)
	})
	t.Run("budget refills at ColdRate", func(t *testing.T) {
		cfg := senderCfg()
		cfg.RingSlots, cfg.ColdRate, cfg.ColdBurst = 16, 1000, 10
		log := newFakeLog(1)
		s, out := newTestSender(t, cfg, log)
		sendN(t, s, out, 200)
		s.Handle(nakFrame(1, 16), mem.AddrB, 0, out)
		if got := serveColdNow(t, s, log, 0, out); got != 10 || s.Stats().ColdOverBudget != 6 {
			t.Fatalf("burst: %d served, %+v", got, s.Stats())
		}
		s.Handle(nakFrame(11, 6), mem.AddrB, int64(5*ms), out) // 5 ms earn 5 records
		if got := serveColdNow(t, s, log, int64(5*ms), out); got != 5 || s.Stats().ColdOverBudget != 7 {
			t.Fatalf("after 5 ms: %d served, %+v", got, s.Stats())
		}
		s.Handle(nakFrame(16, 1), mem.AddrB, int64(time.Hour), out) // full again, no overflow
		if got := serveColdNow(t, s, log, int64(time.Hour), out); got != 1 {
			t.Fatalf("after an hour: %d served", got)
		}
	})
	t.Run("requests wait for a free read, lowest seqs first", func(t *testing.T) {
		cfg := senderCfg()
		cfg.RingSlots = 16
		log := newFakeLog(1)
		s, out := newTestSender(t, cfg, log)
		sendN(t, s, out, 1000)
		for i := 0; i < 100; i++ { // 100 single-seq gaps, highest first
			s.Handle(nakFrame(uint64(800-2*i), 1), mem.AddrB, 0, out)
		}
		st := s.Stats()
		if st.ColdQueued != DefaultMaxColdInFlight+DefaultMaxColdQueued || st.ColdRejected != 100-st.ColdQueued {
			t.Fatalf("stats %+v", st)
		}
		var reqs [64]ColdRequest
		n := s.ColdRequests(reqs[:])
		if n != DefaultMaxColdInFlight || reqs[0].From != 800-2*63 || reqs[1].From != 800-2*62 {
			t.Fatalf("handed out %v", reqs[:n])
		}
		if s.ColdPending() || s.ColdRequests(reqs[:]) != 0 {
			t.Fatal("more than MaxColdInFlight running")
		}
		s.ColdFailed(reqs[0])
		if !s.ColdPending() || s.ColdRequests(reqs[:]) != 1 {
			t.Fatal("a finished read did not make room")
		}
	})
}

func retransmittedTo(t testing.TB, out *batch.Vec) []uint64 { return retransmitted(t, out) }

func TestSenderHeartbeat(t *testing.T) {
	cfg := senderCfg()
	cfg.HeartbeatInterval = 5 * time.Millisecond
	s, out := newTestSender(t, cfg, nil)
	hb := func() (uint64, bool) {
		defer out.Reset()
		if out.Len() != 1 {
			return 0, false
		}
		b, to := out.Msg(0)
		h, p, _, err := wire.DecodeFrame(b)
		if err != nil || h.Type != wire.TypeHeartbeat || to != mem.AddrB {
			t.Fatalf("not a heartbeat: % x to %v", b, to)
		}
		x, _ := wire.ParseHeartbeat(p)
		return x.Highest, true
	}
	s.Tick(0, out)
	if h, ok := hb(); !ok || h != 0 {
		t.Fatalf("first tick of an idle sender: heartbeat %v %d", ok, h)
	}
	s.Tick(int64(4*ms), out)
	if _, ok := hb(); ok {
		t.Fatal("heartbeat before the interval")
	}
	s.Tick(int64(5*ms), out)
	if h, ok := hb(); !ok || h != 0 {
		t.Fatal("no heartbeat after 5 ms idle")
	}
	p := make([]byte, 64)
	for i := 6; i < 30; i++ { // data every ms: no heartbeats
		if _, err := s.Send(100, p, int64(i)*int64(ms), out); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		s.Tick(int64(i)*int64(ms), out)
		if out.Len() != 0 {
			t.Fatalf("heartbeat while data flows at %d ms", i)
		}
	}
	s.Tick(int64(34*ms), out)
	if h, ok := hb(); !ok || h != 24 {
		t.Fatalf("heartbeat %v highest %d, want 24", ok, h)
	}
}

func TestSendErrors(t *testing.T) {
	s, out := newTestSender(t, senderCfg(), nil)
	big := make([]byte, DefaultMaxFrame)
	for _, tc := range []struct {
		name string
		typ  uint16
		p    []byte
		want error
	}{
		{"control type NAK", wire.TypeNak, make([]byte, 64), ErrControlType},
		{"control type heartbeat", wire.TypeHeartbeat, make([]byte, 64), ErrControlType},
		{"payload without room for a seq", 100, make([]byte, 7), ErrPayloadShort},
		{"frame above MaxFrame", 100, big, ErrFrameTooLarge},
	} {
		if _, err := s.Send(tc.typ, tc.p, 0, out); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	full := batch.New(1, 2048)
	if _, err := s.Send(100, make([]byte, 64), 0, full); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(100, make([]byte, 64), 0, full); !errors.Is(err, ErrBatchFull) {
		t.Fatalf("err %v, want ErrBatchFull", err)
	}
	if s.NextSeq() != 2 {
		t.Fatalf("a refused send consumed a seq: next %d", s.NextSeq())
	}
	// SendFrame checks the seq.
	if err := s.SendFrame(frame(5, 64), 0, out); !errors.Is(err, ErrSeqOrder) {
		t.Fatalf("SendFrame out of order: %v", err)
	}
	if err := s.SendFrame(frame(2, 64), 0, out); err != nil || s.NextSeq() != 3 {
		t.Fatalf("SendFrame: %v next %d", err, s.NextSeq())
	}
	logged, _ := newTestSender(t, senderCfg(), newFakeLog(1))
	if err := logged.SendFrame(frame(1, 64), 0, out); !errors.Is(err, ErrHasLog) {
		t.Fatalf("SendFrame with a WAL: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultSenderConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultReceiverConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    func(*SenderConfig)
		r    func(*ReceiverConfig)
	}{
		{name: "send ring not a power of two", s: func(c *SenderConfig) { c.RingSlots = 1000 }},
		{name: "send ring negative", s: func(c *SenderConfig) { c.RingSlots = -4 }},
		{name: "heartbeat negative", s: func(c *SenderConfig) { c.HeartbeatInterval = -1 }},
		{name: "frame above the UDP limit", s: func(c *SenderConfig) { c.MaxFrame = 70000 }},
		{name: "frame below a seq", s: func(c *SenderConfig) { c.MaxFrame = 20 }},
		{name: "no cold reads", s: func(c *SenderConfig) { c.MaxColdInFlight = -1 }},
		{name: "negative cold budget", s: func(c *SenderConfig) { c.ColdRate = -1 }},
		{name: "negative cold burst", s: func(c *SenderConfig) { c.ColdBurst = -1 }},
		{name: "cold rate beyond the bucket arithmetic", s: func(c *SenderConfig) { c.ColdRate = 1 << 40 }},
		{name: "reorder ring not a power of two", r: func(c *ReceiverConfig) { c.ReorderSlots = 3000 }},
		{name: "receiver heartbeat negative", r: func(c *ReceiverConfig) { c.HeartbeatInterval = -1 }},
		{name: "retries out of range", r: func(c *ReceiverConfig) { c.MaxNakRetries = 1 << 20 }},
		{name: "negative silence", r: func(c *ReceiverConfig) { c.SilenceIntervals = -1 }},
		{name: "negative runs per pump", r: func(c *ReceiverConfig) { c.MaxNakRunsPerPump = -1 }},
		{name: "receiver frame too large", r: func(c *ReceiverConfig) { c.MaxFrame = 1 << 17 }},
	} {
		var err error
		if tc.s != nil {
			c := DefaultSenderConfig()
			tc.s(&c)
			_, err = NewSender(c, nil)
		} else {
			c := DefaultReceiverConfig()
			tc.r(&c)
			_, err = NewReceiver(c)
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", tc.name, err)
		}
	}
}

// A batch reset and refilled with a control frame of the same length at
// the same index must not be mistaken for the sender's last datagram.
func TestCoalesceNeverJoinsForeignMessages(t *testing.T) {
	cfg := senderCfg()
	cfg.Coalesce = true
	s, out := newTestSender(t, cfg, nil)
	p := make([]byte, wire.ControlPayloadSize) // data frame of 80 bytes, like a NAK
	if _, err := s.Send(100, p, 0, out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	nak := nakFrame(1, 1)
	out.Append(nak, rogue)
	if _, err := s.Send(100, p, 0, out); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 2 {
		t.Fatalf("%d messages, want the NAK and a new data datagram", out.Len())
	}
	if b, to := out.Msg(0); to != rogue || len(b) != len(nak) {
		t.Fatalf("NAK changed: %d bytes to %v", len(b), to)
	}
	if _, err := s.Send(100, p, 0, out); err != nil || out.Len() != 2 {
		t.Fatalf("consecutive data not coalesced: %v, %d messages", err, out.Len())
	}
}
