package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// streamer sends one connection's records: history up to the durable seq,
// CaughtUp, then the live tail as the source reports new durable records.
type streamer struct {
	s   *Server
	src Source
	rep *ConnReport
	bw  *connWriter
	// rbuf is the cursor's read buffer (for a BufferOpener source).
	rbuf []byte

	hold []byte // a frame read ahead of the durable seq, waiting for it
	ext  bool   // the client set wire.ReplayExt: Skip records and damage details
	req  wire.ReplicationRequest
	last uint64 // last seq sent
}

// damage ends a connection whose stream is damaged at the next seq: every
// record counted as sent is flushed first, then a NotAvailable says where
// the stream breaks (the reference's answer for "cannot serve from here":
// a reference client moves on to its next endpoint with from = that seq;
// a walcast client also gets the seq in the Damaged field).
func (st *streamer) damage(cause error) error {
	next := st.last + 1
	var de *wal.DamageError
	if errors.As(cause, &de) && de.Seq != 0 {
		next = de.Seq
	}
	oldest, highest := st.src.Bounds()
	na := wire.NotAvailable{Requested: next, Oldest: oldest, Highest: highest, Stream: st.src.Stream()}
	if st.ext {
		na.Damaged = next
	}
	var f [wire.ControlFrameSize]byte
	wire.PutNotAvailableFrame(f[:], na)
	if _, err := st.bw.Write(f[:]); err != nil {
		return err
	}
	return st.bw.Flush()
}

func (st *streamer) run(ctx context.Context, from, oldest, durable uint64) error {
	start := from
	if start == 0 {
		start = max(oldest, 1)
	}
	last := start - 1 // last seq sent; records ≤ last are never sent again
	st.last = last
	var cur Cursor
	var err error
	if bo, ok := st.src.(BufferOpener); ok {
		cur, err = bo.OpenBuffer(start, st.rbuf)
	} else {
		cur, err = st.src.Open(start)
	}
	if err != nil {
		return fmt.Errorf("replay: open stream %d at %d: %w", st.src.Stream(), start, err)
	}
	defer cur.Close()
	defer func() { st.last = last }()

	caughtUp := false
	for {
		// Send everything durable, in order, each seq once.
		for {
			f := st.hold
			if f == nil {
				f, err = cur.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("replay: read stream %d after %d: %w", st.src.Stream(), last, err)
				}
			}
			h, herr := wire.ParseHeader(f)
			if herr != nil || len(f) != wire.HeaderSize+int(h.Len) {
				return fmt.Errorf("replay: source frame after %d: %w", last, wire.ErrCorrupt)
			}
			seq := wire.Seq(f[wire.HeaderSize:])
			if seq <= last {
				st.hold = nil
				continue
			}
			skip := false
			if seq != last+1 {
				// A Skip marker stands for the seqs before it.
				sk, serr := wire.ParseSkip(f[wire.HeaderSize:])
				if h.Type != wire.TypeSkip || serr != nil || sk.From > last+1 {
					return fmt.Errorf("%w: source jumped from %d to %d", ErrGap, last, seq)
				}
				skip = true
			} else if h.Type == wire.TypeSkip {
				skip = true
			}
			if seq > durable {
				_, durable = st.src.Bounds()
				if seq > durable {
					// Read ahead of the fsync: keep it until it is durable
					// so a consumer never sees a record a crash could undo.
					if st.hold == nil {
						st.hold = append(make([]byte, 0, len(f)), f...)
					}
					break
				}
			}
			st.hold = nil
			if skip && !st.ext {
				// A reference client knows no Skip record: it sees the
				// seqs jump (its tip is the highest seq it received).
				last = seq
				st.rep.Last = last
				continue
			}
			if _, err := st.bw.Write(f); err != nil {
				return err
			}
			last = seq
			st.rep.Last = last
			st.rep.Records++
			st.s.records.Add(1)
			st.s.bytes.Add(uint64(len(f)))
		}
		if !caughtUp {
			caughtUp = true
			if err := st.caughtUp(min(last, durable)); err != nil {
				return err
			}
		}
		if err := st.bw.Flush(); err != nil {
			return err
		}
		// Wait for the writer's next flush; repeat CaughtUp while idle.
		for {
			wctx, cancel := context.WithTimeout(ctx, st.s.cfg.KeepaliveInterval)
			d, err := st.src.WaitDurable(wctx, last)
			cancel()
			if err == nil {
				durable = max(durable, d)
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, wal.ErrDamaged) || errors.Is(err, wire.ErrCorrupt) {
				// The source's own reader stopped at damage right after
				// the last record this connection sent.
				return err
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("replay: wait on stream %d: %w", st.src.Stream(), err)
			}
			st.s.keepalives.Add(1)
			if err := st.caughtUp(min(last, durable)); err != nil {
				return err
			}
			if err := st.bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// caughtUp writes a CaughtUp record. live_seq means "everything up to
// live_seq has been sent": the last seq sent, or, when nothing was sent,
// from−1 — but never a seq the stream does not have: for a request
// beyond the tip it is the tip (the callers pass min(last sent, durable);
// the reference writes from_seq there, which claims a record that does
// not exist).
func (st *streamer) caughtUp(last uint64) error {
	var f [wire.CaughtUpFrameSize]byte
	wire.PutCaughtUpFrame(f[:], wire.CaughtUp{TsNs: uint64(time.Now().UnixNano()), Stream: st.src.Stream(), LiveSeq: last})
	_, err := st.bw.Write(f[:])
	return err
}
