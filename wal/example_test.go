package wal_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// Append assigns each record the next seq and stamps it into the first 8
// bytes of the payload (its own copy); the returned frame — 16-byte
// header plus payload — is the exact bytes that go on the wire and to
// disk. Flush makes everything appended durable.
func ExampleWriter_Append() {
	dir, _ := os.MkdirTemp("", "wal-example-")
	defer os.RemoveAll(dir)
	w, err := wal.Open(wal.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for _, text := range []string{"first", "second", "third"} {
		payload := append(make([]byte, 8), text...) // bytes 0..7: the seq, filled in by Append
		frame, err := w.Append(100, payload)
		if err != nil {
			log.Fatal(err) // wal.ErrBackpressure: the disk is behind, try again later
		}
		h, p, _, _ := wire.DecodeFrame(frame)
		fmt.Printf("seq %d: type %d, %d-byte payload %q, frame %d bytes\n", wire.Seq(p), h.Type, h.Len, p[8:], len(frame))
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable through seq", w.Durable())
	// Output:
	// seq 1: type 100, 13-byte payload "first", frame 29 bytes
	// seq 2: type 100, 14-byte payload "second", frame 30 bytes
	// seq 3: type 100, 13-byte payload "third", frame 29 bytes
	// durable through seq 3
}

// ReadAt reads one record by its seq — from the buffer while it is not
// yet written, else with one index lookup and one read — and checks its
// CRC; a seq never written is ErrNotFound.
func ExampleWriter_ReadAt() {
	dir, _ := os.MkdirTemp("", "wal-example-")
	defer os.RemoveAll(dir)
	w, err := wal.Open(wal.Config{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for i := range 1000 {
		if _, err := w.Append(100, fmt.Appendf(make([]byte, 8), "record %d", i+1)); err != nil {
			log.Fatal(err)
		}
	}
	w.Flush()
	buf := make([]byte, 16+wire.MaxPayload)
	n, err := w.ReadAt(742, buf)
	if err != nil {
		log.Fatal(err)
	}
	_, p, _, _ := wire.DecodeFrame(buf[:n])
	fmt.Printf("seq %d: %s\n", wire.Seq(p), p[8:])
	_, err = w.ReadAt(1001, buf)
	fmt.Println(errors.Is(err, wal.ErrNotFound))
	// Output:
	// seq 742: record 742
	// true
}

// A Reader walks a stream's durable records in seq order from any seq,
// across segments, and returns io.EOF at the end of what is durable (a
// later Next returns what has been written since).
func ExampleReader() {
	dir, _ := os.MkdirTemp("", "wal-example-")
	defer os.RemoveAll(dir)
	w, err := wal.Open(wal.Config{Dir: dir, Stream: 7, SegmentSize: wal.MinSegmentSize}) // small segments: several files
	if err != nil {
		log.Fatal(err)
	}
	for i := range 500 {
		if _, err := w.Append(100, fmt.Appendf(make([]byte, 8), "record %d", i+1)); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil { // Close flushes
		log.Fatal(err)
	}
	segs, _ := wal.ListSegments(wal.StreamDir(dir, 7), 7)
	r, err := wal.OpenReader(dir, 7, 498)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		frame, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		_, p, _, _ := wire.DecodeFrame(frame)
		fmt.Printf("%d: %s\n", wire.Seq(p), p[8:])
	}
	fmt.Println(len(segs) > 1)
	// Output:
	// 498: record 498
	// 499: record 499
	// 500: record 500
	// true
}
