// Package mem is an in-memory [datapath.Path] for deterministic tests of
// the protocol core: a [Network] of endpoints ([End]) that deliver
// datagrams through per-direction links with seeded, scriptable
// impairments (drop by probability or by index, duplicate, reorder by k
// positions, corrupt a byte, black-out a time window, fixed latency),
// driven by a [Clock] the test advances explicitly.
//
// Multicast: [Network.Join] makes an End a member of a group address; a
// datagram sent to the group crosses the group's upstream link once
// (loss there is shared) and then each member's own link (independent
// loss, delay, duplication, reordering per receiver). [NewFanout] builds
// one sender and N receivers with a data group and a control group.
//
// The same seed and the same sequence of Send, Recv and clock moves give
// the same deliveries, so a failing loss pattern replays exactly.
//
// Package mem owns no sockets and starts no goroutines. A Network is safe
// for concurrent use (one mutex), so two loops on two goroutines may
// drive the two ends of a pair; Send and Recv allocate nothing once the
// packet pool has warmed up.
package mem
