package protocol

// Log is the part of the WAL writer the Sender needs; *wal.Writer
// satisfies it. Append assigns the next seq, stamps it into payload
// offset 0 of its own copy, seals the frame and returns it; the returned
// frame is valid until the next Append. NextSeq is the seq the next
// Append will assign.
type Log interface {
	Append(typ uint16, payload []byte) (frame []byte, err error)
	NextSeq() uint64
}

// Skipper is implemented by a Log that continued past seqs a crash left
// unused ((*wal.Writer).Skipped): it returns the Skip marker frame it
// wrote when it opened, or nil. The Sender sends the marker before its
// first record and answers NAKs for the skipped seqs with it.
type Skipper interface {
	Skipped() []byte
}

// LogHealth is implemented by a Log that can say it is failing
// ((*wal.Writer).Err): a non-nil Err means appends cannot become durable
// now (a full disk, an I/O error). The Sender then withholds heartbeats,
// so receivers see a silent stream instead of a healthy idle one.
type LogHealth interface {
	Err() error
}
