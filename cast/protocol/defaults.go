package protocol

import "reflect"

// The zero value of every field of SenderConfig and ReceiverConfig means
// its default (the Default* constants). Where zero was a setting of its
// own, a negative value now asks for it: RetxDedupWindow < 0 turns the
// retransmit dedup off, MaxColdQueued < 0 queues no cold request, NakDebounce < 0 re-NAKs on every pump,
// MaxNakRetries < 0 allows no retry (the first re-NAK faults).

// withDefaults returns c with every zero field set to its default and
// the negative "off" values mapped to the zero the Sender works with.
func (c SenderConfig) withDefaults() SenderConfig {
	d := DefaultSenderConfig()
	c.MaxFrame = or(c.MaxFrame, d.MaxFrame)
	c.RingSlots = or(c.RingSlots, d.RingSlots)
	c.HeartbeatInterval = or(c.HeartbeatInterval, d.HeartbeatInterval)
	c.RetxDedupWindow = orOff(c.RetxDedupWindow, d.RetxDedupWindow)
	c.MaxColdInFlight = or(c.MaxColdInFlight, d.MaxColdInFlight)
	c.MaxColdQueued = orOff(c.MaxColdQueued, d.MaxColdQueued)
	c.MaxColdRecords = or(c.MaxColdRecords, d.MaxColdRecords)
	c.ColdRate = or(c.ColdRate, d.ColdRate)
	c.ColdBurst = or(c.ColdBurst, d.ColdBurst)
	return c
}

// withDefaults returns c with every zero field set to its default and
// the negative "off" values mapped to the zero the Receiver works with.
func (c ReceiverConfig) withDefaults() ReceiverConfig {
	d := DefaultReceiverConfig()
	c.MaxFrame = or(c.MaxFrame, d.MaxFrame)
	c.ReorderSlots = or(c.ReorderSlots, d.ReorderSlots)
	c.NakDebounce = orOff(c.NakDebounce, d.NakDebounce)
	c.MaxNakRetries = orOff(c.MaxNakRetries, d.MaxNakRetries)
	c.HeartbeatInterval = or(c.HeartbeatInterval, d.HeartbeatInterval)
	c.SilenceIntervals = or(c.SilenceIntervals, d.SilenceIntervals)
	c.MaxNakRunsPerPump = or(c.MaxNakRunsPerPump, d.MaxNakRunsPerPump)
	return c
}

// or is v, or def when v is zero.
func or[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// orOff is def for zero, 0 for a negative v ("off"), else v.
func orOff[T int | int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// nilLog maps a typed nil (a nil *wal.Writer in a Log) to the nil
// interface: both mean a WAL-less Sender.
func nilLog(l Log) Log {
	if l == nil {
		return nil
	}
	if v := reflect.ValueOf(l); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return l
}
