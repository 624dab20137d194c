package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wal/internal/unix"
	"github.com/walcast/walcast/wire"
)

// Seq reservation. Append hands a frame to the sender before it is durable,
// so a crash can lose records that are already on the wire. Their seqs must
// never carry other content, so no seq is handed out before it is covered
// by a durable reservation: the I/O goroutine keeps the reservation
// SeqReserve seqs ahead of the appender (one small write + fdatasync every
// SeqReserve/2 records, never on the appender's thread). After a crash,
// Open continues past the reservation and writes a Skip marker for the
// seqs in between (see [wire.Skip]); a clean Close shrinks the reservation to
// the durable seq, so a clean restart writes no marker.
//
// File <sid>.seq: two 32-byte slots written alternately, each
// "WALSEQ01", reserved seq u64, generation u64, CRC-32C of the first 24
// bytes u32, 4 zero bytes. Open takes the valid slot with the higher
// generation: a torn write leaves the other slot, whose older reservation
// still bounds every seq handed out (the newer one was not yet in use).

const (
	seqSlotSize = 32
	seqFileSize = 2 * seqSlotSize
)

var seqMagic = [8]byte{'W', 'A', 'L', 'S', 'E', 'Q', '0', '1'}

func seqFileName(stream uint32) string { return fmt.Sprintf("%d.seq", stream) }

// readReservation returns the reservation and generation recorded in
// path (0, 0 when the file is missing or holds no valid slot).
func readReservation(path string) (reserved, gen uint64, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("wal: read %s: %w", path, err)
	}
	for off := 0; off+seqSlotSize <= len(b) && off < seqFileSize; off += seqSlotSize {
		sl := b[off : off+seqSlotSize]
		if [8]byte(sl[0:8]) != seqMagic || binary.LittleEndian.Uint32(sl[24:]) != wire.CRC(sl[:24]) {
			continue
		}
		if g := binary.LittleEndian.Uint64(sl[16:]); g >= gen {
			reserved, gen = binary.LittleEndian.Uint64(sl[8:]), g
		}
	}
	return reserved, gen, nil
}

// openReservation opens (creating) the reservation file for writing;
// Open calls it once the log is known whole, after readReservation.
func (w *Writer) openReservation() error {
	path := filepath.Join(w.dir, seqFileName(w.cfg.Stream))
	_, gen, err := readReservation(path)
	if err != nil {
		return err
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", path, err)
	}
	w.seqFd, w.seqGen = fd, gen
	return nil
}

// writeReservation makes r the durable reservation (it may be lower than
// the current one only when everything appended is durable: Close).
func (w *Writer) writeReservation(r uint64) error {
	if w.seqFd < 0 {
		return fmt.Errorf("wal: seq reservation file is not open")
	}
	g := w.seqGen + 1
	var sl [seqSlotSize]byte
	copy(sl[0:8], seqMagic[:])
	binary.LittleEndian.PutUint64(sl[8:], r)
	binary.LittleEndian.PutUint64(sl[16:], g)
	binary.LittleEndian.PutUint32(sl[24:], wire.CRC(sl[:24]))
	if err := pwriteFull(unix.Pwrite, w.seqFd, sl[:], int64(g&1)*seqSlotSize); err != nil {
		return fmt.Errorf("wal: write seq reservation: %w", err)
	}
	if err := w.sys.datasync(w.seqFd); err != nil {
		return fmt.Errorf("wal: fdatasync seq reservation: %w", err)
	}
	w.seqGen = g
	w.reserved.Store(r)
	return nil
}

// reserveAhead runs on the I/O goroutine: when the appender has used half
// of the reservation's lead it extends it to published + SeqReserve and
// wakes appenders waiting for it. It reports whether it extended.
func (w *Writer) reserveAhead() (bool, error) {
	pub := w.published.Load()
	lead := uint64(w.cfg.SeqReserve)
	if pub+lead/2 < w.reserved.Load() {
		return false, nil
	}
	if err := w.writeReservation(pub + lead); err != nil {
		return false, err
	}
	return true, nil
}

// skipPast continues a log that was not closed cleanly after its
// reservation r: the active segment is sealed if it holds records, and the
// next one starts at r+1 with a Skip marker (From = durable + 1) that
// writeSkip appends once the I/O goroutine runs.
func (w *Writer) skipPast(r uint64) error {
	from := w.committed + 1
	if w.act.count() > 0 {
		if err := w.rotate(); err != nil {
			return fmt.Errorf("wal: open: seal the active segment before a Skip: %w", err)
		}
	}
	w.committed = r
	w.act.first, w.act.last = r+1, r
	if w.actIdxFd >= 0 {
		unix.Close(w.actIdxFd)
	}
	w.actIdxFd = createActiveIdx(idxName(w.act.path), r+1, nil)
	sk := wire.Skip{Seq: r + 1, From: from, Reason: wire.SkipRestart}
	w.skipFrame = make([]byte, wire.SkipFrameSize)
	wire.PutSkipFrame(w.skipFrame, sk)
	w.st.recovery.Skip = &sk
	return nil
}

// writeSkip appends the Skip marker prepared by skipPast and waits until
// it is durable: nothing is handed out before it.
func (w *Writer) writeSkip() error {
	f, err := w.Append(wire.TypeSkip, w.skipFrame[wire.HeaderSize:])
	if err != nil {
		return fmt.Errorf("wal: open: append Skip marker: %w", err)
	}
	if wire.Seq(f[wire.HeaderSize:]) != wire.Seq(w.skipFrame[wire.HeaderSize:]) {
		return fmt.Errorf("wal: open: Skip marker got seq %d, want %d", wire.Seq(f[wire.HeaderSize:]), wire.Seq(w.skipFrame[wire.HeaderSize:]))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("wal: open: write Skip marker: %w", err)
	}
	return nil
}

// Skipped returns the Skip marker frame (header and payload) Open wrote
// because the log had not been closed cleanly, or nil. A sender sends it
// before its first record, so receivers learn which seqs never became
// durable. The slice is the Writer's; do not modify it.
func (w *Writer) Skipped() []byte { return w.skipFrame }
