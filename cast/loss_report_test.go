package cast

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// memLog is the Sender's log and cold reader in memory: unlike a WAL it
// never refuses a record (its flush goroutine's pace would make the
// records sent in a burst vary from run to run).
type memLog struct {
	next   uint64
	frames [][]byte // frames[i] has seq i+1
}

func (l *memLog) Append(typ uint16, payload []byte) ([]byte, error) {
	f := make([]byte, wire.HeaderSize+len(payload))
	copy(f[wire.HeaderSize:], payload)
	binary.LittleEndian.PutUint64(f[wire.HeaderSize:], l.next)
	if err := wire.Seal(f, typ); err != nil {
		return nil, err
	}
	l.frames = append(l.frames, f)
	l.next++
	return f, nil
}

func (l *memLog) NextSeq() uint64 { return l.next }

// ReadRange is called on the loop's I/O goroutine while the loop thread
// waits for it (lossRig.step): frames is not appended to meanwhile.
func (l *memLog) ReadRange(from uint64, n int, dst []byte) (frames, bytes int, err error) {
	for seq := from; seq < from+uint64(n) && seq < l.next; seq++ {
		f := l.frames[seq-1]
		if bytes+len(f) > len(dst) {
			break
		}
		bytes += copy(dst[bytes:], f)
		frames++
	}
	return frames, bytes, nil
}

// lossRig is a Sender loop (a log in memory as its log and cold reader) and a
// Receiver loop over a mem network on a virtual clock, iterated by the
// test: the loss report they write is exact.
type lossRig struct {
	t      *testing.T
	clock  *mem.Clock
	ls, lr *Loop
	dir    string
	next   int  // records sent so far
	burst  int  // records OnPoll sends at its next call (beyond one per step)
	hold   bool // OnPoll sends nothing (iterations that wait for a cold read)
}

// data is the seq of a data frame (0: not one).
func data(b []byte) uint64 {
	h, p, _, err := wire.DecodeFrame(b)
	if err != nil || wire.UDPControl(h.Type) || len(p) < 8 {
		return 0
	}
	return wire.Seq(p)
}

func newLossRig(t *testing.T, toB, toA func(b []byte) mem.Action) *lossRig {
	r := &lossRig{t: t, clock: mem.NewClock(1), dir: t.TempDir()}
	net := mem.NewNetwork(r.clock)
	net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{ReorderBy: 3, Script: func(_ int, b []byte) mem.Action { return toB(b) }})
	net.Impair(mem.AddrB, mem.AddrA, mem.Impairment{Script: func(_ int, b []byte) mem.Action { return toA(b) }})
	a, _ := net.Listen(mem.AddrA, mem.AddrB)
	b, _ := net.Listen(mem.AddrB, mem.AddrA)
	w := &memLog{next: 1}
	sc := protocol.DefaultSenderConfig()
	sc.RingSlots = 64
	snd, err := protocol.NewSender(sc, w)
	if err != nil {
		t.Fatal(err)
	}
	rc := protocol.DefaultReceiverConfig()
	rc.MaxNakRetries = 3
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 64)
	ctr := Counters{Dir: r.dir, Stream: 1}
	r.ls, err = NewLoop(LoopConfig{Path: a, Sender: snd, Cold: w, Counters: ctr, OnPoll: func(l *Loop, now int64) {
		if r.hold {
			return
		}
		for n := 1 + r.burst; n > 0; n-- {
			if _, err := l.Send(100, p); err != nil {
				break
			}
			r.next++
		}
		r.burst = 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.lr, err = NewLoop(LoopConfig{Path: b, Receiver: rcv, Counters: ctr})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Loop{r.ls, r.lr} {
		l.vclock = r.clock.Now
		l.now = l.clock()
		l.next = l.now // NewLoop read the real clock
	}
	r.ls.cold.ioWG.Add(1)
	go r.ls.serveIO()
	t.Cleanup(func() { r.ls.Close(); r.lr.Close() })
	return r
}

// step advances the clock 10 µs and runs one iteration of each loop;
// while the sender waits for a cold read it lets the I/O goroutine run
// without advancing the clock or sending.
func (r *lossRig) step() {
	r.hold = true
	for i := 0; r.ls.cold.pendOn || r.ls.snd.ColdPending() || len(r.ls.cold.free) < len(r.ls.cold.bufs); i++ {
		if i > 100000 {
			r.t.Fatal("cold read never came back")
		}
		r.ls.iterate()
		time.Sleep(10 * time.Microsecond)
	}
	r.hold = false
	r.clock.Advance(10 * time.Microsecond)
	r.ls.iterate()
	r.lr.iterate()
}

// TestLossReportExact: a scripted run where every loss is known. Each
// gap's consumer episode carries its first seq, the seqs it held up, its
// NAKs and how it ended; the producer's its first seq (the first NAKed),
// NAKs, retransmits and their source (ring, WAL); the aggregates count them, and the NAKs and
// retransmits of the episodes add up to the totals.
//
//	seq 20    lost once: one NAK, repaired from the ring
//	seq 600   lost twice (the first retransmit too): two NAKs
//	seq 1200  lost once while a burst of 100 pushes it out of the 64-slot
//	          ring before its NAK comes back: repaired from the WAL
//	seq 1800  held back behind 3 later datagrams: NAKed, then filled by
//	          the original (the receiver cannot tell it from the
//	          retransmit, which comes as a duplicate)
//	seq 2400  never delivered: four NAKs, then the receiver faults
//	          (retry budget 3); the later re-NAKs miss the ring
func TestLossReportExact(t *testing.T) {
	drops := map[uint64]int{20: 1, 600: 2, 1200: 1, 2400: 1 << 30} // data seq → transmissions lost
	seen := map[uint64]int{}
	reordered := false
	var rig *lossRig
	rig = newLossRig(t, func(b []byte) mem.Action {
		s := data(b)
		if s == 0 {
			return mem.Pass
		}
		if s == 1200 && seen[s] == 0 {
			rig.burst = 100
		}
		if s == 1800 && !reordered {
			reordered = true
			return mem.Reorder
		}
		if seen[s]++; seen[s] <= drops[s] {
			return mem.Drop
		}
		return mem.Pass
	}, func(b []byte) mem.Action { return mem.Pass })
	for rig.next < 2300 {
		rig.step()
	}
	for range 1000 { // quiet: every episode closes
		rig.step()
	}
	for rig.lr.rcv.Outcome().Kind == protocol.Live {
		if rig.next > 5000 {
			t.Fatalf("no fault: %+v", rig.lr.rcv.Stats())
		}
		rig.step()
	}
	for range 1000 {
		rig.step()
	}
	snap := rig.ls.ctr.f.Snapshot()
	var cons, prod []counters.Loss
	for _, e := range snap.Loss {
		if e.Done <= e.At {
			t.Errorf("episode %+v: repaired before seen", e)
		}
		e.At, e.Done = 0, 0
		if e.Role == counters.RoleConsumer {
			cons = append(cons, e)
		} else {
			prod = append(prod, e)
		}
	}
	c := func(first, count, naks uint64, r counters.Repair) counters.Loss {
		return counters.Loss{Stream: 1, Role: counters.RoleConsumer, First: first, Count: count, Naks: naks, Repair: r}
	}
	p := func(first, count, naks uint64, r counters.Repair) counters.Loss {
		return counters.Loss{Stream: 1, Role: counters.RoleProducer, First: first, Count: count, Naks: naks, Repair: r}
	}
	wantC := []counters.Loss{c(20, 3, 1, counters.RepairUDP), c(600, 23, 2, counters.RepairUDP), c(1200, 104, 1, counters.RepairUDP),
		c(1800, 3, 1, counters.RepairUDP), c(2400, 0, 4, counters.RepairEscalated)}
	wantP := []counters.Loss{p(20, 1, 1, counters.RepairRing), p(600, 2, 2, counters.RepairRing), p(1200, 1, 1, counters.RepairWAL),
		p(1800, 1, 1, counters.RepairRing), p(2400, 4, 4, counters.RepairRingWAL)}
	if !slices.Equal(cons, wantC) {
		t.Errorf("consumer episodes\n got %+v\nwant %+v", cons, wantC)
	}
	if !slices.Equal(prod, wantP) {
		t.Errorf("producer episodes\n got %+v\nwant %+v", prod, wantP)
	}
	rs, ss := rig.lr.rcv.Stats(), rig.ls.snd.Stats()
	sum := func(es []counters.Loss, f func(counters.Loss) uint64) (n uint64) {
		for _, e := range es {
			n += f(e)
		}
		return n
	}
	naks := func(e counters.Loss) uint64 { return e.Naks }
	if n := sum(cons, naks); n != rs.NaksSent {
		t.Errorf("consumer episodes hold %d NAKs, %d sent", n, rs.NaksSent)
	}
	if n := sum(prod, naks); n != ss.Naks {
		t.Errorf("producer episodes hold %d NAKs, %d received", n, ss.Naks)
	}
	if n := sum(prod, func(e counters.Loss) uint64 { return e.Count }); n != ss.RetxHot+ss.RetxCold {
		t.Errorf("producer episodes hold %d retransmits, %d sent", n, ss.RetxHot+ss.RetxCold)
	}
	for label, want := range map[string]uint64{
		`loss_episodes{stream="1",role="consumer",repair="udp"}`:           4,
		`loss_episodes{stream="1",role="consumer",repair="escalated"}`:     1,
		`loss_episodes{stream="1",role="consumer",repair="without_nak"}`:   0,
		`loss_seqs{stream="1",role="consumer",repair="udp"}`:               3 + 23 + 104 + 3,
		`loss_episodes{stream="1",role="producer",repair="ring"}`:          3,
		`loss_episodes{stream="1",role="producer",repair="wal"}`:           1,
		`loss_episodes{stream="1",role="producer",repair="ring_wal"}`:      1,
		`loss_episodes{stream="1",role="producer",repair="none"}`:          0,
		`loss_seqs{stream="1",role="producer",repair="ring"}`:              4,
		`faults_by_cause{stream="1",role="consumer",cause="retry_budget"}`: 1,
		`faults_by_cause{stream="1",role="consumer",cause="silence"}`:      0,
	} {
		if v, ok := snap.Find(label); !ok || v != want {
			t.Errorf("%s = %d (found %v), want %d", label, v, ok, want)
		}
	}
}
