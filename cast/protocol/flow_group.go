package protocol

import (
	"fmt"
	"slices"
)

// FlowPolicy says how a Sender with several receivers (a multicast group)
// combines their windows (a walcast extension). Every policy
// counts only receivers that are live, synced, not stalled and not too
// far behind to repair by NAK (see docs/protocol.md); a receiver silent
// for ReceiverTimeout is dropped from it with a ReceiverLost event.
type FlowPolicy uint8

const (
	// FlowMin paces the sender to the slowest receiver still counted: no
	// counted receiver is ever overrun (the default; with one receiver it
	// is unicast flow control).
	FlowMin FlowPolicy = iota
	// FlowMax paces the sender to the fastest receiver: the others fall
	// behind and repair by NAK while the hot ring or the WAL holds what
	// they miss, and over TCP beyond that.
	FlowMax
	// FlowTagged paces the sender to the slowest of the receivers whose id
	// is in SenderConfig.Tagged; the others are never waited for and catch
	// up as with FlowMax.
	FlowTagged
)

var flowPolicyNames = [...]string{FlowMin: "min", FlowMax: "max", FlowTagged: "tagged"}

func (p FlowPolicy) String() string {
	if int(p) < len(flowPolicyNames) {
		return flowPolicyNames[p]
	}
	return fmt.Sprintf("FlowPolicy(%d)", uint8(p))
}

// ParseFlowPolicy parses "min", "max" or "tagged".
func ParseFlowPolicy(s string) (FlowPolicy, error) {
	for i, n := range flowPolicyNames {
		if n == s {
			return FlowPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: flow policy %q: want min, max or tagged", ErrConfig, s)
}

func (c SenderConfig) validFlowPolicy() error {
	switch {
	case c.FlowPolicy > FlowTagged:
		return fmt.Errorf("%w: FlowPolicy %d unknown", ErrConfig, c.FlowPolicy)
	case c.FlowPolicy == FlowTagged && len(c.Tagged) == 0:
		return fmt.Errorf("%w: FlowPolicy tagged needs receiver ids in Tagged", ErrConfig)
	case c.FlowPolicy != FlowTagged && len(c.Tagged) > 0:
		return fmt.Errorf("%w: Tagged receivers without FlowPolicy tagged", ErrConfig)
	case slices.Contains(c.Tagged, 0):
		return fmt.Errorf("%w: Tagged holds receiver id 0 (ids are nonzero)", ErrConfig)
	}
	return nil
}

// counts reports whether receiver id takes part in the flow policy.
func (fc *flowController) counts(id uint64) bool {
	return fc.cfg.FlowPolicy != FlowTagged || slices.Contains(fc.cfg.Tagged, id)
}

// combine folds a counted receiver's edge into the limit so far (first
// says there is none yet): the lowest edge for FlowMin and FlowTagged, the
// highest for FlowMax.
func (fc *flowController) combine(first bool, limit, edge uint64) uint64 {
	switch {
	case first:
		return edge
	case fc.cfg.FlowPolicy == FlowMax:
		return max(limit, edge)
	}
	return min(limit, edge)
}

// groupDedup reports whether the dedup window follows the group's re-NAK
// delays rather than RetxDedupWindow: the stream goes to a multicast
// group and more than one receiver is in the table. A seq is then
// retransmitted once per half the shortest re-NAK delay any receiver
// reported, however long that is, not once per RetxDedupWindow:
// the repair went to every member, so a NAK for it arriving sooner was
// sent before the repair could reach its sender (another receiver that
// lost the same record, or a NAK delayed by a loaded host) and repeating
// the repair would only load every member again. A receiver whose repair
// was lost asks again after its re-NAK delay, beyond the window. With one
// receiver the window is unicast's.
func (fc *flowController) groupDedup() bool {
	return fc.cfg.Dest.Addr().IsMulticast() && fc.active > 1 && fc.cfg.RetxDedupWindow > 0
}
