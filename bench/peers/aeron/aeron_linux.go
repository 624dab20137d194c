//go:build linux

package aeron

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/walcast/walcast/bench/peers"
)

// api is the part of Aeron's C API the row calls (aeronc.h, aeronmd.h).
type api struct {
	// The client.
	ctxInit       func(ctx *uintptr) int32
	ctxSetDir     func(ctx uintptr, dir string) int32
	ctxSetInvoker func(ctx uintptr, on bool) int32
	ctxClose      func(ctx uintptr) int32
	clientInit    func(client *uintptr, ctx uintptr) int32
	clientStart   func(client uintptr) int32
	clientClose   func(client uintptr) int32
	addPub        func(async *uintptr, client uintptr, uri string, stream int32) int32
	addPubPoll    func(pub *uintptr, async uintptr) int32
	addSub        func(async *uintptr, client uintptr, uri string, stream int32, onAvail, availD, onUnavail, unavailD uintptr) int32
	addSubPoll    func(sub *uintptr, async uintptr) int32
	pubConnected  func(pub uintptr) bool
	asmCreate     func(asm *uintptr, delegate, clientd uintptr) int32
	asmDelete     func(asm uintptr) int32
	asmHandler    uintptr // aeron_fragment_assembler_handler, passed to subPoll
	errmsg        func() string
	// The calls of the hot loops, made with purego.SyscallN: a function
	// registered with purego.RegisterFunc goes through reflect on every
	// call, which costs about twice as much.
	offerFn, subPollFn, clientDoWorkFn, driverDoWorkFn uintptr
	// The embedded media driver.
	dctxInit         func(ctx *uintptr) int32
	dctxSetDir       func(ctx uintptr, dir string) int32
	dctxSetThreading func(ctx uintptr, mode int32) int32
	dctxSetDelStart  func(ctx uintptr, on bool) int32
	dctxSetDelStop   func(ctx uintptr, on bool) int32
	dctxClose        func(ctx uintptr) int32
	driverInit       func(d *uintptr, ctx uintptr) int32
	driverStart      func(d uintptr, manual bool) int32
	driverClose      func(d uintptr) int32
}

// Return values of the offer functions (aeronc.h).
const (
	offerNotConnected  = -1
	offerBackPressured = -2
	offerAdminAction   = -3
	offerClosed        = -4
)

// threadingInvoker is AERON_THREADING_MODE_INVOKER (aeronmd.h).
const threadingInvoker = 3

var loaded = sync.OnceValues(loadLib)

func load() (*api, error) { return loaded() }

// libPath is the file dlopen is given: in AERON_LIB_DIR when it is set,
// else the bare name for the loader's search path.
func libPath() string {
	if d := os.Getenv(LibDirEnv); d != "" {
		return filepath.Join(d, Library)
	}
	return Library
}

func loadLib() (*api, error) {
	path := libPath()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		where := LibDirEnv + " unset: the loader's search path"
		if os.Getenv(LibDirEnv) != "" {
			where = LibDirEnv + "=" + os.Getenv(LibDirEnv)
		}
		return nil, fmt.Errorf("aeron: %s not loaded (%s; %v); build Aeron's C driver as docs/bench.md says and set %s to its lib directory",
			path, where, err, LibDirEnv)
	}
	a := &api{}
	fns := []struct {
		name string
		fn   any
	}{
		{"aeron_context_init", &a.ctxInit}, {"aeron_context_set_dir", &a.ctxSetDir},
		{"aeron_context_set_use_conductor_agent_invoker", &a.ctxSetInvoker}, {"aeron_context_close", &a.ctxClose},
		{"aeron_init", &a.clientInit}, {"aeron_start", &a.clientStart},
		{"aeron_close", &a.clientClose},
		{"aeron_async_add_exclusive_publication", &a.addPub}, {"aeron_async_add_exclusive_publication_poll", &a.addPubPoll},
		{"aeron_async_add_subscription", &a.addSub}, {"aeron_async_add_subscription_poll", &a.addSubPoll},
		{"aeron_exclusive_publication_is_connected", &a.pubConnected},
		{"aeron_fragment_assembler_create", &a.asmCreate}, {"aeron_fragment_assembler_delete", &a.asmDelete},
		{"aeron_errmsg", &a.errmsg},
		{"aeron_driver_context_init", &a.dctxInit}, {"aeron_driver_context_set_dir", &a.dctxSetDir},
		{"aeron_driver_context_set_threading_mode", &a.dctxSetThreading},
		{"aeron_driver_context_set_dir_delete_on_start", &a.dctxSetDelStart},
		{"aeron_driver_context_set_dir_delete_on_shutdown", &a.dctxSetDelStop},
		{"aeron_driver_context_close", &a.dctxClose},
		{"aeron_driver_init", &a.driverInit}, {"aeron_driver_start", &a.driverStart},
		{"aeron_driver_close", &a.driverClose},
	}
	for _, f := range fns {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil {
			purego.Dlclose(h)
			return nil, fmt.Errorf("aeron: %s has no %s (%v): not Aeron's C driver library", path, f.name, err)
		}
		purego.RegisterFunc(f.fn, sym)
	}
	for _, f := range []struct {
		name string
		fn   *uintptr
	}{
		{"aeron_fragment_assembler_handler", &a.asmHandler}, {"aeron_exclusive_publication_offer", &a.offerFn},
		{"aeron_subscription_poll", &a.subPollFn}, {"aeron_main_do_work", &a.clientDoWorkFn},
		{"aeron_driver_main_do_work", &a.driverDoWorkFn},
	} {
		if *f.fn, err = purego.Dlsym(h, f.name); err != nil {
			purego.Dlclose(h)
			return nil, fmt.Errorf("aeron: %s has no %s (%v): not Aeron's C driver library", path, f.name, err)
		}
	}
	return a, nil
}

// The fragment callback: one purego callback for the process (they are
// never freed), finding its end by the clientd it is given.
var (
	fragOnce sync.Once
	fragCB   uintptr
	endsMu   sync.Mutex
	ends     [64]atomic.Pointer[end]
)

func onFragment(clientd uintptr, buf unsafe.Pointer, length uintptr, _ unsafe.Pointer) {
	if e := ends[clientd%uintptr(len(ends))].Load(); e != nil {
		e.push(unsafe.Slice((*byte)(buf), int(length)))
	}
}

// fragmentLimit is the most fragments one poll hands over; the queue of
// an end holds as many messages.
const fragmentLimit = 64

// end is one side: its driver, its client, its publication to the other
// side and its subscription, all driven from the thread that calls Send,
// Flush and Recv.
type end struct {
	a                  *api
	slot               int
	dctx, driver       uintptr
	cctx, client       uintptr
	pub, sub, asm      uintptr
	closed             atomic.Bool
	timeout            time.Duration
	works              int
	sends              int
	q                  [fragmentLimit][]byte
	qn                 [fragmentLimit]int
	head, n            int
	tooBig             int // messages larger than MsgSize (dropped; Recv reports it)
	released, starting bool
}

// work runs one duty cycle of the side's driver (conductor, sender,
// receiver) and, every 64th call, of its client conductor (keepalives,
// image notices).
func (e *end) work() {
	purego.SyscallN(e.a.driverDoWorkFn, e.driver)
	if e.works++; e.works&63 == 0 || e.starting {
		purego.SyscallN(e.a.clientDoWorkFn, e.client)
	}
}

func (e *end) push(p []byte) {
	if e.n == len(e.q) {
		return // cannot happen: a poll delivers at most fragmentLimit
	}
	i := (e.head + e.n) % len(e.q)
	if len(p) > len(e.q[i]) {
		e.tooBig++
		return
	}
	e.qn[i] = copy(e.q[i], p)
	e.n++
}

// Send offers p on the publication; while the publication is back
// pressured (or not yet connected) it drives the side's driver and tries
// again. Every 32nd message it drives the driver once anyway, so a
// stream of sends goes out in batches without waiting for back pressure.
func (e *end) Send(p []byte) error {
	if len(p) == 0 {
		return errors.New("aeron: empty message")
	}
	var deadline time.Time
	for spins := 0; ; spins++ {
		r1, _, _ := purego.SyscallN(e.a.offerFn, e.pub, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0)
		runtime.KeepAlive(p)
		r := int64(r1)
		if r >= 0 {
			if e.sends++; e.sends&31 == 0 {
				e.work()
			}
			return nil
		}
		switch r {
		case offerBackPressured, offerNotConnected, offerAdminAction:
			e.work()
		case offerClosed:
			return peers.ErrClosed
		default:
			return fmt.Errorf("aeron: offer: %d: %s", r, e.a.errmsg())
		}
		if spins&255 == 255 {
			if e.closed.Load() {
				return peers.ErrClosed
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(e.timeout)
			} else if now.After(deadline) {
				return peers.ErrTimeout
			}
		}
	}
}

// Poll runs one duty cycle of the side's driver and client: after its
// last Send, A's driver still has to send what the offers put in the log
// and hear B's status messages.
func (e *end) Poll() error {
	if e.closed.Load() {
		return peers.ErrClosed
	}
	e.work()
	return nil
}

// Flush runs one driver duty cycle: the sender agent sends what the
// offers put in the log.
func (e *end) Flush() error {
	purego.SyscallN(e.a.driverDoWorkFn, e.driver)
	return nil
}

// Recv returns the next message: queued from an earlier poll, or polled
// from the subscription after a driver duty cycle (the receiver agent
// reads the socket into the image's log).
func (e *end) Recv(p []byte) (int, error) {
	var deadline time.Time
	for spins := 0; ; spins++ {
		if e.n > 0 {
			return e.pop(p), nil
		}
		if r, _, _ := purego.SyscallN(e.a.subPollFn, e.sub, e.a.asmHandler, e.asm, fragmentLimit); int32(r) > 0 && e.n > 0 {
			return e.pop(p), nil
		}
		if e.tooBig > 0 {
			return 0, fmt.Errorf("aeron: %d message(s) larger than the %d-byte receive buffer", e.tooBig, len(e.q[0]))
		}
		e.work()
		if spins&255 == 255 {
			if e.closed.Load() {
				return 0, peers.ErrClosed
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(e.timeout)
			} else if now.After(deadline) {
				return 0, peers.ErrTimeout
			}
		}
	}
}

func (e *end) pop(p []byte) int {
	n := copy(p, e.q[e.head][:e.qn[e.head]])
	e.head = (e.head + 1) % len(e.q)
	e.n--
	return n
}

// release closes the client and the driver (which deletes its
// directory). The client's conductor frees its publication and
// subscription.
func (e *end) release() {
	if e.released {
		return
	}
	e.released = true
	if e.slot >= 0 {
		ends[e.slot].Store(nil)
	}
	if e.asm != 0 {
		e.a.asmDelete(e.asm)
	}
	if e.client != 0 {
		e.a.clientClose(e.client)
	}
	if e.cctx != 0 {
		e.a.ctxClose(e.cctx)
	}
	if e.driver != 0 {
		e.a.driverClose(e.driver)
	}
	if e.dctx != 0 {
		e.a.dctxClose(e.dctx)
	}
}

var pairs atomic.Uint64

// startEnd starts a driver in invoker mode in its own directory and a
// client of it with the conductor invoker. Call on a locked thread:
// aeron_errmsg is per thread.
func startEnd(a *api, dir string, cfg peers.Config) (*end, error) {
	e := &end{a: a, slot: -1, timeout: cfg.RecvTimeout(), starting: true}
	for i := range e.q {
		e.q[i] = make([]byte, cfg.MsgSize)
	}
	fail := func(what string) (*end, error) {
		err := fmt.Errorf("aeron: %s: %s", what, a.errmsg())
		e.release()
		return nil, err
	}
	if a.dctxInit(&e.dctx) < 0 {
		return fail("aeron_driver_context_init")
	}
	if a.dctxSetDir(e.dctx, dir) < 0 || a.dctxSetThreading(e.dctx, threadingInvoker) < 0 ||
		a.dctxSetDelStart(e.dctx, true) < 0 || a.dctxSetDelStop(e.dctx, true) < 0 {
		return fail("driver context")
	}
	if a.driverInit(&e.driver, e.dctx) < 0 {
		return fail("aeron_driver_init")
	}
	if a.driverStart(e.driver, true) < 0 {
		return fail("aeron_driver_start")
	}
	if a.ctxInit(&e.cctx) < 0 {
		return fail("aeron_context_init")
	}
	if a.ctxSetDir(e.cctx, dir) < 0 || a.ctxSetInvoker(e.cctx, true) < 0 {
		return fail("client context")
	}
	if a.clientInit(&e.client, e.cctx) < 0 {
		return fail("aeron_init")
	}
	if a.clientStart(e.client) < 0 {
		return fail("aeron_start")
	}
	endsMu.Lock()
	for i := range ends {
		if ends[i].Load() == nil {
			e.slot = i
			ends[i].Store(e)
			break
		}
	}
	endsMu.Unlock()
	if e.slot < 0 {
		e.release()
		return nil, errors.New("aeron: too many pairs open at once")
	}
	fragOnce.Do(func() { fragCB = purego.NewCallback(onFragment) })
	if a.asmCreate(&e.asm, fragCB, uintptr(e.slot)) < 0 {
		return fail("aeron_fragment_assembler_create")
	}
	return e, nil
}

// freePort returns a UDP port on 127.0.0.1 nobody used a moment ago.
func freePort() (int, error) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

const (
	streamAB = 1001
	streamBA = 1002
)

func open(cfg peers.Config) (*peers.Pair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Net != nil {
		return nil, peers.ErrNoNet
	}
	a, err := load()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := fmt.Sprintf("/dev/shm/walcast-aeron-%d-%d", os.Getpid(), pairs.Add(1))
	ea, err := startEnd(a, base+"-a", cfg)
	if err != nil {
		return nil, err
	}
	eb, err := startEnd(a, base+"-b", cfg)
	if err != nil {
		ea.release()
		return nil, err
	}
	pair := &peers.Pair{
		A: ea, B: eb,
		Close:   func() error { ea.closed.Store(true); eb.closed.Store(true); return nil },
		Release: func() { ea.release(); eb.release() },
	}
	if err := connect(a, ea, eb); err != nil {
		pair.Release()
		return nil, err
	}
	ea.starting, eb.starting = false, false
	return pair, nil
}

// connect adds each side's subscription on its own endpoint and its
// publication to the other's, and drives both sides until both
// publications are connected.
func connect(a *api, ea, eb *end) error {
	pa, err := freePort()
	if err != nil {
		return err
	}
	pb, err := freePort()
	if err != nil {
		return err
	}
	uri := func(port int) string { return fmt.Sprintf("aeron:udp?endpoint=127.0.0.1:%d", port) }
	type pending struct {
		e      *end
		sub    bool
		uri    string
		stream int32
		async  uintptr
	}
	ps := []*pending{{e: ea, sub: true, uri: uri(pa), stream: streamBA}, {e: eb, sub: true, uri: uri(pb), stream: streamAB},
		{e: ea, uri: uri(pb), stream: streamAB}, {e: eb, uri: uri(pa), stream: streamBA}}
	for _, p := range ps {
		var rc int32
		if p.sub {
			rc = a.addSub(&p.async, p.e.client, p.uri, p.stream, 0, 0, 0, 0)
		} else {
			rc = a.addPub(&p.async, p.e.client, p.uri, p.stream)
		}
		if rc < 0 {
			return fmt.Errorf("aeron: add %s: %s", p.uri, a.errmsg())
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for open := len(ps); ; {
		ea.work()
		eb.work()
		for _, p := range ps {
			if p.async == 0 {
				continue
			}
			var rc int32
			if p.sub {
				rc = a.addSubPoll(&p.e.sub, p.async)
			} else {
				rc = a.addPubPoll(&p.e.pub, p.async)
			}
			switch {
			case rc < 0:
				return fmt.Errorf("aeron: add %s stream %d: %s", p.uri, p.stream, a.errmsg())
			case rc > 0:
				p.async = 0
				open--
			}
		}
		if open == 0 && a.pubConnected(ea.pub) && a.pubConnected(eb.pub) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("aeron: publications not connected within 10 s")
		}
	}
}
