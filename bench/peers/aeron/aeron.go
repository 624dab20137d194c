// Package aeron is the optional Aeron row. Aeron has no Go client that
// can be fetched as a module, so the row binds Aeron's C media driver
// library (libaeron_driver.so, which also holds the whole C client API)
// at run time with purego when the user has built it; without it the row
// is skipped and says which file it looked for. purego makes the bench
// binary dynamically linked, which is why it lives here and never in the
// transport's packages.
//
// Each end of a pair is what the suite's other spinning peers are: one
// thread. It runs its own embedded C media driver in invoker mode
// (AERON_THREADING_MODE_INVOKER: the driver's conductor, sender and
// receiver agents run one duty cycle per aeron_driver_main_do_work call)
// and its own client with the conductor agent invoker, and drives both
// from the side's thread in every Send retry, Flush and Recv spin. End A
// publishes on aeron:udp to B's endpoint (stream 1001) and subscribes on
// its own (stream 1002); B the other way round. Publications are
// exclusive (one writer each); received fragments go through the C
// client's fragment assembler to one purego callback. No extra threads:
// on a machine with as many cores as the suite pins (two), Aeron's
// default dedicated driver threads would share them with the spinning
// ends.
package aeron

import (
	"github.com/walcast/walcast/bench/peers"
)

// LibDirEnv names the directory holding libaeron_driver.so; unset, the
// dynamic loader's search path is used.
const LibDirEnv = "AERON_LIB_DIR"

// Library is the file the row loads: Aeron's C media driver library,
// which carries the C client API too.
const Library = "libaeron_driver.so"

// Peer is the Aeron row: skipped, with the reason, when the library
// cannot be loaded.
func Peer() peers.Peer {
	p := peers.Peer{Name: "aeron", Mode: "spin", Reliable: true, Open: open}
	if _, err := load(); err != nil {
		p.Skip = err.Error()
		p.Open = nil
	}
	return p
}
