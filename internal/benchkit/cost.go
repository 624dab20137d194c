package benchkit

// CostRows are the rows of the per-record cost breakdown, in the order
// the layers add up: each row is the one before plus one layer, but for
// floor+frame, which is the floor plus the wire format's own per-record
// work (a bound for any implementation, ours or not), and wal-alone.
//
//	floor-gso-gro   raw sendto with UDP_SEGMENT / recvmsg with UDP_GRO,
//	                the floor's sockets and system calls
//	floor+frame     the same, each record copied into a ring of the hot
//	                ring's size and sealed (seq, header, CRC32C) on send,
//	                decoded and checked on receive: the least a sender
//	                that retransmits from memory and a receiver that
//	                checks the CRC can do per record
//	datapath        datapath/mmsg (batch.Vec, sendmmsg+GSO, recvmmsg+GRO)
//	+framing/crc    the same, each record sealed (16-byte header, CRC32C
//	                of the payload) on send and decoded and checked on receive
//	+ring-copy      the same, each record first copied from the producer's
//	                buffer into the next slot of a ring the hot ring's size
//	                (the batch: views of those slots), as the Sender does
//	casting-noflow  cast.Loop on each side with the protocol Sender (hot
//	                ring copy, seqs, batching) and Receiver (reorder,
//	                deliver); no flow control and no Status frames (the
//	                row's own window keeps the sender within the receiver)
//	casting         the same with flow control and Status (the defaults)
//	casting+wal     the same with every record appended to a WAL first
//	                (wal.Writer as the Sender's log; its I/O goroutine
//	                writes and syncs)
//	wal-alone       the WAL without the network: one thread appends
var CostRows = []string{"floor-gso-gro", "floor+frame", "datapath", "+framing/crc", "+ring-copy", "casting-noflow", "casting", "casting+wal", "wal-alone"}

// CostSide is what one measured thread spent during a cost row's
// traffic, from the kernel's account of the thread's run time.
type CostSide struct {
	CPU   int64  // thread CPU time, ns
	Idle  uint64 // polls that found nothing to do
	Iters uint64 // polls in all (0: not counted)
	// IdleCPU is the part of CPU spent in idle polls: each poll reads
	// the thread's CPU clock once, and the time since the previous read
	// goes to that poll.
	IdleCPU int64
}

// Work is the thread's CPU time less its idle polls: what moving the
// records cost it. A spinning thread's CPU time is its wall time; the
// side that waits for the other polls idle for part of it.
func (s CostSide) Work() float64 {
	return float64(s.CPU - s.IdleCPU)
}

// CostRow is one row of the cost breakdown: a layer stack moving
// records one way, with the CPU each side spent per record.
type CostRow struct {
	Name       string
	Size       int   // frame bytes
	Sent       int64 // records the sender handed on
	Delivered  int64 // records the receiver got (in order, for the protocol rows)
	Seconds    float64
	Send, Recv CostSide
	// Other is the CPU time of every other thread of the process over
	// the traffic (the WAL's I/O goroutine, the Go runtime), ns: the
	// sum of their schedstat run times (a thread that ended meanwhile
	// is missing).
	Other int64
	// Softirq is the CPU time of the kernel's ksoftirqd threads over the
	// traffic, ns, machine-wide: network work the kernel deferred there
	// instead of running it in the sender's or receiver's context.
	Softirq int64
	Note    string
	Run     int
}

// SendNS and RecvNS are the sender's work per record sent and the
// receiver's per record delivered; OtherNS and SoftirqNS the other
// threads' and ksoftirqd's CPU per record delivered.
func (r CostRow) SendNS() float64 { return per(r.Send.Work(), r.Sent) }

// RecvNS is the receiver thread's work per record delivered.
func (r CostRow) RecvNS() float64 { return per(r.Recv.Work(), r.Delivered) }

// OtherNS is the other threads' CPU per record delivered.
func (r CostRow) OtherNS() float64 {
	n := r.Delivered
	if n == 0 {
		n = r.Sent
	}
	return per(float64(r.Other), n)
}

// SoftirqNS is ksoftirqd's CPU per record delivered.
func (r CostRow) SoftirqNS() float64 { return per(float64(r.Softirq), max(r.Delivered, r.Sent)) }

// TotalNS is the row's CPU per record: sender, receiver and the other
// threads (ksoftirqd apart: it is machine-wide).
func (r CostRow) TotalNS() float64 { return r.SendNS() + r.RecvNS() + r.OtherNS() }

// RecPerS is the records delivered per second of traffic.
func (r CostRow) RecPerS() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(max(r.Delivered, r.Sent*boolInt(r.Delivered == 0))) / r.Seconds
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func per(ns float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return ns / float64(n)
}
