package protocol

import (
	"testing"
	"time"

	"github.com/walcast/walcast/datapath/mem"
)

// TestInitialWindowLearnsNoStatus: towards a receiver with Status off
// (the reference's bytes) an unpaced sender's first window flows as the
// reference would send it, with no gap over 10 ms of virtual time before
// seq 2049, whether the first NAK comes from a loss or from the probe that
// stands in for the window's last record; a walcast receiver still gets
// flow control; a receiver that hears nothing yet keeps the hold.
func TestInitialWindowLearnsNoStatus(t *testing.T) {
	const n, window = 6000, DefaultReorderSlots
	for _, tc := range []struct {
		name     string
		noStatus bool
		drop     func(i int, b []byte) mem.Action
		probes   uint64 // want InitialProbes
		released uint64 // want InitialReleased
		maxGap   time.Duration
	}{
		{name: "status off, lossless", noStatus: true, probes: 1, released: 1, maxGap: 10 * ms},
		{name: "status off, a loss at the start", noStatus: true, drop: dropSeqs(1, 5), released: 1, maxGap: 10 * ms},
		{name: "walcast receiver", maxGap: 10 * ms},
		{name: "walcast receiver not listening for 150 ms", probes: 1, maxGap: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOpt()
			o.r.NoStatus = tc.noStatus
			h := newHarness(t, o)
			h.trackTimes = true
			start := h.now()
			drop := tc.drop
			if tc.maxGap == time.Second { // not listening: every datagram lost for 150 ms
				drop = func(int, []byte) mem.Action {
					if h.now()-start < int64(150*ms) {
						return mem.Drop
					}
					return mem.Pass
				}
			}
			h.impairData(mem.Impairment{Latency: 200 * us, Script: drop})
			h.impairNaks(mem.Impairment{Latency: 200 * us})
			sentAt := make([]int64, n+1)
			for seq := uint64(1); seq <= n; {
				if h.now()-start > int64(5*time.Second) {
					t.Fatalf("sent %d of %d in 5 s", seq-1, n)
				}
				if h.sOut.Full() {
					h.flushSender()
				}
				got, err := h.s.Send(100, h.payload, h.now(), h.sOut)
				switch {
				case err == nil:
					sentAt[got] = h.now()
					seq++
					h.p.Clock.Advance(time.Microsecond) // an unpaced producer
					if seq%32 == 0 {
						h.flushSender()
						h.step()
					}
				case err == ErrBackpressure:
					h.flushSender()
					h.step()
					h.p.Clock.Advance(100 * us)
				default:
					t.Fatal(err)
				}
				h.checkWindow()
			}
			h.flushSender()
			h.run(2*time.Second, ms)
			h.expectDelivered(1, n)

			gap := func(at []int64, upto int) (time.Duration, int) {
				var worst int64
				at1 := 0
				for i := 2; i <= upto; i++ {
					if d := at[i] - at[i-1]; d > worst {
						worst, at1 = d, i
					}
				}
				return time.Duration(worst), at1
			}
			sendGap, sendSeq := gap(sentAt, window+1)
			delivered := append([]int64{0}, h.deliveredAt[:window+1]...)
			delGap, delSeq := gap(delivered, window+1)
			st := h.s.Stats()
			t.Logf("largest gap before seq %d: %v at Send (before seq %d), %v at delivery (before seq %d); %+v",
				window+1, sendGap, sendSeq, delGap, delSeq, st)
			if sendGap > tc.maxGap || delGap > tc.maxGap {
				t.Fatalf("gap over %v before seq %d", tc.maxGap, window+1)
			}
			if st.InitialProbes != tc.probes || st.InitialReleased != tc.released {
				t.Fatalf("InitialProbes %d InitialReleased %d, want %d and %d", st.InitialProbes, st.InitialReleased, tc.probes, tc.released)
			}
			if tc.noStatus {
				if st.Statuses != 0 || st.Backpressured > 200 {
					t.Fatalf("status-off receiver: %d Status, %d refused sends", st.Statuses, st.Backpressured)
				}
				return
			}
			if st.Statuses == 0 || h.s.fc.active != 1 {
				t.Fatalf("walcast receiver not negotiated: %+v", st)
			}
			if tc.maxGap == time.Second && sendGap < 100*ms {
				t.Fatalf("a receiver that heard nothing yet released the initial window after %v", sendGap)
			}
		})
	}
}

// TestInitialWindowExpiredNoProbe: a producer slow enough that the
// window's last record is sent after InitialWait has passed sends it as
// it is, not as a probe heartbeat that withholds it until the next record
// or a NAK: the window holds nothing back any more, so there is nothing
// to learn. Towards a receiver with Status off, seq InitialWindow, the
// producer's last for now, is delivered one link latency after its Send,
// like the one before it.
func TestInitialWindowExpiredNoProbe(t *testing.T) {
	const window = DefaultReorderSlots
	o := defaultOpt()
	o.r.NoStatus = true
	o.s.InitialWait = 100 * ms
	h := newHarness(t, o)
	h.trackTimes = true
	h.impairData(mem.Impairment{Latency: 200 * us})
	h.impairNaks(mem.Impairment{Latency: 200 * us})
	sentAt := make([]int64, window+1)
	for seq := uint64(1); seq <= window; seq++ {
		got, err := h.s.Send(100, h.payload, h.now(), h.sOut)
		if err != nil || got != seq {
			t.Fatalf("Send %d: seq %d, %v", seq, got, err)
		}
		sentAt[seq] = h.now()
		h.flushSender()
		for range 4 { // 100 µs a record: seq window goes out at ~205 ms
			h.step()
			h.p.Clock.Advance(25 * us)
		}
	}
	h.run(10*ms, 25*us)
	h.expectDelivered(1, window)
	st := h.s.Stats()
	if st.InitialProbes != 0 {
		t.Errorf("InitialProbes %d after InitialWait, want 0", st.InitialProbes)
	}
	for _, seq := range []uint64{window - 1, window} {
		d := time.Duration(h.deliveredAt[seq-1] - sentAt[seq])
		t.Logf("seq %d: delivered %v after its Send", seq, d)
		if d > 300*us {
			t.Errorf("seq %d delivered %v after its Send, want one link latency (200 µs, stepped every 25 µs)", seq, d)
		}
	}
}
