package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows how far a long command is. On a terminal it redraws one
// status line in place (carriage return) at most ten times a second; off
// a terminal (a pipe, a log file) it prints a plain line at most every
// plainEvery and never a carriage return. Safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	every time.Duration
	last  time.Time
	shown int // width of the status line on screen (tty)
	off   bool
}

// plainEvery is how often progress prints a line off a terminal.
const plainEvery = 5 * time.Second

// newProgress reports on f (normally os.Stderr); quiet turns it off.
func newProgress(f *os.File, quiet bool) *progress {
	p := &progress{w: f, tty: isTerminal(f), every: plainEvery, off: quiet}
	if p.tty {
		p.every = 100 * time.Millisecond
	}
	return p
}

// isTerminal reports whether f is a character device (a terminal; also
// /dev/null, where redrawing costs nothing).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update shows line as the current status, rate limited. force shows it
// regardless of the rate limit (a plain line is still printed once).
func (p *progress) update(line string, force bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off || (!force && time.Since(p.last) < p.every) {
		return
	}
	p.last = time.Now()
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := ""
	if n := p.shown - len([]rune(line)); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.shown = len([]rune(line))
}

// done ends the status line (a newline on a terminal) and stops updates.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.shown > 0 {
		fmt.Fprintln(p.w)
	}
	p.shown = 0
	p.off = true
}

func (p *progress) clearLocked() {
	if p.tty && p.shown > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.shown))
		p.shown = 0
	}
}
