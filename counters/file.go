package counters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// SampleInterval is how often a File's sampler goroutine stamps the
// heartbeat, runs the functions given to [File.OnSample] and copies the
// counters into the file: a reader sees values at most this old.
const SampleInterval = 100 * time.Millisecond

// File is this process's counters in one directory, shared by every
// loop of the process (see [Acquire]). The writers store into the
// process's own memory; the sampler goroutine copies it into the file
// that readers map (see mirror), so that nothing a reader does to the
// file (truncate it, fill its file system, scribble on it) can fault a
// writer. Its methods are safe for concurrent use; [Counter.Store] is
// the hot path.
type File struct {
	mem    []byte // the process's own copy: every write goes here
	shared []byte // the file's mapping, written by mirror only (nil: no file)
	fd     *os.File
	path   string
	err    error // why nothing is written (shared nil)
	key    string

	mu       sync.Mutex // slot allocation, errors, samplers, refs
	free     []int32    // released slots, reused first
	next     int32      // first slot never used
	refs     int
	samplers map[int]func()
	sid      int
	running  sync.Mutex // held while the samplers run
	stop     chan struct{}
	done     chan struct{}
	repairs  int // times the file was found cut short and restored
}

var files struct {
	mu sync.Mutex
	m  map[string]*File
}

// Acquire returns this process's counters file in c.Dir, creating it on
// first use (mode 0644; the directory 0755): <Dir>/<pid>.counters. Each
// Acquire needs one [File.Release]; the last removes the file. With
// c.Off it returns nil and no error: every method of a nil *File does
// nothing.
func Acquire(c Config) (*File, error) {
	if c = c.WithDefaults(); c.Off {
		return nil, nil
	}
	key, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("counters: %w", err)
	}
	files.mu.Lock()
	defer files.mu.Unlock()
	if f := files.m[key]; f != nil {
		f.mu.Lock()
		f.refs++
		f.mu.Unlock()
		return f, nil
	}
	f, err := create(key)
	if err != nil {
		return nil, err
	}
	if files.m == nil {
		files.m = map[string]*File{}
	}
	files.m[key] = f
	return f, nil
}

func create(dir string) (*File, error) {
	pid := os.Getpid()
	final := filepath.Join(dir, fmt.Sprintf("%d%s", pid, Suffix))
	words := make([]uint64, fileSize/8)
	mem := unsafeBytes(words, fileSize)
	initHeader(mem, pid)
	f := &File{mem: mem, key: dir, refs: 1, samplers: map[int]func(){},
		stop: make(chan struct{}), done: make(chan struct{})}
	shared, fd, err := mapNew(dir, final, fileSize, func(shared []byte) {
		f.shared = shared
		f.mirror()
	})
	switch {
	case errors.Is(err, ErrNotSupported):
		f.err = err
	case err != nil:
		// Counters in process memory only: the loops and an in-process
		// reader (Snapshot) still see them.
		f.err = fmt.Errorf("counters: %w", err)
		f.shared = nil
	default:
		f.shared, f.fd, f.path = shared, fd, final
	}
	go f.sample()
	return f, nil
}

func initHeader(mem []byte, pid int) {
	copy(mem[hMagic:], Magic)
	le.PutUint32(mem[hVersion:], Version)
	le.PutUint32(mem[hHeaderSize:], HeaderSize)
	le.PutUint64(mem[hPID:], uint64(pid))
	now := time.Now().UnixNano()
	le.PutUint64(mem[hStart:], uint64(now))
	le.PutUint64(mem[hHeartbeat:], uint64(now))
	le.PutUint32(mem[hSlotSize:], SlotSize)
	le.PutUint32(mem[hSlots:], Slots)
	le.PutUint32(mem[hSlotsOff:], slotsOff)
	le.PutUint32(mem[hLossSize:], LossSize)
	le.PutUint32(mem[hLossN:], LossEntries)
	le.PutUint32(mem[hLossOff:], lossOff)
	le.PutUint32(mem[hErrSize:], ErrorSize)
	le.PutUint32(mem[hErrN:], ErrorSlots)
	le.PutUint32(mem[hErrOff:], errorsOff)
	cmd := strings.Join(os.Args, " ")
	if len(cmd) > cmdMax {
		cmd = cmd[:cmdMax]
	}
	copy(mem[hCmd:hCmd+cmdMax], printable(cmd))
}

// printable replaces bytes a table cannot show.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// Path is the file's path ("" where nothing is written).
func (f *File) Path() string {
	if f == nil {
		return ""
	}
	return f.path
}

// Err says why nothing is written to a file (Path is ""): the platform
// has no shared mapping ([ErrNotSupported]), or the directory or file
// could not be made (a full file system: the file's pages are allocated
// when it is created). The counters then live in process memory only.
func (f *File) Err() error {
	if f == nil {
		return nil
	}
	return f.err
}

// Release gives back one Acquire; the last one stops the sampler, unmaps
// and removes the file.
func (f *File) Release() error {
	if f == nil {
		return nil
	}
	files.mu.Lock()
	f.mu.Lock()
	f.refs--
	last := f.refs == 0
	f.mu.Unlock()
	if last {
		delete(files.m, f.key)
	}
	files.mu.Unlock()
	if !last {
		return nil
	}
	close(f.stop)
	<-f.done
	if f.shared == nil {
		return nil
	}
	return errors.Join(os.Remove(f.path), unmap(f.shared), f.fd.Close())
}

func (f *File) sample() {
	defer close(f.done)
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	var fns []func()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			f.mu.Lock()
			fns = fns[:0]
			for _, fn := range f.samplers {
				fns = append(fns, fn)
			}
			f.mu.Unlock()
			f.running.Lock()
			for _, fn := range fns {
				fn()
			}
			f.running.Unlock()
			u64(f.mem, hHeartbeat).Store(uint64(now.UnixNano()))
			f.mirror()
		}
	}
}

// OnSample runs fn on the file's sampler goroutine every SampleInterval
// until the returned stop is called; stop waits for a call under way.
// For counters whose owners have
// thread-safe getters (the WAL writer, the replay server).
func (f *File) OnSample(fn func()) (stop func()) {
	if f == nil {
		return func() {}
	}
	f.mu.Lock()
	f.sid++
	id := f.sid
	f.samplers[id] = fn
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.samplers, id)
		f.mu.Unlock()
		f.running.Lock() // a run that copied fn has finished
		defer f.running.Unlock()
	}
}

func u64(mem []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&mem[off])) }
func u32(mem []byte, off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&mem[off])) }

// Counter is one slot: a value other processes see. The zero Counter
// (counters off, or the file full) stores nothing.
type Counter struct {
	v   *atomic.Uint64
	idx int32
}

// Store publishes v: one atomic store, no allocation, lock or system call.
func (c Counter) Store(v uint64) {
	if c.v != nil {
		c.v.Store(v)
	}
}

// Load is the value last stored (0 for the zero Counter).
func (c Counter) Load() uint64 {
	if c.v == nil {
		return 0
	}
	return c.v.Load()
}

// Valid reports whether c has a slot.
func (c Counter) Valid() bool { return c.v != nil }

// CheckLabel reports why label cannot name a slot: empty, longer than
// LabelMax, or with a byte outside printable ASCII.
func CheckLabel(label string) error {
	if label == "" || len(label) > LabelMax {
		return fmt.Errorf("counters: label %q: length %d outside 1..%d", label, len(label), LabelMax)
	}
	for i := 0; i < len(label); i++ {
		if label[i] < 0x20 || label[i] > 0x7e {
			return fmt.Errorf("counters: label %q: byte %#x at %d is not printable ASCII", label, label[i], i)
		}
	}
	return nil
}

// Counter takes a free slot, names it label (name{key="value",…}: a
// metric name of [a-z0-9_] and labels as Prometheus writes them) and
// returns it holding 0. A nil File returns the zero Counter.
func (f *File) Counter(kind Kind, label string) (Counter, error) {
	if f == nil {
		return Counter{}, nil
	}
	if err := CheckLabel(label); err != nil {
		return Counter{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var idx int32
	switch {
	case len(f.free) > 0:
		idx = f.free[len(f.free)-1]
		f.free = f.free[:len(f.free)-1]
	case f.next < Slots:
		idx = f.next
		f.next++
		u64(f.mem, hSlotsHigh).Store(uint64(f.next))
	default:
		return Counter{}, ErrFull
	}
	off := slotsOff + int(idx)*SlotSize
	gen := u32(f.mem, off+8)
	g := gen.Load()
	gen.Store(g | 1) // odd: being written
	lab := f.mem[off+16 : off+SlotSize]
	clear(lab)
	copy(lab, label)
	u64(f.mem, off).Store(0)
	u32(f.mem, off+12).Store(uint32(kind) | uint32(len(label))<<8)
	gen.Store((g | 1) + 1)
	return Counter{v: u64(f.mem, off), idx: idx}, nil
}

// Free gives c's slot back (readers stop listing it).
func (f *File) Free(c Counter) {
	if f == nil || c.v == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	off := slotsOff + int(c.idx)*SlotSize
	gen := u32(f.mem, off+8)
	g := gen.Load()
	gen.Store(g | 1)
	u32(f.mem, off+12).Store(0)
	u64(f.mem, off).Store(0)
	gen.Store((g | 1) + 1)
	f.free = append(f.free, c.idx)
}

// Loss is one loss episode: a time during which a stream had seqs
// missing (the consumer's view) or NAKs to answer (the producer's).
type Loss struct {
	Stream uint32
	Role   Role
	Repair Repair
	// First is the first missing seq: for the consumer the next expected
	// one when the gap opened, for the producer the first seq the
	// episode's first NAK asked for (0: unknown).
	First uint64
	// Count is, for the consumer, the seqs delivered from First until no
	// gap was open (an upper bound of those lost); for the producer, the
	// records it retransmitted.
	Count uint64
	// Naks is the NAKs sent (consumer) or received (producer) meanwhile.
	Naks uint64
	At   int64 // first seen, Unix ns
	Done int64 // repaired (or given up), Unix ns; 0 while open
}

// Latency is Done − At (0 while open).
func (e Loss) Latency() time.Duration {
	if e.Done == 0 {
		return 0
	}
	return time.Duration(e.Done - e.At)
}

// LossRef names an episode written by [File.OpenLoss], for [File.CloseLoss].
type LossRef uint64

// OpenLoss writes an open episode into the loss ring (lock-free: the
// slot is claimed with one atomic add) and returns its reference.
func (f *File) OpenLoss(e Loss) LossRef {
	if f == nil {
		return 0
	}
	n := u64(f.mem, hLossHead).Add(1)
	f.writeLoss(n, e)
	return LossRef(n)
}

// CloseLoss rewrites episode ref with its end (unless the ring has since
// reused its entry).
func (f *File) CloseLoss(ref LossRef, e Loss) {
	if f == nil || ref == 0 {
		return
	}
	off := lossOff + int((uint64(ref)-1)%LossEntries)*LossSize
	if u64(f.mem, off+56).Load() != uint64(ref) {
		return
	}
	f.writeLoss(uint64(ref), e)
}

func (f *File) writeLoss(n uint64, e Loss) {
	off := lossOff + int((n-1)%LossEntries)*LossSize
	gen := u32(f.mem, off)
	g := gen.Load()
	gen.Store(g | 1)
	u32(f.mem, off+4).Store(e.Stream)
	u64(f.mem, off+8).Store(e.First)
	u64(f.mem, off+16).Store(e.Count)
	u64(f.mem, off+24).Store(uint64(e.At))
	u64(f.mem, off+32).Store(uint64(e.Done))
	u64(f.mem, off+40).Store(e.Naks)
	u32(f.mem, off+48).Store(uint32(e.Role) | uint32(e.Repair)<<8)
	u64(f.mem, off+56).Store(n)
	gen.Store((g | 1) + 1)
}

// Error counts one occurrence of an error: a message seen before (same
// stream and role) gets its count and last time raised, a new one takes
// a free entry (none free: it is counted as dropped). It takes a lock:
// for errors, not for the hot path. at is Unix ns.
func (f *File) Error(stream uint32, role Role, msg string, at int64) {
	if f == nil {
		return
	}
	msg = printable(msg)
	if len(msg) > MessageMax {
		msg = msg[:MessageMax]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < ErrorSlots; i++ {
		off := errorsOff + i*ErrorSize
		cnt := u64(f.mem, off+8)
		if cnt.Load() == 0 {
			gen := u32(f.mem, off)
			g := gen.Load()
			gen.Store(g | 1)
			u32(f.mem, off+4).Store(stream)
			u64(f.mem, off+16).Store(uint64(at))
			u64(f.mem, off+24).Store(uint64(at))
			m := f.mem[off+40 : off+ErrorSize]
			clear(m)
			copy(m, msg)
			u32(f.mem, off+32).Store(uint32(role) | uint32(len(msg))<<8)
			cnt.Store(1)
			gen.Store((g | 1) + 1)
			return
		}
		meta := u32(f.mem, off+32).Load()
		if u32(f.mem, off+4).Load() == stream && Role(meta) == role && int(meta>>8) == len(msg) &&
			string(f.mem[off+40:off+40+len(msg)]) == msg {
			cnt.Add(1)
			u64(f.mem, off+24).Store(uint64(at))
			return
		}
	}
	u64(f.mem, hErrDropped).Add(1)
}
