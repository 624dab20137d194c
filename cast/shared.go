package cast

import (
	"sync"
	"sync/atomic"

	"github.com/walcast/walcast/affinity"
)

// SharedThread runs several loops on one locked OS thread, in turn: each
// pass runs one iteration of every loop attached to it, so one spinning
// thread serves, say, a producer's loop and a consumer's loop of the same
// process. It is the layout for a host with fewer CPUs than spinning
// loops plus the WAL's I/O: two loops spinning on two CPUs leave the
// WAL's I/O goroutine, the runtime and the application only the
// scheduler's preemption slices (milliseconds, which records then
// wait), while one shared thread leaves them a CPU. On loopback, a
// datagram one loop sends is in the other's socket when the send
// returns, so the other loop reads it in the same pass.
//
// A loop whose LoopConfig.Shared names the thread attaches to it in
// Start (instead of starting a thread of its own) and leaves it when it
// stops; its callbacks run on the shared thread. The thread starts with
// the first loop attached, placed per the affinity.Config given to
// NewSharedThread, and spins while any loop is attached (it sleeps
// otherwise). The loops' own Thread and Idle are not applied: a loop on
// a shared thread spins (LoopConfig.Validate refuses affinity.Park and
// other idle strategies: one loop's wait would stall the others).
// Safe for concurrent use.
type SharedThread struct {
	place affinity.Config

	mu      sync.Mutex
	add     []*Loop // attached, not yet picked up by the thread
	thread  *affinity.Thread
	closing bool

	pending atomic.Bool   // add is not empty
	quit    atomic.Bool   // Close was called
	wake    chan struct{} // an attach or Close, to a thread with no loops
	loops   []*Loop       // thread-owned: the loops it runs
}

// NewSharedThread returns a shared thread to be placed per c (see
// affinity.Go) when the first loop attaches.
func NewSharedThread(c affinity.Config) (*SharedThread, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &SharedThread{place: c, wake: make(chan struct{}, 1)}, nil
}

// attach hands l to the thread, starting the thread if it is not
// running. ErrClosed after Close.
func (t *SharedThread) attach(l *Loop) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return ErrClosed
	}
	if t.thread == nil {
		th, err := affinity.Go(t.place, t.run)
		if err != nil {
			return err
		}
		t.thread = th
	}
	t.add = append(t.add, l)
	t.pending.Store(true)
	t.signal()
	return nil
}

func (t *SharedThread) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// run is the thread: a pass runs one step of every attached loop and
// drops the loops that have ended. With no loop it sleeps until an
// attach, and returns once Close was called and no loop is left.
func (t *SharedThread) run() {
	for {
		if t.pending.Load() {
			t.mu.Lock()
			t.loops = append(t.loops, t.add...)
			clear(t.add)
			t.add = t.add[:0]
			t.pending.Store(false)
			t.mu.Unlock()
		}
		if len(t.loops) == 0 {
			if t.quit.Load() && !t.pending.Load() {
				return
			}
			<-t.wake
			continue
		}
		if t.quit.Load() {
			for _, l := range t.loops {
				l.Stop()
			}
		}
		k := 0
		for _, l := range t.loops {
			if l.step() {
				t.loops[k] = l
				k++
			}
		}
		clear(t.loops[k:])
		t.loops = t.loops[:k]
	}
}

// Close stops every loop on the thread (as Loop.Stop does: each still
// needs its own Close, which releases its Path; a Producer's reports
// ErrClosed if records it took were left unsent), waits for the thread
// to end and refuses later attaches. Safe to call more than once.
func (t *SharedThread) Close() error {
	t.mu.Lock()
	t.closing = true
	th := t.thread
	t.mu.Unlock()
	t.quit.Store(true)
	t.signal()
	if th != nil {
		th.Wait()
	}
	return nil
}
