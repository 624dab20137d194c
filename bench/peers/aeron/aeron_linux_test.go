//go:build linux

package aeron

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/walcast/walcast/bench/peers"
)

func openOrSkip(t *testing.T, size int) *peers.Pair {
	t.Helper()
	p := Peer()
	if p.Skip != "" {
		t.Skip(p.Skip)
	}
	cfg := peers.DefaultConfig()
	cfg.MsgSize = size
	cfg.Timeout = 10 * time.Second
	pair, err := p.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// Without the library the row is skipped and names the file, the
// variable and where the build steps are.
func TestSkipReason(t *testing.T) {
	t.Setenv(LibDirEnv, t.TempDir())
	if _, err := loadLib(); err == nil {
		t.Fatal("loaded a library from an empty directory")
	} else if s := err.Error(); !strings.Contains(s, Library) || !strings.Contains(s, LibDirEnv) || !strings.Contains(s, "docs/bench.md") {
		t.Fatalf("skip reason %q does not name the file, %s and the docs", s, LibDirEnv)
	}
}

// Ping-pong: B echoes what A sends, each on its own locked thread, in
// order and intact, messages that need one frame and messages the
// driver fragments (over the 1408-byte default MTU).
func TestPingPong(t *testing.T) {
	for _, size := range []int{64, 3000} {
		pair := openOrSkip(t, size)
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			buf := make([]byte, size)
			for {
				n, err := pair.B.Recv(buf)
				if err != nil {
					done <- err
					return
				}
				if err := pair.B.Send(buf[:n]); err != nil {
					done <- err
					return
				}
				pair.B.(peers.Flusher).Flush()
			}
		}()
		runtime.LockOSThread()
		msg, in := make([]byte, size), make([]byte, size)
		for i := range msg {
			msg[i] = byte(i)
		}
		for i := uint64(0); i < 2000; i++ {
			binary.LittleEndian.PutUint64(msg, i)
			if err := pair.A.Send(msg); err != nil {
				t.Fatalf("size %d send %d: %v", size, i, err)
			}
			pair.A.(peers.Flusher).Flush()
			n, err := pair.A.Recv(in)
			if err != nil {
				t.Fatalf("size %d recv %d: %v", size, i, err)
			}
			if n != size || binary.LittleEndian.Uint64(in) != i || in[size-1] != msg[size-1] {
				t.Fatalf("size %d round trip %d: got %d bytes, seq %d", size, i, n, binary.LittleEndian.Uint64(in))
			}
		}
		runtime.UnlockOSThread()
		pair.Close()
		if err := <-done; !errors.Is(err, peers.ErrClosed) {
			t.Fatalf("echo ended with %v, want ErrClosed", err)
		}
		pair.Release()
	}
}

// A stream as fast as A can offer arrives whole and in order.
func TestStream(t *testing.T) {
	const n, size = 50_000, 1443
	pair := openOrSkip(t, size)
	defer pair.Release()
	got := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		buf := make([]byte, size)
		for i := uint64(0); i < n; i++ {
			k, err := pair.B.Recv(buf)
			if err != nil {
				got <- err
				return
			}
			if k != size || binary.LittleEndian.Uint64(buf) != i {
				got <- errors.New("out of order or short")
				return
			}
		}
		got <- nil
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg := make([]byte, size)
	for i := uint64(0); i < n; i++ {
		binary.LittleEndian.PutUint64(msg, i)
		if err := pair.A.Send(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	a := pair.A.(*end)
	for {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			pair.Close()
			return
		default:
			a.work() // the driver keeps sending and hearing status messages
		}
	}
}
