// Package mmsg is the batched datapath: sendmmsg/recvmmsg over a raw
// non-blocking socket, with UDP GSO (runs of equal-length frames to one
// peer leave as one super-datagram the kernel splits) and UDP GRO (the
// kernel hands over coalesced runs that are split back into datagrams),
// each probed at start and used only where it works, and optional
// coalescing of consecutive frames into one datagram (their exact bytes
// back to back; walcast receivers accept it, a reference receiver does
// not, so it is off by default). It
// is the throughput path. It owns its socket; Send and Recv never block,
// allocate or log.
package mmsg
