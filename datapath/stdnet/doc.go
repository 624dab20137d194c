// Package stdnet is the portable datapath: a [datapath.Path] over the
// standard library's net.UDPConn (or any net.PacketConn), so the casting
// runtime and its tests run on every GOOS, and a program can hand walcast
// a socket it made itself.
//
// How it differs from the Linux paths (datapath/udp and datapath/mmsg,
// the defaults on Linux):
//   - A reader goroutine blocks in ReadFrom and passes datagrams to Recv
//     through a queue of preallocated slots (Config.Slots of
//     Config.SlotSize bytes): Recv never makes a system call, but every
//     datagram is copied once more and crosses a goroutine, which costs
//     latency (a wake-up when the loop parks) and a CPU for the reader.
//     When the queue is full, datagrams are dropped and counted, as a
//     full socket buffer would.
//   - Send makes one write per datagram through the net package; a full
//     socket buffer blocks the write instead of returning EAGAIN (UDP
//     rarely does).
//   - No busy polling, GSO, GRO, sendmmsg or recvmmsg, no NAPI id.
//
// Send, Recv and RecvWait allocate nothing with a *net.UDPConn (ReadFrom
// and WriteTo of another net.PacketConn allocate an address each).
package stdnet
