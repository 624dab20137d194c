package counters

import (
	"runtime/debug"
	"time"
)

// Flush copies the counters into the file now, for a reader that must
// see the latest values (the sampler does it every SampleInterval).
func (f *File) Flush() {
	if f != nil {
		f.mirror()
	}
}

// mirror copies the process's counters (mem) into the file's mapping
// (shared) for readers: the header, the slots in use, the loss ring and
// the error log. Writers never touch the mapping, so a reader that cuts
// the file short cannot fault them; the fault lands here, on the
// sampler goroutine, which recovers, gives the file its size back and
// copies everything again the next time.
//
// Each slot, loss entry and error entry is copied under its generation
// (a seqlock, as the writers do): when the mapping's generation differs
// from mem's, it is made odd, the entry copied, then set to mem's; an
// entry whose generation did not change gets only its changing words
// (a slot's value; an error's count and last time). Values are copied as
// whole aligned words, so a reader never sees a torn one.
func (f *File) mirror() {
	if f.shared == nil {
		return
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if !f.inShared(r) {
			panic(r)
		}
		f.repair()
	}()
	f.mu.Lock() // labels and error messages are written under it
	defer f.mu.Unlock()
	m, s := f.mem, f.shared
	high := min(int(u64(m, hSlotsHigh).Load()), Slots)
	for i := 0; i < high; i++ {
		off := slotsOff + i*SlotSize
		g := u32(m, off+8).Load()
		if g&1 != 0 {
			continue // being labelled: the next mirror copies it
		}
		if u32(s, off+8).Load() != g {
			copyEntry(s, m, off+8, off+12, off+SlotSize, g)
		}
		u64(s, off).Store(u64(m, off).Load())
	}
	n := min(u64(m, hLossHead).Load(), LossEntries)
	for i := 0; i < int(n); i++ {
		off := lossOff + i*LossSize
		if g := u32(m, off).Load(); g&1 == 0 && u32(s, off).Load() != g {
			copyEntry(s, m, off, off+4, off+LossSize, g)
		}
	}
	for i := 0; i < ErrorSlots; i++ {
		off := errorsOff + i*ErrorSize
		g := u32(m, off).Load()
		if g&1 != 0 || u64(m, off+8).Load() == 0 {
			continue
		}
		if u32(s, off).Load() != g {
			copyEntry(s, m, off, off+4, off+ErrorSize, g)
		}
		u64(s, off+8).Store(u64(m, off+8).Load())
		u64(s, off+24).Store(u64(m, off+24).Load())
	}
	// The header last: a reader that finds a slot count or an episode
	// number finds what they count.
	for off := 0; off < HeaderSize; off += 8 {
		u64(s, off).Store(u64(m, off).Load())
	}
}

// copyEntry copies the entry bytes [from, to) of m into s under the
// generation at gen (a u32): odd while it copies, g after, or still odd
// if m's entry changed meanwhile (a loss episode closing: the next
// mirror copies it). from is 4-byte aligned; the rest is copied in words.
func copyEntry(s, m []byte, gen, from, to int, g uint32) {
	u32(s, gen).Store(g - 1) // odd: g is even and ≥ 2
	if from%8 != 0 {
		u32(s, from).Store(u32(m, from).Load())
		from += 4
	}
	for off := from; off < to; off += 8 {
		u64(s, off).Store(u64(m, off).Load())
	}
	if u32(m, gen).Load() == g {
		u32(s, gen).Store(g)
	}
}

// inShared reports whether r is a fault at an address of the mapping.
func (f *File) inShared(r any) bool {
	a, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return false
	}
	lo := addrOf(f.shared)
	return a.Addr() >= lo && a.Addr() < lo+uintptr(len(f.shared))
}

// repair gives the file back the size and pages someone took away, and
// notes it in the error log. The mirror then rewrites every entry (the
// mapping's generations are zero again).
func (f *File) repair() {
	f.mu.Lock()
	cut, err := restore(f.fd, len(f.shared))
	f.repairs++
	f.mu.Unlock()
	msg := "counters file was cut short by another process: restored"
	switch {
	case err != nil:
		msg = "counters file was cut short by another process and cannot be restored: " + err.Error()
	case !cut:
		msg = "counters file mapping faulted (its file system is full?)"
	}
	f.Error(0, RoleNone, msg, time.Now().UnixNano())
}
