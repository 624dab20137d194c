// Package cast is the runtime of the casting protocol: [Loop] binds a
// sans-I/O core from package [protocol] (a Sender, a Receiver or both) to
// a datapath on one locked, pinned OS thread, and [Consumer] runs a live
// UDP Receiver with TCP catch-up from a replay server when the stream
// faults.
//
// The state machines themselves, their configuration, outcomes and
// statistics live in [github.com/walcast/walcast/cast/protocol], which
// imports no sockets, clocks, goroutines or disk; this package supplies
// them.
package cast
