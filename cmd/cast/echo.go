package main

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"

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
	res, err := receive(ctx, &nf, &rf, local, peer, *n, false, out, echoSender(&echoed, &failed))
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
