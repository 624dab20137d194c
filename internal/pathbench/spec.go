package pathbench

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/walcast/walcast/bpf"
	"github.com/walcast/walcast/datapath/xdp"
)

// Spec is one way of moving datagrams, set up identically on both ends of a
// run. Every spec carries the same protocol core (cast.Loop with a Sender
// and a Receiver); only the datapath and its options differ.
type Spec struct {
	Name string
	// Kind is udp (one sendto/recvfrom per datagram), mmsg
	// (sendmmsg/recvmmsg, optionally GSO/GRO) or xdp (AF_XDP copy mode).
	Kind string
	// Batch is the datagrams per loop poll and flush, and per
	// sendmmsg/recvmmsg call for mmsg.
	Batch int
	// GSO sends runs of equal frames as UDP_SEGMENT super-datagrams and
	// receives with UDP_GRO (mmsg).
	GSO bool
	// BusyPoll is SO_BUSY_POLL in µs (xdp: also one recvfrom per empty
	// poll, which runs the device's NAPI poll on the loop thread). -1 takes
	// the path's default.
	BusyPoll int
	// Attach is how the xdp redirect program is attached.
	Attach bpf.Mode
	// NoWakeup binds xdp without XDP_USE_NEED_WAKEUP: a syscall after every
	// transmit batch and on every empty receive poll.
	NoWakeup bool
	// RxFrames is xdp's receive frames (fill and RX ring size); 0: the
	// bench's default.
	RxFrames int
	// FillFrames is xdp's hot set of posted receive frames
	// (xdp.Config.FillFrames); 0: the path's default.
	FillFrames int
	// BusyAlways keeps xdp's busy-poll recvfrom on every empty poll even
	// where it polls nothing (xdp.Config.BusyPollAlways).
	BusyAlways bool
}

// DefaultSpecs are the rows of `cast bench paths` when -paths is not given.
var DefaultSpecs = []string{
	"udp", "mmsg-b1", "mmsg-b64", "mmsg-b64-gso",
	"xdp-native", "xdp-native-busy", "xdp-generic", "xdp-generic-busy",
}

// ParseSpec reads one spec name:
//
//	udp
//	mmsg-b<N>[-gso]                  N datagrams per call, 1..1024
//	xdp-<native|generic>[-b<N>][-rx<N>][-fill<N>][-busy|-busyalways][-nowakeup]
//
// -busy sets SO_BUSY_POLL 50 µs (the path then busy-polls only once its
// socket has a NAPI context); -busyalways makes a busy-poll recvfrom on
// every empty poll regardless, as walcast did before; without either xdp
// does not busy-poll. The kernel paths keep their default busy polling
// (which acts only where the device has a NAPI context; see the report's
// notes). -b<N> sets xdp's batch (loop poll and flush), 64 by default;
// -rx<N> its receive frames (fill and RX ring); -fill<N> how many of
// them stay posted while receiving is light (xdp.Config.FillFrames).
func ParseSpec(name string) (Spec, error) {
	parts := strings.Split(name, "-")
	s := Spec{Name: name, Kind: parts[0], Batch: 64, BusyPoll: -1}
	bad := func(why string) (Spec, error) {
		return Spec{}, fmt.Errorf("pathbench: path %q: %s (want udp, mmsg-b<N>[-gso] or xdp-<native|generic>[-b<N>][-rx<N>][-fill<N>][-busy|-busyalways][-nowakeup])", name, why)
	}
	opts := parts[1:]
	switch s.Kind {
	case "udp":
		if len(opts) > 0 {
			return bad("udp takes no options")
		}
	case "mmsg":
		if len(opts) == 0 || !strings.HasPrefix(opts[0], "b") {
			return bad("mmsg needs a batch size b<N>")
		}
		n, err := strconv.Atoi(opts[0][1:])
		if err != nil || n < 1 || n > 1024 {
			return bad("batch " + opts[0][1:] + " is not 1..1024")
		}
		s.Batch = n
		for _, o := range opts[1:] {
			if o != "gso" || s.GSO {
				return bad("unknown or repeated option " + o)
			}
			s.GSO = true
		}
	case "xdp":
		if len(opts) == 0 {
			return bad("xdp needs native or generic")
		}
		switch opts[0] {
		case "native":
			s.Attach = bpf.ModeNative
		case "generic":
			s.Attach = bpf.ModeGeneric
		default:
			return bad("attach mode " + opts[0] + " is not native or generic")
		}
		s.BusyPoll = 0
		seen := map[string]bool{}
		for _, o := range opts[1:] {
			if seen[o] {
				return bad("repeated option " + o)
			}
			seen[o] = true
			switch {
			case o == "busy" || o == "busyalways":
				if s.BusyPoll > 0 {
					return bad("busy and busyalways together")
				}
				s.BusyPoll, s.BusyAlways = 50, o == "busyalways"
			case o == "nowakeup":
				s.NoWakeup = true
			case strings.HasPrefix(o, "rx"):
				n, err := strconv.Atoi(o[2:])
				if err != nil || n < 64 || n > 1<<18 || n&(n-1) != 0 {
					return bad("rx frames " + o[2:] + " is not a power of two in 64..262144")
				}
				s.RxFrames = n
			case strings.HasPrefix(o, "fill"):
				n, err := strconv.Atoi(o[4:])
				if err != nil || n < 1 || n > 1<<18 {
					return bad("fill frames " + o[4:] + " is not 1..262144")
				}
				s.FillFrames = n
			case strings.HasPrefix(o, "b"):
				n, err := strconv.Atoi(o[1:])
				if err != nil || n < 1 || n > 1024 {
					return bad("batch " + o[1:] + " is not 1..1024")
				}
				s.Batch = n
			default:
				return bad("unknown option " + o)
			}
		}
	default:
		return bad("unknown kind " + s.Kind)
	}
	// Every workload must be able to open it: rtt rows use the path's
	// default receive frames unless -rx is given.
	if rx := cmp.Or(s.RxFrames, xdp.DefaultConfig().RxFrames); s.FillFrames > rx {
		return bad(fmt.Sprintf("fill %d is more than the %d receive frames", s.FillFrames, rx))
	}
	return s, nil
}

// ParseSpecs reads a comma-separated list of spec names; "all" or "" is
// DefaultSpecs. Duplicates are refused.
func ParseSpecs(list string) ([]Spec, error) {
	if list == "" || list == "all" {
		list = strings.Join(DefaultSpecs, ",")
	}
	var out []Spec
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if seen[n] {
			return nil, fmt.Errorf("pathbench: path %q listed twice", n)
		}
		seen[n] = true
		s, err := ParseSpec(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
