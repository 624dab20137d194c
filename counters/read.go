package counters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
)

// State says whether a counters file's writer still runs.
type State string

const (
	Live State = "live" // the pid exists and every heartbeat is recent
	// Silent: the pid exists but a heartbeat stopped: the file's (the
	// process hangs, or the pid was reused) or a loop thread's (that
	// loop is stuck, or stopped without closing).
	Silent State = "silent"
	Stale  State = "stale" // the pid is gone: the process died without removing its file
)

// SilentAfter is how old a heartbeat may be before a live pid's file is
// reported Silent.
const SilentAfter = 5 * time.Second

// Value is one slot as read.
type Value struct {
	Label  string            // as written: name{key="value",…}
	Name   string            // the metric name part
	Labels map[string]string // the label pairs
	Kind   Kind
	Value  uint64
}

// Error is one distinct error as read.
type Error struct {
	Stream  uint32
	Role    Role
	Message string
	Count   uint64
	First   int64 // Unix ns
	Last    int64 // Unix ns
}

// Snapshot is one counters file as read at one moment.
type Snapshot struct {
	Path      string
	PID       int
	Start     int64 // Unix ns the file was created
	Heartbeat int64 // Unix ns of the writer's last heartbeat
	Command   string
	State     State
	// SilentLoops are the labels of the KindHeartbeat slots older than
	// SilentAfter: the loop threads that stopped beating.
	SilentLoops []string
	Values      []Value
	Loss        []Loss  // oldest first
	LossTotal   uint64  // episodes ever written (the ring keeps the last LossEntries)
	Errors      []Error // in the order first seen
	// ErrorsDropped counts the occurrences of errors that found every
	// entry taken by other messages (each occurrence: the log keeps no
	// memory of a message it could not hold).
	ErrorsDropped uint64
}

// Find returns the value of the slot named label (ok false: none).
func (s *Snapshot) Find(label string) (uint64, bool) {
	for _, v := range s.Values {
		if v.Label == label {
			return v.Value, true
		}
	}
	return 0, false
}

// Read maps the counters file at path read-only and copies what it
// holds. A file cut short while it reads is an error, not a fault.
func Read(path string) (s *Snapshot, err error) {
	mem, release, err := mapRead(path)
	if err != nil {
		return nil, err
	}
	defer release()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(interface{ Addr() uintptr })
			if !ok || a.Addr() < addrOf(mem) || a.Addr() >= addrOf(mem)+uintptr(len(mem)) {
				panic(r)
			}
			s, err = nil, fmt.Errorf("counters: %s was cut short while read", path)
		}
	}()
	s, err = parse(mem)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, path)
	}
	s.Path = path
	s.judge(time.Now(), alive(s.PID))
	return s, nil
}

// Snapshot reads this process's counters from its own memory (the file
// may lag by up to SampleInterval, or not exist: see Err).
func (f *File) Snapshot() *Snapshot {
	if f == nil {
		return &Snapshot{PID: os.Getpid(), State: Live}
	}
	f.mu.Lock()
	s, err := parse(f.mem)
	f.mu.Unlock()
	if err != nil {
		panic("counters: own memory unreadable: " + err.Error()) // the layout is this package's own
	}
	s.Path = f.path
	s.judge(time.Now(), true)
	return s
}

// judge sets State and SilentLoops as of now.
func (s *Snapshot) judge(now time.Time, alive bool) {
	s.State, s.SilentLoops = Live, nil
	old := func(ns int64) bool { return now.Sub(time.Unix(0, ns)) > SilentAfter }
	for _, v := range s.Values {
		if v.Kind == KindHeartbeat && old(int64(v.Value)) {
			s.SilentLoops = append(s.SilentLoops, v.Label)
		}
	}
	switch {
	case !alive:
		s.State = Stale
	case old(s.Heartbeat) || len(s.SilentLoops) > 0:
		s.State = Silent
	}
}

func field(mem []byte, off int) uint32 { return u32(mem, off).Load() }

func parse(mem []byte) (*Snapshot, error) {
	if len(mem) < HeaderSize || string(mem[:len(Magic)]) != Magic {
		return nil, ErrFormat
	}
	if v := le.Uint32(mem[hVersion:]); v != Version {
		return nil, fmt.Errorf("%w (layout version %d, this reader knows %d)", ErrFormat, v, Version)
	}
	area := func(sizeOff, nOff, offOff int, want int) (off, n int, err error) {
		size, cnt, o := int(field(mem, sizeOff)), int(field(mem, nOff)), int(field(mem, offOff))
		if size != want || o < HeaderSize || o%8 != 0 || cnt < 0 || cnt > 1<<20 || o+cnt*size > len(mem) {
			return 0, 0, fmt.Errorf("%w (area at %d: %d × %d bytes in a %d-byte file)", ErrFormat, o, cnt, size, len(mem))
		}
		return o, cnt, nil
	}
	sOff, sN, err := area(hSlotSize, hSlots, hSlotsOff, SlotSize)
	if err != nil {
		return nil, err
	}
	lOff, lN, err := area(hLossSize, hLossN, hLossOff, LossSize)
	if err != nil {
		return nil, err
	}
	eOff, eN, err := area(hErrSize, hErrN, hErrOff, ErrorSize)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{
		PID:       int(le.Uint64(mem[hPID:])),
		Start:     int64(le.Uint64(mem[hStart:])),
		Heartbeat: int64(u64(mem, hHeartbeat).Load()),
		Command:   strings.TrimRight(string(mem[hCmd:hCmd+cmdMax]), "\x00"),
	}
	high := min(int(u64(mem, hSlotsHigh).Load()), sN)
	for i := 0; i < high; i++ {
		off := sOff + i*SlotSize
		if v, ok := readSlot(mem, off); ok {
			s.Values = append(s.Values, v)
		}
	}
	s.LossTotal = u64(mem, hLossHead).Load()
	for i := 0; i < lN; i++ {
		if e, n, ok := readLoss(mem, lOff+i*LossSize); ok && n > 0 && n <= s.LossTotal {
			s.Loss = append(s.Loss, e)
		}
	}
	sort.Slice(s.Loss, func(i, j int) bool { return s.Loss[i].At < s.Loss[j].At })
	for i := 0; i < eN; i++ {
		if e, ok := readError(mem, eOff+i*ErrorSize); ok {
			s.Errors = append(s.Errors, e)
		}
	}
	s.ErrorsDropped = u64(mem, hErrDropped).Load()
	return s, nil
}

// stable runs read between two loads of the generation at gen and
// reports whether nothing was written meanwhile (two tries).
func stable(mem []byte, gen int, read func()) bool {
	for try := 0; try < 2; try++ {
		g := u32(mem, gen).Load()
		if g&1 != 0 {
			continue
		}
		read()
		if u32(mem, gen).Load() == g {
			return true
		}
	}
	return false
}

func readSlot(mem []byte, off int) (Value, bool) {
	var v Value
	var meta uint32
	var label []byte
	ok := stable(mem, off+8, func() {
		meta = u32(mem, off+12).Load()
		n := min(int(meta>>8&0xff), LabelMax)
		label = append(label[:0], mem[off+16:off+16+n]...)
		v.Value = u64(mem, off).Load()
	})
	v.Kind = Kind(meta)
	if !ok || v.Kind == 0 || len(label) == 0 {
		return Value{}, false
	}
	v.Label = string(label)
	v.Name, v.Labels, ok = ParseLabel(v.Label)
	return v, ok
}

func readLoss(mem []byte, off int) (Loss, uint64, bool) {
	var e Loss
	var n uint64
	ok := stable(mem, off, func() {
		e.Stream = u32(mem, off+4).Load()
		e.First = u64(mem, off+8).Load()
		e.Count = u64(mem, off+16).Load()
		e.At = int64(u64(mem, off+24).Load())
		e.Done = int64(u64(mem, off+32).Load())
		e.Naks = u64(mem, off+40).Load()
		meta := u32(mem, off+48).Load()
		e.Role, e.Repair = Role(meta), Repair(meta>>8)
		n = u64(mem, off+56).Load()
	})
	return e, n, ok
}

func readError(mem []byte, off int) (Error, bool) {
	var e Error
	var msg []byte
	ok := stable(mem, off, func() {
		e.Count = u64(mem, off+8).Load()
		e.Stream = u32(mem, off+4).Load()
		e.First = int64(u64(mem, off+16).Load())
		e.Last = int64(u64(mem, off+24).Load())
		meta := u32(mem, off+32).Load()
		e.Role = Role(meta)
		n := min(int(meta>>8&0xff), MessageMax)
		msg = append(msg[:0], mem[off+40:off+40+n]...)
	})
	if !ok || e.Count == 0 {
		return Error{}, false
	}
	e.Message = string(msg)
	return e, true
}

// ParseLabel splits name{key="value",…} into the name and the pairs;
// ok is false for anything else (a reader skips such a slot).
func ParseLabel(s string) (name string, labels map[string]string, ok bool) {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return s, nil, validName(s)
	}
	if !strings.HasSuffix(s, "}") {
		return "", nil, false
	}
	name, rest := s[:i], s[i+1:len(s)-1]
	if !validName(name) {
		return "", nil, false
	}
	labels = map[string]string{}
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
			return "", nil, false
		}
		k := rest[:eq]
		end := strings.IndexByte(rest[eq+2:], '"')
		if end < 0 || !validName(k) {
			return "", nil, false
		}
		labels[k] = rest[eq+2 : eq+2+end]
		rest = rest[eq+2+end+1:]
		if rest != "" {
			if rest[0] != ',' {
				return "", nil, false
			}
			rest = rest[1:]
		}
	}
	return name, labels, true
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// List reads every counters file in dir (a missing dir: none), sorted by
// pid. Files that cannot be read are returned in bad with the reason.
func List(dir string) (snaps []*Snapshot, bad map[string]error, err error) {
	if dir == "" {
		dir = DefaultDir()
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+Suffix))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	for _, n := range names {
		s, err := Read(n)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[n] = err
			continue
		}
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].PID < snaps[j].PID })
	return snaps, bad, nil
}

// PIDOf is the pid a counters file's name carries (0: not one).
func PIDOf(path string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), Suffix))
	if err != nil {
		return 0
	}
	return n
}
