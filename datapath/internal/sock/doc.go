// Package sock opens the raw, non-blocking UDP sockets that datapath/udp
// and datapath/mmsg drive: unix.Socket, 8 MiB buffers, SO_BUSY_POLL,
// SO_RXQ_OVFL, bind with a clear error for a port in use, connect when
// the peer is fixed, and an optional park-on-the-netpoller wait. It owns
// the fd's lifetime; it never reads or writes datagrams itself.
package sock
