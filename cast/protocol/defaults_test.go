package protocol

import (
	"errors"
	"reflect"
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wal"
)

// TestZeroConfigIsDefault: the zero configs are valid and behave as the
// defaults; negative values ask for what zero used to mean.
func TestZeroConfigIsDefault(t *testing.T) {
	if err := (SenderConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (ReceiverConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := (SenderConfig{}).withDefaults(), DefaultSenderConfig(); !reflect.DeepEqual(got, want) { // Tagged is a slice
		t.Fatalf("zero sender config %+v, want %+v", got, want)
	}
	if got, want := (ReceiverConfig{}).withDefaults(), DefaultReceiverConfig(); got != want {
		t.Fatalf("zero receiver config %+v, want %+v", got, want)
	}
	off := (ReceiverConfig{NakDebounce: -1, MaxNakRetries: -1, NakBackoff: -1}).withDefaults()
	if off.NakDebounce != 0 || off.MaxNakRetries != 0 || off.NakBackoff != 0 {
		t.Fatalf("negative not mapped to off: %+v", off)
	}
	if s := (SenderConfig{RetxDedupWindow: -5}).withDefaults(); s.RetxDedupWindow != 0 {
		t.Fatalf("negative dedup not off: %d", s.RetxDedupWindow)
	}
	s, err := NewSender(SenderConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(4, 2048)
	if _, err := s.Send(100, make([]byte, 64), 1, out); err != nil || out.Len() != 1 {
		t.Fatalf("send with the zero config: %v, %d datagrams", err, out.Len())
	}
	if _, err := NewReceiver(ReceiverConfig{}); err != nil {
		t.Fatal(err)
	}
}

// TestTypedNilLog: a nil *wal.Writer means WAL-less, as a nil Log does.
func TestTypedNilLog(t *testing.T) {
	var w *wal.Writer
	s, err := NewSender(SenderConfig{}, w)
	if err != nil {
		t.Fatal(err)
	}
	out := batch.New(4, 2048)
	seq, err := s.Send(100, make([]byte, 64), 1, out)
	if err != nil || seq != 1 {
		t.Fatalf("seq %d, err %v", seq, err)
	}
	if _, err := NewSender(SenderConfig{RingSlots: 3}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad ring accepted: %v", err)
	}
}
