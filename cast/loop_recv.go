package cast

import "time"

// senderRecvGap is how long a sender-only loop that keeps sending full
// batches may go without reading its path: NAKs and Status wait at most
// this long (plus an iteration), and a blast at full speed saves most of
// its empty reads, each a system call.
const senderRecvGap = 20 * time.Microsecond

// recvDue reports whether this iteration reads the path: always, unless
// the loop has only a Sender, its last flush sent a full batch (it is
// blasting: the iteration will send again) and it read less than
// senderRecvGap ago.
func (l *Loop) recvDue() bool {
	return l.rcv != nil || !l.fullSend || l.now-l.recvAt >= int64(senderRecvGap)
}
