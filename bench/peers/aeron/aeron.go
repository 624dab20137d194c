// Package aeron is the optional Aeron row. Aeron has no Go client that
// can be fetched as a module, so the row binds the Aeron C client
// library (libaeron.so) at run time with purego when the user has it
// installed; without it the row is skipped and says why. purego makes
// the bench binary dynamically linked, which is why it lives here and
// never in the transport's packages.
package aeron

import (
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
	"github.com/walcast/walcast/bench/peers"
)

// Libraries are the names tried with dlopen, in order.
var Libraries = []string{"libaeron.so", "libaeron.so.1", "/usr/local/lib/libaeron.so", "/opt/aeron/lib/libaeron.so"}

// Probe reports whether the Aeron C client library can be loaded.
func Probe() (string, error) {
	var errs []string
	for _, name := range Libraries {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			purego.Dlclose(h)
			return name, nil
		}
		errs = append(errs, name)
	}
	return "", fmt.Errorf("aeron: C client library not found (tried %s)", strings.Join(errs, ", "))
}

// Peer is the Aeron row. It is always skipped in this build: without the
// library it says so; with it, the ping/pong binding (aeron_init,
// publication offer, subscription poll through purego callbacks, plus a
// running media driver) is not written yet, because no machine this
// suite runs on has Aeron to test it against. Compare with Aeron's own C
// cping/cpong under the same taskset instead.
func Peer() peers.Peer {
	p := peers.Peer{Name: "aeron", Mode: "spin", Reliable: true}
	lib, err := Probe()
	if err != nil {
		p.Skip = err.Error()
	} else {
		p.Skip = "found " + lib + ", but the purego ping/pong binding is not implemented; run Aeron's cping/cpong pinned to cores 0/1"
	}
	return p
}
