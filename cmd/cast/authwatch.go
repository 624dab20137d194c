package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/walcast/walcast/cast"
)

// authPoll is how often a keyed command looks at its refusals, and
// authPersist how many polls in a row must each find new unsealed
// datagrams before it warns: a peer heartbeats every 100 ms, so a peer
// without a key is named within about a second, while one stray datagram
// of junk is not.
const (
	authPoll    = 500 * time.Millisecond
	authPersist = 2
)

// authWatch warns, once, when a keyed command keeps refusing datagrams
// that carry no authentication trailer: its peer sends without a key
// (a datagram tagged with a key id this end does not hold is
// EventKeyUnknown, which the command prints itself, once per id). It
// reads the refusals from get (the Producer's or Consumer's
// Stats().Auth, the numbers the counters file shows), so it works with
// counters off too.
type authWatch struct {
	cmd  string // "cast recv"
	who  string // the peer, in words: "the sender", "a receiver"
	get  func() cast.AuthStats
	w    io.Writer
	stop chan struct{}
	done chan struct{}
	once sync.Once

	last   uint64 // unsealed refusals at the last poll
	streak int    // polls in a row that found new ones
	warned bool
}

// watchAuth starts an authWatch; nil (and no goroutine) when keys are
// off (keyed false). End it with end.
func watchAuth(keyed bool, cmd, who string, w io.Writer, get func() cast.AuthStats) *authWatch {
	if !keyed {
		return nil
	}
	a := &authWatch{cmd: cmd, who: who, get: get, w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		t := time.NewTicker(authPoll)
		defer t.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-t.C:
				a.poll(a.get())
			}
		}
	}()
	return a
}

// unsealed is the datagrams refused for carrying no trailer: too short
// for one, or whose last bytes are no trailer of a known version.
func unsealed(s cast.AuthStats) uint64 { return s.Short + s.Version }

// poll looks at the refusals once (the watch's goroutine; tests call it).
func (a *authWatch) poll(s cast.AuthStats) {
	u := unsealed(s)
	if u > a.last {
		a.streak++
	} else {
		a.streak = 0
	}
	a.last = u
	if a.warned || a.streak < authPersist {
		return
	}
	a.warned = true
	what := fmt.Sprintf("%d authenticated datagrams accepted", s.Opened)
	if s.Opened == 0 {
		what = "nothing authenticated heard"
	}
	fmt.Fprintf(a.w, "%s: refusing datagrams without an authentication trailer from %s (%d so far, %s): it runs without a key; give both ends the same -key-file (docs/auth.md)\n",
		a.cmd, a.who, u, what)
}

// end stops the watch (idempotent; nil does nothing).
func (a *authWatch) end() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		close(a.stop)
		<-a.done
	})
}

// authLine is the summary line of a keyed command's authentication.
func authLine(s cast.AuthStats) string {
	return fmt.Sprintf("authentication: %d datagrams sealed, %d opened, %d refused (unsealed %d, unknown key id %d, bad tag %d, replayed %d)",
		s.Sealed, s.Opened, s.Refused(), unsealed(s), s.KeyID, s.Tag, s.Replay)
}
