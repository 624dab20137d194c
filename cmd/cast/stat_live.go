package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/walcast/walcast/counters"
)

// liveFlags are the flags of the commands that run loops (send, recv,
// demo) about the counters they publish: a progress line built from them
// and a hold of the final values before exit. The progress line reads the
// very slots `cast stat` reads (the process's counters file, from its
// memory), never a second bookkeeping.
type liveFlags struct {
	progress time.Duration
	hold     time.Duration
	fs       *flag.FlagSet
}

func (l *liveFlags) add(fs *flag.FlagSet) {
	l.fs = fs
	fs.DurationVar(&l.progress, "progress", time.Second, "print a progress line on stderr every DUR, from this process's counters (what `cast stat` shows); by default only when stderr is a terminal (redrawn in place); 0: never")
	fs.DurationVar(&l.hold, "hold", 0, "before exiting, keep this process's counters file with the loops' final values for DUR, for `cast stat` and /metrics to read (0: remove it at once)")
}

func (l *liveFlags) check() error {
	if err := checkRange("progress", l.progress, 0, time.Hour); err != nil {
		return err
	}
	return checkRange("hold", l.hold, 0, time.Hour)
}

// live is a running command's view of its own counters.
type live struct {
	f    *counters.File
	hold time.Duration
	p    *progress
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// progressLine builds the progress line from a snapshot of the process's
// counters, the one before (nil at first) and the time between.
type progressLine func(cur, prev *counters.Snapshot, d time.Duration) string

// start takes a reference on the process's counters file (the one its
// loops write: counters.Acquire with the process's default) and starts
// the progress line if it is wanted. With counters off there is no file
// and no progress.
func (l *liveFlags) start(line progressLine) *live {
	v := &live{hold: l.hold, stop: make(chan struct{}), done: make(chan struct{})}
	v.f, _ = counters.Acquire(counters.Config{})
	every := l.progress
	tty := isTerminal(os.Stderr)
	if !flagGiven(l.fs, "progress") && !tty {
		every = 0
	}
	if v.f == nil || every <= 0 || line == nil {
		close(v.done)
		return v
	}
	v.p = &progress{w: os.Stderr, tty: tty}
	go func() {
		defer close(v.done)
		t := time.NewTicker(every)
		defer t.Stop()
		var prev *counters.Snapshot
		at := time.Now()
		for {
			select {
			case <-v.stop:
				return
			case now := <-t.C:
				cur := v.f.Snapshot()
				v.p.update(line(cur, prev, now.Sub(at)), true)
				prev, at = cur, now
			}
		}
	}()
	return v
}

// keep reports whether the loops should leave their slots at Close
// (cast.Counters.Keep): when the file is held after them.
func (v *live) keep() bool { return v.f != nil && v.hold > 0 }

// stopProgress ends the progress line (before the summary is printed).
func (v *live) stopProgress() {
	v.once.Do(func() {
		close(v.stop)
		<-v.done
		if v.p != nil {
			v.p.done()
		}
	})
}

// end stops the progress line, holds the final values for -hold (or
// until ctx ends) and gives the file back: the last reference removes it.
func (v *live) end(ctx context.Context) {
	v.stopProgress()
	if v.keep() {
		select {
		case <-time.After(v.hold):
		case <-ctx.Done():
		}
	}
	v.f.Release()
}

// valueOf sums the slots named name of role in s (every loop's).
func valueOf(s *counters.Snapshot, name, role string) uint64 {
	var n uint64
	for _, v := range s.Values {
		if v.Name == name && v.Labels["role"] == role {
			n += v.Value
		}
	}
	return n
}

// rate is the per-second change of name (role) between prev and cur.
func rate(cur, prev *counters.Snapshot, d time.Duration, name, role string) float64 {
	if prev == nil || d <= 0 {
		return 0
	}
	a, b := valueOf(prev, name, role), valueOf(cur, name, role)
	if b < a {
		return 0
	}
	return float64(b-a) / d.Seconds()
}

// perSecond shows a rate compactly: 950, 20.1k, 1.25M.
func perSecond(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}

// sendProgress is cast send's progress line.
func sendProgress(cur, prev *counters.Snapshot, d time.Duration) string {
	const p = "producer"
	return fmt.Sprintf("sent %d (%s rec/s), naks %d, retransmits %d (hot ring %d, WAL %d), receivers %d, srtt %v",
		valueOf(cur, "records_sent", p), perSecond(rate(cur, prev, d, "records_sent", p)), valueOf(cur, "naks_received", p),
		valueOf(cur, "retx_hot", p)+valueOf(cur, "retx_cold", p), valueOf(cur, "retx_hot", p), valueOf(cur, "retx_cold", p),
		valueOf(cur, "receivers", p), time.Duration(valueOf(cur, "srtt_ns", p)).Round(time.Microsecond))
}

// recvProgress is cast recv's progress line.
func recvProgress(cur, prev *counters.Snapshot, d time.Duration) string {
	const c = "consumer"
	s := fmt.Sprintf("delivered %d (%s rec/s), naks %d, duplicates %d, loss episodes %d, srtt %v",
		valueOf(cur, "records_delivered", c), perSecond(rate(cur, prev, d, "records_delivered", c)), valueOf(cur, "naks_sent", c),
		valueOf(cur, "duplicates", c), valueOf(cur, "loss_episodes", c), time.Duration(valueOf(cur, "srtt_ns", c)).Round(time.Microsecond))
	if tcp := valueOf(cur, "consumer_tcp_records", c); tcp > 0 {
		s += fmt.Sprintf(", %d over TCP", tcp)
	}
	if valueOf(cur, "peer_silent", c) != 0 {
		s += ", sender silent"
	}
	return strings.TrimSpace(s)
}
