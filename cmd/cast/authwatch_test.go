//go:build !windows

package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/walcast/walcast/cast"
)

// The warning needs authPersist polls in a row that each find new
// unsealed refusals (one stray datagram says nothing), comes once, and
// says whether anything authenticated was heard at all; refusals for a
// forged tag or a replay are no reason for it.
func TestAuthWatchWarnsOnce(t *testing.T) {
	var out bytes.Buffer
	a := &authWatch{cmd: "cast recv", who: "the sender", w: &out}
	a.poll(cast.AuthStats{Short: 1})
	a.poll(cast.AuthStats{Short: 1, Tag: 50, Replay: 3})
	a.poll(cast.AuthStats{Short: 1, Tag: 90})
	if out.Len() != 0 {
		t.Fatalf("warned on one stray datagram and forgeries: %q", out.String())
	}
	a.poll(cast.AuthStats{Short: 4})
	a.poll(cast.AuthStats{Short: 4, Version: 7})
	a.poll(cast.AuthStats{Short: 9, Version: 20})
	if got := strings.Count(out.String(), "\n"); got != 1 {
		t.Fatalf("%d warnings: %q", got, out.String())
	}
	if want := "cast recv: refusing datagrams without an authentication trailer from the sender (11 so far, nothing authenticated heard)"; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("warning %q, want it to start %q", out.String(), want)
	}
	if watchAuth(false, "cast recv", "", &out, nil) != nil {
		t.Fatal("a watch without keys")
	}
	var nilWatch *authWatch
	nilWatch.end()
}

// A keyed endpoint whose peer has no key says so once on stderr and
// counts the refusals in its summary: a keyed receiver hearing only an
// unkeyed sender (while it waits for an authenticated one), and a keyed
// sender whose unkeyed receiver's Status and NAKs it refuses.
func TestCLIAuthUnsealedPeer(t *testing.T) {
	k := writeKeyFile(t, 0o600, "3 00112233445566778899aabbccddeeff")
	warn := `refusing datagrams without an authentication trailer from %s \(\d+ so far, nothing authenticated heard\): it runs without a key`

	t.Run("keyed recv", func(t *testing.T) {
		r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "1000000", "-key-file", k)
		s := startCast(t, "", "send", "-to", r.listenAddr(), "-bind", "127.0.0.1:0", "-n", "1000000", "-rate", "10000", "-idle", "park")
		r.waitOutput(strings.ReplaceAll(warn, "%s", "the sender"), hangBudget)
		s.signal(os.Kill)
		s.wait(hangBudget)
		r.signal(os.Interrupt)
		r.wait(hangBudget)
		if n := strings.Count(r.Stderr.String(), "without an authentication trailer"); n != 1 {
			t.Errorf("%d warnings:\n%s", n, r.Stderr.String())
		}
		m := regexp.MustCompile(`(?m)^authentication: 0 datagrams sealed, 0 opened, (\d+) refused \(unsealed (\d+),`).FindStringSubmatch(r.Stdout.String())
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Fatalf("recv summary:\n%s", r.Stdout.String())
		}
	})

	t.Run("keyed send", func(t *testing.T) {
		r := startCast(t, "", "recv", "-listen", "127.0.0.1:0", "-n", "1000000")
		s := startCast(t, "", "send", "-to", r.listenAddr(), "-bind", "127.0.0.1:0", "-n", "1000000", "-rate", "10000", "-idle", "park", "-key-file", k)
		s.waitOutput(strings.ReplaceAll(warn, "%s", "a receiver"), hangBudget)
		r.signal(os.Kill)
		r.wait(hangBudget)
		s.signal(os.Interrupt)
		s.wait(hangBudget)
		if n := strings.Count(s.Stderr.String(), "without an authentication trailer"); n != 1 {
			t.Errorf("%d warnings:\n%s", n, s.Stderr.String())
		}
		if !regexp.MustCompile(`(?m)^authentication: [1-9]\d* datagrams sealed, 0 opened, [1-9]\d* refused`).MatchString(s.Stdout.String()) {
			t.Fatalf("send summary:\n%s", s.Stdout.String())
		}
	})
}
