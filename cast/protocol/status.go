package protocol

import "github.com/walcast/walcast/wire"

// A Status frame (wire.Status) carries the sender's receiver's OutcomeKind
// as wire.Status.State: the numbers must stay the same. Each line fails to
// compile when they drift apart.
var (
	_ = [1]struct{}{}[uint8(Live)-wire.StateLive]
	_ = [1]struct{}{}[uint8(Faulted)-wire.StateFaulted]
	_ = [1]struct{}{}[uint8(Reconnect)-wire.StateReconnect]
	_ = [1]struct{}{}[uint8(SenderRestarted)-wire.StateSenderRestarted]
)
