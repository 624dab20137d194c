package suite

import (
	"github.com/walcast/walcast/bench/peers"
	"github.com/walcast/walcast/bench/peers/aeron"
	"github.com/walcast/walcast/bench/peers/kcp"
	"github.com/walcast/walcast/bench/peers/moldudp64"
	"github.com/walcast/walcast/bench/peers/quic"
	"github.com/walcast/walcast/bench/peers/rawudp"
	"github.com/walcast/walcast/bench/peers/saw"
	"github.com/walcast/walcast/bench/peers/soupbintcp"
	"github.com/walcast/walcast/bench/peers/tcp"
)

// LatencyPeers are the rows of the rtt and oneway workloads, floor first.
func LatencyPeers() []peers.Peer {
	return []peers.Peer{
		rawudp.Peer(), tcp.Peer(), moldudp64.Peer(), soupbintcp.Peer(),
		kcp.Peer(), quic.StreamPeer(), quic.DatagramPeer(), saw.Peer(), aeron.Peer(),
	}
}

// ThroughputPeers are the rows of the throughput workload, floors first.
func ThroughputPeers() []peers.Peer {
	return []peers.Peer{
		rawudp.Peer(), rawudp.MmsgPeer(), rawudp.GSOPeer(), tcp.Peer(), moldudp64.Peer(),
		soupbintcp.Peer(), kcp.Peer(), quic.StreamPeer(), saw.Peer(), aeron.Peer(),
	}
}

// LossPeers are the rows of loss-degradation, floor first. TCP runs
// there too: at 0 % beside the others, above it only where the suite can
// drop its segments (the row says when it cannot).
func LossPeers() []peers.Peer {
	return []peers.Peer{rawudp.Peer(), tcp.Peer(), moldudp64.Peer(), kcp.Peer(), quic.StreamPeer(), saw.Peer()}
}
