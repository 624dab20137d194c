package benchkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

// The floors of this file share no code with what they measure: no
// datapath, no batch.Vec, no affinity helper, no Loop, no wal. Sockets
// and files are opened with x/sys/unix here, system calls go through
// unix.Syscall6, threads are pinned with sched_setaffinity directly. They
// are what the kernel and the disk allow; every other row is compared
// with them.

// floorThread runs f on a new goroutine locked to its OS thread and
// pinned to cpu (-1: unpinned); the returned channel is closed when f
// returns. The thread is never unlocked, so the runtime retires it and
// the pin cannot leak.
func floorThread(cpu int, f func()) (<-chan struct{}, error) {
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if cpu >= 0 {
			var s unix.CPUSet
			s.Set(cpu)
			if err := unix.SchedSetaffinity(0, &s); err != nil {
				errc <- fmt.Errorf("benchkit: floor: pin to CPU %d: %w", cpu, err)
				return
			}
		}
		errc <- nil
		f()
	}()
	return done, <-errc
}

// floorUDPPair opens two IPv4 UDP sockets on 127.0.0.1, connected to
// each other; nonblock sets O_NONBLOCK.
func floorUDPPair(nonblock bool) (a, b int, err error) {
	typ := unix.SOCK_DGRAM | unix.SOCK_CLOEXEC
	if nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	open := func() (int, *unix.SockaddrInet4, error) {
		fd, err := unix.Socket(unix.AF_INET, typ, 0)
		if err != nil {
			return -1, nil, err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			unix.Close(fd)
			return -1, nil, err
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			unix.Close(fd)
			return -1, nil, err
		}
		return fd, sa.(*unix.SockaddrInet4), nil
	}
	a, aa, err := open()
	if err != nil {
		return -1, -1, fmt.Errorf("benchkit: floor socket: %w", err)
	}
	b, ba, err := open()
	if err != nil {
		unix.Close(a)
		return -1, -1, fmt.Errorf("benchkit: floor socket: %w", err)
	}
	if err = unix.Connect(a, ba); err == nil {
		err = unix.Connect(b, aa)
	}
	if err != nil {
		unix.Close(a)
		unix.Close(b)
		return -1, -1, fmt.Errorf("benchkit: floor connect: %w", err)
	}
	return a, b, nil
}

// groRecv receives GRO super-datagrams with recvmsg into one 64 KiB
// buffer and counts the frames in each by the segment size the kernel
// reports (UDP_GRO control message).
type groRecv struct {
	fd       int
	n        int // bytes of the last super-datagram
	buf, oob []byte
	iov      unix.Iovec
	h        unix.Msghdr
}

func newGRORecv(fd int) *groRecv {
	g := &groRecv{fd: fd, buf: make([]byte, 65535), oob: make([]byte, unix.CmsgSpace(4))}
	g.iov = unix.Iovec{Base: &g.buf[0]}
	g.iov.SetLen(len(g.buf))
	g.h.Iov = &g.iov
	g.h.SetIovlen(1)
	g.h.Control = &g.oob[0]
	return g
}

// recv receives one super-datagram and returns its frames, or the errno
// of recvmsg (EAGAIN on a non-blocking socket with nothing to read).
func (g *groRecv) recv() (int, unix.Errno) {
	g.h.SetControllen(len(g.oob))
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(g.fd), uintptr(unsafe.Pointer(&g.h)), 0)
	if e != 0 {
		return 0, e
	}
	seg := int(r)
	g.n = int(r)
	if g.h.Controllen >= uint64(unix.CmsgLen(2)) {
		ch := (*unix.Cmsghdr)(unsafe.Pointer(&g.oob[0]))
		if ch.Level == unix.SOL_UDP && ch.Type == unix.UDP_GRO {
			if s := int(*(*int32)(unsafe.Pointer(&g.oob[unix.CmsgLen(0)]))); s > 0 {
				seg = s
			}
		}
	}
	return (int(r) + seg - 1) / seg, 0
}

// floorGSOPair is floorUDPPair(true) with 8 MiB socket buffers (forced
// where CAP_NET_ADMIN allows), UDP_SEGMENT of size on tx and UDP_GRO on
// rx: the pair of the GSO/GRO floors.
func floorGSOPair(size int) (tx, rx int, err error) {
	tx, rx, err = floorUDPPair(true)
	if err != nil {
		return -1, -1, err
	}
	for _, fd := range []int{tx, rx} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		}
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
		}
	}
	if err = unix.SetsockoptInt(tx, unix.SOL_UDP, unix.UDP_SEGMENT, size); err != nil {
		err = fmt.Errorf("benchkit: floor UDP_SEGMENT: %w", err)
	} else if err = unix.SetsockoptInt(rx, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
		err = fmt.Errorf("benchkit: floor UDP_GRO: %w", err)
	}
	if err != nil {
		unix.Close(tx)
		unix.Close(rx)
		return -1, -1, err
	}
	return tx, rx, nil
}

// rawSend and rawRecv are sendto/recvfrom on a connected socket through
// unix.Syscall6, with the errno raw: nothing is built on EAGAIN.
func rawSend(fd int, p []byte) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return e
}

func rawRecv(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(r), e
}

// RTTFloor is the RTT floor: the minimal raw loop. c.Size-byte
// datagrams ping-pong over connected non-blocking loopback UDP sockets
// with sendto/recvfrom through unix.Syscall6. In spin mode two threads
// pinned to c.CPUs busy-loop on EAGAIN. In park mode two plain goroutines
// wait for EAGAIN to clear on Go's netpoller (os.File's RawConn: the
// runtime's epoll and nothing of ours), as the park loops do. Row name
// "floor-loop".
//
// A blocking recvfrom is not the park floor on a VM: a thread asleep in
// the kernel leaves its vCPU idle, and waking a halted vCPU costs the
// host's scheduling, many times what a goroutine parked on the
// netpoller, which spins briefly before it sleeps, takes (docs/bench.md,
// "The floors").
func RTTFloor(c RTTConfig) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	cli, srv, err := floorUDPPair(true)
	if err != nil {
		return Row{}, err
	}
	if n := runtime.GOMAXPROCS(0); n < 4 {
		runtime.GOMAXPROCS(4) // two spinners keep their Ps; leave room for the rest
		defer runtime.GOMAXPROCS(n)
	}
	// recv waits for one datagram on fd until deadline (lost: 0, 0).
	var recv func(fd int, p []byte, deadline time.Time) (int, unix.Errno)
	var closeAll func()
	var stop atomic.Bool
	if c.Mode == affinity.Spin {
		closeAll = func() { unix.Close(cli); unix.Close(srv) }
		recv = func(fd int, p []byte, deadline time.Time) (int, unix.Errno) {
			for spins := 0; ; spins++ {
				n, e := rawRecv(fd, p)
				if e != unix.EAGAIN && e != unix.EINTR {
					return n, e
				}
				if spins&1023 == 1023 && (stop.Load() || time.Now().After(deadline)) {
					return 0, 0
				}
			}
		}
	} else {
		files := map[int]*os.File{cli: os.NewFile(uintptr(cli), "floor-cli"), srv: os.NewFile(uintptr(srv), "floor-srv")}
		conns := map[int]syscall.RawConn{}
		for fd, f := range files {
			rc, err := f.SyscallConn()
			if err != nil {
				files[cli].Close()
				files[srv].Close()
				return Row{}, err
			}
			conns[fd] = rc
		}
		closeAll = func() { files[cli].Close(); files[srv].Close() }
		type waitState struct {
			p  []byte
			n  int
			e  unix.Errno
			fn func(uintptr) bool
			rc syscall.RawConn
			f  *os.File
			dl time.Time
		}
		states := map[int]*waitState{}
		for fd := range files {
			ws := &waitState{rc: conns[fd], f: files[fd]}
			ws.fn = func(fd uintptr) bool {
				ws.n, ws.e = rawRecv(int(fd), ws.p)
				return ws.e != unix.EAGAIN
			}
			states[fd] = ws
		}
		recv = func(fd int, p []byte, deadline time.Time) (int, unix.Errno) {
			ws := states[fd]
			if !deadline.Equal(ws.dl) {
				ws.dl = deadline
				_ = ws.f.SetReadDeadline(deadline)
			}
			ws.p = p
			if err := ws.rc.Read(ws.fn); err != nil {
				return 0, 0 // deadline or closed
			}
			return ws.n, ws.e
		}
	}
	defer closeAll()

	var echoErr error
	echoDone, err := floorGo(c.Mode, c.CPUs[1], func() {
		buf := make([]byte, 2048)
		for !stop.Load() {
			n, e := recv(srv, buf, time.Now().Add(100*time.Millisecond))
			if e != 0 {
				echoErr = fmt.Errorf("benchkit: floor echo recvfrom: %w", e)
				return
			}
			if n == 0 {
				continue
			}
			for {
				e = rawSend(srv, buf[:n])
				if e != unix.EAGAIN && e != unix.ENOBUFS && e != unix.EINTR {
					break
				}
			}
			if e != 0 && e != unix.ECONNREFUSED {
				echoErr = fmt.Errorf("benchkit: floor echo sendto: %w", e)
				return
			}
		}
	})
	if err != nil {
		return Row{}, err
	}
	defer func() { stop.Store(true); <-echoDone }()

	s := NewSamples(c.N)
	var runErr error
	var el time.Duration
	lost := 0
	cliDone, err := floorGo(c.Mode, c.CPUs[0], func() {
		out := make([]byte, c.Size)
		in := make([]byte, 2048)
		start := time.Now()
		var deadline time.Time
		for i := 0; i < c.Warmup+c.N; i++ {
			if i == c.Warmup {
				start = time.Now()
			}
			binary.LittleEndian.PutUint64(out, uint64(i))
			t0 := time.Now()
			if i&63 == 0 {
				// A deadline refreshed every 64 pings: one ping waits
				// Timeout at least, and no timer is reset per ping.
				deadline = t0.Add(2 * c.Timeout)
			}
			for {
				e := rawSend(cli, out)
				if e == 0 {
					break
				}
				if e != unix.EAGAIN && e != unix.ENOBUFS && e != unix.EINTR {
					runErr = fmt.Errorf("benchkit: floor sendto: %w", e)
					return
				}
			}
			for {
				n, e := recv(cli, in, deadline)
				if e != 0 {
					runErr = fmt.Errorf("benchkit: floor recvfrom: %w", e)
					return
				}
				if n == 0 { // deadline
					lost++
					deadline = time.Now().Add(2 * c.Timeout)
					break
				}
				if n >= 8 && binary.LittleEndian.Uint64(in) == uint64(i) {
					if i >= c.Warmup {
						s.Record(int64(time.Since(t0)))
					}
					break
				}
			}
		}
		el = time.Since(start)
	})
	if err != nil {
		return Row{}, err
	}
	<-cliDone
	if runErr != nil {
		return Row{}, runErr
	}
	stop.Store(true)
	<-echoDone
	if echoErr != nil {
		return Row{}, echoErr
	}
	row := Row{Workload: "rtt", Name: "floor-loop", Path: "sendto/recvfrom", Mode: c.Mode.String(),
		Latency: s.Summarize(), Records: int64(s.Len()), Seconds: el.Seconds()}
	row.RecPerS = float64(s.Len()) / el.Seconds()
	row.Note = "minimal raw loop: unix.Syscall6, no datapath"
	if c.Mode != affinity.Spin {
		row.Note += ", netpoller wait"
	}
	if lost > 0 {
		row.Note += fmt.Sprintf("; %d pings lost", lost)
	}
	return row, nil
}

// floorGo runs f on a pinned locked thread (spin) or a plain goroutine
// (park, as the loops' park mode does).
func floorGo(mode affinity.Strategy, cpu int, f func()) (<-chan struct{}, error) {
	if mode == affinity.Spin {
		return floorThread(cpu, f)
	}
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return done, nil
}

// floorBatch makes the floor rows' batches: per frames of size bytes
// for one GSO sendto. Plain, one buffer whose frames get their seq
// stamped. Framed (floor+frame), the wire format's per-record work: each
// record's payload copied from the producer's buffer into the next slot
// of a ring as large as the casting Sender's hot ring
// (protocol.DefaultSendRingSlots frames, whole batches so that none
// wraps), its seq stamped and the frame sealed (wire.Seal: header,
// CRC-32C); the batch is its slots, back to back.
type floorBatch struct {
	per, size         int
	framed            bool
	out, ring, record []byte
	off               int
	seq               uint64
}

func newFloorBatch(c ThroughputConfig, framed bool) *floorBatch {
	f := &floorBatch{per: c.gsoPerSend(), size: c.Size, framed: framed}
	f.out = make([]byte, f.per*c.Size)
	if framed {
		f.ring = make([]byte, (protocol.DefaultSendRingSlots+f.per-1)/f.per*f.per*c.Size)
		f.record = make([]byte, c.Size-wire.HeaderSize)
	}
	return f
}

// next returns the next batch to send.
func (f *floorBatch) next() []byte {
	if !f.framed {
		for j := 0; j < f.per; j++ {
			binary.LittleEndian.PutUint64(f.out[j*f.size:], f.seq+uint64(j))
		}
		return f.out
	}
	if f.off+len(f.out) > len(f.ring) {
		f.off = 0
	}
	b := f.ring[f.off : f.off+len(f.out)]
	for j := 0; j < f.per; j++ {
		fr := b[j*f.size : (j+1)*f.size]
		copy(fr[wire.HeaderSize:], f.record)
		binary.LittleEndian.PutUint64(fr[wire.HeaderSize:], f.seq+1+uint64(j))
		_ = wire.Seal(fr, 1)
	}
	return b
}

// sent moves on past the batch next returned, which went out.
func (f *floorBatch) sent() {
	f.seq += uint64(f.per)
	if f.framed {
		f.off += len(f.out)
	}
}

// errFrameCheck: a frame floor+frame received failed its decode or CRC
// check. On loopback that is a bug or corrupted memory, never noise: the
// row fails rather than report a rate.
var errFrameCheck = errors.New("benchkit: floor+frame: a received frame failed its header or CRC check")

// checkFrames decodes and checks (header, CRC-32C) every frame of a
// received super-datagram, as a receiver of the wire format must.
func checkFrames(b []byte) bool {
	for len(b) > 0 {
		_, _, n, err := wire.DecodeFrame(b)
		if err != nil {
			return false
		}
		b = b[n:]
	}
	return true
}

// ThroughputFloor is the throughput floor: raw UDP GSO on send and GRO
// on receive with nothing of ours in between. One pinned thread sets
// UDP_SEGMENT to c.Size once and sends super-datagrams of as many frames
// as fit 65 000 bytes (at most 64) with sendto; one pinned thread
// receives with recvmsg into a 64 KiB buffer (UDP_GRO on) and counts the
// frames. The sender keeps at most c.Window frames in flight, as the
// other throughput rows do, so the row measures lossless throughput.
// Row name "floor-gso-gro".
func ThroughputFloor(c ThroughputConfig) (Row, error) { return throughputFloor(c, false) }

// ThroughputFloorFrame is ThroughputFloor plus the wire format's own
// per-record work and nothing else of ours (floorBatch): the sender
// copies every record into a ring of the hot ring's size and seals it,
// the receiver decodes and checks every frame. The least any
// implementation that retransmits from memory and checks the CRC can do
// per record: the bound for the casting rows. Row name "floor+frame".
func ThroughputFloorFrame(c ThroughputConfig) (Row, error) { return throughputFloor(c, true) }

func throughputFloor(c ThroughputConfig, framed bool) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	tx, rx, err := floorGSOPair(c.Size)
	if err != nil {
		return Row{}, err
	}
	defer unix.Close(tx)
	defer unix.Close(rx)
	if n := runtime.GOMAXPROCS(0); n < 4 {
		runtime.GOMAXPROCS(4)
		defer runtime.GOMAXPROCS(n)
	}
	fb := newFloorBatch(c, framed)
	per := fb.per
	var stop atomic.Bool
	var got atomic.Int64
	var rxErr error
	rxDone, err := floorThread(c.CPUs[1], func() {
		g := newGRORecv(rx)
		var n64 int64
		for {
			k, e := g.recv()
			if e == unix.EAGAIN || e == unix.EINTR {
				if stop.Load() {
					break
				}
				continue
			}
			if e != 0 {
				rxErr = fmt.Errorf("benchkit: floor recvmsg: %w", e)
				break
			}
			if framed && !checkFrames(g.buf[:g.n]) {
				rxErr = errFrameCheck
				break
			}
			n64 += int64(k)
			got.Store(n64)
		}
		got.Store(n64)
	})
	if err != nil {
		return Row{}, err
	}
	var sent int64
	var txErr error
	var el time.Duration
	txDone, err := floorThread(c.CPUs[0], func() {
		start := time.Now()
		end := start.Add(c.Duration)
		for i := 0; ; i++ {
			if i&63 == 0 && !time.Now().Before(end) {
				break
			}
			if c.Window > 0 && sent-got.Load() > int64(c.Window) {
				continue
			}
			e := rawSend(tx, fb.next())
			if e == unix.EAGAIN || e == unix.ENOBUFS || e == unix.EINTR {
				continue
			}
			if e != 0 {
				txErr = fmt.Errorf("benchkit: floor sendto (GSO): %w", e)
				break
			}
			sent += int64(per)
			fb.sent()
		}
		el = time.Since(start)
	})
	if err != nil {
		stop.Store(true)
		<-rxDone
		return Row{}, err
	}
	<-txDone
	for t := time.Now(); got.Load() < sent && time.Since(t) < 200*time.Millisecond; {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	<-rxDone
	if txErr != nil {
		return Row{}, txErr
	}
	if rxErr != nil {
		return Row{}, rxErr
	}
	row := Row{Workload: "throughput", Name: "floor-gso-gro", Path: "sendto/recvmsg"}
	row.fill(got.Load(), c.Size, el.Seconds())
	row.Note = fmt.Sprintf("size=%d sent=%d, %d frames per GSO send; no datapath", c.Size, sent, per)
	if framed {
		row.Name = "floor+frame"
		row.Note = fmt.Sprintf("size=%d sent=%d, %d frames per GSO send, each copied into a %d-frame ring and sealed, decoded and checked on receive; no datapath, no protocol", c.Size, sent, per, len(fb.ring)/c.Size)
	}
	return row, nil
}

// DiskFloor is the disk's floor for the bytes of a throughput run: one
// thread writing sequentially with O_DIRECT in 1 MiB aligned blocks and
// fdatasync after each, to a preallocated file in dir, for d. RecPerS is
// the byte rate divided by size: the records/s the disk alone allows.
// Row name "floor-odirect". Where the filesystem refuses O_DIRECT the row
// says so and writes buffered (+ fdatasync).
func DiskFloor(dir string, size int, d time.Duration) (Row, error) {
	const block = 1 << 20
	const file = 512 << 20
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("floor-odirect-%d", os.Getpid()))
	defer os.Remove(path)
	note := "O_DIRECT 1 MiB writes + fdatasync; no wal"
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		note = fmt.Sprintf("buffered 1 MiB writes + fdatasync (O_DIRECT refused: %v)", err)
		if fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644); err != nil {
			return Row{}, fmt.Errorf("benchkit: disk floor: open %s: %w", path, err)
		}
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, file); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return Row{}, fmt.Errorf("benchkit: disk floor: fallocate: %w", err)
	}
	mem, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Row{}, fmt.Errorf("benchkit: disk floor: mmap: %w", err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i)
	}
	var bytes int64
	start := time.Now()
	for off := int64(0); time.Since(start) < d; off = (off + block) % file {
		if _, err := unix.Pwrite(fd, mem, off); err != nil {
			return Row{}, fmt.Errorf("benchkit: disk floor: pwrite: %w", err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			return Row{}, fmt.Errorf("benchkit: disk floor: fdatasync: %w", err)
		}
		bytes += block
	}
	el := time.Since(start).Seconds()
	row := Row{Workload: "throughput", Name: "floor-odirect", Path: "disk", Seconds: el}
	row.fill(bytes/int64(size), size, el)
	row.Note = fmt.Sprintf("size=%d %.0f MB/s, %s", size, float64(bytes)/el/1e6, note)
	return row, nil
}

// walConfig is the WAL configuration of every WAL-on throughput row and
// of the WAL-alone floor, so they measure the same log.
func walConfig(dir string) wal.Config {
	return wal.DefaultConfig(dir)
}

// WALAlone is the WAL's own floor for a throughput run: one goroutine
// appends (c.Size − 16)-byte payloads to a wal.Writer for c.Duration as
// fast as the Writer takes them (spinning on backpressure), then flushes.
// RecPerS counts records made durable, up to the end of the last flush.
// No network, no loop. Row name "wal-alone".
func WALAlone(c ThroughputConfig) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	dir, err := os.MkdirTemp(c.Dir, "walcast-bench-wal-")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	w, err := wal.Open(walConfig(dir))
	if err != nil {
		return Row{}, err
	}
	defer w.Close()
	p := make([]byte, c.Size-wire.HeaderSize)
	var n, bp int64
	// The appender runs on this locked thread, so its CPU time is the
	// thread's; the rest of the process's CPU time is the WAL's I/O
	// goroutine (and the runtime): the core share the I/O needs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	proc0, thr0 := cpuTimes()
	start := time.Now()
	end := start.Add(c.Duration)
	for i := 0; ; i++ {
		if i&255 == 0 && !time.Now().Before(end) {
			break
		}
		if _, err := w.Append(1, p); err != nil {
			if errors.Is(err, wal.ErrBackpressure) {
				bp++
				continue
			}
			return Row{}, err
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return Row{}, err
	}
	el := time.Since(start).Seconds()
	proc1, thr1 := cpuTimes()
	st := w.Stats()
	row := Row{Workload: "throughput", Name: "wal-alone", Path: "disk"}
	row.fill(n, c.Size, el)
	io := float64((proc1-proc0)-(thr1-thr0)) / 1e9 / el
	row.Note = fmt.Sprintf("size=%d %.0f MB/s, %d flushes (p50 %v), backpressure %d, direct=%v; appender %.0f%% of a core, I/O goroutine + runtime %.0f%% of a core (%.0f ns per record)",
		c.Size, float64(n)*float64(c.Size)/el/1e6, st.Flushes, st.FlushP50.Round(time.Microsecond), bp, st.Direct,
		100*float64(thr1-thr0)/1e9/el, 100*io, float64((proc1-proc0)-(thr1-thr0))/float64(max(n, 1)))
	return row, nil
}

// cpuTimes returns the process's and the calling thread's CPU time, ns.
func cpuTimes() (proc, thread int64) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		proc = ru.Utime.Nano() + ru.Stime.Nano()
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) == nil {
		thread = ts.Nano()
	}
	return proc, thread
}
