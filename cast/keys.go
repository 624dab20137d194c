package cast

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/walcast/walcast/wire"
)

// ErrKeyFile is wrapped by every error about a key file: its
// permissions, its syntax or its keys.
var ErrKeyFile = errors.New("cast: key file")

// Keys are the pre-shared keys of an authenticated stream (see
// docs/auth.md): Send tags every datagram this endpoint sends; a datagram
// is accepted when its tag verifies under Send or any of Accept (the
// keys of a rollover: old and new at once). Key ids are distinct.
type Keys struct {
	Send   wire.Key
	Accept []wire.Key
}

// all returns Send and Accept, Send first.
func (k *Keys) all() []wire.Key {
	return append([]wire.Key{k.Send}, k.Accept...)
}

// validate reports two keys with one id.
func (k *Keys) validate() error {
	seen := map[uint8]bool{}
	for _, key := range k.all() {
		if seen[key.ID] {
			return fmt.Errorf("%w: key id %d given twice", ErrKeyFile, key.ID)
		}
		seen[key.ID] = true
	}
	return nil
}

// ParseKeys reads keys in the key file format: one key per line, its id
// (0–255) and its 16-byte secret as 32 hex digits, separated by blanks;
// blank lines and lines starting with # are ignored. The first key is
// the one this endpoint sends with; every key listed is accepted.
func ParseKeys(text []byte) (*Keys, error) {
	var keys []wire.Key
	sc := bufio.NewScanner(bytes.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want \"ID HEX\", got %d fields", ErrKeyFile, line, len(f))
		}
		id, err := strconv.ParseUint(f[0], 10, 8)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: key id %q is not 0–255", ErrKeyFile, line, f[0])
		}
		secret, err := hex.DecodeString(f[1])
		if err != nil || len(secret) != 16 {
			return nil, fmt.Errorf("%w: line %d: the secret must be 32 hex digits (16 bytes)", ErrKeyFile, line)
		}
		k := wire.Key{ID: uint8(id)}
		copy(k.Secret[:], secret)
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key in it", ErrKeyFile)
	}
	k := &Keys{Send: keys[0], Accept: keys[1:]}
	if err := k.validate(); err != nil {
		return nil, err
	}
	return k, nil
}

// LoadKeyFile reads a key file (format: [ParseKeys]). It refuses a file
// that others than its owner and group may read, or that others than its
// owner may write: a key anyone on the host can read authenticates
// nothing.
func LoadKeyFile(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if m := st.Mode().Perm(); m&0o026 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: others may read or others or the group may write it (chmod 600 %s)", ErrKeyFile, path, m, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// NewEpoch returns an epoch for a [wire.Sealer] (see [wire.NewEpoch]).
func NewEpoch() uint64 { return wire.NewEpoch() }

// SetKeys replaces a keyed Producer's keys while it runs (see
// [Loop.SetKeys] and docs/auth.md for a rollover).
func (p *Producer) SetKeys(k *Keys) error { return p.loop.SetKeys(k) }

// SetKeys replaces a keyed Consumer's keys at any time (see
// [Loop.SetKeys]): before Run, while it waits for its producer or
// catches up, the keys are kept and taken by what authenticates next.
// It fails on a Consumer built without keys.
func (c *Consumer) SetKeys(k *Keys) error {
	if c.cfg.Keys == nil {
		return fmt.Errorf("%w: SetKeys on a Consumer without keys", ErrConfig)
	}
	if err := k.validate(); err != nil {
		return err
	}
	c.keys.Store(k)
	if l := c.loopP.Load(); l != nil {
		return l.SetKeys(k)
	}
	return nil
}

// currentKeys are the keys the Consumer authenticates with now.
func (c *Consumer) currentKeys() *Keys {
	if k := c.keys.Load(); k != nil {
		return k
	}
	return c.cfg.Keys
}
