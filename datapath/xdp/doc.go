// Package xdp is the AF_XDP datapath: one AF_XDP socket bound to one queue
// of one interface, with its own UMEM and the four rings (fill, completion,
// RX, TX), and an XDP program (package bpf) that redirects the IPv4/UDP
// datagrams for our port into the socket while ARP, ICMP, other ports, IPv6
// and fragments keep going to the kernel.
//
// It implements [datapath.Path], so cast.Loop runs on it unchanged. Send
// builds Ethernet, IPv4 and UDP headers by hand into UMEM frames, with the
// IPv4 header checksum and the UDP checksum computed in software (the frame
// leaves through the driver as is, so nothing computes them later); Recv
// parses and checks them and copies each payload into the caller's
// [batch.Vec]. Both allocate nothing.
//
// Ownership and threads: a Path is used by one goroutine (the loop's pinned
// thread). [Open] must run in the network namespace of the interface (see
// internal/netns Host.Do in tests); the socket keeps that namespace, so the
// Path works from any thread afterwards. Close detaches the XDP program,
// closes the socket and unmaps the UMEM.
//
// Ring memory ordering follows libxdp's xsk.h: the consumer loads the
// producer index with an atomic load (acquire) before reading descriptors and
// publishes its consumer index with an atomic store (release) after; the
// producer does the reverse. Each index is loaded and stored at most once
// per batch; the cached copies avoid touching the shared cache line for
// every descriptor.
//
// Copy mode is used unless the driver accepts zero-copy (veth does not:
// bind with XDP_ZEROCOPY fails with EOPNOTSUPP). XDP_USE_NEED_WAKEUP is set,
// so the TX path makes a sendto only when the kernel asks for one; in copy
// mode it always does, because the copy-mode transmit runs inside sendto.
//
// One socket serves one queue: [Open] refuses a device with more RX queues
// than that (datagrams hashed to another queue would bypass the socket) and
// says how to fix it. The package must not log or read the environment.
package xdp
