package cast

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

// rigState is what two authRigs run on the same inputs must agree on
// when forged datagrams changed nothing: what each core counted and
// estimated, the sender's receiver table, and what was delivered.
type rigState struct {
	Snd       protocol.SenderStats
	Rcv       protocol.ReceiverStats
	SndRTT    protocol.RTT
	RcvRTT    protocol.RTT
	Receivers []protocol.ReceiverInfo
	Outcome   protocol.Outcome
	Delivered []uint64
}

func (r *authRig) state() rigState {
	return rigState{
		Snd: r.snd.snd.Stats(), Rcv: r.rcv.rcv.Stats(),
		SndRTT: r.snd.snd.RTT(), RcvRTT: r.rcv.rcv.RTT(),
		Receivers: r.snd.Receivers(), Outcome: r.rcv.rcv.Outcome(),
		Delivered: slices.Clone(r.delivered),
	}
}

// frames returns the frames of datagram d (its trailer stripped when
// keyed).
func frames(t *testing.T, d []byte, keyed bool) [][]byte {
	t.Helper()
	if keyed {
		d = d[:len(d)-wire.TrailerSize]
	}
	var fs [][]byte
	for len(d) > 0 {
		_, _, size, err := wire.DecodeFrame(d)
		if err != nil {
			t.Fatalf("a datagram the rig sent does not decode: %v", err)
		}
		fs = append(fs, d[:size])
		d = d[size:]
	}
	return fs
}

// sameWire fails unless the two rigs' links carried the same frames
// (trailers aside: each endpoint draws its own epoch).
func sameWire(t *testing.T, when string, a, b *authRig, keyed bool) {
	t.Helper()
	for _, dir := range []struct {
		name string
		a, b [][]byte
	}{{"A→B", a.sentAB, b.sentAB}, {"B→A", a.sentBA, b.sentBA}} {
		if len(dir.a) != len(dir.b) {
			t.Fatalf("%s: %s carried %d datagrams in one rig, %d in its twin", when, dir.name, len(dir.a), len(dir.b))
		}
		for i := range dir.a {
			if fa, fb := frames(t, dir.a[i], keyed), frames(t, dir.b[i], keyed); !reflect.DeepEqual(fa, fb) {
				t.Fatalf("%s: %s datagram %d differs from its twin's:\n%x\n%x", when, dir.name, i, fa, fb)
			}
		}
	}
}

// probeFrames returns the timestamps of the probes (heartbeats in the
// extended form) in datagrams ds and the datagrams that hold one.
func probeFrames(t *testing.T, ds [][]byte, keyed bool) (ts []uint64, holding [][]byte) {
	t.Helper()
	for _, d := range ds {
		found := false
		for _, f := range frames(t, d, keyed) {
			if h, p, _, _ := wire.DecodeFrame(f); h.Type == wire.TypeHeartbeat {
				if pr, err := wire.ParseProbe(p); err == nil && pr.TS != 0 {
					ts, found = append(ts, pr.TS), true
				}
			}
		}
		if found {
			holding = append(holding, d)
		}
	}
	return ts, holding
}

// echoFrames returns the datagrams in ds that hold a Status echoing a
// probe, and the highest Status serial in ds.
func echoFrames(t *testing.T, ds [][]byte, keyed bool) (holding [][]byte, serial uint32) {
	t.Helper()
	for _, d := range ds {
		found := false
		for _, f := range frames(t, d, keyed) {
			if h, p, _, _ := wire.DecodeFrame(f); h.Type == wire.TypeStatus {
				if st, err := wire.ParseStatus(p); err == nil {
					serial = max(serial, st.Serial)
					found = found || st.EchoTS != 0
				}
			}
		}
		if found {
			holding = append(holding, d)
		}
	}
	return holding, serial
}

// Forged and replayed probes and probe echoes change nothing on a keyed
// stream: the receiver echoes no forged timestamp and believes no forged
// RTT estimate, the sender takes no RTT sample from a forged echo and
// proves no receiver by it, and the frames each side sends afterwards are
// byte for byte those of a twin rig that was sent nothing (the virtual
// clock and fixed ids make the two runs identical). Each forgery is
// counted. Without keys the same frames do steer both sides (so the
// comparison can see a change).
func TestLoopAuthForgedProbes(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := "keyed"
		if !keyed {
			name = "without keys"
		}
		t.Run(name, func(t *testing.T) {
			k := testKeys
			if !keyed {
				k = nil
			}
			forged, twin := newAuthRig(t, k, k), newAuthRig(t, k, k)
			for _, r := range []*authRig{forged, twin} {
				r.produce = 50
				r.run(200 * time.Millisecond) // past a heartbeat interval: idle probes too
			}
			if s := forged.state(); !reflect.DeepEqual(s, twin.state()) {
				t.Fatalf("the twin rigs differ before any forgery:\n%+v\n%+v", s, twin.state())
			}
			sameWire(t, "before", forged, twin, keyed)
			probeTS, probes := probeFrames(t, forged.sentAB, keyed)
			echoes, serial := echoFrames(t, forged.sentBA, keyed)
			if len(probeTS) == 0 || len(echoes) == 0 {
				t.Fatalf("the stream carried %d probes and %d echoes: nothing to forge from", len(probeTS), len(echoes))
			}
			now := uint64(forged.p.Clock.Now())

			// To the receiver: probes in the sender's name announcing
			// nothing new, with a timestamp ahead of every genuine one
			// (believed, the genuine probes after it would read as
			// stale) and a wild RTT estimate, plain and under a wrong
			// secret; and the genuine probes, replayed.
			fakeProbe := frame(128, func(b []byte) int {
				return wire.PutProbeFrame(b, wire.Probe{Highest: 50, TS: now + 1e12, SenderID: rigSenderID, SRTT: 2e9, RTTVar: 1e9})
			})
			// To the sender: the receiver's echo of a genuine probe,
			// ahead in serial (a round trip of the whole run, and
			// proof), plain and under a wrong secret; and the
			// receiver's genuine echoes, replayed.
			fakeEcho := frame(128, func(b []byte) int {
				return wire.PutStatusFrame(b, wire.Status{Delivered: 50, Highest: 50, ReceiverID: rigReceiverID,
					EchoTS: probeTS[0], Window: 1 << 20, Serial: serial + 1000, Flags: wire.StatusSynced})
			})
			wrong := wire.Key{ID: testKeys.Send.ID}
			toR := [][]byte{fakeProbe}
			toS := [][]byte{fakeEcho}
			if keyed {
				toR = append(toR, sealAs(t, wrong, NewEpoch(), fakeProbe))
				toR = append(toR, probes...)
				toS = append(toS, sealAs(t, wrong, NewEpoch(), fakeEcho))
				toS = append(toS, echoes...)
			}
			nAB, nBA := len(forged.sentAB), len(forged.sentBA)
			forged.forge(mem.AddrB, toR...)
			forged.forge(mem.AddrA, toS...)
			for _, r := range []*authRig{forged, twin} {
				r.run(50 * time.Millisecond)
				r.produce = 100
				r.run(200 * time.Millisecond)
			}
			fs, ts := forged.state(), twin.state()
			if !keyed {
				// The forgeries were believed: the receiver took the probe
				// and then ignored the genuine ones as stale, the sender
				// took the echo's round trip.
				if fs.Rcv.StaleHeartbeats == ts.Rcv.StaleHeartbeats || fs.SndRTT == ts.SndRTT {
					t.Fatalf("forgeries without keys changed nothing (the test cannot see a change):\n%+v\n%+v", fs, ts)
				}
				return
			}
			if !reflect.DeepEqual(fs, ts) {
				t.Fatalf("forged probes changed state:\nforged %+v\ntwin   %+v", fs, ts)
			}
			sameWire(t, "after", forged, twin, keyed)
			if len(forged.sentAB) == nAB || len(forged.sentBA) == nBA {
				t.Fatal("nothing was sent after the forgeries")
			}
			for _, d := range forged.sentBA[nBA:] {
				for _, f := range frames(t, d, keyed) {
					if h, p, _, _ := wire.DecodeFrame(f); h.Type == wire.TypeStatus {
						if st, _ := wire.ParseStatus(p); st.EchoTS == now+1e12 {
							t.Fatal("the receiver echoed a forged probe")
						}
					}
				}
			}
			if len(fs.Delivered) != 100 {
				t.Fatalf("delivered %d of 100", len(fs.Delivered))
			}
			ra, sa := forged.rcv.AuthStats(), forged.snd.AuthStats()
			if ra.Refused() != uint64(len(toR)) || ra.Replay != uint64(len(probes)) || ra.Tag != 1 ||
				sa.Refused() != uint64(len(toS)) || sa.Replay != uint64(len(echoes)) || sa.Tag != 1 {
				t.Fatalf("refusals: receiver %+v (sent %d, %d replays), sender %+v (sent %d, %d replays)",
					ra, len(toR), len(probes), sa, len(toS), len(echoes))
			}
			if a, b := twin.rcv.AuthStats(), twin.snd.AuthStats(); a.Refused() != 0 || b.Refused() != 0 {
				t.Fatalf("the twin refused genuine datagrams: %+v %+v", a, b)
			}
		})
	}
}
