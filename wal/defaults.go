package wal

import "github.com/walcast/walcast/internal/cfgerr"

// ErrConfig matches every error of [Config.Validate] (and so of Open for
// a bad Config): "wal: invalid configuration: …".
var ErrConfig = cfgerr.Sentinel("wal")

// withDefaults returns c with every zero field set to its default
// (DefaultConfig shows them). Retention < 0 keeps every segment (zero
// used to mean that).
func (c Config) withDefaults() Config {
	d := DefaultConfig(c.Dir)
	if c.SegmentSize == 0 {
		c.SegmentSize = d.SegmentSize
	}
	if c.BufferSize == 0 {
		c.BufferSize = d.BufferSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.FlushRecords == 0 {
		c.FlushRecords = d.FlushRecords
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = d.FlushBytes
	}
	if c.MaxFlushLag == 0 {
		c.MaxFlushLag = d.MaxFlushLag
	}
	if c.SeqReserve == 0 {
		c.SeqReserve = d.SeqReserve
	}
	switch {
	case c.Retention == 0:
		c.Retention = d.Retention
	case c.Retention < 0:
		c.Retention = 0
	}
	return c
}
