package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// getterDiff derives events the way a loop did before NextEvent: it
// compares the Receiver's getters after each call, and looks at LateStart
// and LastSkip in the deliver callback.
type getterDiff struct {
	r          *Receiver
	lastKind   OutcomeKind
	lastSilent bool
	lastLate   uint64
	ended      bool
}

func (g *getterDiff) deliver(h wire.Header, out *[]string) {
	if s := g.r.LateStart(); s != g.lastLate {
		g.lastLate = s
		*out = append(*out, fmt.Sprintf("late_start %d", s))
	}
	if h.Type == wire.TypeSkip {
		*out = append(*out, fmt.Sprintf("skip %+v", g.r.LastSkip()))
	}
}

func (g *getterDiff) check(out *[]string) {
	o := g.r.Outcome()
	if o.Kind != g.lastKind {
		g.lastKind = o.Kind
		if o.Kind != Live {
			*out = append(*out, "outcome "+o.Kind.String())
		}
	}
	if final, done := g.r.Ended(); done != g.ended {
		g.ended = done
		if done {
			*out = append(*out, fmt.Sprintf("ended %d", final))
		}
	}
	if g.r.LateStart() == 0 {
		g.lastLate = 0
	}
	if s := g.r.PeerSilent(); s != g.lastSilent {
		g.lastSilent = s
		if s {
			*out = append(*out, "peer_silent")
		} else {
			*out = append(*out, "peer_heard")
		}
	}
}

func eventString(e ReceiverEvent) string {
	switch e.Kind {
	case OutcomeSet:
		return "outcome " + e.Outcome.Kind.String()
	case LateStart, StreamEnded:
		return fmt.Sprintf("%v %d", e.Kind, e.Seq)
	case SkipApplied:
		return fmt.Sprintf("skip %+v", e.Skip)
	}
	return e.Kind.String()
}

// TestReceiverEventsMatchGetters drives Receivers with random streams
// (loss, reordering, heartbeats, Skip markers, session ends, silences,
// restarts, catch-ups, resyncs) and checks that NextEvent yields, call
// by call, the events a loop found by diffing the getters.
func TestReceiverEventsMatchGetters(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := DefaultReceiverConfig()
			cfg.ReorderSlots = 64
			cfg.MaxNakRetries = 1 + rng.IntN(4)
			cfg.StartNow = seed%3 == 0
			cfg.ID = seed + 1
			r, err := NewReceiver(cfg)
			if err != nil {
				t.Fatal(err)
			}
			g := &getterDiff{r: r}
			out := batch.New(256, 2048)
			var want, got []string
			deliver := func(h wire.Header, _ []byte) {
				g.deliver(h, &want)
				for e, ok := r.NextEvent(); ok; e, ok = r.NextEvent() {
					got = append(got, eventString(e))
				}
			}
			drain := func(step int) {
				g.check(&want)
				for e, ok := r.NextEvent(); ok; e, ok = r.NextEvent() {
					got = append(got, eventString(e))
				}
				// Within one call the order may differ (the queue has
				// PeerHeard when traffic came, the diff after the call).
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(want, got) {
					t.Fatalf("step %d: events %q, the getters say %q", step, got, want)
				}
				want, got = want[:0], got[:0]
			}
			now := int64(time.Second)
			next := uint64(1) + uint64(rng.IntN(3))*50
			var held [][]byte
			for step := range 3000 {
				now += int64(rng.IntN(3)) * int64(time.Millisecond)
				var d []byte
				switch x := rng.IntN(100); {
				case x < 60:
					d = frame(next, 16)
					next++
					if rng.IntN(10) == 0 {
						continue // lost
					}
					if rng.IntN(8) == 0 {
						held = append(held, d) // late
						continue
					}
				case x < 66 && len(held) > 0:
					d, held = held[0], held[1:]
				case x < 72:
					d = hbFrame(next - 1)
				case x < 73:
					d = skipFrame(next+uint64(rng.IntN(5)), next-uint64(rng.IntN(3)), wire.SkipRepair)
					next = le.Uint64(d[wire.HeaderSize:]) + 1
				case x < 74:
					d = make([]byte, wire.ControlFrameSize)
					wire.PutSessionEndFrame(d, wire.SessionEnd{Final: next - 1})
				case x < 75:
					d = hbFrame(1) // a restart announced (twice makes it one)
				case x < 77:
					now += int64(cfg.HeartbeatInterval) * int64(cfg.SilenceIntervals) // silence
				case x < 78:
					r.ResetAfterReplay(next - 1)
					drain(step)
					continue
				case x < 79:
					r.Resync()
					drain(step)
					continue
				case x < 80:
					next += uint64(3 * cfg.ReorderSlots) // outrun the window
					continue
				default:
					r.Tick(now, out)
					out.Reset()
					drain(step)
					continue
				}
				r.Handle(d, now, out, deliver)
				out.Reset()
				drain(step)
				if r.Outcome().Kind != Live && rng.IntN(4) == 0 {
					r.ResetAfterReplay(next - 1)
					drain(step)
				}
			}
		})
	}
}

// TestReceiverEventOrder: LateStart and SkipApplied are readable in the
// deliver callback before the record they precede; a full queue drops
// and counts.
func TestReceiverEventOrder(t *testing.T) {
	cfg := DefaultReceiverConfig()
	cfg.StartNow = true
	r, _ := NewReceiver(cfg)
	out := batch.New(64, 2048)
	var seen []string
	deliver := func(_ wire.Header, p []byte) {
		for e, ok := r.NextEvent(); ok; e, ok = r.NextEvent() {
			seen = append(seen, eventString(e))
		}
		seen = append(seen, fmt.Sprint(wire.Seq(p)))
	}
	r.Handle(frame(10, 16), 1, out, deliver)
	r.Handle(skipFrame(13, 11, wire.SkipRepair), 2, out, deliver)
	want := []string{"late_start 10", "10", "skip {Skip:{Seq:13 From:11 Reason:2} LostFrom:0 LostTo:0}", "13"}
	if !slices.Equal(seen, want) {
		t.Fatalf("saw %q, want %q", seen, want)
	}

	// A pending Skip (records before its hole missing): the event comes
	// when the jump is made, before the marker.
	r.Resync()
	seen = nil
	r.Handle(frame(1, 16), 3, out, deliver)
	r.Handle(skipFrame(5, 3, wire.SkipRepair), 4, out, deliver)
	r.Handle(frame(2, 16), 5, out, deliver)
	want = []string{"1", "2", "skip {Skip:{Seq:5 From:3 Reason:2} LostFrom:0 LostTo:0}", "5"}
	if !slices.Equal(seen, want) {
		t.Fatalf("pending skip: saw %q, want %q", seen, want)
	}

	for range maxEvents + 3 {
		r.event(PeerHeard, 6, 0, SkipNotice{})
	}
	n := 0
	for _, ok := r.NextEvent(); ok; _, ok = r.NextEvent() {
		n++
	}
	// The last slot is kept for OutcomeSet.
	if n != maxEvents-1 || r.Stats().EventsDropped != 4 {
		t.Fatalf("read %d events, %d dropped; want %d, 4", n, r.Stats().EventsDropped, maxEvents-1)
	}
}
