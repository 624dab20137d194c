package main

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
)

// A multicast sender hears several receivers: one that is done and leaves
// does not speak for another still catching up, and the verdict waits
// for (and judges) each of them.
func TestFlowWatchPerReceiver(t *testing.T) {
	a := protocol.ReceiverInfo{ID: 1, Addr: netip.MustParseAddrPort("10.0.0.2:9"), Delivered: 10000}
	b := protocol.ReceiverInfo{ID: 2, Addr: netip.MustParseAddrPort("10.0.0.3:9"), Delivered: 9000}
	w := newFlowWatch(nil)
	w.table([]protocol.ReceiverInfo{a, b})
	w.event(cast.Event{Kind: cast.EventReceiverLeft, Receiver: a}) // a has everything and exits
	b.Delivered = 9992
	w.table([]protocol.ReceiverInfo{b}) // the table no longer lists a
	if w.done(10000) {
		t.Fatal("done while b is behind")
	}
	err, ok := w.judge(10000)
	var ee *exitError
	if !ok || !errors.As(err, &ee) || ee.code != exitFailed || ee.msg != "the receiver at 10.0.0.3:9 is still behind and made no progress for -linger: it delivered through seq 9992 of 10000" {
		t.Fatalf("verdict with b behind: %v", err)
	}
	if w.last.ID != 2 {
		t.Fatalf("last = receiver %d, want the one behind (2)", w.last.ID)
	}
	b.Delivered = 10000
	w.table([]protocol.ReceiverInfo{b})
	if err, ok := w.judge(10000); !w.done(10000) || err != nil || !ok {
		t.Fatalf("both delivered everything: done %v, verdict %v", w.done(10000), err)
	}

	// A receiver that leaves early is an outcome, whatever the others did.
	c := protocol.ReceiverInfo{ID: 3, Addr: netip.MustParseAddrPort("10.0.0.4:9"), Delivered: 500}
	w.event(cast.Event{Kind: cast.EventReceiverLeft, Receiver: c})
	if err, _ := w.judge(10000); !errors.As(err, &ee) || ee.code != exitOutcome || ee.msg != "the receiver at 10.0.0.4:9 left while records were being sent: it delivered through seq 500 of 10000" {
		t.Fatalf("verdict with c gone early: %v", err)
	}
	// Restarted (a new ID from c's address): its old incarnation no longer counts.
	c2 := c
	c2.ID, c2.Delivered = 4, 10000
	w.event(cast.Event{Kind: cast.EventReceiverRestarted, Receiver: c2})
	if err, _ := w.judge(10000); err != nil {
		t.Fatalf("after c restarted and caught up: %v", err)
	}
	if _, ok := newFlowWatch(nil).judge(1); ok {
		t.Fatal("no receiver heard, yet a verdict")
	}
}
