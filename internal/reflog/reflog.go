// Package reflog writes and reads WAL directories the way the reference
// implementation (rsx-cast) does, for tests that take over a reference
// log or hand one back: it shares no code with package wal, so a test
// checks wal against an independent reading of the format (spec §6).
//
// Write reproduces the reference writer's rotation, including its
// pre-write mislabel: when a flush batch does not fit, the full segment is
// renamed with a last seq that already counts the batch still in memory,
// and that batch is written to the next segment, whose first seq is set
// above it. So every segment sealed that way is named one batch further
// than it holds. ReadAll is a strict sequential reader: every byte of
// every file must be a frame.
package reflog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Options of Write; zero fields take the values in brackets.
type Options struct {
	Records     int   // records to write [100000]
	Payload     int   // payload bytes per record, ≥ 8 [64]
	SegmentSize int64 // rotation threshold in bytes [1 MiB]
	Batch       int   // records per flush [1000]
	Type        uint16
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame builds one frame: 16-byte header (version 1, type, len, CRC-32C
// of the payload) and a payload whose first 8 bytes are seq.
func Frame(typ uint16, seq uint64, payload int) []byte {
	b := make([]byte, 16+payload)
	p := b[16:]
	binary.LittleEndian.PutUint64(p, seq)
	for i := 8; i < len(p); i++ {
		p[i] = byte(seq*7 + uint64(i))
	}
	b[0] = 1
	binary.LittleEndian.PutUint16(b[2:], typ)
	binary.LittleEndian.PutUint16(b[4:], uint16(payload))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(p, castagnoli))
	return b
}

// Write writes a log of stream into root/<stream>/ as the reference
// writer does (spec §6.2–6.3): records buffered and flushed every Batch
// records, a pre-write rotation when the active file is not empty and
// size + buffered ≥ SegmentSize (named with last = the last seq assigned,
// buffered ones included), a post-write rotation when size ≥ SegmentSize.
// It returns the names of the sealed segments in order.
func Write(root string, stream uint32, o Options) ([]string, error) {
	if o.Records == 0 {
		o.Records = 100000
	}
	if o.Payload == 0 {
		o.Payload = 64
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 20
	}
	if o.Batch == 0 {
		o.Batch = 1000
	}
	if o.Type == 0 {
		o.Type = 100
	}
	dir := filepath.Join(root, strconv.FormatUint(uint64(stream), 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	active := filepath.Join(dir, fmt.Sprintf("%d_active.wal", stream))
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var sealed []string
	var size int64
	firstSeq, nextSeq := uint64(1), uint64(1)
	rotate := func() error {
		if err := f.Sync(); err != nil {
			return err
		}
		f.Close()
		name := fmt.Sprintf("%d_%d_%d.wal", stream, firstSeq, nextSeq-1)
		if err := os.Rename(active, filepath.Join(dir, name)); err != nil {
			return err
		}
		sealed = append(sealed, name)
		if f, err = os.OpenFile(active, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			return err
		}
		size, firstSeq = 0, nextSeq
		return nil
	}
	var buf []byte
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if size > 0 && size+int64(len(buf)) >= o.SegmentSize {
			if err := rotate(); err != nil { // pre-write: nextSeq counts the buffer
				return err
			}
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
		size += int64(len(buf))
		buf = buf[:0]
		if size >= o.SegmentSize {
			return rotate()
		}
		return nil
	}
	for i := 0; i < o.Records; i++ {
		buf = append(buf, Frame(o.Type, nextSeq, o.Payload)...)
		nextSeq++
		if (i+1)%o.Batch == 0 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return sealed, f.Close()
}

// ErrMalformed is what ReadAll returns for bytes that are not a frame
// (the reference's sequential reader ends with "malformed header").
var ErrMalformed = errors.New("reflog: malformed header")

// ReadAll reads every file of stream under root/<stream>/ in the
// reference's file order (sealed segments by the first seq of their
// name, then the active file) and checks each frame strictly: a header
// of version 1, the whole payload present, its CRC. It returns the number
// of records, the seqs of the first and last, and the first problem
// (nil for a clean end: the last byte of the last file ends a frame).
// Seqs must increase by one from record to record.
func ReadAll(root string, stream uint32) (n int, first, last uint64, err error) {
	dir := filepath.Join(root, strconv.FormatUint(uint64(stream), 10))
	files, err := Files(dir, stream)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return n, first, last, err
		}
		for off := 0; off < len(b); {
			if len(b)-off < 16 || b[off] != 1 {
				return n, first, last, fmt.Errorf("%s offset %d: %w", filepath.Base(p), off, ErrMalformed)
			}
			l := int(binary.LittleEndian.Uint16(b[off+4:]))
			if len(b)-off-16 < l || l < 8 {
				return n, first, last, fmt.Errorf("%s offset %d: %w", filepath.Base(p), off, io.ErrUnexpectedEOF)
			}
			pl := b[off+16 : off+16+l]
			if crc32.Checksum(pl, castagnoli) != binary.LittleEndian.Uint32(b[off+8:]) {
				return n, first, last, fmt.Errorf("%s offset %d: CRC mismatch", filepath.Base(p), off)
			}
			seq := binary.LittleEndian.Uint64(pl)
			if n > 0 && seq != last+1 {
				return n, first, last, fmt.Errorf("%s offset %d: seq %d after %d", filepath.Base(p), off, seq, last)
			}
			if n == 0 {
				first = seq
			}
			last = seq
			n++
			off += 16 + l
		}
	}
	return n, first, last, nil
}

// Files lists the segment files of stream in dir in the reference's
// order: names <sid>_<first>_<last>.wal by first, then <sid>_active.wal.
func Files(dir string, stream uint32) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type seg struct {
		first uint64
		path  string
	}
	var sealed []seg
	var active string
	sid := strconv.FormatUint(uint64(stream), 10)
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok || e.IsDir() {
			continue
		}
		if stem == sid+"_active" {
			active = filepath.Join(dir, e.Name())
			continue
		}
		parts := strings.Split(stem, "_")
		if len(parts) != 3 || parts[0] != sid {
			continue
		}
		a, err1 := strconv.ParseUint(parts[1], 10, 64)
		_, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		sealed = append(sealed, seg{a, filepath.Join(dir, e.Name())})
	}
	sort.Slice(sealed, func(i, j int) bool { return sealed[i].first < sealed[j].first })
	var out []string
	for _, s := range sealed {
		out = append(out, s.path)
	}
	if active != "" {
		out = append(out, active)
	}
	return out, nil
}
