package bpf

import "fmt"

// Direction is the tc hook a [TCImpair] attaches to.
type Direction int

const (
	// Egress sees every datagram the interface transmits through the
	// stack (dev_queue_xmit): kernel sockets on this host, and frames a
	// bridge, a router or a veth peer forwards out of it. AF_XDP copy-mode
	// transmit (and packet sockets with PACKET_QDISC_BYPASS) skip it.
	Egress Direction = iota
	// Ingress sees what arrives after XDP has passed it.
	Ingress
)

func (d Direction) String() string {
	switch d {
	case Egress:
		return "egress"
	case Ingress:
		return "ingress"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// TCMode says how a tc program is attached.
type TCMode int

const (
	// TCAuto uses a TCX link where the kernel has one (6.6+) and falls
	// back to a clsact qdisc with a cls_bpf filter.
	TCAuto TCMode = iota
	// TCX attaches through a bpf_link (BPF_TCX_EGRESS/INGRESS): nothing
	// is left behind when the process dies.
	TCX
	// TCClsact adds a direct-action cls_bpf filter under the clsact qdisc
	// (created when missing) over rtnetlink, as `tc filter add dev IF
	// egress bpf da` does. Close removes the filter, and the qdisc if this
	// attachment created it; a killed process leaves them until the
	// interface (or its namespace) goes away.
	TCClsact
)

func (m TCMode) String() string {
	switch m {
	case TCAuto:
		return "auto"
	case TCX:
		return "tcx"
	case TCClsact:
		return "clsact"
	}
	return fmt.Sprintf("TCMode(%d)", int(m))
}
