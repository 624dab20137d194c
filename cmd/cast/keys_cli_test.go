//go:build !windows

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
