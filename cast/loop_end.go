package cast

import (
	"fmt"

	"github.com/walcast/walcast/cast/protocol"
)

// End ends the Sender's stream from inside a loop callback (OnPoll,
// OnRecord, OnEvent): no record is sent after it, NAKs are still served,
// and receivers that negotiated hear the session end marker (repeated
// every heartbeat interval), so they report EventEnded once they have
// everything. Keep the loop running until the receivers are done (or a
// linger time) before Close. It must not be called from another
// goroutine.
func (l *Loop) End() error {
	if l.snd == nil {
		return fmt.Errorf("%w: loop has no Sender", protocol.ErrConfig)
	}
	l.snd.End(l.now, l.out)
	return nil
}
