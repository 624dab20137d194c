package cast

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/wire"
)

// AuthStats count the datagrams a keyed Loop refused, by reason (see
// docs/auth.md), and those it sealed and opened. None of the refused
// reached a core. The counters file has them as auth_sealed, auth_opened
// and auth_refused{reason=…} (docs/operate.md).
type AuthStats struct {
	Short   uint64 // shorter than a frame and a trailer: unauthenticated traffic
	Version uint64 // an unknown trailer version
	KeyID   uint64 // tagged with a key id this endpoint does not hold
	Tag     uint64 // the tag does not verify: forged or altered
	Replay  uint64 // seen before, more than a window old, or of an older epoch
	Sealed  uint64 // datagrams sent with a trailer
	Opened  uint64 // datagrams received whose tag verified (handed to the cores)
}

// Refused is the number of datagrams refused for any reason.
func (s AuthStats) Refused() uint64 { return s.Short + s.Version + s.KeyID + s.Tag + s.Replay }

// loopAuth seals what a keyed Loop sends and opens what it receives. The
// loop thread owns the Sealer and the Opener; SetKeys from another
// goroutine hands new keys over through next.
type loopAuth struct {
	sealer  *wire.Sealer
	opener  *wire.Opener
	next    atomic.Pointer[Keys]
	applied *Keys
	stats   AuthStats
	warned  [4]uint64 // key ids already reported by EventKeyUnknown (bitmap)
}

func newLoopAuth(k *Keys) (*loopAuth, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	s, err := wire.NewSealer(k.Send, NewEpoch())
	if err != nil {
		return nil, err
	}
	o, err := wire.NewOpener(k.all()...)
	if err != nil {
		return nil, err
	}
	return &loopAuth{sealer: s, opener: o, applied: k}, nil
}

// SetKeys replaces a keyed Loop's keys while it runs (a rollover, see
// docs/auth.md): the loop thread tags with k.Send and accepts every key
// of k from its next iteration on. Safe from any goroutine. It fails on a
// Loop built without keys: authentication is on or off for a Loop's life.
func (l *Loop) SetKeys(k *Keys) error {
	if l.auth == nil {
		return fmt.Errorf("%w: SetKeys on a Loop without keys", ErrConfig)
	}
	if err := k.validate(); err != nil {
		return err
	}
	l.auth.next.Store(k)
	return nil
}

// AuthStats returns the keyed Loop's refusals, at most one TickInterval
// old (zero without keys).
func (l *Loop) AuthStats() AuthStats {
	l.snap.mu.Lock()
	defer l.snap.mu.Unlock()
	return l.authPub
}

// apply takes keys handed over by SetKeys (loop thread).
func (a *loopAuth) apply() {
	k := a.next.Load()
	if k == nil || k == a.applied {
		return
	}
	a.applied = k
	if err := a.opener.SetKeys(k.all()...); err == nil {
		_ = a.sealer.SetKey(k.Send) // validated keys: AES takes any 16 bytes
	}
}

// open verifies and strips d's trailer; false means drop it (counted).
func (l *Loop) open(d []byte, from netip.AddrPort) ([]byte, bool) {
	a := l.auth
	n, err := a.opener.Open(d, from)
	if err == nil {
		a.stats.Opened++
		return d[:n], true
	}
	if a.stats.refuse(err) == wire.ErrAuthKeyID {
		if id := d[len(d)-wire.TrailerSize+16]; a.warned[id/64]&(1<<(id%64)) == 0 {
			a.warned[id/64] |= 1 << (id % 64)
			l.emit(Event{Kind: EventKeyUnknown, At: l.now, Sender: from,
				Err: fmt.Errorf("%w: a datagram from %v is tagged with key id %d, which this endpoint does not hold", ErrKeyFile, from, id)})
		}
	}
	return nil, false
}

// refuse counts a datagram [wire.Opener.Open] refused with err under its
// reason, and returns the reason's error (Replay for any other).
func (s *AuthStats) refuse(err error) error {
	switch {
	case errors.Is(err, wire.ErrAuthShort):
		s.Short++
		return wire.ErrAuthShort
	case errors.Is(err, wire.ErrAuthVersion):
		s.Version++
		return wire.ErrAuthVersion
	case errors.Is(err, wire.ErrAuthKeyID):
		s.KeyID++
		return wire.ErrAuthKeyID
	case errors.Is(err, wire.ErrAuthTag):
		s.Tag++
		return wire.ErrAuthTag
	}
	s.Replay++
	return wire.ErrAuthReplay
}

// plus is s and o added field by field.
func (s AuthStats) plus(o AuthStats) AuthStats {
	return AuthStats{Short: s.Short + o.Short, Version: s.Version + o.Version, KeyID: s.KeyID + o.KeyID,
		Tag: s.Tag + o.Tag, Replay: s.Replay + o.Replay, Sealed: s.Sealed + o.Sealed, Opened: s.Opened + o.Opened}
}

// seal appends a trailer to messages from… of v (their buffers have the
// room: see NewLoop). A message that is a view (a first send straight
// from the Sender's hot ring) is copied into its slot first: the trailer
// must not land in the ring.
func (a *loopAuth) seal(v *batch.Vec, from int) {
	for i := from; i < v.Len(); i++ {
		m, addr := v.Msg(i)
		if !v.Owned(i) {
			copy(v.Buf(i), m)
		}
		v.Set(i, a.sealer.Seal(v.Buf(i), len(m)), addr)
	}
	a.stats.Sealed += uint64(v.Len() - from)
}
