package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/drop"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "echo", summary: "send every record received back to its sender on a stream of its own (RTT peer)", run: runEcho})
}

func runEcho(args []string) error {
	fs := newFlagSet("echo", "-listen ADDR [-peer ADDR] [flags]", "Receive a casting stream and send every record straight back on a stream of its\nown (the other direction's Sender), from inside the loop: the peer of `cast sender`\nand of RTT benchmarks. Runs until Ctrl-C or -n records.")
	listen := fs.String("listen", "0.0.0.0:9000", "address HOST:PORT to receive on")
	peerS := fs.String("peer", "", "the client's address (default: learnt from the first datagram)")
	n := fs.Int64("n", 0, "exit after echoing this many records (0: until Ctrl-C)")
	var rf recvFlags
	rf.add(fs)
	var nf netFlags
	nf.add(fs, "udp", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	defer nf.done()
	if err := nf.check(); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	local, err := addrFlag("listen", *listen, false)
	if err != nil {
		return err
	}
	peer, err := addrFlag("peer", *peerS, false)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var echoed, failed int64
	res, err := receiveEcho(ctx, &nf, &rf, local, peer, *n, &echoed, &failed)
	if err != nil {
		return err
	}
	res.print(out)
	fmt.Fprintf(out, "echoed %d records (%d could not be sent)\n", echoed, failed)
	out.Flush()
	if err := res.verdict(ctx, *n); err != nil {
		return err
	}
	if failed > 0 {
		return failf("%d of %d records could not be echoed (the path or the sender refused them)", failed, res.delivered)
	}
	return nil
}

// receiveEcho runs a loop with a Receiver and the echoing Sender on
// one thread (so not a cast.Consumer: the echo goes out from inside the
// loop) until n records (0: no limit), ctx's end or a sticky outcome.
// Without peer the sender is learnt from its first frame.
func receiveEcho(ctx context.Context, nf *netFlags, rf *recvFlags, local, peer netip.AddrPort, n int64, echoed, failed *int64) (recvResult, error) {
	res := recvResult{inOrder: true, outcome: protocol.Live}
	p, err := nf.open(local, peer)
	if err != nil {
		return res, err
	}
	res.path = features(p)
	var first *batch.Vec
	if !peer.IsValid() {
		fmt.Fprintf(os.Stderr, "listening on %s, waiting for a sender\n", p.LocalAddr())
		if first, peer, _, err = cast.AwaitSender(ctx, p, protocol.MaxDatagram, nf.kw.opener().open()); err != nil {
			p.Close()
			if ctx.Err() != nil {
				return res, nil
			}
			return res, err
		}
	}
	rc := rf.config()
	rc.Sender = peer
	rcv, err := protocol.NewReceiver(rc)
	if err != nil {
		p.Close()
		return res, err
	}
	lc, err := nf.loop(p)
	if err != nil {
		p.Close()
		return res, err
	}
	lc.Receiver, lc.Source = rcv, peer
	if err := echoSender(echoed, failed)(&lc, peer); err != nil {
		p.Close()
		return res, err
	}
	// As in consume: the last echo's time after the first, one monotonic
	// read a record (it comes before the reply goes out).
	var start time.Time
	var lastAt time.Duration
	var count atomic.Int64
	echo := lc.OnRecord
	lc.OnRecord = func(l *cast.Loop, h wire.Header, payload []byte) {
		seq := wire.Seq(payload)
		if res.delivered == 0 {
			start, res.first = time.Now(), int64(seq)
		} else if int64(seq) != res.last+1 {
			res.inOrder = false
		}
		res.last = int64(seq)
		res.delivered++
		lastAt = time.Since(start)
		echo(l, h, payload)
		count.Store(res.delivered)
	}
	l, err := cast.NewLoop(lc)
	if err != nil {
		p.Close()
		return res, err
	}
	defer nf.kw.attach(l.SetKeys)()
	if first != nil {
		for i := 0; i < first.Len(); i++ {
			if d, src := first.Msg(i); src == peer {
				l.Feed(d, src)
			}
		}
	}
	if err := l.Start(); err != nil {
		p.Close()
		return res, err
	}
	fmt.Fprintf(os.Stderr, "receiving on %s from %s over %s\n", p.LocalAddr(), peer, res.path)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
loop:
	for ctx.Err() == nil && (n == 0 || count.Load() < n) {
		select {
		case e := <-l.Events():
			switch e.Kind {
			case cast.EventFaulted, cast.EventReconnect, cast.EventSenderRestarted:
				res.outcome, res.outcomeErr = e.Outcome.Kind, e.Outcome.Err()
				break loop
			case cast.EventError:
				l.Close()
				return res, e.Err
			case cast.EventEnded:
				res.ended, res.final = true, e.Seq
				break loop
			case cast.EventPeerSilent:
				if n > 0 && count.Load() > 0 {
					res.silent = true
					break loop
				}
			}
		case <-l.Done():
			break loop
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	if err := l.Close(); err != nil {
		return res, err
	}
	// The loop thread has stopped: res is this goroutine's again.
	res.elapsed = lastAt
	res.stats = l.ReceiverStats()
	if d, ok := p.(*drop.Path); ok {
		res.dropped, _ = d.Dropped()
	}
	return res, nil
}

// echoSender adds a Sender to the loop that sends every delivered record
// back (to the peer the Receiver NAKs).
func echoSender(echoed, failed *int64) func(lc *cast.LoopConfig, peer netip.AddrPort) error {
	return func(lc *cast.LoopConfig, peer netip.AddrPort) error {
		sc := protocol.DefaultSenderConfig()
		sc.Dest = peer
		s, err := protocol.NewSender(sc, nil)
		if err != nil {
			return err
		}
		lc.Sender = s
		lc.OnRecord = func(l *cast.Loop, h wire.Header, payload []byte) {
			if _, err := l.Send(h.Type, payload); err != nil {
				*failed++
				return
			}
			*echoed++
		}
		return nil
	}
}
