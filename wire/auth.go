package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
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
//	0   u64  epoch    the sending endpoint's epoch (see NewSealer)
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
// epochs differ.
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
// replay state for. Only a datagram whose tag verifies creates an entry,
// so traffic without the key cannot fill the table; when it is full the
// endpoint heard from least recently is evicted.
const MaxAuthPeers = 256

// Authentication errors. Each wraps ErrAuth.
var (
	ErrAuth        = errors.New("wire: datagram not authenticated")
	ErrAuthShort   = fmt.Errorf("%w: shorter than a frame and a trailer", ErrAuth)
	ErrAuthVersion = fmt.Errorf("%w: unknown trailer version", ErrAuth)
	ErrAuthKeyID   = fmt.Errorf("%w: unknown key id", ErrAuth)
	ErrAuthTag     = fmt.Errorf("%w: tag does not verify", ErrAuth)
	ErrAuthReplay  = fmt.Errorf("%w: replayed or too old", ErrAuth)
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
	nonce   [nonceSize]byte
}

// NewSealer returns a Sealer that tags with k. epoch names this sending
// endpoint for the life of the Sealer: it must differ from every other
// epoch used with k, by any endpoint, ever (receivers keep replay state
// per epoch, and the nonce is epoch ‖ counter). The Unix time in
// nanoseconds at start with random low bits serves (cast.NewEpoch).
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
	copy(s.nonce[:], t[:16])
	s.key.aead.Seal(t[authHeadSize:authHeadSize], s.nonce[:], nil, buf[:n+authHeadSize])
	return n + TrailerSize
}

// peerWindow is the replay state of one sending endpoint (one epoch):
// the highest counter accepted and a bitmap of the ReplayWindow counters
// at and below top (bit c%64 of word (c/64) mod len is counter c).
// Invariant: every counter ≤ top−ReplayWindow counts as seen.
type peerWindow struct {
	epoch uint64
	top   uint64
	bits  [ReplayWindow / 64]uint64
	used  uint64 // Opener.clock at the last accepted datagram (LRU)
}

// check reports whether counter c is new for this endpoint; it changes
// nothing.
func (w *peerWindow) check(c uint64) error {
	switch {
	case c == 0 || c+ReplayWindow <= w.top:
		return ErrAuthReplay
	case c > w.top:
		return nil
	}
	if w.bits[(c/64)%uint64(len(w.bits))]&(1<<(c%64)) != 0 {
		return ErrAuthReplay
	}
	return nil
}

// accept records counter c (after check said yes).
func (w *peerWindow) accept(c uint64) {
	if c > w.top {
		// Clear the words the window slides past (all of them when it
		// jumps by a window or more).
		if from, to := w.top/64+1, c/64; to >= from+uint64(len(w.bits)) {
			w.bits = [ReplayWindow / 64]uint64{}
		} else {
			for i := from; i <= to; i++ {
				w.bits[i%uint64(len(w.bits))] = 0
			}
		}
		w.top = c
	}
	w.bits[(c/64)%uint64(len(w.bits))] |= 1 << (c % 64)
}

// Opener verifies and strips trailers for one receiving endpoint and
// keeps replay state per sending endpoint (epoch), wherever its datagrams
// come from: a datagram replayed from another address is still a replay.
// Not safe for concurrent use: one loop thread owns it.
type Opener struct {
	keys  []keyAEAD
	peers []peerWindow
	last  int // index of the endpoint found last: most datagrams come from it
	clock uint64
	nonce [nonceSize]byte
	tag   [tagSize]byte // Open's (empty) plaintext is written here
}

// NewOpener returns an Opener that accepts datagrams tagged with any of
// keys (old and new during a rollover). Key ids must be distinct.
func NewOpener(keys ...Key) (*Opener, error) {
	o := &Opener{peers: make([]peerWindow, 0, MaxAuthPeers)}
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

// Open verifies the trailer of datagram d and returns the length of its
// frames (d[:n]). On any error nothing changes: the datagram must be
// dropped. Replay state advances only for a datagram whose tag verifies.
// It allocates nothing.
func (o *Opener) Open(d []byte) (n int, err error) {
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
	w := o.find(epoch)
	if w != nil {
		if err := w.check(counter); err != nil {
			return 0, err
		}
	} else if counter == 0 {
		return 0, ErrAuthReplay
	}
	copy(o.nonce[:], t[:16])
	if _, err := key.aead.Open(o.tag[:0], o.nonce[:], t[authHeadSize:], d[:n+authHeadSize]); err != nil {
		return 0, ErrAuthTag
	}
	if w == nil {
		w = o.insert(epoch)
	}
	o.clock++
	w.used = o.clock
	w.accept(counter)
	return n, nil
}

// Peers returns how many sending endpoints the Opener keeps replay state
// for.
func (o *Opener) Peers() int { return len(o.peers) }

func (o *Opener) find(epoch uint64) *peerWindow {
	if o.last < len(o.peers) && o.peers[o.last].epoch == epoch {
		return &o.peers[o.last]
	}
	for i := range o.peers {
		if o.peers[i].epoch == epoch {
			o.last = i
			return &o.peers[i]
		}
	}
	return nil
}

// insert returns a fresh window for epoch: a new entry while the table
// has room, else the entry heard from least recently.
func (o *Opener) insert(epoch uint64) *peerWindow {
	if len(o.peers) < cap(o.peers) {
		o.peers = append(o.peers, peerWindow{epoch: epoch})
		return &o.peers[len(o.peers)-1]
	}
	old := 0
	for i := range o.peers {
		if o.peers[i].used < o.peers[old].used {
			old = i
		}
	}
	o.peers[old] = peerWindow{epoch: epoch}
	return &o.peers[old]
}
