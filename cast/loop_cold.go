package cast

import (
	"fmt"
	"sync"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wire"
)

// coldService is the loop's side of the cold reads: the buffers the I/O
// goroutine (serveIO) reads into, free when their index is in free; the
// requests it is handed (req) and returns (done); and the one read whose
// frames the Sender has not taken yet (pend, pendRest while pendOn).
type coldService struct {
	bufs     [][]byte
	free     []int
	reqs     []protocol.ColdRequest
	req      chan coldJob
	done     chan coldJob
	pend     coldJob
	pendRest []byte
	pendOn   bool
	ioWG     sync.WaitGroup
}

type coldJob struct {
	req   protocol.ColdRequest
	buf   int
	bytes int
	err   error
}

// serveCold finishes cold reads that came back and hands new requests to
// the I/O goroutine. It reports whether it did anything.
func (l *Loop) serveCold() bool {
	did := false
	if l.cold.pendOn {
		did = true
		if !l.finishCold() {
			return true
		}
	}
	for {
		select {
		case j := <-l.cold.done:
			did = true
			l.cold.pend, l.cold.pendOn = j, true
			if j.err != nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(j.req)
				l.releaseCold()
				continue
			}
			l.ls.ColdReads++
			l.cold.pendRest = l.cold.bufs[j.buf][:j.bytes]
			if !l.finishCold() {
				return true
			}
			continue
		default:
		}
		break
	}
	if len(l.cold.free) > 0 && l.snd.ColdPending() {
		did = true
		n := l.snd.ColdRequests(l.cold.reqs[:len(l.cold.free)])
		for i := 0; i < n; i++ {
			if l.cfg.Cold == nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(l.cold.reqs[i])
				continue
			}
			b := l.cold.free[len(l.cold.free)-1]
			l.cold.free = l.cold.free[:len(l.cold.free)-1]
			l.cold.req <- coldJob{req: l.cold.reqs[i], buf: b}
		}
	}
	return did
}

// finishCold hands the pending read's frames to the Sender, flushing when
// the batch fills; false means the path is backed up (try again later).
// A frame the Sender cannot take into a batch that is not full is larger
// than this loop's datagrams (a log written with a larger MaxFrame, or
// without keys when this loop adds a trailer): it is skipped and counted
// (LoopStats.ColdTooLarge, EventColdTooLarge), and the receiver asking
// for it learns of its loss as of any record the log no longer has.
func (l *Loop) finishCold() bool {
	for {
		rest := l.snd.ColdDone(l.cold.pend.req, l.cold.pendRest, l.now, l.out)
		if len(rest) == 0 {
			l.releaseCold()
			return true
		}
		if len(rest) == len(l.cold.pendRest) && !l.out.Full() {
			l.cold.pendRest = l.skipCold(rest)
			continue
		}
		progress := len(rest) < len(l.cold.pendRest)
		l.cold.pendRest = rest
		if err := l.flush(); err != nil || (!progress && l.out.Full()) {
			return false
		}
	}
}

// skipCold drops the first frame of rest, which fits no datagram of this
// loop, and returns the frames after it.
func (l *Loop) skipCold(rest []byte) []byte {
	_, p, n, err := wire.DecodeFrame(rest)
	if err != nil {
		return nil // the Sender would have dropped a bad frame: not ours
	}
	l.ls.ColdTooLarge++
	if l.ls.ColdTooLarge == 1 {
		l.emit(Event{Kind: EventColdTooLarge, At: l.now, Seq: wire.Seq(p),
			Err: fmt.Errorf("cast: the log's record %d is a %d-byte frame; this loop's datagrams hold at most %d (with keys, %d of them go to the trailer): it cannot be retransmitted", wire.Seq(p), n, l.out.SlotSize(), wire.TrailerSize)})
	}
	return rest[n:]
}

func (l *Loop) releaseCold() {
	l.cold.free = append(l.cold.free, l.cold.pend.buf)
	l.cold.pendOn = false
	l.cold.pendRest = nil
}

func (l *Loop) serveIO() {
	defer l.cold.ioWG.Done()
	for j := range l.cold.req {
		_, j.bytes, j.err = l.cfg.Cold.ReadRange(j.req.From, j.req.Count, l.cold.bufs[j.buf])
		l.cold.done <- j
	}
}
