package protocol

import (
	"reflect"

	"github.com/walcast/walcast/internal/defaults"
)

// The zero value of every field of SenderConfig and ReceiverConfig means
// its default (the Default* constants). Where zero was a setting of its
// own, a negative value now asks for it: RetxDedupWindow < 0 turns the
// retransmit dedup off, MaxColdQueued < 0 queues no cold request, NakDebounce < 0 re-NAKs on every pump,
// MaxNakRetries < 0 allows no retry (the first re-NAK faults),
// InitialWindow < 0 sends unthrottled before the first Status, NakFloor < 0
// lets the adaptive re-NAK delay go to zero, NakBackoff < 0 takes no NAK
// back-off in a multicast group.

// withDefaults returns c with every zero field set to its default and
// the negative "off" values mapped to the zero the Sender works with.
func (c SenderConfig) withDefaults() SenderConfig {
	d := DefaultSenderConfig()
	c.MaxFrame = defaults.Or(c.MaxFrame, d.MaxFrame)
	c.RingSlots = defaults.Or(c.RingSlots, d.RingSlots)
	c.HeartbeatInterval = defaults.Or(c.HeartbeatInterval, d.HeartbeatInterval)
	c.RetxDedupWindow = defaults.Off(c.RetxDedupWindow, d.RetxDedupWindow)
	c.MaxColdInFlight = defaults.Or(c.MaxColdInFlight, d.MaxColdInFlight)
	c.MaxColdQueued = defaults.Off(c.MaxColdQueued, d.MaxColdQueued)
	c.MaxColdRecords = defaults.Or(c.MaxColdRecords, d.MaxColdRecords)
	c.ColdRate = defaults.Or(c.ColdRate, d.ColdRate)
	c.ColdBurst = defaults.Or(c.ColdBurst, d.ColdBurst)
	c.ReceiverTimeout = defaults.Or(c.ReceiverTimeout, d.ReceiverTimeout)
	c.MaxReceivers = defaults.Or(c.MaxReceivers, d.MaxReceivers)
	c.ProbeFloor = defaults.Or(c.ProbeFloor, d.ProbeFloor)
	c.RTTProbeInterval = defaults.Or(c.RTTProbeInterval, d.RTTProbeInterval)
	c.InitialWindow = defaults.Off(c.InitialWindow, d.InitialWindow)
	c.InitialWait = defaults.Or(c.InitialWait, d.InitialWait)
	return c
}

// withDefaults returns c with every zero field set to its default and
// the negative "off" values mapped to the zero the Receiver works with.
func (c ReceiverConfig) withDefaults() ReceiverConfig {
	d := DefaultReceiverConfig()
	c.MaxFrame = defaults.Or(c.MaxFrame, d.MaxFrame)
	c.ReorderSlots = defaults.Or(c.ReorderSlots, d.ReorderSlots)
	c.NakDebounce = defaults.Off(c.NakDebounce, d.NakDebounce)
	c.MaxNakRetries = defaults.Off(c.MaxNakRetries, d.MaxNakRetries)
	c.HeartbeatInterval = defaults.Or(c.HeartbeatInterval, d.HeartbeatInterval)
	c.SilenceIntervals = defaults.Or(c.SilenceIntervals, d.SilenceIntervals)
	c.MaxNakRunsPerPump = defaults.Or(c.MaxNakRunsPerPump, d.MaxNakRunsPerPump)
	c.StatusInterval = defaults.Or(c.StatusInterval, d.StatusInterval)
	c.NakFloor = defaults.Off(c.NakFloor, d.NakFloor)
	c.OverrunEvidence = defaults.Or(c.OverrunEvidence, d.OverrunEvidence)
	c.NakBackoff = defaults.Off(c.NakBackoff, d.NakBackoff)
	return c
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
