// Package protocol is the sans-I/O core of the casting protocol: the
// [Sender] and [Receiver] state machines, their hot send ring and reorder
// ring, NAK and heartbeat handling, and the sticky outcomes (Faulted,
// Reconnect, SenderRestarted) that hand a consumer over to TCP replay.
//
// # What the core must not do
//
// Sender and Receiver never open a socket, read a clock, start a
// goroutine, take a lock or touch the disk. Time comes in as now, an
// int64 of monotonic nanoseconds; datagrams come in as byte slices and go
// out appended to the caller's [batch.Vec] (with their destination: the
// zero netip.AddrPort means the datapath's connected peer); records go
// out through a callback. Send, Receiver.Handle, NAK service from the hot
// ring and heartbeats allocate nothing. One goroutine owns each value.
//
// # Driving a Sender (one loop iteration)
//
//	s, _ := protocol.NewSender(cfg, w)            // w: *wal.Writer, or nil for WAL-less
//	seq, err := s.Send(typ, payload, now, out) // ErrBatchFull: flush out, retry
//	for each received datagram d from addr:   // NAKs from the receiver
//	    s.Handle(d, addr, now, out)
//	n := s.ColdRequests(reqs)                 // NAKed seqs no longer in the hot ring
//	    // on the I/O goroutine: nb := w.ReadRange(req.From, req.Count, buf)
//	    // back on the loop:     rest := s.ColdDone(req, buf[:nb], now, out)
//	    //                       (flush out and call again while rest is non-empty;
//	    //                        ColdDone(req, nil, …) on wal.ErrNotFound;
//	    //                        ColdFailed(req) if the read failed)
//	s.Tick(now, out)                          // idle-only heartbeat; continues retransmits
//	path.Send(out); out.Reset()               // that did not fit (again while s.RetxPending())
//
// SendBatch(typ, payloads, now, out) sends what a loop of Send would,
// with the per-record bookkeeping done once per run in the steady state.
//
// With a WAL, Send appends the record to the WAL first (the WAL assigns
// the seq and seals the frame once), copies the frame into the hot ring
// (slot = seq mod RingSlots, slots hold whole frames) and appends it to
// out. A NAK is verified (version, len, CRC, source), its count clamped
// to RingSlots and to the seqs actually sent, served from the ring where
// the slot still holds the seq (with a per-slot dedup window), and the
// rest is queued as cold requests of at most MaxColdRecords records
// (MaxColdInFlight running, MaxColdQueued waiting), which the loop serves
// off the hot thread. Cold seqs are de-duplicated across NAKs (a seq
// queued, running or served within RetxDedupWindow is not read again)
// and budgeted (ColdRate records/s, ColdBurst at once), so NAKs for old
// seqs cannot amplify from the WAL. Retransmits always go to Dest, never
// to the NAK's source.
//
// # Driving a Receiver
//
//	r, _ := protocol.NewReceiver(cfg)
//	for each received datagram d:
//	    r.Handle(d, now, out, deliver) // deliver(h, payload) in seq order, exactly once
//	// or a batch read at once, in one call (the same effect):
//	// r.HoldStatus(); r.HandleRun(in, 0, in.Len(), now, out, deliver); r.ReleaseStatus(now, out)
//	r.Tick(now, out)                   // clock-driven re-NAKs and the silence rule
//	for e, ok := r.NextEvent(); ok; e, ok = r.NextEvent() {
//	    if e.Kind == protocol.OutcomeSet { // Faulted, Reconnect, SenderRestarted
//	        // catch up over TCP replay from the persisted tip, then:
//	        r.ResetAfterReplay(tip)
//	    }
//	}
//	path.Send(out); out.Reset()
//
// A Receiver begins at ReceiverConfig.Start (default seq 1, the stream's
// first): records missing before the first one heard are NAKed like any
// other gap, so delivery never begins later silently. With StartNow it
// begins at the first data record heard (or after the highest seq of the
// first heartbeat) and LateStart reports where, when that is after seq
// 1. ResetAfterReplay moves the start to tip+1. Records ahead of the next
// expected seq are buffered in the reorder ring; every newly revealed
// missing run is NAKed at once, and each run is re-NAKed after its delay,
// on Tick or on traffic, until repaired; the NAK that takes a run past
// MaxNakRetries raises Faulted. Data ReorderSlots or more ahead is dropped
// (and NAKed as the window moves on); Reconnect needs OverrunEvidence such
// datagrams over NakDebounce: no single datagram ends a stream. Two
// heartbeats within the silence time below the last seq the Receiver
// delivered itself raise SenderRestarted (below a replay tip only, they
// are stale and ignored). No data and no heartbeat for SilenceIntervals
// heartbeat intervals raises Faulted when a gap is open, else the
// non-sticky PeerSilent event. Sticky outcomes drop all input until
// ResetAfterReplay (or Resync).
//
// Inside, a Receiver is a reorder ring (receiver_ring.go), a loss
// detector holding one gap per missing seq and running the NAK pass
// (receiver_loss.go, receiver_renak.go) that asks its re-NAK delay policy
// when each run is due — the RTT timer, the order, pinned, group
// back-off and backlog rules, each a small type (receiver_delay.go) — a
// status reporter (receiver_status.go), the set of other receivers of a
// multicast group (receiver_group.go), an overrun detector and a Skip
// hole; the Receiver hands each what it judges by. A Sender is a hot
// ring, an emitter, a retransmitter with its cold queue, a flow
// controller with its initial window, a prober and the same event queue
// (docs/protocol.md, "Inside the core").
//
// # Flow control, RTT and probes (negotiated)
//
// A Receiver sends [wire.Status] frames (type 0x10: delivered seq, window =
// min(ReorderSlots, consumer room), receiver id, echoed probe timestamp,
// state) to its sender. A Sender that hears a valid one keeps every seq it
// sends within that receiver's window (Send returns ErrBackpressure),
// sends [wire.Probe]s (heartbeats carrying a timestamp) for RTT and tail loss,
// and reports receivers joining, restarting, faulting, leaving or going
// silent through NextEvent. A Receiver that hears probes re-NAKs after
// clamp(srtt + 4·rttvar, NakFloor, NakDebounce), doubling per retry. Until
// a Status is heard (the reference ignores it) a Sender sends exactly the
// reference's bytes. Loops tick both cores at their Deadline.
//
// Both sides accept datagrams holding several consecutive frames
// (SenderConfig.Coalesce produces them). Bad datagrams are counted by
// reason in Stats and dropped; nothing from the network can panic.
//
// The interfaces the loop and the WAL meet are [Log] (satisfied by
// *wal.Writer) and [ColdRequest]. See docs/protocol.md for the design
// choices and measured figures.
package protocol
