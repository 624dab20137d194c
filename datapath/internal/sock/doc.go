// Package sock is what datapath/udp and datapath/mmsg share: it opens
// the raw, non-blocking UDP socket they drive (unix.Socket, 8 MiB
// buffers, SO_BUSY_POLL, SO_RXQ_OVFL, bind with a clear error for a port
// in use, connect when the peer is fixed), owns the fd's lifetime and the
// closed flag, parks RecvWait on Go's netpoller without allocating,
// holds the counters both paths keep, and builds their *net.OpError
// values. Socket options every socket path needs (multicast membership,
// for one) belong here, in configure. It never reads or writes datagrams
// itself: the send and receive loops, the hot paths, stay in each path.
//
// On other platforms it provides only [Unsupported], the method set of
// the paths' stubs.
package sock
