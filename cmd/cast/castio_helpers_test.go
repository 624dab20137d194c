package main

import "github.com/walcast/walcast/cast"

func eventFaultedForTest() cast.Event {
	return cast.Event{Kind: cast.EventFaulted, Outcome: cast.Outcome{Kind: cast.Faulted, LastDelivered: 10, GapStart: 11, GapEnd: 12, Cause: cast.RetryBudget}}
}
