package pathbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
	"golang.org/x/sys/unix"
)

// loopCfg is a spinning loop on path p pinned to cpu (bc.CPUs[end]), with
// a Sender and/or a Receiver (senderConfig, receiverConfig: the
// receiver's window within the sender's hot ring; retry and silence
// budgets stretched to bc.Stall if bc.Tolerate). tid receives the loop thread's id on its first iteration.
func loopCfg(bc Config, end int, p datapath.Path, batch int, sender, receiver bool, tid *atomic.Int64) (cast.LoopConfig, error) {
	c := cast.DefaultLoopConfig()
	c.Path, c.Thread, c.Batch = p, affinity.OnCPU(bc.CPUs[end]), batch
	c.RaiseGOMAXPROCS = true
	if sender {
		s, err := protocol.NewSender(senderConfig(), nil)
		if err != nil {
			return c, err
		}
		c.Sender = s
	}
	if receiver {
		r, err := protocol.NewReceiver(receiverConfig(bc))
		if err != nil {
			return c, err
		}
		c.Receiver = r
	}
	c.OnPoll = func(*cast.Loop, int64) { noteTID(tid) }
	return c, nil
}

// senderConfig is the bench's Sender: WAL-less, so what it can
// retransmit is its hot ring (RingSlots).
func senderConfig() protocol.SenderConfig { return protocol.DefaultSenderConfig() }

// receiverConfig is the bench's Receiver.
func receiverConfig(bc Config) protocol.ReceiverConfig {
	rc := protocol.DefaultReceiverConfig()
	// The receiver's window (its free reorder slots) must not exceed what
	// the WAL-less sender can retransmit, its hot ring. With 32 Ki slots
	// here and the default 4 Ki ring, a receiver loop descheduled for a
	// few hundred ms at the loss rows' 20 000 records/s lost more than
	// 4 Ki records in a row (the AF_XDP fill ring ran empty), the sender
	// had moved past them, and the row stalled INCOMPLETE (docs/xdp.md).
	rc.ReorderSlots = senderConfig().RingSlots
	if bc.Tolerate {
		stall := int64(bc.stall())
		rc.MaxNakRetries = max(rc.MaxNakRetries, int(stall/int64(rc.NakDebounce)))
		rc.SilenceIntervals = max(rc.SilenceIntervals, int(stall/int64(rc.HeartbeatInterval)))
	}
	return rc
}

// noteTID stores the calling thread's id once (one atomic load after).
func noteTID(tid *atomic.Int64) {
	if tid.Load() == 0 {
		tid.Store(int64(unix.Gettid()))
	}
}

// waitTIDs waits for the loops' first iterations.
func waitTIDs(limit time.Duration, tids ...*atomic.Int64) error {
	deadline := time.Now().Add(limit)
	for _, t := range tids {
		for t.Load() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("pathbench: a loop did not start within %v", limit)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// startProbed starts A's loop from cfg beside b, B's loop already
// running, waits for both loops' first iterations and opens a probe on
// each loop thread. On error it closes the loops it has (b included).
func startProbed(cfg cast.LoopConfig, b *cast.Loop, tidA, tidB *atomic.Int64, sys *bpf.SyscallCounter) (a *cast.Loop, pA, pB *probe, err error) {
	a, err = cast.StartLoop(cfg)
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	if err := waitTIDs(10*time.Second, tidA, tidB); err != nil {
		closeAll(a, b)
		return nil, nil, nil, err
	}
	return a, openProbe(int(tidA.Load()), sys), openProbe(int(tidB.Load()), sys), nil
}

// sendOK reports whether a Send error only means "not now" (batch or
// window full).
func sendOK(err error) bool {
	return err == nil || errors.Is(err, protocol.ErrBatchFull) || errors.Is(err, wal.ErrBackpressure)
}

// Payload layout after the seq the Sender writes at [0:8).
func putIndex(p []byte, i uint64) { binary.LittleEndian.PutUint64(p[8:], i) }
func getIndex(p []byte) uint64    { return binary.LittleEndian.Uint64(p[8:]) }
func putStamp(p []byte, ns int64) { binary.LittleEndian.PutUint64(p[16:], uint64(ns)) }
func getStamp(p []byte) int64     { return int64(binary.LittleEndian.Uint64(p[16:])) }
func payloadOK(p []byte) bool     { return len(p) >= 24 }
func payloadLen(record int) int   { return record - wire.HeaderSize }
func closeAll(ls ...*cast.Loop) error {
	var errs []error
	for _, l := range ls {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(errs...)
}
