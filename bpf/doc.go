// Package bpf owns walcast's XDP programs and their loaders. The programs
// are assembled in Go with github.com/cilium/ebpf/asm at run time (no clang,
// nothing generated is committed):
//
//   - Redirect sends IPv4/UDP datagrams for one destination port to the
//     AF_XDP socket registered for the receiving queue
//     (XSKMAP[rx_queue_index]) and passes everything else (ARP, ICMP, other
//     ports, IPv6, fragments, IPv4 with options) to the kernel stack.
//   - Impair drops a configured fraction of matching UDP datagrams
//     (bpf_get_prandom_u32), or exactly every Nth, optionally only those whose
//     first record has a given type, and counts what it saw in a map. It is
//     the loss injector for tests on hosts without netem. Its configuration is
//     a map, so [Impair.Set] changes the loss (for example 100 % for an
//     outage, then 0 %) while the program stays attached.
//   - TCImpair is the same impair logic as a direct-action tc classifier,
//     for an interface's egress (or ingress) hook, attached through TCX or
//     a clsact qdisc; on the ports of a bridge it impairs AF_XDP senders
//     too, whose copy-mode transmit skips their own egress hook.
//
// Only one XDP program can sit on an interface. An interface that carries a
// Redirect and needs loss as well gets an Impair embedded into the Redirect
// program ([RedirectConfig.Impair]); the same maps then drive it.
//
// Lifetime: New* creates maps and programs (needs root, or CAP_BPF and
// CAP_NET_ADMIN); Attach links the program to an interface through a bpf_link
// (native/driver mode first, generic/SKB mode as the fallback, the mode used
// is reported); Close detaches and frees everything. A process that dies
// detaches its links too, because nothing is pinned.
//
// The package must not open sockets, read configuration from the
// environment, or log. It runs on Linux; elsewhere the constructors return
// [ErrNotSupported].
//
// Frame layout the programs assume: Ethernet II without VLAN tag (14 bytes),
// IPv4 with IHL 5 (20 bytes), UDP (8 bytes), then the walcast frame whose
// record type is the little-endian u16 at offset 2 of the UDP payload.
package bpf
