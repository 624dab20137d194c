package tune

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewProber returns the Linux prober: ethtool through SIOCETHTOOL ioctls
// on an AF_INET socket (so it acts on the caller's network namespace),
// real sockets and a real O_DIRECT file.
func NewProber() Prober { return linuxProber{} }

type linuxProber struct{}

// ifreqData is struct ifreq with ifr_data: name, then a pointer. The
// kernel reads 40 bytes on 64-bit.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtool issues one SIOCETHTOOL on iface with buf as the command
// structure (its first u32 is the command).
func ethtool(iface string, buf []byte) error {
	if len(iface) >= unix.IFNAMSIZ || iface == "" {
		return fmt.Errorf("tune: bad interface name %q", iface)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tune: ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], iface)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		if errno == unix.EOPNOTSUPP || errno == errnoENOTSUPP {
			return fmt.Errorf("tune: ethtool %#x on %s: %w: %w", binary.NativeEndian.Uint32(buf), iface, ErrNotSupported, errno)
		}
		return fmt.Errorf("tune: ethtool %#x on %s: %w", binary.NativeEndian.Uint32(buf), iface, errno)
	}
	return nil
}

func (linuxProber) Driver(iface string) (string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, iface)
	if err != nil {
		return "", fmt.Errorf("tune: drvinfo %s: %w", iface, err)
	}
	return unix.ByteSliceToString(info.Driver[:]), nil
}

// featureNames returns the ETH_SS_FEATURES string set of iface.
func featureNames(iface string) ([]string, error) {
	const ethSSFeatures = 4
	// struct ethtool_sset_info { u32 cmd, reserved; u64 sset_mask; u32 data[] }
	si := make([]byte, 20)
	binary.NativeEndian.PutUint32(si[0:], unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(si[8:], 1<<ethSSFeatures)
	if err := ethtool(iface, si); err != nil {
		return nil, err
	}
	if binary.NativeEndian.Uint64(si[8:])&(1<<ethSSFeatures) == 0 {
		return nil, fmt.Errorf("tune: %s has no feature strings: %w", iface, ErrNotSupported)
	}
	n := int(binary.NativeEndian.Uint32(si[16:]))
	if n <= 0 || n > 4096 {
		return nil, fmt.Errorf("tune: %s reports %d feature strings", iface, n)
	}
	// struct ethtool_gstrings { u32 cmd, string_set, len; u8 data[len*32] }
	gs := make([]byte, 12+n*ethGStringLen)
	binary.NativeEndian.PutUint32(gs[0:], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(gs[4:], ethSSFeatures)
	binary.NativeEndian.PutUint32(gs[8:], uint32(n))
	if err := ethtool(iface, gs); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		s := gs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := bytes.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		names[i] = string(s)
	}
	return names, nil
}

// getFeatures returns the names and the raw ethtool_gfeatures blocks
// ({available, requested, active, never_changed} per 32 features).
func getFeatures(iface string) ([]string, []byte, error) {
	names, err := featureNames(iface)
	if err != nil {
		return nil, nil, err
	}
	blocks := (len(names) + 31) / 32
	gf := make([]byte, 8+blocks*16)
	binary.NativeEndian.PutUint32(gf[0:], unix.ETHTOOL_GFEATURES)
	binary.NativeEndian.PutUint32(gf[4:], uint32(blocks))
	if err := ethtool(iface, gf); err != nil {
		return nil, nil, err
	}
	return names, gf, nil
}

func (linuxProber) Features(iface string) (map[string]bool, error) {
	names, gf, err := getFeatures(iface)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			continue
		}
		active := binary.NativeEndian.Uint32(gf[8+(i/32)*16+8:])
		out[n] = active&(1<<(i%32)) != 0
	}
	return out, nil
}

func (linuxProber) SetFeature(iface, name string, on bool) error {
	names, gf, err := getFeatures(iface)
	if err != nil {
		return err
	}
	idx := -1
	for i, n := range names {
		if n == name {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("tune: %s has no feature %q: %w", iface, name, ErrNotSupported)
	}
	blk, bit := idx/32, uint32(1)<<(idx%32)
	if binary.NativeEndian.Uint32(gf[8+blk*16:])&bit == 0 {
		return fmt.Errorf("tune: %s: feature %s is fixed: %w", iface, name, ErrNotSupported)
	}
	// struct ethtool_sfeatures { u32 cmd, size; {u32 valid, requested}[size] }
	blocks := (len(names) + 31) / 32
	sf := make([]byte, 8+blocks*8)
	binary.NativeEndian.PutUint32(sf[0:], unix.ETHTOOL_SFEATURES)
	binary.NativeEndian.PutUint32(sf[4:], uint32(blocks))
	binary.NativeEndian.PutUint32(sf[8+blk*8:], bit)
	if on {
		binary.NativeEndian.PutUint32(sf[8+blk*8+4:], bit)
	}
	if err := ethtool(iface, sf); err != nil {
		return err
	}
	// The ioctl returns ETHTOOL_F_WISH etc. as a positive value we do not
	// see; read back instead.
	got, err := linuxProber{}.Features(iface)
	if err != nil {
		return err
	}
	if got[name] != on {
		return fmt.Errorf("tune: %s: feature %s stayed %s (a dependency is off?)", iface, name, onOff(got[name]))
	}
	return nil
}

// coalesceFields maps ethtool -C names to the u32 index in struct
// ethtool_coalesce (index 0 is cmd).
var coalesceFields = map[string]int{
	"rx-usecs": 1, "rx-frames": 2, "tx-usecs": 5, "tx-frames": 6,
	"adaptive-rx": 10, "adaptive-tx": 11,
}

const coalesceSize = 23 * 4

func getCoalesce(iface string) ([]byte, error) {
	b := make([]byte, coalesceSize)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GCOALESCE)
	return b, ethtool(iface, b)
}

func (linuxProber) Coalesce(iface string) (map[string]uint32, error) {
	b, err := getCoalesce(iface)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint32, len(coalesceFields))
	for n, i := range coalesceFields {
		out[n] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return out, nil
}

func (linuxProber) SetCoalesce(iface, name string, v uint32) error {
	i, ok := coalesceFields[name]
	if !ok {
		return fmt.Errorf("tune: unknown coalescing parameter %q", name)
	}
	b, err := getCoalesce(iface)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_SCOALESCE)
	binary.NativeEndian.PutUint32(b[4*i:], v)
	return ethtool(iface, b)
}

func (linuxProber) SocketBuffer(n int) (rcv, snd int, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("tune: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n); err != nil {
		return 0, 0, fmt.Errorf("tune: SO_RCVBUF: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n); err != nil {
		return 0, 0, fmt.Errorf("tune: SO_SNDBUF: %w", err)
	}
	// The kernel doubles the request (clamped to *mem_max) for its
	// bookkeeping overhead and reports the doubled value.
	r, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return 0, 0, err
	}
	s, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		return 0, 0, err
	}
	return r / 2, s / 2, nil
}

var fsNames = map[int64]string{
	unix.EXT4_SUPER_MAGIC: "ext4", unix.XFS_SUPER_MAGIC: "xfs", unix.TMPFS_MAGIC: "tmpfs",
	unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlay", unix.NFS_SUPER_MAGIC: "nfs",
	unix.RAMFS_MAGIC: "ramfs", 0x65735546: "fuse", unix.F2FS_SUPER_MAGIC: "f2fs",
}

func (linuxProber) DirectIO(dir string) (DirectIO, error) {
	var d DirectIO
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return d, fmt.Errorf("tune: statfs %s: %w", dir, err)
	}
	d.FS = fsNames[int64(st.Type)]
	if d.FS == "" {
		d.FS = fmt.Sprintf("fs-%#x", st.Type)
	}
	path := filepath.Join(dir, fmt.Sprintf(".cast-tune-probe-%d", os.Getpid()))
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			d.Err = "open with O_DIRECT: EINVAL (filesystem lacks it)"
			return d, nil
		}
		return d, fmt.Errorf("tune: create probe file in %s: %w", dir, err)
	}
	defer unix.Unlink(path)
	defer unix.Close(fd)
	var sx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx) == nil && sx.Mask&unix.STATX_DIOALIGN != 0 {
		d.MemAlign, d.OffsetAlign = int(sx.Dio_mem_align), int(sx.Dio_offset_align)
	}
	// Page-aligned memory outside the Go heap.
	buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return d, fmt.Errorf("tune: mmap: %w", err)
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pwrite(fd, buf[:4096], 0); err != nil {
		d.Err = "aligned 4 KiB write: " + err.Error()
		return d, nil
	}
	d.Works = true
	_, err = unix.Pwrite(fd, buf[1:2], 4096)
	d.RejectsMisaligned = errors.Is(err, unix.EINVAL)
	return d, nil
}

func (linuxProber) NapiID(addr string, wait time.Duration) (uint32, error) {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return 0, fmt.Errorf("tune: listen %s: %w", addr, err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	var b [2048]byte
	if _, _, err := c.ReadFrom(b[:]); err != nil {
		return 0, fmt.Errorf("tune: no datagram on %s within %v: %w", addr, wait, err)
	}
	rc, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var id int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		id, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("tune: SO_INCOMING_NAPI_ID: %w", serr)
	}
	return uint32(id), nil
}

const (
	// errnoENOTSUPP is the kernel-internal ENOTSUPP (524) that some
	// drivers leak through ethtool ioctls instead of EOPNOTSUPP.
	errnoENOTSUPP = unix.Errno(524)
	ethGStringLen = 32 // ETH_GSTRING_LEN
)
