// Package counters publishes a process's walcast counters in a
// memory-mapped file that other processes read while it runs: the
// process's loops write plain atomic stores into fixed slots of the
// process's own memory, a sampler goroutine copies them into the file
// every [SampleInterval], and `cast stat` (or [Read]) maps the file
// read-only and prints them. It is walcast's equivalent of Aeron's CnC
// counters file.
//
// One file per process and directory ([Acquire]); every loop of the
// process takes its slots from it and gives them back when it stops. The
// last [File.Release] removes the file; a process that was killed leaves
// it behind, and a reader reports it stale (its pid is gone).
//
// The layout is fixed, little-endian and versioned (docs/operate.md
// documents every field):
//
//	header   512 bytes: magic "WALCNTRS", layout version, pid, start and
//	         heartbeat time (Unix ns), the areas' offsets and sizes, the
//	         process's command line
//	slots    4096 × 128 bytes: u64 value, u32 generation, u32 kind and
//	         label length, then the label: name{key="value",…}
//	loss     1024 × 64 bytes: a ring of the last loss episodes
//	errors   64 × 256 bytes: distinct errors with count, first and last time
//
// Writers never read what a reader does (a reader's mapping is
// read-only; nothing flows back), and they never touch the file: a
// reader that truncates it, or a file system that fills up, faults at
// most the sampler's copy, which recovers and restores the file (its
// pages are all allocated when it is made; a file system without room
// for it leaves the counters in process memory, [File.Err] says why). So
// no reader can stall or crash a writer. A slot's generation is odd
// while its label is written: a reader that sees it odd, or changed
// across its read, skips the slot.
//
// What must not happen here: a lock, an allocation or a system call on
// [Counter.Store] (the loop's hot path); a writer touching the file's
// mapping, or depending on a reader.
//
// Off unix systems the slots live in process memory only ([File.Err] is
// [ErrNotSupported]).
package counters
