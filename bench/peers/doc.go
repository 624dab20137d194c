// Package peers holds the protocols walcast is compared with, each a real
// implementation that parses what it receives as a real peer would: raw
// UDP (the floor), TCP_NODELAY, MoldUDP64, SoupBinTCP, KCP, QUIC (stream
// and datagrams), the classic stop-and-wait ARQ, and Aeron when its C
// client library is installed.
//
// Every peer is opened as a connected [Pair] on loopback: A is the
// sending side of the primary direction, B the receiving side, and B can
// answer (echo) to A. The harness in bench/harness drives every peer the
// same way; a peer never measures itself.
//
// Peers must not import the bench harness or the report; they may import
// the main module's packages.
package peers
