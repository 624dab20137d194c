package counters

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
)

// Magic opens every counters file.
const Magic = "WALCNTRS"

// Version is the layout version this package writes and reads.
const Version = 1

// Layout sizes, bytes and entries (see the package comment).
const (
	HeaderSize  = 512
	SlotSize    = 128
	Slots       = 4096
	LossSize    = 64
	LossEntries = 1024
	ErrorSize   = 256
	ErrorSlots  = 64

	// LabelMax is the longest slot label, bytes.
	LabelMax = SlotSize - 16
	// MessageMax is the longest error message kept, bytes.
	MessageMax = ErrorSize - 40

	slotsOff  = HeaderSize
	lossOff   = slotsOff + Slots*SlotSize
	errorsOff = lossOff + LossEntries*LossSize
	fileSize  = errorsOff + ErrorSlots*ErrorSize
)

// Header field offsets.
const (
	hMagic      = 0
	hVersion    = 8
	hHeaderSize = 12
	hPID        = 16
	hStart      = 24
	hHeartbeat  = 32
	hSlotSize   = 40
	hSlots      = 44
	hSlotsOff   = 48
	hLossSize   = 52
	hLossN      = 56
	hLossOff    = 60
	hErrSize    = 64
	hErrN       = 68
	hErrOff     = 72
	hLossHead   = 80 // u64: episodes written so far; the next goes to head % entries
	hErrDropped = 88 // u64: occurrences of errors that found no free entry
	hSlotsHigh  = 96 // u64: slots ever used (a reader scans up to it)
	hCmd        = 128
	cmdMax      = 128
)

// Suffix names counters files; a file being set up has a leading dot
// and is renamed when its header is complete.
const Suffix = ".counters"

// Kind says what a slot's value is.
type Kind uint8

const (
	KindCounter   Kind = 1 // only grows (a Prometheus counter)
	KindGauge     Kind = 2 // goes up and down
	KindCounterNs Kind = 3 // a counter of nanoseconds (exposed in seconds)
	KindGaugeNs   Kind = 4 // a gauge of nanoseconds (exposed in seconds)
	// KindHeartbeat is a writer thread's last sign of life, Unix ns (a
	// gauge, exposed in seconds): a reader calls the process Silent when
	// one is older than SilentAfter.
	KindHeartbeat Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindGauge:
		return "gauge"
	case KindCounterNs:
		return "counter_ns"
	case KindGaugeNs:
		return "gauge_ns"
	case KindHeartbeat:
		return "heartbeat"
	}
	return "unknown"
}

// IsCounter reports whether values of this kind only grow.
func (k Kind) IsCounter() bool { return k == KindCounter || k == KindCounterNs }

// IsNs reports whether values of this kind are nanoseconds (a duration,
// or for KindHeartbeat a Unix time).
func (k Kind) IsNs() bool { return k == KindCounterNs || k == KindGaugeNs || k == KindHeartbeat }

// Role is the side of a stream a loss episode or error belongs to.
type Role uint8

const (
	RoleNone     Role = 0
	RoleProducer Role = 1
	RoleConsumer Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleProducer:
		return "producer"
	case RoleConsumer:
		return "consumer"
	}
	return ""
}

// Repair says how a loss episode ended.
type Repair uint8

const (
	RepairOpen      Repair = 0 // not repaired yet
	RepairUDP       Repair = 1 // retransmits over UDP (the receiver cannot tell ring from WAL)
	RepairRing      Repair = 2 // the sender answered from its hot ring
	RepairWAL       Repair = 3 // the sender read the records back from its WAL
	RepairRingWAL   Repair = 4 // both
	RepairEscalated Repair = 5 // the receiver gave up on UDP (faulted, reconnect): TCP catch-up's turn
	RepairSkip      Repair = 6 // a Skip marker declared the seqs without a record
	RepairClosed    Repair = 7 // the loop stopped with the gap still open
	RepairReorder   Repair = 8 // filled with no NAK sent meanwhile: reordered, or repaired by an earlier NAK
	RepairNone      Repair = 9 // the producer answered the NAKs with no retransmit (deduplicated, never sent)
)

var repairNames = [...]string{"open", "udp", "ring", "wal", "ring_wal", "escalated", "skip", "closed", "without_nak", "none"}

func (r Repair) String() string {
	if int(r) < len(repairNames) {
		return repairNames[r]
	}
	return "unknown"
}

// ErrNotSupported: this platform has no shared memory mapping here; the
// counters live in process memory only.
var ErrNotSupported = errors.New("counters: not supported on this platform")

// ErrFull: every slot of the file is taken.
var ErrFull = errors.New("counters: all slots taken")

// ErrFormat: the file is not a counters file of a layout this package reads.
var ErrFormat = errors.New("counters: not a counters file of a known layout")

var le = binary.LittleEndian

// shmDir is where DefaultDir looks first: a memory file system, so the
// sampler's copies never reach a disk. A variable so tests can point it
// at a directory of their own.
var shmDir = "/dev/shm"

// DefaultDir is walcast under /dev/shm (memory, not disk) where that is
// usable, else walcast under os.TempDir(); or what SetDefault set.
// /dev/shm is usable when /dev/shm/walcast is already a directory, or
// /dev/shm is a directory this process may create entries in: a missing
// /dev/shm, or one mounted read-only or not writable by this user, falls
// back to the temporary directory. Writers and readers decide alike, so
// `cast stat` finds the files where the processes put them.
func DefaultDir() string {
	if d := processDefault.Load(); d != nil && d.Dir != "" {
		return d.Dir
	}
	return chooseDir(shmDir, os.TempDir())
}

// chooseDir is DefaultDir's choice between shm/walcast and tmp/walcast.
func chooseDir(shm, tmp string) string {
	dir := filepath.Join(shm, "walcast")
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && writable(shm) {
		return dir
	}
	return filepath.Join(tmp, "walcast")
}

// Config says where a process's counters go.
type Config struct {
	// Off writes no counters file.
	Off bool
	// Dir is the directory of the counters files (default DefaultDir()).
	// It is created with mode 0755, the file with 0644: any user can
	// read the counters; the processes of two users need a directory
	// both can write.
	Dir string
}

var processDefault atomic.Pointer[Config]

// SetDefault makes c what a zero Config means in this process (a Dir
// for DefaultDir, or Off). For programs that map an environment
// variable or flag onto it at start (cmd/cast reads WALCAST_COUNTERS);
// libraries leave it alone.
func SetDefault(c Config) { processDefault.Store(&c) }

// WithDefaults returns c with an empty Dir set to DefaultDir(); a zero
// c is the process default (SetDefault).
func (c Config) WithDefaults() Config {
	if d := processDefault.Load(); c == (Config{}) && d != nil {
		c = *d
	}
	if c.Dir == "" {
		c.Dir = DefaultDir()
	}
	return c
}
