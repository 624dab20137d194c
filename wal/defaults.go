package wal

import (
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/internal/defaults"
)

// ErrConfig matches every error of [Config.Validate] (and so of Open for
// a bad Config): "wal: invalid configuration: …".
var ErrConfig = cfgerr.Sentinel("wal")

// withDefaults returns c with every zero field set to its default
// (DefaultConfig shows them). Retention < 0 keeps every segment.
func (c Config) withDefaults() Config {
	d := DefaultConfig(c.Dir)
	c.SegmentSize = defaults.Or(c.SegmentSize, d.SegmentSize)
	c.BufferSize = defaults.Or(c.BufferSize, d.BufferSize)
	c.FlushInterval = defaults.Or(c.FlushInterval, d.FlushInterval)
	c.FlushRecords = defaults.Or(c.FlushRecords, d.FlushRecords)
	c.FlushBytes = defaults.Or(c.FlushBytes, d.FlushBytes)
	c.MaxFlushLag = defaults.Or(c.MaxFlushLag, d.MaxFlushLag)
	c.SeqReserve = defaults.Or(c.SeqReserve, d.SeqReserve)
	c.Retention = defaults.Off(c.Retention, d.Retention)
	return c
}
