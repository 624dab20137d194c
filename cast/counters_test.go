package cast

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/datapath/mem"
)

// TestCountersFile: a Producer and a Consumer over a lossy link publish
// their counters; what another reader maps equals what their Stats say
// once the stream is quiet, loss episodes and the WAL's counters
// included, and Close takes the slots (and the file) away.
func TestCountersFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no shared mapping on windows: counters stay in process memory")
	}
	dir := t.TempDir()
	ctr := Counters{Dir: dir}
	net := mem.NewNetwork(monoClock{time.Now()})
	net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Seed: 3, DropProb: 0.05})
	endA, _ := net.Listen(mem.AddrA, mem.AddrB)
	endB, _ := net.Listen(mem.AddrB, mem.AddrA)
	p, err := NewProducer(ProducerConfig{To: mem.AddrB, Path: endA, Dir: t.TempDir(), Stream: 7, Idle: quiet, Advanced: ProducerAdvanced{Counters: ctr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := NewConsumer(ConsumerConfig{From: mem.AddrA, Path: endB, Stream: 7, NoCatchUp: true,
		Idle: quiet, Advanced: ConsumerAdvanced{SkipBootstrap: true, Counters: ctr}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan uint64, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, func(r Record) error {
			if r.Seq == n {
				got <- r.Seq
			}
			return nil
		})
	}()
	publishN(t, p, n)
	select {
	case <-got:
	case err := <-done:
		t.Fatalf("consumer stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatalf("not delivered: %+v", c.Stats())
	}
	// Quiet: every loop has ticked and every sampler has run since.
	time.Sleep(5 * counters.SampleInterval)

	path := p.loop.ctr.f.Path()
	s, err := counters.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.State != counters.Live {
		t.Fatalf("pid %d state %s", s.PID, s.State)
	}
	ps, cs := p.Stats(), c.Stats()
	rs := p.Receivers()
	if len(rs) != 1 {
		t.Fatalf("receivers %+v", rs)
	}
	row := fmt.Sprintf(`{stream="7",role="producer",receiver="%d"}`, rs[0].ID)
	for label, want := range map[string]uint64{
		`records_sent{stream="7",role="producer"}`:         ps.Sender.Sent,
		`naks_received{stream="7",role="producer"}`:        ps.Sender.Naks,
		`retx_hot{stream="7",role="producer"}`:             ps.Sender.RetxHot,
		`last_seq{stream="7",role="producer"}`:             n,
		`records_published{stream="7",role="producer"}`:    n,
		`wal_durable_seq{stream="7",role="producer"}`:      ps.WAL.Durable,
		`naks_sent{stream="7",role="consumer"}`:            cs.Receiver.NaksSent,
		`records_delivered{stream="7",role="consumer"}`:    cs.Receiver.Delivered,
		`delivered_seq{stream="7",role="consumer"}`:        n,
		`consumer_udp_records{stream="7",role="consumer"}`: cs.UDPRecords,
		`receivers{stream="7",role="producer"}`:            1,
		"receiver_delivered_seq" + row:                     n,
		"receiver_window" + row:                            uint64(rs[0].Window),
	} {
		if v, ok := s.Find(label); !ok || v != want {
			t.Errorf("%s = %d (found %v), want %d", label, v, ok, want)
		}
	}
	if cs.Receiver.NaksSent == 0 {
		t.Fatalf("no loss at 5 %%: %+v", cs.Receiver)
	}
	var it uint64
	for _, v := range s.Values {
		if v.Name == "loop_iterations" {
			it += v.Value
		}
	}
	if it == 0 {
		t.Error("loop_iterations not published")
	}
	// Loss episodes: the consumer's closed ones repaired over UDP; the
	// aggregates count them.
	var eps, udp uint64
	for _, e := range s.Loss {
		if e.Role == counters.RoleConsumer && e.Repair == counters.RepairUDP {
			udp++
			if e.First == 0 || e.Latency() <= 0 || e.Naks == 0 {
				t.Errorf("episode %+v", e)
			}
		}
	}
	eps, _ = s.Find(`loss_episodes{stream="7",role="consumer",repair="udp"}`)
	if udp == 0 || eps < udp {
		t.Errorf("consumer episodes: %d in the ring, %d counted", udp, eps)
	}
	if pe, _ := s.Find(`loss_episodes{stream="7",role="producer",repair="ring"}`); pe == 0 {
		t.Errorf("no producer episode repaired from the ring: %+v", s.Loss)
	}
	for _, e := range s.Loss {
		if e.Role == counters.RoleProducer && (e.First == 0 || e.First > p.Stats().LastSeq) {
			t.Errorf("producer episode %+v: first seq not one the producer sent", e)
		}
	}

	cancel()
	<-done
	p.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file left after every loop closed: %v", err)
	}
}

// TestCountersOff: Off writes no file.
func TestCountersOff(t *testing.T) {
	dir := t.TempDir()
	pair := mem.NewPair(1)
	p, err := NewProducer(ProducerConfig{Path: pair.A, Idle: quiet, Advanced: ProducerAdvanced{Counters: Counters{Off: true, Dir: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if path, err := p.loop.CountersPath(); path != "" || err != nil {
		t.Fatalf("CountersPath %q %v", path, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files written: %v", ents)
	}
}

// TestLoopIterateAllocsWithCounters: with counters on, iterations over
// a lossy link (ticks, publishing, loss episodes opening and closing)
// allocate nothing, with keys too (sealing, opening and the auth slots).
func TestLoopIterateAllocsWithCounters(t *testing.T) {
	for _, keys := range []*Keys{nil, testKeys} {
		t.Run(fmt.Sprintf("keyed=%v", keys != nil), func(t *testing.T) {
			clock := mem.NewClock(1)
			net := mem.NewNetwork(clock)
			net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Seed: 1, DropProb: 0.1})
			a, _ := net.Listen(mem.AddrA, mem.AddrB)
			b, _ := net.Listen(mem.AddrB, mem.AddrA)
			dir := t.TempDir()
			snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
			rcv, _ := protocol.NewReceiver(protocol.DefaultReceiverConfig())
			p := make([]byte, 64)
			n := 0
			ls, err := NewLoop(LoopConfig{Path: a, Sender: snd, Counters: Counters{Dir: dir}, Keys: keys,
				OnPoll: func(l *Loop, now int64) {
					if n++; n%3 == 0 {
						_, _ = l.Send(1, p)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			lr, err := NewLoop(LoopConfig{Path: b, Receiver: rcv, Counters: Counters{Dir: dir}, Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			ls.vclock, lr.vclock = clock.Now, clock.Now
			t.Cleanup(func() { ls.Close(); lr.Close() })
			step := func() {
				clock.Advance(100 * time.Microsecond)
				ls.iterate()
				lr.iterate()
			}
			for range 2000 {
				step()
			}
			if a := testing.AllocsPerRun(2000, step); a != 0 {
				t.Fatalf("%v allocations per iteration pair", a)
			}
			if lr.ctr.cl.episodes[counters.RepairUDP].Load() == 0 {
				t.Fatalf("no loss episode repaired: %+v", lr.rcv.Stats())
			}
			if ls.ctr.pl.episodes[counters.RepairRing].Load() == 0 {
				t.Fatalf("no producer episode repaired: %+v", ls.snd.Stats())
			}
			if keys != nil {
				lab := lr.ctr.roles["consumer"]
				if v, _ := lr.ctr.f.Snapshot().Find("auth_opened" + lab); v == 0 {
					t.Fatalf("auth_opened%s not published: %+v", lab, lr.auth.stats)
				}
			}
		})
	}
}

// TestCountersKeep: a loop with Counters.Keep leaves its slots, with
// their final values, in a file someone else still holds; the last
// Release removes it.
func TestCountersKeep(t *testing.T) {
	dir := t.TempDir()
	hold, err := counters.Acquire(counters.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	pair := mem.NewPair(1)
	snd, _ := protocol.NewSender(protocol.DefaultSenderConfig(), nil)
	l, err := StartLoop(LoopConfig{Path: pair.A, Sender: snd, Idle: quiet, Counters: Counters{Dir: dir, Stream: 9, Keep: true}})
	if err != nil {
		t.Fatal(err)
	}
	for l.Stats().Iterations == 0 {
		time.Sleep(time.Millisecond)
	}
	l.Close()
	it := l.Stats().Iterations
	s := hold.Snapshot()
	var got uint64
	for _, v := range s.Values {
		if v.Name == "loop_iterations" && v.Labels["stream"] == "9" {
			got = v.Value
		}
	}
	if got != it || it == 0 {
		t.Fatalf("kept loop_iterations %d, the loop's final %d", got, it)
	}
	path := hold.Path()
	hold.Release()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file left after the last Release: %v", err)
	}
}
