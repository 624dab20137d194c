// Package batch owns the message vector that every datapath shares: a
// fixed number of preallocated datagram buffers with their lengths and
// peer addresses. A [Vec] is filled by the protocol core (outgoing) or by
// a datapath (incoming) and drained by the other side; nothing in it
// allocates after [New].
//
// The Linux-only parts of this package (sendmmsg/recvmmsg over raw file
// descriptors, UDP GSO/GRO) live in *_linux.go files.
package batch
