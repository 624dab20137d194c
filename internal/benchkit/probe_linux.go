package benchkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loopPair opens two non-blocking UDP sockets on 127.0.0.1, a connected
// to b, and returns their fds and b's address.
func loopPair() (a, b int, bAddr *unix.SockaddrInet4, err error) {
	lo := [4]byte{127, 0, 0, 1}
	mk := func() (int, error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: lo}); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
	if a, err = mk(); err != nil {
		return -1, -1, nil, err
	}
	if b, err = mk(); err != nil {
		unix.Close(a)
		return -1, -1, nil, err
	}
	sa, err := unix.Getsockname(b)
	if err != nil {
		unix.Close(a)
		unix.Close(b)
		return -1, -1, nil, err
	}
	bAddr = sa.(*unix.SockaddrInet4)
	if err := unix.Connect(a, bAddr); err != nil {
		unix.Close(a)
		unix.Close(b)
		return -1, -1, nil, err
	}
	return a, b, bAddr, nil
}

// recvWait reads one datagram from a non-blocking fd, waiting up to 1 s.
func recvWait(fd int, p, oob []byte) (n, oobn int, err error) {
	deadline := time.Now().Add(time.Second)
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, p, oob, 0)
		if err != unix.EAGAIN {
			return n, oobn, err
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("no datagram within 1s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// probeGSO sends one 256-byte write with UDP_SEGMENT=128 over loopback
// and checks that it arrives as two 128-byte datagrams. Linux 7.0–7.1.4
// mangle equal-length GSO segments; the kernel release is reported so a
// reader can tell.
func probeGSO(string) (string, error) {
	a, b, _, err := loopPair()
	if err != nil {
		return "", err
	}
	defer unix.Close(a)
	defer unix.Close(b)
	rel := kernelRelease()
	if err := unix.SetsockoptInt(a, unix.SOL_UDP, unix.UDP_SEGMENT, 128); err != nil {
		return "kernel " + rel, fmt.Errorf("setsockopt UDP_SEGMENT: %v: %w", err, ErrUnsupported)
	}
	if _, err := unix.Write(a, bytes.Repeat([]byte{7}, 256)); err != nil {
		// EIO: the egress device cannot checksum segments.
		return "kernel " + rel, fmt.Errorf("GSO write: %v: %w", err, ErrUnsupported)
	}
	p := make([]byte, 2048)
	var sizes []int
	for range 2 {
		n, _, err := recvWait(b, p, nil)
		if err != nil {
			return "", err
		}
		sizes = append(sizes, n)
	}
	if sizes[0] != 128 || sizes[1] != 128 {
		return "", fmt.Errorf("segments of %v bytes, want 128+128", sizes)
	}
	return fmt.Sprintf("256 B write split into 2×128 B on lo (kernel %s)", rel), nil
}

// probeGRO enables UDP_GRO on the receiver and sends a GSO burst: with GRO
// the burst arrives as one coalesced read carrying a UDP_GRO cmsg.
func probeGRO(string) (string, error) {
	a, b, _, err := loopPair()
	if err != nil {
		return "", err
	}
	defer unix.Close(a)
	defer unix.Close(b)
	if err := unix.SetsockoptInt(b, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
		return "", fmt.Errorf("setsockopt UDP_GRO: %v: %w", err, ErrUnsupported)
	}
	if err := unix.SetsockoptInt(a, unix.SOL_UDP, unix.UDP_SEGMENT, 128); err != nil {
		return "UDP_GRO set", nil // GRO works; nothing to coalesce with
	}
	if _, err := unix.Write(a, bytes.Repeat([]byte{7}, 512)); err != nil {
		return "UDP_GRO set; GSO burst refused", nil
	}
	p := make([]byte, 65535) // GRO needs room for the whole coalesced read
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, err := recvWait(b, p, oob)
	if err != nil {
		return "", err
	}
	seg := 0
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_UDP && m.Header.Type == unix.UDP_GRO && len(m.Data) >= 2 {
				seg = int(*(*uint16)(unsafe.Pointer(&m.Data[0])))
			}
		}
	}
	if seg > 0 {
		return fmt.Sprintf("4×128 B burst read as one %d B buffer, segment %d B", n, seg), nil
	}
	return fmt.Sprintf("UDP_GRO set; burst read as %d B without a GRO cmsg", n), nil
}

// probeBusyPoll sets SO_BUSY_POLL and reads SO_INCOMING_NAPI_ID after one
// packet. Busy polling acts only when the socket's sk_napi_id is a real
// NAPI id (sk_can_busy_loop); loopback and plain veth report 0, so there
// it is a no-op.
func probeBusyPoll(string) (string, error) {
	a, b, _, err := loopPair()
	if err != nil {
		return "", err
	}
	defer unix.Close(a)
	defer unix.Close(b)
	if err := unix.SetsockoptInt(b, unix.SOL_SOCKET, unix.SO_BUSY_POLL, 50); err != nil {
		return "", fmt.Errorf("SO_BUSY_POLL: %v: %w", err, ErrUnsupported)
	}
	prefer := "SO_PREFER_BUSY_POLL ok"
	if err := unix.SetsockoptInt(b, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1); err != nil {
		prefer = "SO_PREFER_BUSY_POLL: " + err.Error()
	}
	if _, err := unix.Write(a, []byte{1}); err != nil {
		return "", err
	}
	p := make([]byte, 16)
	if _, _, err := recvWait(b, p, nil); err != nil {
		return "", err
	}
	id, err := unix.GetsockoptInt(b, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		return "SO_BUSY_POLL=50 ok; " + prefer, fmt.Errorf("SO_INCOMING_NAPI_ID: %v: %w", err, ErrUnsupported)
	}
	if id == 0 {
		return "SO_BUSY_POLL=50 ok; " + prefer, fmt.Errorf("NAPI id 0 on lo, so busy polling is a no-op here: %w", ErrUnsupported)
	}
	return fmt.Sprintf("SO_BUSY_POLL=50 ok; %s; NAPI id %d on lo", prefer, id), nil
}

// probeODirect opens a scratch file with O_DIRECT in dir, asks statx for
// the DIO alignment and writes one aligned block.
func probeODirect(dir string) (string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "walcast-odirect-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return dir, fmt.Errorf("open O_DIRECT: %v: %w", err, ErrUnsupported)
	}
	defer unix.Close(fd)
	memAlign, offAlign := 4096, 4096
	var sx unix.Statx_t
	align := "statx DIOALIGN n/a, assuming 4096"
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx); err == nil && sx.Mask&unix.STATX_DIOALIGN != 0 && sx.Dio_mem_align > 0 {
		memAlign, offAlign = int(sx.Dio_mem_align), int(sx.Dio_offset_align)
		align = fmt.Sprintf("align mem %d / offset %d", memAlign, offAlign)
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return "", err
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pwrite(fd, buf[:max(memAlign, offAlign, 512)], 0); err != nil {
		return align, fmt.Errorf("aligned O_DIRECT write: %v: %w", err, ErrUnsupported)
	}
	return fmt.Sprintf("%s (%s)", align, fsName(dir)), nil
}

// fsName is the filesystem type of dir from statfs magic numbers.
func fsName(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return filepath.Clean(dir)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return dir + " on ext4"
	case unix.TMPFS_MAGIC:
		return dir + " on tmpfs"
	case unix.XFS_SUPER_MAGIC:
		return dir + " on xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return dir + " on btrfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return dir + " on overlayfs"
	}
	return fmt.Sprintf("%s on fs 0x%x", dir, st.Type)
}

// probeXDP checks that AF_XDP sockets can be created. Attaching a program
// needs the bpf package; the report says which mode loopback can offer:
// lo has no native XDP driver hook, so only generic (skb) mode, which is
// what the xdp datapath uses there and on veth without native support.
func probeXDP(string) (string, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("AF_XDP socket: %v: %w", err, ErrUnsupported)
	}
	unix.Close(fd)
	return "AF_XDP socket ok; lo: generic (skb) mode only, no native driver hook", nil
}

// probePerf opens the counter group on a locked thread and lists what
// counts.
func probePerf(string) (string, error) {
	type res struct {
		avail, na []string
		err       error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c, err := OpenCounters() // usable even on error: every event n/a
		defer func() { c.Close() }()
		var r res
		r.err = err
		r.avail = c.Available()
		for i, w := range c.why {
			if w != "" {
				r.na = append(r.na, PerfEvents[i]+" ("+strings.SplitN(w, ":", 2)[0]+")")
			}
		}
		ch <- r
	}()
	r := <-ch
	d := "counting: " + strings.Join(r.avail, ", ")
	if len(r.na) > 0 {
		d += "; n/a: " + strings.Join(r.na, ", ")
	}
	if r.err != nil {
		return d, r.err
	}
	if len(r.avail) < len(PerfEvents) {
		return d, fmt.Errorf("some events missing, software fallback: %w", ErrUnsupported)
	}
	return d, nil
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}
