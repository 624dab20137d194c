// Package fanout runs one casting sender and N receivers, each in its own
// network namespace on one Linux bridge (internal/netns LAN), with
// independent loss injected in the kernel on the way to every receiver
// (the tc-BPF impair program on its bridge port's egress), and measures what the fan-out goals ask:
// every record delivered once and in order at every receiver, datagrams
// on the wire per record, NAK frames per lost-record event, repair
// datagrams per lost seq, one-way latency per receiver, and a receiver
// killed and restarted mid-stream.
//
// The same runner serves the root-only tests (fanout_linux_test.go),
// `cast bench fanout` and the bench module's fan-out workload. The
// measurements come from taps on the datapaths (a wrapper that parses the
// frames crossing it), not from the protocol's own counters, so a
// counting bug in the core cannot flatter it.
//
// Package fanout creates namespaces and BPF programs (root only) and
// removes them before Run returns; it must not be imported by library
// code.
package fanout
