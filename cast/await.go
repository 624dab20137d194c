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
// learnt from traffic after this. open, when not nil, authenticates a
// datagram first (wire.Opener.Open: the length of its frames, or an
// error for one that fails and is ignored); the batch keeps the
// datagrams as they came. It returns ctx's error when ctx ends first, or
// the path's.
func AwaitSender(ctx context.Context, p datapath.Path, slot int, open func([]byte) (int, error)) (v *batch.Vec, from netip.AddrPort, ignored int, err error) {
	v = batch.New(64, slot)
	waiter, _ := p.(Waiter)
	var idle affinity.Idler
	idle.Strategy = affinity.Backoff
	for ctx.Err() == nil {
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
				k, oerr := open(d)
				if oerr != nil {
					ignored++
					continue
				}
				d = d[:k]
			}
			if src.IsValid() && SenderFrame(d) {
				v.Drop(i) // the datagrams before it are the ignored ones
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
