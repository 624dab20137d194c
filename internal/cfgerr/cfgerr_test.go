package cfgerr

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestNest(t *testing.T) {
	errReplay, errCast := Sentinel("replay"), Sentinel("cast")
	in := New("replay", errReplay, "Endpoints", "none given")
	if got := in.Error(); got != "replay: invalid configuration: Endpoints: none given" {
		t.Fatal(got)
	}
	out := Nest("cast", errCast, "Replay", in)
	if got := out.Error(); got != "cast: invalid configuration: Replay.Endpoints: none given" {
		t.Fatal(got)
	}
	if !errors.Is(out, errCast) || !errors.Is(out, errReplay) {
		t.Fatal("a sentinel does not match")
	}
	plain := Nest("cast", errCast, "Thread", io.ErrUnexpectedEOF)
	if got := plain.Error(); got != "cast: invalid configuration: Thread: unexpected EOF" || !errors.Is(plain, io.ErrUnexpectedEOF) {
		t.Fatal(got)
	}
	wrapped := Nest("cast", errCast, "Sender", fmt.Errorf("%w: RingSlots 3 is not a power of two", errReplay))
	if got := wrapped.Error(); got != "cast: invalid configuration: Sender: RingSlots 3 is not a power of two" || !errors.Is(wrapped, errReplay) {
		t.Fatal(got)
	}
	if Nest("cast", errCast, "X", nil) != nil {
		t.Fatal("nil nested")
	}
	if errors.Is(New("cast", errCast, "", "x"), errReplay) {
		t.Fatal("foreign sentinel matched")
	}
}
