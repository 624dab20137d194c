package protocol

import (
	"testing"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// A unicast receiver whose sender speaks probes, woken after the machine
// did not run it, drains a socket buffer deep with records while its
// re-NAK timers keep expiring: the repair it asks for again may be queued
// behind them. Re-NAKs made with input unread still go out but do not
// spend the run's retry budget; once the input is read, they do again.
// (cmd/cast TestCLIFlowLoss/drop30 faulted on the budget this way in a
// make test run: "gap 1073..1073", 15 297 NAKs for 20 000 records.)
func TestReNakWithBacklogSpendsNoBudget(t *testing.T) {
	drive := func(backlog bool) (r *Receiver, naked int) {
		r, err := NewReceiver(DefaultReceiverConfig())
		if err != nil {
			t.Fatal(err)
		}
		out := batch.New(64, 2048)
		now := int64(1_000_000)
		r.Handle(probeFrame(wire.Probe{Highest: 1, TS: 1, SenderID: 7}), now, out, nop)
		r.Handle(dataFrame(1), now, out, nop)
		seq := uint64(3) // 2 is lost, and so is every repair of it
		r.SetBacklog(backlog, now)
		r.Handle(dataFrame(seq), now, out, nop)
		naked = len(naks(out))
		out.Reset()
		for i := 0; i < 4*r.cfg.MaxNakRetries && r.Outcome().Kind == Live; i++ {
			now += r.renakDelay(uint16(i+1)) + 1
			seq++
			r.SetBacklog(backlog, now)
			r.Handle(dataFrame(seq), now, out, nop) // the sender is heard
			r.Tick(now, out)
			naked += len(naks(out))
			out.Reset()
		}
		return r, naked
	}
	r, naked := drive(true)
	if r.Outcome().Kind != Live {
		t.Fatalf("with input unread: %v after %d NAKs", r.Outcome(), naked)
	}
	if naked <= r.cfg.MaxNakRetries {
		t.Fatalf("with input unread: %d NAKs; re-NAKs must still go out", naked)
	}
	r, naked = drive(false)
	if r.Outcome().Kind != Faulted || r.Outcome().Cause != RetryBudget {
		t.Fatalf("input read, repairs never come: %v after %d NAKs, want Faulted on the retry budget", r.Outcome(), naked)
	}
}
