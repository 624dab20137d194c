package cast

import "testing"

// TestEventNames pins each kind's name: `cast recv -json` prints them in
// its "event" field, so they are a user interface and do not change.
func TestEventNames(t *testing.T) {
	want := map[EventKind]string{
		EventFaulted: "faulted", EventReconnect: "reconnect", EventSenderRestarted: "sender_restarted",
		EventPeerSilent: "peer_silent", EventPeerHeard: "peer_heard", EventError: "error", EventSkip: "skip",
		EventLogError: "log_error", EventLogRecovered: "log_recovered", EventLateStart: "late_start",
		EventReceiverJoined: "receiver_joined", EventReceiverRestarted: "receiver_restarted",
		EventReceiverLost: "receiver_lost", EventReceiverLeft: "receiver_left", EventReceiverFaulted: "receiver_faulted",
		EventReceiverRecovered: "receiver_recovered", EventReceiverStalled: "receiver_stalled", EventEnded: "ended",
		EventSenderFound: "sender_found", EventCatchingUp: "catching_up", EventCaughtUp: "caught_up",
		EventLive: "live", EventKeyUnknown: "key_unknown",
		EventColdTooLarge: "cold_too_large",
	}
	seen := map[string]EventKind{}
	for k := EventKind(1); k < EventKind(len(eventNames)); k++ {
		name, ok := want[k]
		if !ok {
			t.Errorf("kind %d (%v) has no pinned name: add it here", k, k)
			continue
		}
		if k.String() != name {
			t.Errorf("kind %d is %q, want %q", k, k.String(), name)
		}
		if o, dup := seen[name]; dup {
			t.Errorf("kinds %d and %d are both %q", o, k, name)
		}
		seen[name] = k
	}
	if len(want) != len(eventNames)-1 {
		t.Errorf("%d kinds pinned, %d defined", len(want), len(eventNames)-1)
	}
}
