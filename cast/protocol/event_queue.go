package protocol

// maxEvents is how many unread events a Sender or Receiver keeps.
const maxEvents = 32

// eventQueue is the bounded FIFO that NextEvent drains, for the
// Sender's and the Receiver's events alike. A full queue drops the new
// event (push returns false and the caller counts it); a push may keep
// slots free for events that must not be dropped.
//
// Invariant: 0 ≤ n ≤ maxEvents and 0 ≤ head < maxEvents; the unread
// events are q[head], q[head+1], … (mod maxEvents), oldest first.
type eventQueue[E any] struct {
	q       [maxEvents]E
	head, n int
}

// push queues e unless fewer than reserve+1 slots are free (false).
func (q *eventQueue[E]) push(e E, reserve int) bool {
	if q.n+reserve >= len(q.q) {
		return false
	}
	q.q[(q.head+q.n)%len(q.q)] = e
	q.n++
	return true
}

// pop returns the oldest unread event.
func (q *eventQueue[E]) pop() (E, bool) {
	if q.n == 0 {
		var zero E
		return zero, false
	}
	e := q.q[q.head]
	q.head = (q.head + 1) % len(q.q)
	q.n--
	return e, true
}
