package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

// The crash test runs this test binary again as a child (env
// WAL_CRASH_CHILD=dir) that appends forever and prints every durable
// watermark it learns; the parent kills it with SIGKILL at a random moment
// and checks the recovered log.
const crashEnv = "WAL_CRASH_CHILD"

func crashConfig(dir string) Config {
	c := DefaultConfig(dir)
	c.Stream = 9
	c.SegmentSize = 64 << 10 // rotate often, so kills land inside rotations too
	c.BufferSize = 1 << 20
	c.FlushInterval = time.Millisecond
	c.FlushRecords = 50
	c.MaxFlushLag = time.Second
	return c
}

// TestMain runs crashChild instead of the tests when the binary is started
// as TestCrashRecovery's child process, so the child is not a skipped test.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
	}
	os.Exit(m.Run())
}

// crashChild appends until it is killed, printing the durable watermark
// and the highest seq appended (handed out) so far.
func crashChild(dir string) {
	w, err := Open(crashConfig(dir))
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	fmt.Printf("start %d\n", w.NextSeq())
	// Safety net: never outlive a parent that failed before killing us.
	parent := os.Getppid()
	go func() {
		for start := time.Now(); time.Since(start) < time.Minute && os.Getppid() == parent; {
			time.Sleep(50 * time.Millisecond)
		}
		os.Exit(4)
	}()
	go func() {
		var d uint64
		for {
			nd, err := w.WaitDurable(context.Background(), d)
			if err != nil {
				return
			}
			d = nd
			fmt.Printf("durable %d appended %d\n", d, w.NextSeq()-1)
		}
	}()
	for {
		seq := w.NextSeq()
		if _, err := w.Append(100, payloadFor(seq, sizeFor(seq))); err != nil {
			if errors.Is(err, ErrBackpressure) {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			fmt.Printf("error %v\n", err)
			os.Exit(3)
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	runCrashes(t, 15)
}

func TestLargeCrashRecovery(t *testing.T) {
	runCrashes(t, 60)
}

func runCrashes(t *testing.T, rounds int) {
	dir := t.TempDir()
	c := crashConfig(dir)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var lastDurable, lastAppended, recovered uint64
	skips := 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // never leave a child behind on failure
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the child to start, then let it run a random time.
		var start uint64
		select {
		case l := <-lines:
			if !strings.HasPrefix(l, "start ") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: child said %q", round, l)
			}
			start, _ = strconv.ParseUint(strings.TrimPrefix(l, "start "), 10, 64)
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child did not start", round)
		}
		if start != recovered+1 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child starts at seq %d, recovered log ends at %d", round, start, recovered)
		}
		deadline := time.After(time.Duration(5+rng.IntN(60)) * time.Millisecond)
	run:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break run
				}
				if d, a, ok := parseDurable(l); ok {
					if d < start-1 {
						t.Fatalf("round %d: durable %d below the start %d", round, d, start)
					}
					lastDurable = max(lastDurable, d)
					lastAppended = max(lastAppended, a)
				} else {
					t.Fatalf("round %d: child: %s", round, l)
				}
			case <-deadline:
				break run
			}
		}
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		for l := range lines { // watermarks printed before the kill count too
			if d, a, ok := parseDurable(l); ok {
				lastDurable = max(lastDurable, d)
				lastAppended = max(lastAppended, a)
			}
		}
		// Recover in the parent and check everything.
		w, err := Open(c)
		if err != nil {
			t.Fatalf("round %d: recovery: %v", round, err)
		}
		last := w.NextSeq() - 1
		if last < lastDurable {
			w.Close()
			t.Fatalf("round %d: lost durable records: recovered up to %d, child reported %d durable", round, last, lastDurable)
		}
		buf := make([]byte, 1<<17)
		// No seq the child handed out is handed out again: the log goes on
		// after them, with a Skip marker for those that did not survive.
		if last < lastAppended {
			w.Close()
			t.Fatalf("round %d: the next seq %d reuses a seq the child handed out (up to %d)", round, last+1, lastAppended)
		}
		if sk := w.Stats().Recovery.Skip; sk != nil {
			skips++
			if sk.From <= lastDurable || sk.Seq <= lastAppended || sk.Seq != last {
				w.Close()
				t.Fatalf("round %d: Skip %+v; durable %d, appended %d, last %d", round, *sk, lastDurable, lastAppended, last)
			}
			// A reader asked for a seq inside the hole starts at the marker.
			r, err := OpenReader(c.Dir, c.Stream, (sk.From+sk.Seq)/2)
			if err != nil {
				w.Close()
				t.Fatalf("round %d: reader inside the hole: %v", round, err)
			}
			fr, err := r.Next()
			r.Close()
			if h, _ := wire.ParseHeader(fr); err != nil || h.Type != wire.TypeSkip || wire.Seq(fr[wire.HeaderSize:]) != sk.Seq {
				w.Close()
				t.Fatalf("round %d: reader inside the hole got %v %v", round, h, err)
			}
			if _, err := w.ReadAt(sk.From, buf); !errors.Is(err, ErrNotFound) {
				w.Close()
				t.Fatalf("round %d: ReadAt of a skipped seq: %v", round, err)
			}
		}
		for _, seq := range []uint64{1, lastDurable, last, (last + 1) / 2} {
			if seq == 0 {
				continue
			}
			n, err := w.ReadAt(seq, buf)
			if errors.Is(err, ErrNotFound) {
				continue // a seq a crash left unused (inside a Skip)
			}
			if err != nil {
				w.Close()
				t.Fatalf("round %d: ReadAt(%d): %v", round, seq, err)
			}
			checkRecord(t, seq, buf[:n])
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(StreamDir(dir, c.Stream), c.Stream)
		if err != nil || rep.Bad != nil || rep.Last != last || (last > 0 && rep.First != 1) {
			t.Fatalf("round %d: verify: %v %v (%d…%d, want 1…%d)", round, err, rep.Bad, rep.First, rep.Last, last)
		}
		recovered = last
	}
	if lastDurable == 0 {
		t.Fatal("the child never reported a durable record")
	}
	verifyDir(t, c, recovered)
	t.Logf("%d kills; %d records recovered, last durable watermark %d, %d Skip markers", rounds, recovered, lastDurable, skips)
}

// parseDurable parses the child's "durable D appended A" line.
func parseDurable(l string) (d, a uint64, ok bool) {
	if _, err := fmt.Sscanf(l, "durable %d appended %d", &d, &a); err != nil {
		return 0, 0, false
	}
	return d, a, true
}
