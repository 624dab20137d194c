package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

// rowStream prints a benchmark's rows as each finishes (the table header
// before the first), keeps them for the summary that follows, and shows
// which row is running. On Ctrl-C it keeps what finished and stops
// printing: the row being measured is abandoned.
type rowStream struct {
	mu      sync.Mutex
	w       io.Writer
	asJSON  bool
	print   func(w io.Writer, r benchkit.Row) // one row of the table (and its header when due)
	title   string
	started bool
	stopped bool
	rows    []benchkit.Row
	prog    *progress
	name    string
	total   int // rows, or steps when counted by nextStep
	step    int // the step running (0: counted in rows)
	begun   time.Time
}

// newRowStream streams the rows of a latency (lat) or throughput table.
func newRowStream(name, title string, total int, lat, asJSON bool) *rowStream {
	headed := false
	return newRowStreamFunc(name, title, total, asJSON, func(w io.Writer, r benchkit.Row) {
		if !headed {
			printHeader(w, lat)
			headed = true
		}
		printRow(w, r, lat)
	})
}

// newRowStreamFunc streams rows printed by print.
func newRowStreamFunc(name, title string, total int, asJSON bool, print func(io.Writer, benchkit.Row)) *rowStream {
	return &rowStream{w: os.Stdout, asJSON: asJSON, print: print, title: title, name: name, total: total,
		prog: newProgress(os.Stderr, false), begun: time.Now()}
}

// next says which row is being measured now.
func (s *rowStream) next(what string) {
	s.mu.Lock()
	k := len(s.rows) + 1
	s.mu.Unlock()
	s.prog.update(fmt.Sprintf("%s: row %d of %d: %s (%s elapsed)", s.name, k, s.total, what, time.Since(s.begun).Round(time.Second)), true)
}

// nextStep is next for benchmarks counted in steps, not rows.
func (s *rowStream) nextStep(k int, what string) {
	s.mu.Lock()
	s.step = k
	s.mu.Unlock()
	s.prog.update(fmt.Sprintf("%s: step %d of %d: %s (%s elapsed)", s.name, k, s.total, what, time.Since(s.begun).Round(time.Second)), true)
}

// add prints r and keeps it.
func (s *rowStream) add(r benchkit.Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.prog.mu.Lock()
	s.prog.clearLocked()
	s.prog.mu.Unlock()
	if !s.started && !s.asJSON {
		fmt.Fprintln(s.w, s.title)
	}
	s.started = true
	if s.asJSON {
		_ = json.NewEncoder(s.w).Encode(r)
	} else {
		s.print(s.w, r)
	}
	s.rows = append(s.rows, r)
}

// run measures with fn (which calls next and add) until it returns or
// ctx ends, and returns the rows kept either way.
func (s *rowStream) run(ctx context.Context, fn func() error) ([]benchkit.Row, error) {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		s.mu.Lock()
		if s.step > 0 {
			err = interruptedf("in step %d of %d, %d rows measured", s.step, s.total, len(s.rows))
		} else {
			err = interruptedf("%d of %d rows measured", len(s.rows), s.total)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.stopped = true
	rows := s.rows
	s.mu.Unlock()
	s.prog.done()
	return rows, err
}
