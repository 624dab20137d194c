package tune

import "time"

// Prober answers what a file under /proc or /sys cannot: ethtool state of
// an interface, what the kernel grants a socket, whether O_DIRECT works in
// a directory. [NewProber] returns the platform's; tests pass a fake.
// Methods return an error wrapping [ErrNotSupported] where the kernel,
// driver or platform lacks the feature.
type Prober interface {
	// Driver returns the interface's driver name ("veth", "virtio_net").
	Driver(iface string) (string, error)
	// Features returns every ethtool feature of iface (names as in the
	// kernel's string set: "rx-gro", "tx-generic-segmentation",
	// "rx-udp-gro-forwarding") and whether it is active.
	Features(iface string) (map[string]bool, error)
	// SetFeature turns one feature on or off.
	SetFeature(iface, name string, on bool) error
	// Coalesce returns the interrupt-coalescing parameters of iface by
	// ethtool name: "rx-usecs", "rx-frames", "tx-usecs", "tx-frames",
	// "adaptive-rx", "adaptive-tx" (0/1).
	Coalesce(iface string) (map[string]uint32, error)
	// SetCoalesce sets one of the parameters Coalesce returns.
	SetCoalesce(iface, name string, v uint32) error
	// SocketBuffer opens a UDP socket, asks for bytes of receive and send
	// buffer (SO_RCVBUF/SO_SNDBUF, not the FORCE variants) and returns what
	// the kernel granted, in usable bytes (the read-back value halved).
	SocketBuffer(bytes int) (rcv, snd int, err error)
	// DirectIO probes dir: filesystem type, whether an O_DIRECT file can be
	// created and written with aligned buffers, and whether a misaligned
	// write is rejected. It creates and removes one file.
	DirectIO(dir string) (DirectIO, error)
	// NapiID listens on the UDP address addr for up to wait, and returns
	// SO_INCOMING_NAPI_ID of the first datagram (0: not received through
	// NAPI, so busy polling does nothing for that socket).
	NapiID(addr string, wait time.Duration) (uint32, error)
}

// DirectIO is what [Prober.DirectIO] found in a directory.
type DirectIO struct {
	FS                string // filesystem type ("ext4", "tmpfs", "xfs", or the magic in hex)
	Works             bool   // O_DIRECT open and an aligned 4 KiB write succeeded
	RejectsMisaligned bool   // a 1-byte write from a misaligned buffer failed (EINVAL)
	MemAlign          int    // STATX_DIOALIGN memory alignment, bytes (0: not reported)
	OffsetAlign       int    // STATX_DIOALIGN offset alignment, bytes (0: not reported)
	Err               string // why Works is false
}
