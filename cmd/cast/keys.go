package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/wire"
)

// keyWatch reloads a -key-file on every SIGHUP for the whole run of a
// command (a key rollover without a restart, docs/auth.md). The handler
// is installed as soon as the file is first loaded, so a SIGHUP never
// kills a keyed command, and a reload that arrives before the command's
// loop exists (while it waits for its sender, or catches up) is kept
// and applied when the loop is attached. A nil *keyWatch (no -key-file)
// does nothing.
type keyWatch struct {
	path    string
	initial *cast.Keys
	latest  atomic.Pointer[cast.Keys]

	mu  sync.Mutex
	set func(*cast.Keys) error // the running loop's SetKeys (nil: none)

	hup  chan os.Signal
	done chan struct{}
}

// watchKeys installs the SIGHUP handler for keys loaded from path.
func watchKeys(path string, keys *cast.Keys) *keyWatch {
	w := &keyWatch{path: path, initial: keys, hup: make(chan os.Signal, 1), done: make(chan struct{})}
	w.latest.Store(keys)
	signal.Notify(w.hup, syscall.SIGHUP)
	go w.run()
	return w
}

func (w *keyWatch) run() {
	for {
		select {
		case <-w.done:
			return
		case <-w.hup:
			k, err := cast.LoadKeyFile(w.path)
			if err == nil {
				w.latest.Store(k)
				w.mu.Lock()
				if w.set != nil {
					err = w.set(k)
				}
				w.mu.Unlock()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "cast: SIGHUP: keys not reloaded: %v\n", err)
			} else {
				fmt.Fprintf(os.Stderr, "cast: SIGHUP: keys reloaded from %s (sending with key id %d)\n", w.path, k.Send.ID)
			}
		}
	}
}

// attach makes set receive every later reload, and hands it at once the
// keys of a reload it missed (set's loop was built with the keys first
// loaded). detach ends that.
func (w *keyWatch) attach(set func(*cast.Keys) error) (detach func()) {
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set = set
	if k := w.latest.Load(); k != w.initial {
		if err := set(k); err != nil {
			fmt.Fprintf(os.Stderr, "cast: keys reloaded earlier not applied: %v\n", err)
		}
	}
	return func() {
		w.mu.Lock()
		w.set = nil
		w.mu.Unlock()
	}
}

// stop removes the handler.
func (w *keyWatch) stop() {
	if w == nil {
		return
	}
	signal.Stop(w.hup)
	close(w.done)
}

// keyedOpener authenticates datagrams with the watched keys, taking a
// reload before its next datagram. One goroutine uses it at a time.
type keyedOpener struct {
	w       *keyWatch
	op      *wire.Opener
	applied *cast.Keys
}

// opener returns a fresh keyedOpener (its own replay state), or nil
// without keys.
func (w *keyWatch) opener() *keyedOpener {
	if w == nil {
		return nil
	}
	k := w.latest.Load()
	op, err := wire.NewOpener(append([]wire.Key{k.Send}, k.Accept...)...)
	if err != nil {
		panic(err) // LoadKeyFile validated the keys
	}
	return &keyedOpener{w: w, op: op, applied: k}
}

// open returns o.Open, or nil for a nil keyedOpener (for
// cast.AwaitSender: no authentication).
func (o *keyedOpener) open() func([]byte, netip.AddrPort) (int, error) {
	if o == nil {
		return nil
	}
	return o.Open
}

// Open is a wire.Opener's Open with the latest keys.
func (o *keyedOpener) Open(d []byte, from netip.AddrPort) (int, error) {
	if k := o.w.latest.Load(); k != o.applied {
		if err := o.op.SetKeys(append([]wire.Key{k.Send}, k.Accept...)...); err == nil {
			o.applied = k
		}
	}
	return o.op.Open(d, from)
}
