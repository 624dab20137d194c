package cast

import (
	"context"
	"net/netip"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/wire"
)

// AwaitSender reads p until a datagram arrives that starts with a frame
// a casting sender sends its receivers (see [SenderFrame]), and returns
// the batch it came in from that datagram on (the datagrams before it
// dropped; later ones from every source kept, for the caller to sort),
// its source and how many datagrams were ignored before it. slot is the
// largest datagram kept (larger ones are truncated by the path). It is
// how a receiver that was not told its sender's address finds it: junk,
// a bad CRC, a NAK or a Status never name the sender, and nothing is
// learnt from traffic after this. It returns ctx's error when ctx ends
// first, or the path's.
//
// open, when not nil, authenticates a datagram first (a
// [wire.Opener.Open]: the length of its frames, or an error for one that
// fails and is ignored). Then a genuine datagram may still be a
// recording replayed from another address, so the choice waits
// [AuthSettle] after the first authenticated sender frame and takes the
// newest one heard by then: of the latest run (epoch second), and within
// one run the highest counter. A live sender heartbeats at least every
// HeartbeatInterval, so it is heard, and outranks any recording of an
// earlier run or of its own past datagrams. The batch then holds that
// one datagram, as it came (trailer included).
func AwaitSender(ctx context.Context, p datapath.Path, slot int, open func(d []byte, from netip.AddrPort) (int, error)) (v *batch.Vec, from netip.AddrPort, ignored int, err error) {
	v = batch.New(64, slot)
	waiter, _ := p.(Waiter)
	var idle affinity.Idler
	idle.Strategy = affinity.Backoff
	var best authCandidate
	for ctx.Err() == nil {
		if best.d != nil && !time.Now().Before(best.decideAt) {
			v.Reset()
			v.Append(best.d, best.from)
			return v, best.from, ignored, nil
		}
		var n int
		if waiter != nil {
			n, err = waiter.RecvWait(v, time.Now().Add(50*time.Millisecond))
		} else {
			n, err = p.Recv(v)
		}
		if err != nil {
			return nil, netip.AddrPort{}, ignored, err
		}
		for i := 0; i < n; i++ {
			d, src := v.Msg(i)
			if open != nil {
				k, oerr := open(d, src)
				if oerr != nil || !src.IsValid() || !SenderFrame(d[:k]) {
					ignored++
					continue
				}
				if !best.take(d, src) {
					ignored++
				}
				continue
			}
			if src.IsValid() && SenderFrame(d) {
				v.Drop(i) // the datagrams before it are the ignored ones
				v.Own()   // a datapath's views last only until its next Recv
				return v, src, ignored, nil
			}
			ignored++
		}
		if n == 0 {
			idle.Idle()
		} else {
			idle.Reset()
		}
	}
	return nil, netip.AddrPort{}, ignored, ctx.Err()
}

// AuthSettle is how long a keyed receiver that discovers its sender
// ([AwaitSender] with open) listens after the first authenticated sender
// frame before it chooses: more than two default heartbeat intervals.
const AuthSettle = 250 * time.Millisecond

// authCandidate is the newest authenticated sender frame AwaitSender
// heard so far.
type authCandidate struct {
	d              []byte
	from           netip.AddrPort
	epoch, counter uint64
	decideAt       time.Time
}

// take keeps d from src when it is newer than the candidate: a later
// run, or the same run further on. False: d is not kept.
func (c *authCandidate) take(d []byte, src netip.AddrPort) bool {
	e, n, ok := wire.Trailer(d)
	if !ok {
		return false
	}
	if c.d != nil {
		later := wire.EpochSeconds(e) > wire.EpochSeconds(c.epoch)
		if !later && (e != c.epoch || n <= c.counter) {
			return false
		}
	} else {
		c.decideAt = time.Now().Add(AuthSettle)
	}
	c.d = append(c.d[:0], d...)
	c.from, c.epoch, c.counter = src, e, n
	return true
}

// SenderFrame reports whether datagram d starts with a frame a casting
// sender sends to its receivers: version, length and CRC right, and
// either a valid heartbeat or a record with a seq (a data record or a
// Skip marker; not one of the protocol's other types, which flow the
// other way, over TCP, or only after a stream has begun).
func SenderFrame(d []byte) bool {
	h, p, _, err := wire.DecodeFrame(d)
	switch {
	case err != nil:
		return false
	case h.Type == wire.TypeHeartbeat:
		_, err := wire.ParseHeartbeat(p)
		return err == nil
	case wire.Reserved(h.Type) && h.Type != wire.TypeSkip:
		return false
	}
	return len(p) >= 8 && wire.Seq(p) != 0
}
