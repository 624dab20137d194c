package protocol

import (
	"fmt"
	"time"
)

// SenderEventKind says what a [SenderEvent] reports.
type SenderEventKind uint8

// Sender events: changes in the set of receivers under flow control,
// and in the health of the log.
const (
	// ReceiverJoined: the first valid Status of a receiver id; flow
	// control, probes and adaptive timers are on for it.
	ReceiverJoined SenderEventKind = iota + 1
	// ReceiverRestarted: a new id from the address of a known receiver;
	// it replaced the old one (PrevID).
	ReceiverRestarted
	// ReceiverLost: no Status for ReceiverTimeout; dropped from flow
	// control (the sender is unthrottled by it).
	ReceiverLost
	// ReceiverLeft: the receiver said it is closing; dropped.
	ReceiverLeft
	// ReceiverFaulted: the receiver reported a sticky outcome (State);
	// it no longer throttles until it is live again.
	ReceiverFaulted
	// ReceiverRecovered: live again after ReceiverFaulted, or progressing
	// again after ReceiverStalled.
	ReceiverRecovered
	// ReceiverStalled: the receiver held the sender back for
	// ReceiverTimeout without delivering anything (a consumer that stopped
	// taking records, a path that carries its Status but not the data);
	// it no longer throttles until its delivered seq moves again.
	ReceiverStalled
	// LogError: the log cannot make records durable (Err: a full disk,
	// an I/O error, a stalled flush, as LogHealth reports it); heartbeats
	// are withheld until LogRecovered.
	LogError
	// LogRecovered: the log makes records durable again.
	LogRecovered
)

var senderEventNames = [...]string{ReceiverJoined: "receiver_joined", ReceiverRestarted: "receiver_restarted",
	ReceiverLost: "receiver_lost", ReceiverLeft: "receiver_left", ReceiverFaulted: "receiver_faulted",
	ReceiverRecovered: "receiver_recovered", ReceiverStalled: "receiver_stalled", LogError: "log_error",
	LogRecovered: "log_recovered"}

func (k SenderEventKind) String() string {
	if int(k) < len(senderEventNames) && senderEventNames[k] != "" {
		return senderEventNames[k]
	}
	return fmt.Sprintf("SenderEventKind(%d)", uint8(k))
}

// SenderEvent is one change in the flow-control table or in the log's
// health.
type SenderEvent struct {
	Kind     SenderEventKind
	At       int64 // sender clock, ns
	Receiver ReceiverInfo
	PrevID   uint64 // ReceiverRestarted: the id it replaced
	Err      error  // LogError: the log's error (its own value: nothing is allocated)
}

// NextEvent returns the oldest unread event. The loop drains it after
// Handle and Tick; at most maxEvents (32) wait
// (more are counted in SenderStats.EventsDropped).
func (s *Sender) NextEvent() (SenderEvent, bool) { return s.events.pop() }

// Events is the number of unread events: a loop checks it before it
// calls NextEvent.
func (s *Sender) Events() int { return s.events.n }

// logCheckInterval is how often Tick reads the log's health: a loop
// ticks far more often under load, and the read may cost a clock read
// (the log's stall check).
const logCheckInterval = int64(time.Millisecond)

// noteLog reads the log's health (LogHealth), at most once per
// logCheckInterval, and queues LogError when it starts failing,
// LogRecovered when it stops. Tick calls it first.
func (s *Sender) noteLog(now int64) {
	if s.health == nil || now < s.logAt {
		return
	}
	s.logAt = now + logCheckInterval
	err := s.health.Err()
	if (err == nil) == (s.logErr == nil) {
		s.logErr = err
		return
	}
	e := SenderEvent{Kind: LogRecovered, At: now}
	if err != nil {
		e.Kind, e.Err = LogError, err
	}
	if !s.events.push(e, 0) {
		s.stats.EventsDropped++
		return // reported on a later Tick
	}
	s.logErr = err
}
