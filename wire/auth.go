package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Datagram authentication (opt-in). A keyed endpoint appends a trailer to
// every UDP datagram it sends and accepts only datagrams whose trailer
// verifies; an endpoint without a key sends and expects the reference's
// bytes exactly. The trailer is transport framing: it is never part of a
// record, so the bytes in the WAL and on the TCP replay stream are the
// same with and without keys.
//
// Trailer layout (TrailerSize bytes, little-endian), after the last frame:
//
//	0   u64  epoch    the sending endpoint's epoch (see NewEpoch)
//	8   u64  counter  the endpoint's datagram counter: 1, 2, … within an epoch
//	16  u8   key id   which pre-shared key made the tag
//	17  u8   version  AuthVersion
//	18  [16] tag      AES-128-GCM tag: empty plaintext, additional data =
//	                  the datagram's frames and trailer bytes 0..17,
//	                  nonce = epoch ‖ counter (16 bytes)
//
// GCM with an empty plaintext is GMAC: a MAC, not encryption (the frames
// travel in the clear). The 16-byte nonce makes (epoch, counter) the
// nonce, so endpoints sharing one key never reuse a nonce while their
// epochs differ: NewEpoch gives each endpoint 32 random bits.
const (
	TrailerSize  = 34
	AuthVersion  = 1
	authHeadSize = 18 // trailer bytes covered by the tag
	tagSize      = 16
	nonceSize    = 16
)

// ReplayWindow is how far, in datagrams, an authenticated datagram may
// arrive behind the newest one seen from its source and still be
// accepted (once).
const ReplayWindow = 4096

// MaxAuthPeers bounds the sending endpoints (epochs) an [Opener] keeps
// replay state for, and the source addresses it remembers the newest
// epoch of. Only a datagram whose tag verifies creates an entry, so
// traffic without the key cannot fill the tables; when one is full the
// entry heard from least recently is evicted.
const MaxAuthPeers = 256

// NewEpoch returns an epoch for a [Sealer]: the Unix time in seconds in
// its high 32 bits and 32 bits from crypto/rand in its low ones. The
// random half keeps endpoints that share a key from sharing an epoch,
// and so a nonce (two endpoints started in the same second collide with
// probability 2⁻³²); the time half orders the runs of one endpoint, so a
// receiver can refuse a run older than one it already heard from the
// same address (see [Opener.Open]).
func NewEpoch() uint64 {
	var r [4]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (it panics instead)
	return uint64(uint32(time.Now().Unix()))<<32 | uint64(binary.LittleEndian.Uint32(r[:]))
}

// EpochSeconds returns the time half of an epoch (see [NewEpoch]).
func EpochSeconds(epoch uint64) uint32 { return uint32(epoch >> 32) }

// Trailer returns the epoch and counter of sealed datagram d (not
// verified: call it after [Opener.Open] accepted d); ok is false when d
// is too short to hold a trailer.
func Trailer(d []byte) (epoch, counter uint64, ok bool) {
	if len(d) < HeaderSize+TrailerSize {
		return 0, 0, false
	}
	t := d[len(d)-TrailerSize:]
	return binary.LittleEndian.Uint64(t[0:]), binary.LittleEndian.Uint64(t[8:]), true
}

// Authentication errors. Each wraps ErrAuth.
var (
	ErrAuth        = errors.New("wire: datagram not authenticated")
	ErrAuthShort   = fmt.Errorf("%w: shorter than a frame and a trailer", ErrAuth)
	ErrAuthVersion = fmt.Errorf("%w: unknown trailer version", ErrAuth)
	ErrAuthKeyID   = fmt.Errorf("%w: unknown key id", ErrAuth)
	ErrAuthTag     = fmt.Errorf("%w: tag does not verify", ErrAuth)
	ErrAuthReplay  = fmt.Errorf("%w: replayed or too old", ErrAuth)
	ErrAuthEpoch   = fmt.Errorf("%w: an earlier run than one already heard from its address", ErrAuthReplay)
)

// Key is one pre-shared key: a 16-byte AES-128 secret and the id that
// names it on the wire, so that keys can rotate without a restart.
type Key struct {
	ID     uint8
	Secret [16]byte
}

type keyAEAD struct {
	id   uint8
	aead cipher.AEAD
}

func newAEAD(k Key) (cipher.AEAD, error) {
	b, err := aes.NewCipher(k.Secret[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithNonceSize(b, nonceSize)
}

// Sealer appends trailers for one sending endpoint. Not safe for
// concurrent use: one loop thread owns it.
type Sealer struct {
	key     keyAEAD
	epoch   uint64
	counter uint64
}

// NewSealer returns a Sealer that tags with k. epoch names this sending
// endpoint for the life of the Sealer: it must differ from every other
// epoch used with k, by any endpoint, ever (receivers keep replay state
// per epoch, and the nonce is epoch ‖ counter), and grow across the runs
// of one endpoint: [NewEpoch].
func NewSealer(k Key, epoch uint64) (*Sealer, error) {
	a, err := newAEAD(k)
	if err != nil {
		return nil, err
	}
	return &Sealer{key: keyAEAD{k.ID, a}, epoch: epoch}, nil
}

// SetKey makes k the key new trailers are tagged with (rotation: the
// receivers must already accept k). The counter goes on.
func (s *Sealer) SetKey(k Key) error {
	a, err := newAEAD(k)
	if err != nil {
		return err
	}
	s.key = keyAEAD{k.ID, a}
	return nil
}

// KeyID returns the id of the key trailers are tagged with.
func (s *Sealer) KeyID() uint8 { return s.key.id }

// Epoch returns the Sealer's epoch.
func (s *Sealer) Epoch() uint64 { return s.epoch }

// Seal appends a trailer to the datagram buf[:n] in place and returns the
// new length, n+TrailerSize. buf must have room (len(buf) ≥ n+TrailerSize).
// It allocates nothing.
func (s *Sealer) Seal(buf []byte, n int) int {
	s.counter++
	t := buf[n : n+TrailerSize]
	binary.LittleEndian.PutUint64(t[0:], s.epoch)
	binary.LittleEndian.PutUint64(t[8:], s.counter)
	t[16] = s.key.id
	t[17] = AuthVersion
	// The nonce is trailer bytes 0–15 (epoch ‖ counter), read in place;
	// the tag goes straight into the trailer. GCM allows the nonce to
	// alias the additional data; only its output must not overlap it.
	s.key.aead.Seal(t[authHeadSize:authHeadSize], t[:nonceSize], nil, buf[:n+authHeadSize])
	return n + TrailerSize
}

// peerWindow is the replay state of one sending endpoint (one epoch):
// the highest counter accepted and a bitmap of the counters at and below
// it, bit c%64 of word (c/64) mod windowWords standing for counter c
// (RFC 6479). The bitmap is one word longer than the window: the words
// of the ReplayWindow counters top−ReplayWindow+1 … top are then all
// distinct, so clearing the word a new top enters never clears a counter
// still inside the window.
// Invariant: every counter ≤ top−ReplayWindow counts as seen.
type peerWindow struct {
	epoch uint64
	top   uint64
	bits  [windowWords]uint64
	used  uint64 // Opener.clock at the last accepted datagram (LRU)
}

const windowWords = ReplayWindow/64 + 1

// check reports whether counter c is new for this endpoint; it changes
// nothing.
func (w *peerWindow) check(c uint64) error {
	switch {
	case c == 0 || c+ReplayWindow <= w.top:
		return ErrAuthReplay
	case c > w.top:
		return nil
	}
	if w.bits[(c/64)%windowWords]&(1<<(c%64)) != 0 {
		return ErrAuthReplay
	}
	return nil
}

// accept records counter c (after check said yes).
func (w *peerWindow) accept(c uint64) {
	if c > w.top {
		// Clear the words the new top enters (all of them when it jumps
		// by the whole bitmap or more).
		if from, to := w.top/64+1, c/64; to >= from+windowWords {
			w.bits = [windowWords]uint64{}
		} else {
			for i := from; i <= to; i++ {
				w.bits[i%windowWords] = 0
			}
		}
		w.top = c
	}
	w.bits[(c/64)%windowWords] |= 1 << (c % 64)
}

// sourceEpoch is the newest epoch accepted from one source address.
type sourceEpoch struct {
	addr  netip.AddrPort
	epoch uint64
	used  uint64 // Opener.clock at the last accepted datagram (LRU)
}

// Opener verifies and strips trailers for one receiving endpoint. It
// keeps replay state per sending endpoint (epoch), wherever its
// datagrams come from, so a datagram replayed from another address is
// still a replay; and the newest epoch per source address, so a datagram
// of an earlier run of the endpoint at that address is refused even once
// that run's replay state is gone.
// Not safe for concurrent use: one loop thread owns it.
type Opener struct {
	keys    []keyAEAD
	peers   []peerWindow
	sources []sourceEpoch
	last    int // index of the endpoint found last: most datagrams come from it
	lastSrc int // likewise for sources
	clock   uint64
	tag     [tagSize]byte // Open's (empty) plaintext is written here
}

// NewOpener returns an Opener that accepts datagrams tagged with any of
// keys (old and new during a rollover). Key ids must be distinct.
func NewOpener(keys ...Key) (*Opener, error) {
	o := &Opener{peers: make([]peerWindow, 0, MaxAuthPeers), sources: make([]sourceEpoch, 0, MaxAuthPeers)}
	if err := o.SetKeys(keys...); err != nil {
		return nil, err
	}
	return o, nil
}

// SetKeys replaces the accepted keys. Replay state is kept.
func (o *Opener) SetKeys(keys ...Key) error {
	if len(keys) == 0 {
		return fmt.Errorf("wire: an Opener needs at least one key")
	}
	ks := make([]keyAEAD, 0, len(keys))
	for _, k := range keys {
		for _, have := range ks {
			if have.id == k.ID {
				return fmt.Errorf("wire: key id %d given twice", k.ID)
			}
		}
		a, err := newAEAD(k)
		if err != nil {
			return err
		}
		ks = append(ks, keyAEAD{k.ID, a})
	}
	o.keys = ks
	return nil
}

// Open verifies the trailer of datagram d, which came from the address
// from, and returns the length of its frames (d[:n]). It refuses a
// datagram whose tag does not verify, one it accepted before (or more
// than ReplayWindow behind the newest of its epoch), and one whose
// epoch is of an earlier second than the newest epoch accepted from the
// same address (ErrAuthEpoch: a recording of that endpoint's previous
// run). On any error nothing changes: the datagram must be dropped.
// Replay state advances only for a datagram whose tag verifies. It
// allocates nothing.
func (o *Opener) Open(d []byte, from netip.AddrPort) (n int, err error) {
	if len(d) < HeaderSize+TrailerSize {
		return 0, ErrAuthShort
	}
	n = len(d) - TrailerSize
	t := d[n:]
	if t[17] != AuthVersion {
		return 0, ErrAuthVersion
	}
	var key *keyAEAD
	for i := range o.keys {
		if o.keys[i].id == t[16] {
			key = &o.keys[i]
			break
		}
	}
	if key == nil {
		return 0, ErrAuthKeyID
	}
	epoch := binary.LittleEndian.Uint64(t[0:])
	counter := binary.LittleEndian.Uint64(t[8:])
	src := o.findSource(from)
	if src != nil && EpochSeconds(epoch) < EpochSeconds(src.epoch) {
		return 0, ErrAuthEpoch
	}
	w := o.find(epoch)
	if w != nil {
		if err := w.check(counter); err != nil {
			return 0, err
		}
	} else if counter == 0 {
		return 0, ErrAuthReplay
	}
	if _, err := key.aead.Open(o.tag[:0], t[:nonceSize], t[authHeadSize:], d[:n+authHeadSize]); err != nil {
		return 0, ErrAuthTag
	}
	o.clock++
	if w == nil {
		w = o.insert(epoch)
	}
	w.used = o.clock
	w.accept(counter)
	if src == nil {
		src = o.insertSource(from)
	}
	src.used = o.clock
	if EpochSeconds(epoch) > EpochSeconds(src.epoch) || src.epoch == 0 {
		src.epoch = epoch
	}
	return n, nil
}

// Peers returns how many sending endpoints the Opener keeps replay state
// for.
func (o *Opener) Peers() int { return len(o.peers) }

func (o *Opener) find(epoch uint64) *peerWindow {
	return lookup(o.peers, &o.last, epoch, func(w *peerWindow) uint64 { return w.epoch })
}

// insert returns a fresh window for epoch: a new entry while the table
// has room, else the entry heard from least recently.
func (o *Opener) insert(epoch uint64) *peerWindow {
	i := slot(&o.peers, func(w *peerWindow) uint64 { return w.used })
	o.peers[i] = peerWindow{epoch: epoch}
	return &o.peers[i]
}

func (o *Opener) findSource(addr netip.AddrPort) *sourceEpoch {
	return lookup(o.sources, &o.lastSrc, addr, func(s *sourceEpoch) netip.AddrPort { return s.addr })
}

// insertSource returns a fresh entry for addr, like insert.
func (o *Opener) insertSource(addr netip.AddrPort) *sourceEpoch {
	i := slot(&o.sources, func(s *sourceEpoch) uint64 { return s.used })
	o.sources[i] = sourceEpoch{addr: addr}
	o.lastSrc = i
	return &o.sources[i]
}

// lookup returns the entry of tab whose key is k, nil if none: first
// tab[*last] (a datagram mostly comes from the peer the last one came
// from), then every entry, remembering in *last where it found it.
func lookup[T any, K comparable](tab []T, last *int, k K, key func(*T) K) *T {
	if *last < len(tab) && key(&tab[*last]) == k {
		return &tab[*last]
	}
	for i := range tab {
		if key(&tab[i]) == k {
			*last = i
			return &tab[i]
		}
	}
	return nil
}

// slot returns the index of a new entry of a bounded table: appended
// while it has room, else the entry heard from least recently.
func slot[T any](tab *[]T, used func(*T) uint64) int {
	t := *tab
	if len(t) < cap(t) {
		var zero T
		*tab = append(t, zero)
		return len(t)
	}
	old := 0
	for i := range t {
		if used(&t[i]) < used(&t[old]) {
			old = i
		}
	}
	return old
}
