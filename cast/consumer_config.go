package cast

import (
	"crypto/tls"
	"net/netip"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/datapath"
	"github.com/walcast/walcast/internal/cfgerr"
	"github.com/walcast/walcast/replay"
)

// ConsumerConfig configures a [Consumer]. The zero value of every field
// means its default; ConsumerConfig{Plaintext: true} is a consumer on a
// free port of every address that learns its producer from the stream
// and catches up from it over plain TCP.
type ConsumerConfig struct {
	// Local is the UDP address to receive on (default: the unspecified
	// IPv4 address, on a free port). Consumer.Addr reports the address
	// bound: give it to the producer as ProducerConfig.To.
	Local netip.AddrPort
	// From is the producer's UDP address (Producer.Addr): NAKs go there,
	// and catch-up defaults to the same address and port over TCP. Zero:
	// the consumer learns it from the first valid frame that arrives — a
	// data record or a heartbeat whose CRC checks (a producer announces
	// itself within a heartbeat interval, 100 ms by default, even when it
	// has nothing to send) — and ignores what other addresses send.
	From netip.AddrPort
	// Keys, when set, authenticate every datagram (docs/auth.md): only
	// datagrams tagged with one of them reach the receiver, the producer's
	// address is learnt only from one, and every NAK and Status this
	// consumer sends is tagged. The producer needs the same keys.
	Keys *Keys
	// Replay lists the replay servers to catch up from, "host:port", in
	// the order tried (newest source first, archives after). Default: the
	// producer's address (From, or the one learnt) over TCP.
	Replay []string
	// Stream is the stream id asked for (default 0).
	Stream uint32
	// TLS is the client's TLS config (RootCAs: the CA to trust). Required
	// for catch-up unless Plaintext.
	TLS *tls.Config
	// Plaintext catches up without TLS; it must be asked for.
	Plaintext bool
	// TipPath is the tip file: the last seq delivered, written at most
	// every 10 ms and when Run returns, so that a restarted consumer
	// resumes at tip+1. Empty: the tip lives in memory.
	TipPath string
	// NoCatchUp never dials TCP: a gap UDP cannot repair (the receiver
	// faults or must reconnect) ends Run with the outcome's error. For a
	// producer without a WAL or a replay server.
	NoCatchUp bool
	// Path replaces the UDP socket (datapath/mem in tests). The Consumer
	// owns it and closes it. Local is then ignored.
	Path datapath.Path
	// Thread pins the loop's OS thread (default: locked, unpinned).
	Thread affinity.Config
	// Idle is what the loop does when it found nothing to do (default:
	// spin; affinity.Park sleeps on the socket).
	Idle affinity.Idler
	// OnEvent, when set, is called for each [Event] of the consumer, on the
	// goroutine that calls deliver, in order with the records. It must
	// not block.
	OnEvent func(Event)
	// Advanced holds the settings most consumers leave at their
	// defaults: where to start, catch-up timing, the loop's batch, and the
	// tuning of the protocol receiver and the catch-up client.
	Advanced ConsumerAdvanced
}

// ConsumerAdvanced is the part of a [ConsumerConfig] most consumers leave
// zero (every zero field means its default).
type ConsumerAdvanced struct {
	// StartTip, without a TipPath, is the tip to resume after: delivery
	// starts at StartTip+1 (default 0: the stream's first record).
	StartTip uint64
	// StartNow, while the consumer has no tip (none in TipPath, StartTip
	// 0), starts at the first record heard instead of seq 1: the records
	// before it are neither caught up nor delivered, and EventLateStart
	// says where delivery began. A consumer with a tip resumes after it.
	StartNow bool
	// SkipBootstrap goes live at once instead of catching up over TCP
	// first: at tip+1 (seq 1 without a tip: a stream already a reorder
	// window ahead escalates to a catch-up).
	SkipBootstrap bool
	// Control is where NAKs and Status go instead of the producer's
	// address: a multicast group's control address, which every member
	// hears (NAK suppression). Zero: the producer's (From, or the address
	// learnt).
	Control netip.AddrPort
	// VerifyWait bounds the check made when the producer announces a
	// highest seq below the tip (SenderRestarted): whether its WAL still
	// holds the consumer's last record (default 1 s).
	VerifyWait time.Duration
	// CatchUpGrace: a catch-up goes on past the server's CaughtUp, on its
	// live tail, until the tip reaches the highest seq the receiver has
	// heard of, for at most this long (default 200 ms; negative: stop at
	// CaughtUp).
	CatchUpGrace time.Duration
	// Batch is the most datagrams the loop receives per poll (default
	// 64).
	Batch int
	// RaiseGOMAXPROCS lets the loop raise GOMAXPROCS for its spinning
	// thread (see LoopConfig.RaiseGOMAXPROCS); by default it is left
	// alone.
	RaiseGOMAXPROCS bool
	// Shared runs the loop on a SharedThread, in turn with other loops
	// (a producer's, say), instead of on a thread of its own: Thread is
	// then not applied and Idle must spin (LoopConfig.Shared).
	Shared *SharedThread
	// Counters publishes the consumer's counters for `cast stat` (on by
	// default; Counters.Stream is set from Stream).
	Counters Counters
	// Receiver tunes the protocol receiver (reorder window, NAK timing,
	// Status). By default the receiver sends Status frames (flow control:
	// the producer runs at most ReorderSlots records ahead of what it
	// delivered; RTT; a Leave when Run ends); NoStatus sends the
	// reference's bytes only.
	Receiver ReceiverTuning
	// ReplayClient tunes the catch-up client (timeouts, backoff, retry
	// budget).
	ReplayClient ReplayClientTuning
}

const (
	defaultVerifyWait   = time.Second
	defaultCatchUpGrace = 200 * time.Millisecond
)

func (c ConsumerConfig) check() error {
	bad := func(field, f string, a ...any) error { return cfgerr.New("cast", ErrConfig, field, f, a...) }
	switch {
	case c.TipPath != "" && c.Advanced.StartTip != 0:
		return bad("Advanced.StartTip", "the tip comes from TipPath; StartTip is for a consumer without a tip file")
	case c.NoCatchUp && (len(c.Replay) > 0 || c.TipPath != ""):
		return bad("NoCatchUp", "no catch-up, yet Replay or TipPath is set")
	case !c.NoCatchUp && c.TLS == nil && !c.Plaintext:
		return bad("TLS", "catch-up needs a TLS config with the CA to trust, or Plaintext (or NoCatchUp)")
	case c.Advanced.VerifyWait < 0:
		return bad("Advanced.VerifyWait", "%v is negative", c.Advanced.VerifyWait)
	case c.Advanced.StartNow && c.Advanced.StartTip != 0:
		return bad("Advanced.StartNow", "a start tip says where to resume; StartNow is for a consumer without one")
	}
	if err := c.Advanced.Receiver.Config().Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Advanced.Receiver", err)
	}
	if err := c.Thread.Validate(); err != nil {
		return cfgerr.Nest("cast", ErrConfig, "Thread", err)
	}
	if !c.NoCatchUp {
		if _, err := c.clientConfig("127.0.0.1:1"); err != nil {
			return err
		}
	}
	return nil
}

// clientConfig is the replay client's config, with from as the endpoint
// when Replay lists none.
func (c ConsumerConfig) clientConfig(from string) (replay.ClientConfig, error) {
	rc := c.Advanced.ReplayClient.config()
	rc.Endpoints = c.Replay
	if len(rc.Endpoints) == 0 {
		rc.Endpoints = []string{from}
	}
	rc.Stream, rc.TLS, rc.Plaintext, rc.TipPath, rc.StartTip = c.Stream, c.TLS, c.Plaintext, c.TipPath, c.Advanced.StartTip
	if err := rc.Validate(); err != nil {
		return rc, cfgerr.Nest("cast", ErrConfig, "Advanced.ReplayClient", err)
	}
	return rc, nil
}
