// Package datapath defines [Path], the interface through which the
// protocol core's datagrams move, and holds its implementations in
// sub-packages: udp (one syscall per datagram), mmsg (sendmmsg/recvmmsg
// with UDP GSO/GRO), xdp (AF_XDP) and mem (in-memory, with scripted
// impairments and a virtual clock, for deterministic tests).
//
// Package datapath itself holds no implementation and imports only batch.
package datapath
