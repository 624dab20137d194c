package replay

import (
	"bufio"
	"context"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walcast/walcast/wire"
)

func TestTipFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "consumer.tip")
	cases := []struct {
		name    string
		content *string
		want    uint64
	}{
		{"missing", nil, 0},
		{"empty", ptr(""), 0},
		{"garbage", ptr("forty-two"), 0},
		{"decimal", ptr("42"), 42},
		{"newline tolerated", ptr("42\n"), 42},
		{"max", ptr("18446744073709551615"), 1<<64 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(p)
			if tc.content != nil {
				os.WriteFile(p, []byte(*tc.content), 0o644)
			}
			got, err := ReadTip(p)
			if err != nil || got != tc.want {
				t.Errorf("ReadTip = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if err := WriteTip(p, 42); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "42" {
		t.Errorf("tip file holds %q, want \"42\" (bare decimal, no newline)", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "consumer.tmp")); !os.IsNotExist(err) {
		t.Errorf("temp file left behind: %v", err)
	}
	if err := WriteTip(filepath.Join(dir, "missing-dir", "x.tip"), 1); err == nil {
		t.Error("WriteTip into a missing directory succeeded")
	}
}

func ptr[T any](v T) *T { return &v }

// The tip is persisted at most every TipInterval while records flow, and
// exactly on stream end.
func TestTipPersistedPeriodically(t *testing.T) {
	src := newMemSource(1, 1, 64)
	src.AppendFlush(10)
	_, addr := startServer(t, nil, src)
	cfg := testClientConfig(t, addr)
	cfg.TipPath = filepath.Join(t.TempDir(), "c.tip")
	cfg.TipInterval = 20 * time.Millisecond
	cl, _ := NewClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx, func(wire.Header, []byte) error { return nil }) }()
	for range 50 {
		src.AppendFlush(10)
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cl.Tip() != 510 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Idle at 510: the file follows within a tip interval (plus the two
	// fsyncs, which a loaded disk may stretch).
	var tip uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if tip, _ = ReadTip(cfg.TipPath); tip == 510 {
			break
		}
	}
	if tip != 510 {
		t.Errorf("tip file %d while idle at 510", tip)
	}
	cancel()
	<-done
	w := cl.Stats().TipWrites
	// ~300 ms of traffic at a 20 ms interval: a few to ~20 writes, never one per record.
	if w < 2 || w > 60 {
		t.Errorf("tip written %d times for 510 records", w)
	}
}

// TestMain runs consumerProcess instead of the tests when the binary is
// started as TestConsumerKilledAndRestarted's child, so the child is not a
// skipped test.
func TestMain(m *testing.M) {
	if addr := os.Getenv("REPLAY_CHILD_ADDR"); addr != "" {
		consumerProcess(addr)
		os.Exit(0)
	}
	if args := strings.Split(os.Getenv("REPLAY_SLOW_READERS"), ","); len(args) == 3 {
		n, _ := strconv.Atoi(args[1])
		slowReaders(args[0], n, args[2])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// consumerProcess is the consumer process that TestConsumerKilledAndRestarted
// runs and kills. It prints each delivered seq on stdout.
func consumerProcess(addr string) {
	tip, ca := os.Getenv("REPLAY_CHILD_TIP"), os.Getenv("REPLAY_CHILD_CA")
	fatal := func(err error) {
		fmt.Fprintln(os.Stderr, "consumer process:", err)
		os.Exit(3)
	}
	cfg := DefaultClientConfig()
	cfg.Endpoints = []string{addr}
	cfg.Stream = 1
	var err error
	cfg.TLS, err = ClientTLS(ca, os.Getenv("REPLAY_CHILD_CERT"), os.Getenv("REPLAY_CHILD_KEY"))
	if err != nil {
		fatal(err)
	}
	cfg.TipPath = tip
	cl, err := NewClient(cfg)
	if err != nil {
		fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	cl.Run(context.Background(), func(_ wire.Header, p []byte) error {
		fmt.Fprintln(w, wire.Seq(p))
		w.Flush()
		time.Sleep(50 * time.Microsecond) // slow enough to be killed mid-stream
		return nil
	})
}

// A consumer process is SIGKILLed mid-stream and started again with the
// same tip file: it resumes at tip+1 — nothing at or below the persisted
// tip is delivered again, and nothing is lost.
func TestConsumerKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	src := newMemSource(1, 1, 64)
	src.AppendFlush(6000)
	_, addr := startServer(t, nil, src)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, testPKI(t).CACert, 0o644)
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	os.WriteFile(cert, testPKI(t).ClientCert, 0o644)
	os.WriteFile(key, testPKI(t).ClientKey, 0o600)
	tip := filepath.Join(dir, "consumer.tip")

	start := func() (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "REPLAY_CHILD_ADDR="+addr, "REPLAY_CHILD_TIP="+tip, "REPLAY_CHILD_CA="+ca, "REPLAY_CHILD_CERT="+cert, "REPLAY_CHILD_KEY="+key)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, bufio.NewScanner(out)
	}
	seqs := func(sc *bufio.Scanner, stopAt uint64) []uint64 {
		var got []uint64
		for sc.Scan() {
			n, err := strconv.ParseUint(strings.TrimSpace(sc.Text()), 10, 64)
			if err != nil {
				continue // test framework chatter
			}
			got = append(got, n)
			if n >= stopAt {
				break
			}
		}
		return got
	}
	cmd, sc := start()
	first := seqs(sc, 2000)
	cmd.Process.Signal(syscall.SIGKILL)
	first = append(first, seqs(sc, 1<<63)...) // what it printed before dying
	cmd.Wait()
	persisted, _ := ReadTip(tip)
	last := first[len(first)-1]
	checkRange(t, first, 1, last)
	if persisted == 0 || persisted > last {
		t.Fatalf("persisted tip %d, killed after delivering %d", persisted, last)
	}
	t.Logf("killed after %d, tip file %d (%d records to redeliver)", last, persisted, last-persisted)

	_, sc2 := start()
	second := seqs(sc2, 6000)
	checkRange(t, second, persisted+1, 6000)
}
