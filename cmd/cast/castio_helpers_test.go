package main

import (
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/cast/protocol"
)

func eventFaultedForTest() cast.Event {
	return cast.Event{Kind: cast.EventFaulted, Handled: true, Outcome: protocol.Outcome{Kind: protocol.Faulted, LastDelivered: 10, GapStart: 11, GapEnd: 12, Cause: protocol.RetryBudget}}
}
