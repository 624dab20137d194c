package protocol

import (
	"errors"
	"testing"
)

// TestLogHealthEvents: the Sender reports its log failing and recovering
// as events, once per change, with the log's own error value, read at
// most once per logCheckInterval.
func TestLogHealthEvents(t *testing.T) {
	l := &skipLog{fakeLog: newFakeLog(1)}
	s, out := newTestSender(t, senderCfg(), l)
	sendN(t, s, out, 3)
	drain := func() (got []SenderEvent) {
		for e, ok := s.NextEvent(); ok; e, ok = s.NextEvent() {
			got = append(got, e)
		}
		return got
	}
	s.Tick(0, out)
	if got := drain(); len(got) != 0 {
		t.Fatalf("a healthy log raised %v", got)
	}
	full := errors.New("wal: flush failed: no space left on device")
	l.err = full
	s.Tick(logCheckInterval/2, out) // read at 0: not again before logCheckInterval
	if got := drain(); len(got) != 0 {
		t.Fatalf("the health was read again within logCheckInterval: %v", got)
	}
	for now := logCheckInterval; now < 10*logCheckInterval; now += logCheckInterval / 3 {
		s.Tick(now, out)
	}
	got := drain()
	if len(got) != 1 || got[0].Kind != LogError || got[0].Err != full || got[0].At != logCheckInterval {
		t.Fatalf("a failing log raised %+v, want one LogError at %d with its error", got, logCheckInterval)
	}
	l.err = nil
	for now := 10 * logCheckInterval; now < 20*logCheckInterval; now += logCheckInterval / 3 {
		s.Tick(now, out)
	}
	if got := drain(); len(got) != 1 || got[0].Kind != LogRecovered || got[0].Err != nil {
		t.Fatalf("a recovered log raised %+v, want one LogRecovered", got)
	}
}

// TestOutcomeEventNeverDropped: a full event queue drops new events but
// keeps its last slot for OutcomeSet, the event a loop must not miss.
func TestOutcomeEventNeverDropped(t *testing.T) {
	r, err := NewReceiver(DefaultReceiverConfig())
	if err != nil {
		t.Fatal(err)
	}
	dropped := func() uint64 { return r.Stats().EventsDropped }
	for i := 0; i < maxEvents-1; i++ {
		if r.event(PeerSilent, 0, 0, SkipNotice{}); dropped() != 0 {
			t.Fatalf("event %d refused", i)
		}
	}
	if r.event(PeerHeard, 0, 0, SkipNotice{}); dropped() != 1 {
		t.Fatal("an event took the slot kept for OutcomeSet")
	}
	if r.event(OutcomeSet, 0, 0, SkipNotice{}); dropped() != 1 {
		t.Fatal("OutcomeSet dropped")
	}
	if r.event(OutcomeSet, 0, 0, SkipNotice{}); dropped() != 2 {
		t.Fatal("a full queue took another event")
	}
}
