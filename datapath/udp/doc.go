// Package udp is the plainest datapath: one sendto per outgoing datagram
// and one recvfrom per incoming one, on a raw non-blocking socket (see
// datapath/internal/sock). It is the latency path and the floor the
// batched paths are compared with. It owns its socket; it never blocks
// in Send or Recv, never allocates there, and never logs.
package udp
