package batch

import "net/netip"

// Vec is a vector of up to Cap() datagrams backed by one preallocated slab.
// Messages 0..Len()-1 are in use. A message is either held in its own
// slot (Append, Commit, Set) or a view of memory the Vec does not own
// (AppendView: a datapath's receive buffer, a sender's retransmit ring),
// which its owner keeps unchanged while the message is in use. A Vec is
// not safe for concurrent use.
type Vec struct {
	bufs  [][]byte         // each of length slot+tail, carved from one slab
	msgs  [][]byte         // message i: a prefix of bufs[i], or a view
	addrs []netip.AddrPort // peer of message i: destination (send) or source (recv); zero = the connected peer
	n     int
	slot  int
}

// New returns a Vec of n messages of up to slot bytes each.
func New(n, slot int) *Vec { return NewTail(n, slot, 0) }

// NewTail returns a Vec of n messages of up to slot bytes each whose
// buffers have tail bytes more behind the slot: room for a trailer that
// the Vec's owner appends to a finished message (Buf, Set) and that the
// writers of messages (Next, Append, SlotSize) do not see.
func NewTail(n, slot, tail int) *Vec {
	if n <= 0 || slot <= 0 || tail < 0 {
		panic("batch: NewTail needs n > 0, slot > 0 and tail ≥ 0")
	}
	size := slot + tail
	slab := make([]byte, n*size)
	v := &Vec{
		bufs:  make([][]byte, n),
		msgs:  make([][]byte, n),
		addrs: make([]netip.AddrPort, n),
		slot:  slot,
	}
	for i := range v.bufs {
		v.bufs[i] = slab[i*size : (i+1)*size : (i+1)*size]
	}
	return v
}

// Cap is the number of messages the Vec can hold.
func (v *Vec) Cap() int { return len(v.bufs) }

// Len is the number of messages in use.
func (v *Vec) Len() int { return v.n }

// SlotSize is the size of each message buffer in bytes (a tail, see
// [NewTail], not counted).
func (v *Vec) SlotSize() int { return v.slot }

// Full reports whether every message slot is in use.
func (v *Vec) Full() bool { return v.n == len(v.bufs) }

// Reset marks every message unused. Buffers are kept.
func (v *Vec) Reset() { v.n = 0 }

// Msg returns message i (bytes in use; owned by the Vec, valid until the
// slot is reused) and its peer address.
func (v *Vec) Msg(i int) ([]byte, netip.AddrPort) {
	return v.msgs[i], v.addrs[i]
}

// Append copies p into the next free slot addressed to (or received from)
// addr. It returns false, copying nothing, when the Vec is full or p does
// not fit in a slot.
func (v *Vec) Append(p []byte, addr netip.AddrPort) bool {
	if v.n == len(v.bufs) || len(p) > v.slot {
		return false
	}
	v.msgs[v.n] = v.bufs[v.n][:copy(v.bufs[v.n], p)]
	v.setAddr(v.n, addr)
	v.n++
	return true
}

// AppendView adds p as the next message without copying it: the message
// is a view of p, which must stay unchanged until the Vec is reset or the
// message is sent or read. It returns false when the Vec is full or p
// does not fit in a slot (the same limits as Append).
func (v *Vec) AppendView(p []byte, addr netip.AddrPort) bool {
	if v.n == len(v.bufs) || len(p) > v.slot {
		return false
	}
	v.msgs[v.n] = p
	v.setAddr(v.n, addr)
	v.n++
	return true
}

// Owned reports whether message i is held in its own slot (Buf(i) holds
// its bytes), not a view.
func (v *Vec) Owned(i int) bool {
	m := v.msgs[i]
	return len(m) == 0 || &m[0] == &v.bufs[i][0]
}

// Own copies every view into its message's own slot, so that the Vec no
// longer refers to memory it does not own.
func (v *Vec) Own() {
	for i := 0; i < v.n; i++ {
		if !v.Owned(i) {
			v.msgs[i] = v.bufs[i][:copy(v.bufs[i], v.msgs[i])]
		}
	}
}

// Next returns the whole buffer of the next free slot, for a writer that
// encodes in place and then calls [Vec.Commit]; nil when the Vec is full.
func (v *Vec) Next() []byte {
	if v.n == len(v.bufs) {
		return nil
	}
	return v.bufs[v.n][:v.slot]
}

// Commit marks the slot returned by [Vec.Next] as used with n bytes.
func (v *Vec) Commit(n int, addr netip.AddrPort) {
	v.msgs[v.n] = v.bufs[v.n][:n]
	v.setAddr(v.n, addr)
	v.n++
}

// Buf returns the whole buffer of slot i, its tail included (for
// datapaths that receive in place, and for appending a trailer); Set
// records its length and address and is used together with SetLen to
// publish received messages.
func (v *Vec) Buf(i int) []byte { return v.bufs[i] }

// Set records the length and peer of slot i: message i is then the first
// n bytes of its own slot.
func (v *Vec) Set(i, n int, addr netip.AddrPort) {
	v.msgs[i] = v.bufs[i][:n]
	v.setAddr(i, addr)
}

// setAddr records message i's peer. A slot is mostly reused for the same
// peer: comparing is cheaper than storing an address (it holds a pointer,
// so the store goes through the GC's write barrier check).
func (v *Vec) setAddr(i int, addr netip.AddrPort) {
	if v.addrs[i] != addr {
		v.addrs[i] = addr
	}
}

// SetLen sets the number of messages in use (for datapaths that filled
// slots 0..n-1 with Set).
func (v *Vec) SetLen(n int) { v.n = n }

// Drop removes the first k messages, shifting the rest down (used after a
// partial send). It swaps slot buffers instead of copying bytes.
func (v *Vec) Drop(k int) {
	if k <= 0 {
		return
	}
	if k >= v.n {
		v.n = 0
		return
	}
	for i := 0; i+k < v.n; i++ {
		j := i + k
		v.bufs[i], v.bufs[j] = v.bufs[j], v.bufs[i]
		v.msgs[i] = v.msgs[j]
		v.addrs[i] = v.addrs[j]
	}
	v.n -= k
}
