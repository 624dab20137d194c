//go:build !windows

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/walcast/walcast/wire"
)

func writeKeyFile(t *testing.T, mode os.FileMode, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stream.key")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// cast send and cast recv with one key file, 1 % loss at the receiver:
// every record once, in order, exit 0 on both sides.
func TestCLIKeyFile(t *testing.T) {
	k := writeKeyFile(t, 0o600, "# test key", "3 00112233445566778899aabbccddeeff")
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "5000", "-drop", "1", "-key-file", k)
	addr := r.listenAddr()
	s := runCast(t, "send", "-to", addr, "-bind", "127.0.0.1:0", "-n", "5000", "-rate", "20000", "-linger", "1s", "-key-file", k)
	s.expect(0, "stdout", `^naks \d+, retransmits`)
	r.wait(hangBudget)
	r.expect(0, "stdout", `^outcome: live$`)
	if !strings.Contains(r.Stdout.String(), "received 5000 records (seq 1..5000, in order: true)") {
		t.Fatalf("recv:\n%s", r.Stdout.String())
	}
}

// A key file others may read is refused before anything is done (exit 2,
// naming the mode); a receiver holding another key id delivers nothing,
// says which key id it does not hold, and exits 1.
func TestCLIKeyFileRefused(t *testing.T) {
	loose := writeKeyFile(t, 0o644, "3 00112233445566778899aabbccddeeff")
	runCast(t, "recv", "-listen", "127.0.0.1:0", "-n", "1", "-key-file", loose).
		expect(2, "stderr", `-key-file: .*mode 0644`)
	mine := writeKeyFile(t, 0o600, "3 00112233445566778899aabbccddeeff")
	theirs := writeKeyFile(t, 0o600, "4 ffeeddccbbaa99887766554433221100")
	r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "1000", "-json", "-key-file", theirs)
	addr := r.listenAddr()
	s := startCast(t, "", "send", "-to", addr, "-n", "1000", "-rate", "20000", "-key-file", mine)
	r.waitOutput(`"event":"key_unknown"`, hangBudget)
	s.Cmd.Process.Kill()
	s.wait(hangBudget)
	r.Cmd.Process.Kill()
	r.wait(hangBudget)
	if out := r.Stdout.String(); strings.Contains(out, `"seq":`) || !strings.Contains(out, "key id 3") {
		t.Fatalf("recv with another key:\n%s", out)
	}
}

// SIGHUP reloads -key-file in every keyed command, also before the
// command has found its sender: a receiver and an echo, each told of
// key 4 by a reload while they wait, serve a sender that tags with key 4
// only. A forged unsealed heartbeat that reaches the echo first does not
// make it take the forger for its sender.
func TestCLIKeyReload(t *testing.T) {
	const k3, k4 = "3 00112233445566778899aabbccddeeff", "4 ffeeddccbbaa99887766554433221100"
	reload := func(c *child, file string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(k4+"\n"+k3+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.signal(syscall.SIGHUP)
		c.waitOutput(`keys reloaded from`, hangBudget)
	}
	send4 := writeKeyFile(t, 0o600, k4)

	t.Run("recv", func(t *testing.T) {
		rk := writeKeyFile(t, 0o600, k3)
		r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "2000", "-key-file", rk)
		addr := r.listenAddr()
		reload(r, rk)
		runCast(t, "send", "-to", addr, "-bind", "127.0.0.1:0", "-n", "2000", "-rate", "20000", "-linger", "1s", "-key-file", send4).
			expect(0, "stdout", `^naks \d+, retransmits`)
		r.wait(hangBudget)
		r.expect(0, "stdout", `^outcome: live$`)
		if !strings.Contains(r.Stdout.String(), "received 2000 records (seq 1..2000, in order: true)") {
			t.Fatalf("recv:\n%s", r.Stdout.String())
		}
	})

	t.Run("echo", func(t *testing.T) {
		ek := writeKeyFile(t, 0o600, k3)
		e := startCast(t, "", "echo", "-listen", "127.0.0.1:0", "-n", "40", "-key-file", ek)
		addr := e.listenAddr()
		forger, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer forger.Close()
		hb := make([]byte, wire.ControlFrameSize)
		if _, err := forger.Write(hb[:wire.PutHeartbeatFrame(hb, wire.Heartbeat{Highest: 1})]); err != nil {
			t.Fatal(err)
		}
		reload(e, ek)
		runCast(t, "sender", "-addr", addr, "-n", "40", "-q", "-key-file", send4).expect(0, "stdout", `^throughput = `)
		e.wait(hangBudget)
		e.expect(0, "stdout", `^echoed 40 records \(0 could not be sent\)$`)
	})
}
