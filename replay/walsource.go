package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// WriterSource serves a stream from a [wal.Writer] in the same process:
// history through [wal.OpenReader] (which seeks by the seq index and then
// reads sequentially through the page cache) and the live tail woken by
// [wal.Writer.WaitDurable] on every flush. (A cursor over
// wal.Writer.ReadRange — O_DIRECT runs — is slower for full catch-ups,
// as every read goes to the disk.)
type WriterSource struct {
	w      *wal.Writer
	dir    string
	stream uint32
}

// NewWriterSource adapts w, whose Config had Dir dir and Stream stream.
func NewWriterSource(w *wal.Writer, dir string, stream uint32) *WriterSource {
	return &WriterSource{w: w, dir: dir, stream: stream}
}

// Stream implements [Source].
func (s *WriterSource) Stream() uint32 { return s.stream }

// Bounds implements [Source]: the writer's oldest seq and its durable seq.
func (s *WriterSource) Bounds() (oldest, durable uint64) {
	o, _ := s.w.Bounds()
	d := s.w.Durable()
	if o == 0 || d == 0 || o > d {
		return 0, 0
	}
	return o, d
}

// Open implements [Source].
func (s *WriterSource) Open(from uint64) (Cursor, error) {
	r, err := wal.OpenReader(s.dir, s.stream, from)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenBuffer implements [BufferOpener]: the cursor reads through buf (at
// least wal.MinReaderBuffer bytes), which the caller owns.
func (s *WriterSource) OpenBuffer(from uint64, buf []byte) (Cursor, error) {
	r, err := wal.OpenReaderBuffer(s.dir, s.stream, from, buf)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// WaitDurable implements [Source].
func (s *WriterSource) WaitDurable(ctx context.Context, after uint64) (uint64, error) {
	return s.w.WaitDurable(ctx, after)
}

// DirSource serves a stream from a WAL directory that another process
// writes. Its durable seq is the highest record visible in the files; a
// tail reader follows it, woken by inotify on the stream directory (Linux)
// and, as a safety net for lost events and other systems, by a poll every
// PollInterval.
type DirSource struct {
	dir    string
	stream uint32

	mu      sync.Mutex
	tail    *wal.Reader
	highest uint64
	notify  chan struct{}
	err     error

	watch   io.Closer
	done    chan struct{}
	wg      sync.WaitGroup
	wakeups atomic.Uint64
}

// OpenDirSource follows stream under the WAL root dir (the writer's
// Config.Dir). It reads the active segment once to find the highest seq.
// poll is the safety-net poll interval (0: 1 s when inotify works,
// 20 ms when it does not).
func OpenDirSource(dir string, stream uint32, poll time.Duration) (*DirSource, error) {
	sdir := wal.StreamDir(dir, stream)
	segs, err := wal.ListSegments(sdir, stream)
	if err != nil {
		return nil, fmt.Errorf("replay: open %s: %w", sdir, err)
	}
	var from uint64
	for _, sf := range segs {
		if !sf.Active {
			from = sf.Last + 1
		}
	}
	tail, err := wal.OpenReader(dir, stream, from)
	var damage error
	if errors.Is(err, wal.ErrDamaged) {
		// Serve what can be served; connections that reach the damage
		// are told (and the other streams are not affected).
		damage, tail = err, nil
	} else if err != nil {
		return nil, fmt.Errorf("replay: open %s: %w", sdir, err)
	}
	s := &DirSource{dir: dir, stream: stream, tail: tail, err: damage, notify: make(chan struct{}), done: make(chan struct{})}
	if from > 0 {
		s.highest = from - 1
	}
	s.refresh()
	w, werr := watchDir(sdir)
	if poll <= 0 {
		poll = time.Second
		if werr != nil {
			poll = 20 * time.Millisecond
		}
	}
	if werr == nil {
		s.watch = w
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			var buf [4096]byte
			for {
				if _, err := w.Read(buf[:]); err != nil {
					return
				}
				s.wakeups.Add(1)
				s.refresh()
			}
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.refresh()
			}
		}
	}()
	return s, nil
}

// Wakeups counts inotify wake-ups (0 where inotify is not used).
func (s *DirSource) Wakeups() uint64 { return s.wakeups.Load() }

// refresh drains the tail reader and wakes waiters when the highest seq
// moved.
func (s *DirSource) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tail == nil {
		return
	}
	h := s.highest
	for {
		f, err := s.tail.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			break
		}
		h = wire.Seq(f[wire.HeaderSize:])
	}
	if h > s.highest {
		s.highest = h
		close(s.notify)
		s.notify = make(chan struct{})
	}
}

// Close stops following the directory.
func (s *DirSource) Close() error {
	close(s.done)
	if s.watch != nil {
		s.watch.Close()
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tail == nil {
		return nil
	}
	err := s.tail.Close()
	s.tail = nil
	return err
}

// Stream implements [Source].
func (s *DirSource) Stream() uint32 { return s.stream }

// Bounds implements [Source]: the oldest seq the first segment covers
// (its first record's seq, or the From of the Skip marker it starts with)
// and the highest record visible.
func (s *DirSource) Bounds() (oldest, durable uint64) {
	s.mu.Lock()
	h := s.highest
	s.mu.Unlock()
	if h == 0 {
		return 0, 0
	}
	segs, err := wal.ListSegments(wal.StreamDir(s.dir, s.stream), s.stream)
	if err != nil || len(segs) == 0 {
		return 0, 0
	}
	_, covers, err := wal.FirstSeq(segs[0].Path)
	if err != nil {
		if segs[0].Active {
			return 0, 0
		}
		return segs[0].First, h // unreadable: the name says
	}
	return covers, h
}

// Open implements [Source].
func (s *DirSource) Open(from uint64) (Cursor, error) {
	r, err := wal.OpenReader(s.dir, s.stream, from)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenBuffer implements [BufferOpener]: the cursor reads through buf (at
// least wal.MinReaderBuffer bytes), which the caller owns.
func (s *DirSource) OpenBuffer(from uint64, buf []byte) (Cursor, error) {
	r, err := wal.OpenReaderBuffer(s.dir, s.stream, from, buf)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// WaitDurable implements [Source].
func (s *DirSource) WaitDurable(ctx context.Context, after uint64) (uint64, error) {
	for {
		s.mu.Lock()
		h, ch, err := s.highest, s.notify, s.err
		s.mu.Unlock()
		if h > after {
			return h, nil
		}
		if err != nil {
			return h, err
		}
		select {
		case <-ch:
		case <-s.done:
			return h, wal.ErrClosed
		case <-ctx.Done():
			return h, ctx.Err()
		}
	}
}

// Err is the damage (or read error) the source's tail reader stopped at,
// or nil. Connections are still served up to it.
func (s *DirSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
