package protocol

import "testing"

// TestEventQueue: events come out oldest first across the ring's wrap,
// a full queue refuses the new event (a push that keeps slots free, once
// only those are left), and an empty one returns none.
func TestEventQueue(t *testing.T) {
	var q eventQueue[int]
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue")
	}
	next, want := 1, 1
	for _, c := range []struct{ push, pop int }{{20, 15}, {27, 0}, {1, 32}, {40, 40}} {
		for range c.push {
			ok := q.push(next, 0)
			if full := q.n == maxEvents && !ok; !ok && !full {
				t.Fatalf("push %d refused with %d queued", next, q.n)
			}
			if ok {
				next++
			}
		}
		for range c.pop {
			e, ok := q.pop()
			if !ok {
				break
			}
			if e != want {
				t.Fatalf("pop %d, want %d", e, want)
			}
			want++
		}
		if q.n < 0 || q.n > maxEvents || q.head < 0 || q.head >= maxEvents {
			t.Fatalf("head %d n %d", q.head, q.n)
		}
	}
	if next-want != q.n || q.n != 0 {
		t.Fatalf("%d pushed, %d popped, %d queued", next-1, want-1, q.n)
	}
	// A push that keeps a slot free stops one short; one that keeps none
	// takes that slot.
	for i := range maxEvents - 1 {
		if !q.push(i, 1) {
			t.Fatalf("push %d of %d refused", i, maxEvents-1)
		}
	}
	if q.push(-1, 1) || !q.push(-2, 0) || q.push(-3, 0) {
		t.Fatalf("the last slot: %d queued", q.n)
	}
}
