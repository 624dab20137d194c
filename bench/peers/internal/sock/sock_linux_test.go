package sock

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A connect or accept interrupted by a signal (EINTR) is tried again,
// each time with the socket timeout lowered to what is left before the
// deadline; other errors and success end it; a deadline that has passed
// ends it with ETIMEDOUT.
func TestHandshakeRetriesEINTR(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	timeout := func() time.Duration {
		tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(tv.Nano())
	}

	deadline := time.Now().Add(time.Hour)
	var seen []time.Duration
	calls := 0
	err = handshake(fd, unix.SO_SNDTIMEO, deadline, func() error {
		calls++
		seen = append(seen, timeout())
		if calls < 3 {
			return unix.EINTR
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("%d calls, err %v; want 3 calls and success after two EINTR", calls, err)
	}
	for i, d := range seen {
		if d <= 0 || d > time.Hour || i > 0 && d > seen[i-1] {
			t.Fatalf("socket timeouts %v: want each at most an hour and none above the one before", seen)
		}
	}

	calls = 0
	err = handshake(fd, unix.SO_SNDTIMEO, deadline, func() error { calls++; return unix.ECONNREFUSED })
	if !errors.Is(err, unix.ECONNREFUSED) || calls != 1 {
		t.Fatalf("%d calls, err %v; want one call returning ECONNREFUSED", calls, err)
	}

	calls = 0
	err = handshake(fd, unix.SO_SNDTIMEO, time.Now().Add(20*time.Millisecond), func() error {
		calls++
		time.Sleep(5 * time.Millisecond)
		return unix.EINTR
	})
	if !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("%d calls, err %v; want ETIMEDOUT once the deadline passed", calls, err)
	}
}

// TCPPair completes its handshake on loopback.
func TestTCPPair(t *testing.T) {
	c, s, err := TCPPair()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c.FD)
	defer unix.Close(s.FD)
	if err := c.WriteAll([]byte("ping")); err != nil {
		t.Fatal(err)
	}
}
