//go:build !linux

package tune

import (
	"fmt"
	"time"
)

// NewProber returns a Prober whose every method reports ErrNotSupported:
// the probes need Linux.
func NewProber() Prober { return otherProber{} }

type otherProber struct{}

var errOther = fmt.Errorf("tune: probes need Linux: %w", ErrNotSupported)

func (otherProber) Driver(string) (string, error)                { return "", errOther }
func (otherProber) Features(string) (map[string]bool, error)     { return nil, errOther }
func (otherProber) SetFeature(string, string, bool) error        { return errOther }
func (otherProber) Coalesce(string) (map[string]uint32, error)   { return nil, errOther }
func (otherProber) SetCoalesce(string, string, uint32) error     { return errOther }
func (otherProber) SocketBuffer(int) (int, int, error)           { return 0, 0, errOther }
func (otherProber) DirectIO(string) (DirectIO, error)            { return DirectIO{}, errOther }
func (otherProber) NapiID(string, time.Duration) (uint32, error) { return 0, errOther }
