package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/datapath/drop"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "receiver", summary: "classic: echo the messages of `cast sender`s, one sender after another, with -drop loss", run: runClassicReceiver})
}

func runClassicReceiver(args []string) error {
	fs := newFlagSet("receiver", "[-port P] [flags]", "Echo every message a `cast sender` sends, losing -drop percent of the datagrams that\n"+
		"arrive (casting recovers them by NAK). Like the stop-and-wait receiver it keeps\n"+
		"listening: senders are served one after another, each summed up (received,\n"+
		"dropped, total) when it goes quiet for a second or another sender starts. Runs\n"+
		"until Ctrl-C, -n messages or -senders senders; exits 3 if any sender's stream\n"+
		"hit a sticky outcome (faulted, reconnect, sender restarted).")
	port := fs.Int("port", classicPort, "UDP port to listen on (all addresses)")
	n := fs.Int64("n", 0, "exit after this many messages in all (0: no limit)")
	senders := fs.Int("senders", 0, "exit after serving this many senders (0: no limit)")
	var rf recvFlags
	rf.add(fs)
	var nf netFlags
	nf.add(fs, "udp", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkPort("port", *port); err != nil {
		return err
	}
	if err := checkRange("n", *n, 0, 1<<62); err != nil {
		return err
	}
	if err := checkRange("senders", *senders, 0, 1<<30); err != nil {
		return err
	}
	defer nf.done()
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	// One socket for the whole run; each sender gets its own session
	// (a fresh Receiver, echo Sender and -drop wrapper) on top of it.
	raw := nf
	raw.drop = 0
	sock, err := raw.open(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(*port)), netip.AddrPort{})
	if err != nil {
		return err
	}
	defer sock.Close()
	fmt.Fprintf(os.Stderr, "listening on %s over casting (%s), -drop %g%%\n", sock.LocalAddr(), features(sock), nf.drop)
	if receiverListening != nil {
		receiverListening(sock.LocalAddr())
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()

	src := &oneSource{inner: sock, stash: batch.New(64, 65535), auth: nf.kw.opener()}
	src.waiter, _ = sock.(cast.Waiter)
	var total, dropped int64
	served := 0
	var faults []string
	for ctx.Err() == nil && (*n == 0 || total < *n) && (*senders == 0 || served < *senders) {
		s, err := serveSender(ctx, &nf, &rf, src, *n-total, *n > 0)
		if err != nil {
			return err
		}
		if s.peer.IsValid() {
			served++
			total += s.res.delivered
			dropped += int64(s.res.dropped)
			fmt.Fprintf(out, "sender %s: %s\n", s.peer, s.end)
			fmt.Fprintf(out, "received: %d\ndropped: %d\ntotal: %d\n", s.res.delivered, s.res.dropped, s.res.delivered+int64(s.res.dropped))
			out.Flush()
			if s.res.outcome != protocol.Live {
				faults = append(faults, fmt.Sprintf("%s: %s", s.peer, s.end))
			}
		}
	}
	if served > 1 {
		fmt.Fprintf(out, "all %d senders: received %d, dropped %d, total %d\n", served, total, dropped, total+dropped)
	}
	out.Flush()
	switch {
	case len(faults) > 0:
		return outcomef("%d of %d senders' streams stopped: %s", len(faults), served, strings.Join(faults, "; "))
	case ctx.Err() != nil:
		return interruptedf("served %d senders, %d messages", served, total)
	}
	return nil
}

// receiverListening, when set (tests), learns the classic receiver's
// address once it is bound.
var receiverListening func(netip.AddrPort)

// session is one sender served by the classic receiver.
type session struct {
	peer netip.AddrPort
	res  recvResult
	end  string // why it ended
}

// serveSender waits for a sender on src, echoes its messages until it
// goes quiet, another sender starts, its stream hits a sticky outcome,
// max messages (when limited) or ctx ends.
func serveSender(ctx context.Context, nf *netFlags, rf *recvFlags, src *oneSource, limit int64, limited bool) (session, error) {
	var s session
	// A fresh Opener each session: the stash holds datagrams src.auth
	// already accepted.
	first, from, _, err := cast.AwaitSender(ctx, src, protocol.MaxDatagram, nf.kw.opener().open())
	if err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		return s, err
	}
	s.peer = from
	src.peer = from
	if src.auth != nil {
		d, _ := first.Msg(0)
		src.epoch, _, _ = wire.Trailer(d)
	}
	var p datapath.Path = src
	var lossy *drop.Path
	if nf.drop > 0 {
		// The first datagram reached the loop by Feed, past this wrapper.
		lossy = drop.New(p, drop.Config{RecvPct: nf.drop, Seed: uint64(time.Now().UnixNano())}, nf.batch, protocol.DefaultMaxFrame)
		p = lossy
	}
	fmt.Fprintf(os.Stderr, "serving %s\n", from)
	rc := rf.config()
	rc.Sender = from
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		return s, err
	}
	lc, err := nf.loop(p)
	if err != nil {
		return s, err
	}
	lc.Receiver = rcv
	var echoed, failed int64
	if err := echoSender(&echoed, &failed)(&lc, from); err != nil {
		return s, err
	}
	l, err := cast.NewLoop(lc)
	if err != nil {
		return s, err
	}
	for i := 0; i < first.Len(); i++ {
		if d, a := first.Msg(i); a == from {
			l.Feed(d, a)
		} else if !src.stash.Full() {
			src.stash.Append(d, a)
			src.other.Store(true)
		}
	}
	if err := l.Start(); err != nil {
		return s, err
	}
	detach := nf.kw.attach(l.SetKeys)
	defer detach()
	s.end = "went quiet"
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			s.end = "interrupted"
			break wait
		case <-l.Done():
			break wait
		case e := <-l.Events():
			switch e.Kind {
			case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
				s.res.outcome, s.res.outcomeErr = e.Outcome.Kind, e.Outcome.Err()
				s.end = "stream stopped: " + strings.TrimPrefix(e.Outcome.Err().Error(), "cast: ")
				break wait
			case cast.EventPeerSilent:
				break wait
			}
		case <-tick.C:
			if src.other.Load() {
				s.end = "another sender started"
				break wait
			}
			if limited && int64(l.Stats().Delivered) >= limit {
				s.end = "message limit reached"
				break wait
			}
		}
	}
	lerr := l.Close() // closes src: the session ends, the socket stays
	s.res.stats = l.ReceiverStats()
	s.res.delivered = int64(s.res.stats.Delivered)
	if lossy != nil {
		s.res.dropped, _ = lossy.Dropped()
	}
	if lerr != nil {
		return s, lerr
	}
	return s, nil
}

// oneSource is the classic receiver's socket seen by one session: it
// passes the datagrams of the session's sender, and keeps those of any
// other source (a sender that starts while the session runs) for the
// next session, which learns its peer from them; the previous session's
// sender, if it still sends, is ignored. With keys only an authenticated
// sender frame of another endpoint, of a run not older than the
// session's sender's (epoch, see docs/auth.md), counts as another
// sender: unsealed or forged datagrams, and recordings of the session's
// sender or of an earlier run replayed from elsewhere, are dropped.
type oneSource struct {
	inner  datapath.Path
	waiter cast.Waiter
	peer   netip.AddrPort // the session's sender (zero: none yet)
	prev   netip.AddrPort // the previous session's sender
	stash  *batch.Vec     // another source's datagrams, for the next session
	other  atomic.Bool    // stash holds something: the session should end
	auth   *keyedOpener   // nil without keys
	epoch  uint64         // the session's sender's epoch (with keys)
}

// another reports whether d, from a, announces another sender.
func (o *oneSource) another(d []byte, a netip.AddrPort) bool {
	if a == o.prev {
		return false
	}
	if o.auth == nil {
		return true
	}
	n, err := o.auth.Open(d, a)
	if err != nil || !cast.SenderFrame(d[:n]) {
		return false
	}
	e, _, _ := wire.Trailer(d)
	return e != o.epoch && wire.EpochSeconds(e) >= wire.EpochSeconds(o.epoch)
}

// Recv hands out the stash first (before a session: cast.AwaitSender reads
// it), then what the socket has, keeping only the session's sender.
func (o *oneSource) Recv(v *batch.Vec) (int, error) {
	if o.stash.Len() > 0 && !o.peer.IsValid() {
		return o.unstash(v), nil
	}
	n, err := o.inner.Recv(v)
	return o.filter(v, n), err
}

// RecvWait is Recv that parks up to deadline (the park idle mode).
func (o *oneSource) RecvWait(v *batch.Vec, deadline time.Time) (int, error) {
	if o.waiter == nil || (o.stash.Len() > 0 && !o.peer.IsValid()) {
		return o.Recv(v)
	}
	n, err := o.waiter.RecvWait(v, deadline)
	return o.filter(v, n), err
}

// ReleaseWait forwards to the socket (datapath.ReleaseWait).
func (o *oneSource) ReleaseWait() { datapath.ReleaseWait(o.inner) }

func (o *oneSource) unstash(v *batch.Vec) int {
	v.Reset()
	k := 0
	for i := 0; i < o.stash.Len() && k < v.Cap(); i++ {
		d, a := o.stash.Msg(i)
		v.Append(d, a)
		k++
	}
	o.stash.Drop(k)
	return k
}

func (o *oneSource) filter(v *batch.Vec, n int) int {
	if !o.peer.IsValid() || n == 0 {
		return n
	}
	k := 0
	for i := 0; i < n; i++ {
		d, a := v.Msg(i)
		if a != o.peer {
			if !o.stash.Full() && o.another(d, a) {
				o.stash.Append(d, a)
				o.other.Store(true)
			}
			continue
		}
		if k != i {
			c := copy(v.Buf(k), d)
			v.Set(k, c, a)
		}
		k++
	}
	v.SetLen(k)
	return k
}

// Send and LocalAddr are the socket's.
func (o *oneSource) Send(v *batch.Vec) (int, error) { return o.inner.Send(v) }
func (o *oneSource) LocalAddr() netip.AddrPort      { return o.inner.LocalAddr() }

// Close ends the session (the loop closes its path), not the socket:
// what is stashed goes to the next session.
func (o *oneSource) Close() error {
	o.prev, o.peer = o.peer, netip.AddrPort{}
	o.other.Store(false)
	return nil
}
