package main

// A crash loop: `cast send -wal DIR` runs as a
// separate process and is killed with SIGKILL again and again, unpaced
// and paced, while a cast.Consumer follows it over UDP (with 0.5 % loss)
// and catches up over TCP replay from the same WAL directory. At the end
// every record the consumer kept must be the log's record, byte for byte
// (CRC), and every seq it delivered that the log does not have must be
// named by a Skip event: a restarted sender that reissued such seqs with
// other content would leave the consumer holding the old content without
// a word.

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/datapath/udp"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

func TestSenderCrashLoop(t *testing.T)      { runCrashLoop(t, 12) }
func TestLargeSenderCrashLoop(t *testing.T) { runCrashLoop(t, 300) }

type kept struct {
	seq uint64
	crc uint32
	typ uint16
}

type crashLoop struct {
	t        *testing.T
	walRoot  string
	mu       sync.Mutex
	got      []kept
	lost     [][2]uint64 // delivered seqs a Skip declared without a record
	skips    int
	runErr   error
	consumer *cast.Consumer
}

func runCrashLoop(t *testing.T, kills int) {
	if testing.Short() {
		t.Skip("crash loop: -short")
	}
	dir := t.TempDir()
	cl := &crashLoop{t: t, walRoot: filepath.Join(dir, "wal")}
	if err := os.MkdirAll(wal.StreamDir(cl.walRoot, 1), 0o755); err != nil {
		t.Fatal(err)
	}
	// The sender's port, picked by the kernel and reused by every run so
	// the consumer's NAKs reach each incarnation.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	senderAddr := pc.LocalAddr().String()
	pc.Close()

	// Replay server over the WAL directory the sender writes.
	ds, err := replay.OpenDirSource(cl.walRoot, 1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	scfg := replay.DefaultServerConfig()
	scfg.Plaintext = true
	srv, err := replay.NewServer(scfg, ds)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	// The consumer: UDP with 0.5 % loss, replay on escalation.
	uc := udp.DefaultConfig()
	uc.Local = netip.MustParseAddrPort("127.0.0.1:0")
	up, err := udp.New(uc)
	if err != nil {
		t.Fatal(err)
	}
	path := drop.New(up, drop.Config{RecvPct: 0.5, Seed: 16}, 64, 2048)
	defer path.Close()
	ccfg := cast.ConsumerConfig{
		Path: path, From: netip.MustParseAddrPort(senderAddr), Replay: []string{ln.Addr().String()}, Plaintext: true, Stream: 1,
		Idle: affinity.Idler{Strategy: affinity.Backoff, Spins: 1, Yields: 1, MinSleep: 20 * time.Microsecond, MaxSleep: 20 * time.Microsecond},
	}
	ccfg.Advanced.ReplayClient.Backoff = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond}
	ccfg.Advanced.ReplayClient.RetryBudget = 100
	ccfg.OnEvent = func(e cast.Event) {
		if e.Kind == cast.EventSkip {
			cl.skips++
			if e.Skip.LostTo != 0 {
				cl.lost = append(cl.lost, [2]uint64{e.Skip.LostFrom, e.Skip.LostTo})
			}
		}
	}
	c, err := cast.NewConsumer(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.consumer = c
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		err := c.Run(ctx, func(r cast.Record) error {
			cl.mu.Lock()
			cl.got = append(cl.got, kept{seq: r.Seq, crc: r.CRC, typ: r.Type})
			cl.mu.Unlock()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			cl.mu.Lock()
			cl.runErr = err
			cl.mu.Unlock()
		}
	}()
	defer func() { cancel(); <-runDone }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	to := path.LocalAddr().String()
	start := time.Now()
	for k := 0; k < kills; k++ {
		args := []string{"send", "-to", to, "-bind", senderAddr, "-wal", cl.walRoot, "-wal-verify=false",
			"-n", "1000000000", "-size", "32", "-path", "udp"}
		run := time.Duration(10+rng.IntN(40)) * time.Millisecond
		if k%2 == 1 {
			args = append(args, "-rate", strconv.Itoa(20000+rng.IntN(80000)))
			run = time.Duration(20+rng.IntN(120)) * time.Millisecond
		}
		ch := cl.startSender(args)
		time.Sleep(run)
		ch.Cmd.Process.Signal(syscall.SIGKILL)
		<-ch.Done()
		if err := cl.err(); err != nil {
			t.Fatalf("kill %d: consumer: %v", k, err)
		}
	}
	// A last, clean run: it writes the Skip for the last kill and ends the
	// stream normally.
	last := cl.startSender([]string{"send", "-to", to, "-bind", senderAddr, "-wal", cl.walRoot, "-wal-verify=false",
		"-n", "2000", "-size", "32", "-path", "udp", "-rate", "20000", "-linger", "1s"})
	if code := last.wait(hangBudget); code != 0 {
		t.Fatalf("last sender exited %d: %s", code, last.Stderr.String())
	}
	rep, err := wal.Verify(wal.StreamDir(cl.walRoot, 1), 1)
	if err != nil || rep.Bad != nil {
		t.Fatalf("the WAL after %d kills: %v %v", kills, err, rep.Bad)
	}
	end := time.Now().Add(hangBudget)
	for c.Tip() < rep.Last && time.Now().Before(end) && cl.err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-runDone
	if cl.runErr != nil {
		t.Fatalf("consumer: %v", cl.runErr)
	}
	if c.Tip() < rep.Last {
		t.Fatalf("consumer stopped at %d, the log ends at %d", c.Tip(), rep.Last)
	}
	cl.check(rep)
	st := c.Stats()
	t.Logf("%d SIGKILLs in %v: log %d records, %d Skip markers; consumer delivered %d (UDP %d, TCP %d), %d escalations (%d faults, %d reconnects), %d skips, %d delivered seqs reported lost in %d events, 0 kept that differ from the log",
		kills, time.Since(start).Round(time.Second), rep.Records, len(rep.Skips), len(cl.got), st.UDPRecords, st.TCPRecords,
		st.Escalations, st.Faults, st.Reconnects, cl.skips, st.LostSeqs, len(cl.lost))
}

func (cl *crashLoop) err() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.runErr
}

func (cl *crashLoop) startSender(args []string) *child {
	cl.t.Helper()
	for try := 0; ; try++ {
		ch := startCast(cl.t, "", args...)
		select {
		case <-ch.Done():
			if try < 20 {
				time.Sleep(50 * time.Millisecond) // the port was not free yet
				continue
			}
			cl.t.Fatalf("cast send exited %d: %s", ch.Code(), ch.Stderr.String())
		default:
		}
		ch.waitOutput(`sending \d+ records`, hangBudget)
		return ch
	}
}

// check compares what the consumer delivered with the log, both in seq
// order: a kept record must be the log's record; a delivered seq the log
// does not hold (or holds with other content) must be inside a range a
// Skip event named; every record of the log after the consumer's first
// must have been delivered.
func (cl *crashLoop) check(rep wal.VerifyReport) {
	t := cl.t
	if len(cl.got) == 0 {
		t.Fatal("the consumer delivered nothing")
	}
	inLost := func(s uint64) bool {
		for _, r := range cl.lost {
			if s >= r[0] && s <= r[1] {
				return true
			}
		}
		return false
	}
	r, err := wal.OpenReader(cl.walRoot, 1, cl.got[0].seq)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var fr []byte
	next := func() {
		fr, err = r.Next()
		if err == io.EOF {
			fr = nil
		} else if err != nil {
			t.Fatalf("reading the log: %v", err)
		}
	}
	next()
	var prev uint64
	divergent, dropped := 0, 0
	for i, g := range cl.got {
		if i > 0 && g.seq <= prev {
			t.Fatalf("delivered %d after %d", g.seq, prev)
		}
		prev = g.seq
		// Log records before g the consumer never got.
		for fr != nil && wire.Seq(fr[wire.HeaderSize:]) < g.seq {
			t.Fatalf("the log's seq %d was never delivered (delivered %d next)", wire.Seq(fr[wire.HeaderSize:]), g.seq)
		}
		if fr != nil && wire.Seq(fr[wire.HeaderSize:]) == g.seq {
			h, _ := wire.ParseHeader(fr)
			if h.CRC == g.crc && h.Type == g.typ {
				next()
				continue
			}
			next()
		}
		if !inLost(g.seq) {
			divergent++
			if divergent <= 5 {
				t.Errorf("seq %d delivered with CRC %08x, not in the log (or different there), and no Skip named it", g.seq, g.crc)
			}
			continue
		}
		dropped++
	}
	if divergent > 0 {
		t.Fatalf("%d delivered records differ from the log without an event", divergent)
	}
	if fr != nil {
		t.Fatalf("the log goes on at %d after the consumer's last %d", wire.Seq(fr[wire.HeaderSize:]), prev)
	}
	var lostSeqs uint64
	for _, r := range cl.lost {
		lostSeqs += r[1] - r[0] + 1
	}
	if uint64(dropped) != lostSeqs {
		t.Fatalf("%d delivered seqs are not in the log, Skip events named %d", dropped, lostSeqs)
	}
	t.Logf("compared %d delivered records with the log: %d kept and identical, %d reported lost", len(cl.got), len(cl.got)-dropped, dropped)
}
