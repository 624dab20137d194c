package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walcast/walcast/wal"
)

// cast certs writes a PKI; cast replay serve follows a WAL directory with
// those certs; cast replay tail catches up from a seq and stops after
// -count records, printing one line per record.
func TestReplayServeTail(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	var stderr bytes.Buffer
	if code := run([]string{"certs", "-dir", certs}, &stderr); code != 0 {
		t.Fatalf("cast certs: %d %s", code, stderr.String())
	}
	if code := run([]string{"certs", "-dir", certs}, &stderr); code == 0 {
		t.Error("cast certs overwrote existing files without -force")
	}

	walDir := filepath.Join(dir, "wal")
	cfg := wal.DefaultConfig(walDir)
	cfg.Stream = 3
	cfg.BlockOnBackpressure = true // a loaded machine's flush lags: wait, never lose a record
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	payload := make([]byte, 64)
	for range 50 {
		if _, err := w.Append(100, payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	// Pick a free port for serve.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	old := replayContext
	replayContext = func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	defer func() { replayContext = old }()

	var wg sync.WaitGroup
	wg.Add(1)
	var serveCode int
	var serveErr bytes.Buffer
	go func() {
		defer wg.Done()
		serveCode = run([]string{"replay", "serve", "-wal", walDir, "-listen", addr, "-max-conns", "4",
			"-cert", filepath.Join(certs, "server.pem"), "-key", filepath.Join(certs, "server-key.pem"), "-client-ca", filepath.Join(certs, "ca.pem")}, &serveErr)
	}()
	defer func() { cancel(); wg.Wait() }()

	var out bytes.Buffer
	replayOut = &out
	defer func() { replayOut = os.Stdout }()
	var tailErr bytes.Buffer
	deadline := time.Now().Add(10 * time.Second)
	for {
		out.Reset()
		code := run([]string{"replay", "tail", "-endpoints", addr, "-stream", "3", "-from", "41", "-count", "10",
			"-ca", filepath.Join(certs, "ca.pem"), "-cert", filepath.Join(certs, "client.pem"), "-key", filepath.Join(certs, "client-key.pem")}, &tailErr)
		if code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // serve not listening yet
	}
	var want strings.Builder
	for seq := 41; seq <= 50; seq++ {
		fmt.Fprintf(&want, "%d 100 64\n", seq)
	}
	if out.String() != want.String() {
		t.Errorf("tail printed\n%s\nwant\n%s\nstderr: %s", out.String(), want.String(), tailErr.String())
	}
	cancel()
	wg.Wait()
	if serveCode != exitInterrupted {
		t.Errorf("serve exited %d, want 130 (stopped): %s", serveCode, serveErr.String())
	}
}
