package cast

import (
	"github.com/walcast/walcast/cast/protocol"
)

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
	if l.pendOn {
		did = true
		if !l.finishCold() {
			return true
		}
	}
	for {
		select {
		case j := <-l.coldDone:
			did = true
			l.pend, l.pendOn = j, true
			if j.err != nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(j.req)
				l.releaseCold()
				continue
			}
			l.ls.ColdReads++
			l.pendRest = l.coldBufs[j.buf][:j.bytes]
			if !l.finishCold() {
				return true
			}
			continue
		default:
		}
		break
	}
	if len(l.coldFree) > 0 && l.snd.ColdPending() {
		did = true
		n := l.snd.ColdRequests(l.coldReqs[:len(l.coldFree)])
		for i := 0; i < n; i++ {
			if l.cfg.Cold == nil {
				l.ls.ColdErrors++
				l.snd.ColdFailed(l.coldReqs[i])
				continue
			}
			b := l.coldFree[len(l.coldFree)-1]
			l.coldFree = l.coldFree[:len(l.coldFree)-1]
			l.coldReq <- coldJob{req: l.coldReqs[i], buf: b}
		}
	}
	return did
}

// finishCold hands the pending read's frames to the Sender, flushing when
// the batch fills; false means the path is backed up (try again later).
func (l *Loop) finishCold() bool {
	for {
		rest := l.snd.ColdDone(l.pend.req, l.pendRest, l.now, l.out)
		if len(rest) == 0 {
			l.releaseCold()
			return true
		}
		progress := len(rest) < len(l.pendRest)
		l.pendRest = rest
		if err := l.flush(); err != nil || (!progress && l.out.Full()) {
			return false
		}
	}
}

func (l *Loop) releaseCold() {
	l.coldFree = append(l.coldFree, l.pend.buf)
	l.pendOn = false
	l.pendRest = nil
}

func (l *Loop) serveIO() {
	defer l.ioWG.Done()
	for j := range l.coldReq {
		_, j.bytes, j.err = l.cfg.Cold.ReadRange(j.req.From, j.req.Count, l.coldBufs[j.buf])
		l.coldDone <- j
	}
}
