package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walcast/walcast/wal"
)

// TestCLIReplayMutualTLS: the `cast certs` flow makes mutual TLS the
// default. serve without the clients' CA refuses to
// start; with the files `cast certs` wrote, serve admits only clients with
// a certificate from that CA and tail presents the one written beside it;
// -any-client is the explicit opt-out.
func TestCLIReplayMutualTLS(t *testing.T) {
	bare := t.TempDir()
	runCast(t, "replay", "serve", "-wal", bare, "-listen", "127.0.0.1:0").
		expect(2, "stderr", `^cast replay: mutual TLS needs the CA that signed the clients' certificates: -client-ca FILE .*or -any-client to serve any TLS client$`)
	runCast(t, "replay", "serve", "-wal", bare, "-plaintext", "-any-client").
		expect(2, "stderr", `-any-client is a TLS option`)

	dir := t.TempDir()
	if c := startCast(t, dir, "certs"); c.wait(hangBudget) != 0 {
		t.Fatalf("cast certs: %s", c.Stderr.String())
	}
	walDir := filepath.Join(dir, "wal")
	cfg := wal.DefaultConfig(walDir)
	cfg.Stream = 1
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 20 {
		if _, err := w.Append(100, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	srv := startCast(t, dir, "replay", "serve", "-wal", walDir, "-listen", "127.0.0.1:0", "-max-conns", "8")
	ep := srv.waitOutput(`on (127\.0\.0\.1:\d+) \(TLS 1\.3, clients with a certificate from certs/ca\.pem; at most 8 connections\)`, hangBudget)
	tail := startCast(t, dir, "replay", "tail", "-endpoints", ep, "-caught-up")
	tail.wait(hangBudget)
	tail.expect(0, "stderr", `^20 records, tip 20$`)

	ca := filepath.Join(dir, "certs", "ca.pem")
	noCert := runCast(t, "replay", "tail", "-endpoints", ep, "-caught-up", "-ca", ca, "-wait", "1s")
	noCert.expect(1, "stderr", `^cast replay: gave up after 1s`)
	srv.signal(syscall.SIGINT)
	srv.wait(hangBudget)
	if !strings.Contains(srv.Stderr.String(), "certificate") {
		t.Errorf("serve did not say why it refused the client:\n%s", srv.Stderr.String())
	}

	anySrv := startCast(t, dir, "replay", "serve", "-wal", walDir, "-listen", "127.0.0.1:0", "-any-client")
	ep = anySrv.waitOutput(`on (127\.0\.0\.1:\d+) \(TLS 1\.3, any client;`, hangBudget)
	runCast(t, "replay", "tail", "-endpoints", ep, "-caught-up", "-ca", ca).expect(0, "stderr", `^20 records, tip 20$`)
	anySrv.signal(syscall.SIGINT)
	anySrv.wait(hangBudget)
}
