package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// newTestReporter is a status reporter of 64 slots, StatusInterval 100
// and HeartbeatInterval 1000 ns, that sent its first Status at time 0
// (delivered 10, highest 10, live, window 64).
func newTestReporter(t *testing.T) (*statusReporter, statusInput) {
	t.Helper()
	cfg := DefaultReceiverConfig()
	cfg.ReorderSlots = 64
	cfg.StatusInterval = 100
	cfg.HeartbeatInterval = 1000
	s := new(statusReporter)
	*s = newStatusReporter(cfg.withDefaults(), 9)
	in := statusInput{delivered: 10, highest: 10, state: Live, synced: true}
	if !s.due(in, 0) {
		t.Fatal("no Status due before the first")
	}
	if !sendStatus(s, in, 0, 0, 0, batch.New(4, 2048)) {
		t.Fatal("first Status not sent")
	}
	return s, in
}

// TestStatusReporterDue: urgent news goes out at once, other news after
// StatusInterval, and with no news a Status still goes out every
// HeartbeatInterval.
func TestStatusReporterDue(t *testing.T) {
	for _, c := range []struct {
		name  string
		now   int64
		in    func(in *statusInput)
		room  int  // SetConsumerRoom before the check (0: unchanged)
		again bool // the changed input went out in a Status at time 0
		want  bool
		dline int64
	}{
		{name: "nothing new, within the interval", now: 50, want: false, dline: 1000},
		{name: "a new outcome", now: 1, in: func(in *statusInput) { in.state = Faulted }, want: true},
		{name: "a quarter window delivered", now: 1, in: func(in *statusInput) { in.delivered += 16 }, want: true},
		{name: "less than a quarter delivered", now: 1, in: func(in *statusInput) { in.delivered += 15; in.highest += 15 }, want: false, dline: 100},
		{name: "news after the interval", now: 100, in: func(in *statusInput) { in.highest++ }, want: true, dline: 100},
		{name: "no news after the interval", now: 999, want: false, dline: 1000},
		{name: "no news after the heartbeat interval", now: 1000, want: true, dline: 1000},
		{name: "a sender at the edge is news", now: 100, in: func(in *statusInput) { in.highest = 74 }, again: true, want: true, dline: 100},
		{name: "a sender short of the edge is not", now: 100, in: func(in *statusInput) { in.highest = 73 }, again: true, want: false, dline: 1000},
		{name: "a closing window is news, not urgent", now: 1, room: 20, want: false, dline: 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, in := newTestReporter(t)
			if c.in != nil {
				c.in(&in)
			}
			if c.room != 0 {
				s.setRoom(c.room, in.delivered)
			}
			if c.again {
				sendStatus(s, in, 0, 0, 0, batch.New(1, 2048))
			}
			if got := s.due(in, c.now); got != c.want {
				t.Errorf("due at %d = %v, want %v", c.now, got, c.want)
			}
			if c.dline != 0 {
				if d := s.deadline(1<<40, in); d != c.dline {
					t.Errorf("deadline %d, want %d", d, c.dline)
				}
			}
		})
	}
}

// TestStatusReporterWindow: the advertised window is the consumer room
// left, at most the slots; a window that opens from closed is urgent;
// maxEdge never moves down and an unsynced receiver advertises none.
func TestStatusReporterWindow(t *testing.T) {
	s, in := newTestReporter(t)
	out := batch.New(8, 2048)
	if s.maxEdge != 74 {
		t.Fatalf("maxEdge %d after the first Status, want 74", s.maxEdge)
	}
	s.setRoom(5, 10)
	for _, c := range []struct{ delivered, want uint64 }{{10, 5}, {13, 2}, {15, 0}, {20, 0}} {
		if w := s.advWindow(c.delivered); w != c.want {
			t.Errorf("room 5 from 10, delivered %d: window %d, want %d", c.delivered, w, c.want)
		}
	}
	in.delivered = 15
	sendStatus(s, in, 0, 0, 1, out)
	if s.window != 0 || s.maxEdge != 74 {
		t.Fatalf("closed window: window %d, maxEdge %d; want 0, 74", s.window, s.maxEdge)
	}
	s.setRoom(1, 15)
	if !s.due(in, 2) {
		t.Fatal("a window opening from closed is not urgent")
	}
	s.setRoom(-3, 15)
	if s.advWindow(15) != 0 {
		t.Fatal("negative room is not 0")
	}
	s.setRoom(UnlimitedRoom, 15)
	un := statusInput{state: Live}
	sendStatus(s, un, 0, 0, 3, out)
	if s.maxEdge != 74 {
		t.Fatalf("an unsynced Status moved maxEdge to %d", s.maxEdge)
	}
}

// TestStatusReporterFrame: a Status carries the reporter's view, the
// re-NAK delay and, once, the echo of the last probe heard.
func TestStatusReporterFrame(t *testing.T) {
	s, in := newTestReporter(t)
	out := batch.New(8, 2048)
	s.echo(777, 40)
	sendStatus(s, in, 5000, wire.StatusClosing, 100, out)
	sendStatus(s, in, 0, 0, 200, out)
	if out.Len() != 2 {
		t.Fatalf("%d frames", out.Len())
	}
	var got []wire.Status
	for i := range out.Len() {
		m, to := out.Msg(i)
		if to != s.dest {
			t.Fatalf("Status to %v", to)
		}
		_, p, _, err := wire.DecodeFrame(m)
		st, err2 := wire.ParseStatus(p)
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		got = append(got, st)
	}
	a, b := got[0], got[1]
	if a.ReceiverID != 9 || a.Delivered != 10 || a.Window != 64 || a.ReNak != 5000 || a.EchoTS != 777 || a.EchoHold != 60 ||
		a.Flags != wire.StatusClosing|wire.StatusSynced || a.Serial != 2 {
		t.Fatalf("first Status %+v", a)
	}
	if b.EchoTS != 0 || b.ReNak != 0 || b.Serial != 3 || b.Flags != wire.StatusSynced {
		t.Fatalf("second Status %+v", b)
	}
}

// sendStatus has s write a Status into out as the Receiver does; false
// when out has no room.
func sendStatus(s *statusReporter, in statusInput, renak int64, flags uint8, now int64, out *batch.Vec) bool {
	buf := out.Next()
	if len(buf) < statusRoom {
		return false
	}
	out.Commit(s.put(buf, in, renak, flags, now), s.dest)
	return true
}

// TestStatusReporterSpan: the urgent rules measure a window wider than
// statusSpan (the sender's default ring) against statusSpan, so that a
// sender without a log, which runs at most its ring past the last
// delivered seq it heard, hears a Status every quarter ring; a window up
// to statusSpan keeps the quarter-window rule.
func TestStatusReporterSpan(t *testing.T) {
	for _, c := range []struct {
		slots  int
		stride uint64 // records delivered that make a Status urgent
		step   uint64 // window opening that makes a Status urgent
	}{
		{DefaultReorderSlots, DefaultReorderSlots / 4, DefaultReorderSlots / 4},
		{statusSpan, statusSpan / 4, statusSpan / 4},
		{1 << 16, statusSpan / 4, statusSpan / 4},
	} {
		cfg := DefaultReceiverConfig()
		cfg.ReorderSlots = c.slots
		s := new(statusReporter)
		*s = newStatusReporter(cfg.withDefaults(), 9)
		in := statusInput{delivered: 10, highest: 10, state: Live, synced: true}
		sendStatus(s, in, 0, 0, 0, batch.New(4, 2048))
		for _, d := range []struct {
			n    uint64
			want bool
		}{{c.stride - 1, false}, {c.stride, true}} {
			if got := s.urgent(in.delivered+d.n, Live); got != d.want {
				t.Errorf("slots %d: urgent after %d delivered = %v, want %v", c.slots, d.n, got, d.want)
			}
		}
		room := c.slots / 2
		s.setRoom(room, in.delivered)
		sendStatus(s, in, 0, 0, 1, batch.New(4, 2048))
		for _, d := range []struct {
			n    uint64
			want bool
		}{{c.step - 1, false}, {c.step, true}} {
			s.setRoom(room+int(d.n), in.delivered)
			if got := s.opened(in.delivered); got != d.want {
				t.Errorf("slots %d: window %d opened by %d: urgent = %v, want %v", c.slots, room, d.n, got, d.want)
			}
		}
	}
}
