//go:build !linux

package sock

import (
	"net/netip"
	"time"

	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath"
)

// Unsupported is the Path of datapath/udp and datapath/mmsg on platforms
// without raw UDP sockets: the constructors return an error, and these
// methods exist only so that code naming the types builds everywhere.
type Unsupported struct{}

func (Unsupported) Send(*batch.Vec) (int, error)                { return 0, datapath.ErrClosed }
func (Unsupported) Recv(*batch.Vec) (int, error)                { return 0, datapath.ErrClosed }
func (Unsupported) RecvWait(*batch.Vec, time.Time) (int, error) { return 0, datapath.ErrClosed }
func (Unsupported) ReleaseWait()                                {}
func (Unsupported) LocalAddr() netip.AddrPort                   { return netip.AddrPort{} }
func (Unsupported) Close() error                                { return nil }
func (Unsupported) NAPIID() int                                 { return 0 }
