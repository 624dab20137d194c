// Package cast is what a user of walcast imports: a [Producer] publishes
// a stream — records appended to a write-ahead log, sent over UDP by the
// protocol sender on its own pinned loop thread, retransmitted when a
// consumer NAKs them (from the hot ring, else from the log), and served
// over TCP to consumers that fall behind — and a [Consumer] follows one:
// the protocol receiver on its own loop thread delivers every record
// once, in seq order, NAKs gaps, and catches up over TCP when UDP cannot
// repair one. The package example is a complete program.
//
// Underneath, [Loop] binds a sans-I/O core from package
// [github.com/walcast/walcast/cast/protocol] (a Sender, a Receiver or
// both) to a datapath on one locked, pinned OS thread; programs that run
// their own protocol logic in the loop (ping-pong, relays, benchmarks)
// use it directly. On a host with few CPUs, several loops (a producer's
// and a consumer's) can take turns on one [SharedThread].
//
// Every config struct's zero value is valid: a zero field means its
// default. Misuse fails in the constructor with an error matching
// [ErrConfig] that names the field. docs/library.md has the rules;
// docs/portability.md what changes off Linux.
package cast
