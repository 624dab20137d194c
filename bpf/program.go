package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf/asm"
	"github.com/walcast/walcast/internal/feature"
)

// ErrNotSupported is returned (wrapped) on platforms without XDP. It is
// walcast's one "not supported" value; errors.Is(err,
// errors.ErrUnsupported) holds too.
var ErrNotSupported = feature.ErrNotSupported

// XDP verdicts (enum xdp_action).
const (
	XDPAborted  = 0
	XDPDrop     = 1
	XDPPass     = 2
	XDPTx       = 3
	XDPRedirect = 4
)

// Mode says how a program is attached to an interface.
type Mode int

const (
	// ModeAuto tries native (driver) mode and falls back to generic mode.
	ModeAuto Mode = iota
	// ModeNative runs the program in the driver's receive path.
	ModeNative
	// ModeGeneric runs the program on the skb (works on every interface,
	// slower, and AF_XDP then always copies).
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Offsets into an untagged Ethernet/IPv4(IHL 5)/UDP frame, in bytes.
const (
	offEtherType = 12
	offIPVerIHL  = 14
	offIPFrag    = 20
	offIPProto   = 23
	offUDPDst    = 36
	offPayload   = 42 // first byte of the UDP payload
	offRecType   = offPayload + 2
)

// Offsets into struct xdp_md.
const (
	xdpData       = 0
	xdpDataEnd    = 4
	xdpRxQueueIdx = 16
)

// Offsets into struct __sk_buff (the tc program's context).
const (
	skbData    = 76
	skbDataEnd = 80
)

// tc verdicts (TC_ACT_*) of a direct-action classifier. The tc impair
// program answers TCActUnspec for what it lets through (TCX_NEXT: the next
// program or filter on the hook decides, and with none the frame passes),
// so it composes with other programs, including a second injector.
const (
	TCActUnspec = -1
	TCActOK     = 0
	TCActShot   = 2
)

// Stack slots of the programs (relative to R10).
const (
	stackKey   = -4  // u32 map key 0
	stackQueue = -8  // u32 rx_queue_index, saved before R6 (ctx) is reused
	stackPort  = -12 // u32 UDP destination port as loaded (port-keyed redirect)
)

// ne16 returns what a native-endian 16-bit load reads from the two bytes
// b0, b1: packet loads are not byte-swapped, so constants are converted
// instead.
func ne16(b0, b1 byte) int32 { return int32(binary.NativeEndian.Uint16([]byte{b0, b1})) }

// be16 is ne16 for a big-endian (network order) value.
func be16(v uint16) int32 { return ne16(byte(v>>8), byte(v)) }

// Impair configuration map value (impairCfgSize bytes, one entry at key 0).
const (
	cfgThreshold  = 0  // u64: drop when prandom_u32 < threshold; 1<<32 drops all
	cfgEveryNth   = 8  // u32: >0 drops candidates N, 2N, ... instead
	cfgPort       = 12 // u16 as loaded from the packet (0 = any port)
	cfgRecType    = 14 // u16 as loaded from the packet
	cfgFlags      = 16 // u32: bit 0 = filter on record type
	impairCfgSize = 24

	flagRecType = 1
)

// Impair counter map value (impairCtrSize bytes, one entry at key 0).
const (
	ctrMatched    = 0  // u64: IPv4/UDP datagrams to the port
	ctrCandidates = 8  // u64: matched and of the record type (if filtered)
	ctrDropped    = 16 // u64: dropped
	impairCtrSize = 24
)

// ImpairConfig says which datagrams the impair program drops.
type ImpairConfig struct {
	// Port is the UDP destination port whose datagrams are impaired; 0
	// impairs every IPv4/UDP datagram.
	Port uint16
	// DropFraction is the probability (0..1) that a candidate is dropped,
	// drawn per datagram with bpf_get_prandom_u32. 1 is an outage.
	DropFraction float64
	// EveryNth, when > 0, replaces the random draw: candidates number N,
	// 2N, 3N, ... (counted since load, over all CPUs) are dropped.
	EveryNth uint32
	// RecordType, when >= 0, restricts impairment to datagrams whose first
	// record has this type (for example wire.TypeNak). -1 impairs every
	// record type. Datagrams too short to hold a type are never candidates.
	RecordType int
	// TCP makes the program impair IPv4/TCP segments instead of UDP
	// datagrams (Port is then the TCP destination port). It is fixed when
	// the program is loaded, for the tc program only ([NewTCImpair]): Set
	// cannot change it, and it needs RecordType -1.
	TCP bool
}

// DefaultImpairConfig drops nothing and matches every record type.
func DefaultImpairConfig() ImpairConfig { return ImpairConfig{RecordType: -1} }

// Validate reports a configuration the program cannot express.
func (c ImpairConfig) Validate() error {
	if math.IsNaN(c.DropFraction) || c.DropFraction < 0 || c.DropFraction > 1 {
		return fmt.Errorf("bpf: impair DropFraction %v outside 0..1", c.DropFraction)
	}
	if c.RecordType < -1 || c.RecordType > math.MaxUint16 {
		return fmt.Errorf("bpf: impair RecordType %d outside -1..65535", c.RecordType)
	}
	if c.TCP && c.RecordType != -1 {
		return fmt.Errorf("bpf: impair TCP needs RecordType -1 (a TCP segment has no record type), not %d", c.RecordType)
	}
	return nil
}

// value encodes c as the configuration map value.
func (c ImpairConfig) value() []byte {
	b := make([]byte, impairCfgSize)
	th := uint64(math.Round(c.DropFraction * (1 << 32)))
	binary.NativeEndian.PutUint64(b[cfgThreshold:], th)
	binary.NativeEndian.PutUint32(b[cfgEveryNth:], c.EveryNth)
	binary.BigEndian.PutUint16(b[cfgPort:], c.Port) // as the packet holds it
	if c.RecordType >= 0 {
		binary.LittleEndian.PutUint16(b[cfgRecType:], uint16(c.RecordType)) // as the header holds it
		binary.NativeEndian.PutUint32(b[cfgFlags:], flagRecType)
	}
	return b
}

// ImpairCounters are the impair program's counters since it was loaded.
type ImpairCounters struct {
	Matched    uint64 // IPv4/UDP datagrams to the configured port
	Candidates uint64 // of those, of the configured record type
	Dropped    uint64 // of those, dropped
}

func parseCounters(b []byte) ImpairCounters {
	return ImpairCounters{
		Matched:    binary.NativeEndian.Uint64(b[ctrMatched:]),
		Candidates: binary.NativeEndian.Uint64(b[ctrCandidates:]),
		Dropped:    binary.NativeEndian.Uint64(b[ctrDropped:]),
	}
}

// RedirectConfig configures the redirect program.
type RedirectConfig struct {
	// Port is the UDP destination port whose IPv4 datagrams are redirected.
	Port uint16
	// Queues is the XSKMAP size: the highest queue id + 1 that can hold a
	// socket.
	Queues int
	// PortSlots, when > 0, steers by destination port instead: the
	// program looks the port up in a map filled by RegisterPort and
	// redirects to that slot's socket, so several sockets sharing one
	// queue (and one UMEM) each receive their own port. Port is then
	// ignored and Queues unused; ports not registered go to the kernel.
	PortSlots int
	// Fallback is the verdict when the receiving queue has no socket
	// registered (XDPPass by default; tests use XDPDrop to tell a redirect
	// attempt from a pass).
	Fallback int32
	// Impair, when set, runs the impair logic (with Impair's maps) on the
	// redirected datagrams before they reach the socket. Only one XDP
	// program fits on an interface, so this is how a receiver that uses
	// AF_XDP also gets loss.
	Impair *Impair
}

// DefaultRedirectConfig redirects port 0 (set Port), 64 queues, fallback pass.
func DefaultRedirectConfig() RedirectConfig {
	return RedirectConfig{Queues: 64, Fallback: XDPPass}
}

// Validate reports a configuration that cannot be loaded.
func (c RedirectConfig) Validate() error {
	if c.PortSlots < 0 || c.PortSlots > 1024 {
		return fmt.Errorf("bpf: redirect PortSlots %d outside 0..1024", c.PortSlots)
	}
	if c.Port == 0 && c.PortSlots == 0 {
		return errors.New("bpf: redirect Port is 0")
	}
	if c.Queues < 1 || c.Queues > 1024 {
		return fmt.Errorf("bpf: redirect Queues %d outside 1..1024", c.Queues)
	}
	if c.Fallback < XDPAborted || c.Fallback > XDPTx {
		return fmt.Errorf("bpf: redirect Fallback %d is not an XDP verdict", c.Fallback)
	}
	return nil
}

// progSpec describes one program to assemble. Map fds are filled in by the
// loader; an fd of 0 leaves that part out.
type progSpec struct {
	redirectPort uint16 // with xskFD: IPv4/UDP to this port goes to XSKMAP
	xskFD        int
	fallback     int32 // redirect_map's action when the queue has no socket
	portsFD      int   // with xskFD: port-keyed (port → slot map) instead of redirectPort
	impairCfgFD  int   // with impairCtrFD: run the impair section
	impairCtrFD  int
	// tc assembles a direct-action tc (SchedCLS) program instead of XDP:
	// the context is a __sk_buff, the verdicts are TC_ACT_OK/TC_ACT_SHOT,
	// and a frame whose headers are not in the linear part is pulled in
	// first. Only the impair section exists for tc.
	tc bool
	// tcp (tc only) matches IPv4/TCP instead of IPv4/UDP; the destination
	// port sits at the same offset.
	tcp bool
}

// instructions assembles the program. Register use: R6 = ctx (until the
// impair section reuses it for the counter pointer), R7 = UDP destination
// port as loaded, R8 = record type as loaded (0x10000 when the payload is too
// short to hold one), R9 = impair configuration pointer.
func (s progSpec) instructions() asm.Instructions {
	const pass, after = "pass", "after_impair"
	passV, dropV := int32(XDPPass), int32(XDPDrop)
	var in asm.Instructions
	if s.tc {
		passV, dropV = TCActUnspec, TCActShot
		in = asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.StoreImm(asm.RFP, stackKey, 0, asm.Word),
			// An skb's linear part may end before the record type (a
			// clone, a paged frame): pull the headers in only then, since
			// pulling a cloned skb copies it.
			asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
			asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, offRecType+2),
			asm.JLE.Reg(asm.R4, asm.R3, "linear"),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, offRecType+2),
			asm.FnSkbPullData.Call(), // fails harmlessly on a shorter frame
			asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word).WithSymbol("linear"),
			asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		}
	} else {
		in = asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			// Save rx_queue_index while ctx is still in R6.
			asm.LoadMem(asm.R1, asm.R6, xdpRxQueueIdx, asm.Word),
			asm.StoreMem(asm.RFP, stackQueue, asm.R1, asm.Word),
			asm.StoreImm(asm.RFP, stackKey, 0, asm.Word),
			asm.LoadMem(asm.R2, asm.R6, xdpData, asm.Word),
			asm.LoadMem(asm.R3, asm.R6, xdpDataEnd, asm.Word),
		}
	}
	in = append(in,
		// The verifier rejects any packet load not dominated by a bounds check.
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, offPayload),
		asm.JGT.Reg(asm.R4, asm.R3, pass),
		asm.LoadMem(asm.R5, asm.R2, offEtherType, asm.Half),
		asm.JNE.Imm(asm.R5, be16(0x0800), pass), // IPv4 only (IPv6, ARP, VLAN pass)
		asm.LoadMem(asm.R5, asm.R2, offIPVerIHL, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, pass), // no IP options: the UDP header is at 34
		asm.LoadMem(asm.R5, asm.R2, offIPProto, asm.Byte),
		asm.JNE.Imm(asm.R5, s.ipProto(), pass),
		// Fragments (MF set or offset != 0) go to the kernel to reassemble;
		// a non-first fragment has no UDP header at 34.
		asm.LoadMem(asm.R5, asm.R2, offIPFrag, asm.Half),
		asm.And.Imm(asm.R5, be16(0x3fff)),
		asm.JNE.Imm(asm.R5, 0, pass),
		asm.LoadMem(asm.R7, asm.R2, offUDPDst, asm.Half),
		asm.Mov.Imm(asm.R8, 0x10000),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, offRecType+2),
		asm.JGT.Reg(asm.R4, asm.R3, "have_fields"),
		asm.LoadMem(asm.R8, asm.R2, offRecType, asm.Half),
	)
	next := "have_fields"
	label := func(ins asm.Instruction) asm.Instruction {
		if next != "" {
			ins = ins.WithSymbol(next)
			next = ""
		}
		return ins
	}
	if s.xskFD != 0 && !s.tc {
		if s.portsFD != 0 {
			// The impair section reuses R7: keep the port for the lookup.
			in = append(in, label(asm.StoreMem(asm.RFP, stackPort, asm.R7, asm.Word)))
		} else {
			in = append(in, label(asm.JNE.Imm(asm.R7, be16(s.redirectPort), pass)))
		}
	}
	if s.impairCfgFD != 0 {
		cfg, ctr := lookup(s.impairCfgFD, stackKey, after), lookup(s.impairCtrFD, stackKey, after)
		cfg[0], ctr[0] = label(cfg[0]), ctr[0].WithSymbol("port_ok")
		in = append(in, cfg...)
		in = append(in,
			asm.Mov.Reg(asm.R9, asm.R0),
			asm.LoadMem(asm.R1, asm.R9, cfgPort, asm.Half),
			asm.JEq.Imm(asm.R1, 0, "port_ok"),
			asm.JNE.Reg(asm.R1, asm.R7, after),
		)
		in = append(in, ctr...)
		in = append(in,
			asm.Mov.Reg(asm.R6, asm.R0), // counters; ctx is not needed any more
			asm.Mov.Imm(asm.R1, 1),
			asm.AddAtomic.Mem(asm.R6, asm.R1, asm.DWord, ctrMatched),
			asm.LoadMem(asm.R1, asm.R9, cfgFlags, asm.Word),
			asm.And.Imm(asm.R1, flagRecType),
			asm.JEq.Imm(asm.R1, 0, "type_ok"),
			asm.LoadMem(asm.R1, asm.R9, cfgRecType, asm.Half),
			asm.JNE.Reg(asm.R1, asm.R8, after),
			asm.Mov.Imm(asm.R7, 1).WithSymbol("type_ok"),
			fetchAdd64(asm.R6, asm.R7, ctrCandidates), // R7 = old count
			asm.Add.Imm(asm.R7, 1),
			asm.LoadMem(asm.R1, asm.R9, cfgEveryNth, asm.Word),
			asm.JEq.Imm(asm.R1, 0, "random"),
			asm.Mod.Reg(asm.R7, asm.R1),
			asm.JNE.Imm(asm.R7, 0, after),
			asm.Ja.Label("drop"),
			asm.FnGetPrandomU32.Call().WithSymbol("random"),
			asm.LoadMem(asm.R1, asm.R9, cfgThreshold, asm.DWord),
			asm.JGE.Reg(asm.R0, asm.R1, after),
			asm.Mov.Imm(asm.R1, 1).WithSymbol("drop"),
			asm.AddAtomic.Mem(asm.R6, asm.R1, asm.DWord, ctrDropped),
			asm.Mov.Imm(asm.R0, dropV),
			asm.Return(),
		)
		next = after
	}
	if s.xskFD != 0 && !s.tc && s.portsFD != 0 {
		ports := lookup(s.portsFD, stackPort, pass)
		ports[0] = label(ports[0])
		in = append(in, ports...)
		in = append(in,
			asm.LoadMem(asm.R2, asm.R0, 0, asm.Word), // the port's slot
			asm.LoadMapPtr(asm.R1, s.xskFD),
			asm.Mov.Imm(asm.R3, s.fallback),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		)
	} else if s.xskFD != 0 && !s.tc {
		in = append(in,
			label(asm.LoadMem(asm.R2, asm.RFP, stackQueue, asm.Word)),
			asm.LoadMapPtr(asm.R1, s.xskFD),
			asm.Mov.Imm(asm.R3, s.fallback), // low bits of flags: action when the slot is empty
			asm.FnRedirectMap.Call(),
			asm.Return(),
		)
	}
	if next != "" {
		// No redirect: the label falls through to pass.
		in = append(in, asm.Mov.Imm(asm.R0, passV).WithSymbol(next), asm.Return())
	}
	in = append(in, asm.Mov.Imm(asm.R0, passV).WithSymbol(pass), asm.Return())
	return in
}

// ipProto is the IPv4 protocol the program matches: UDP, or TCP.
func (s progSpec) ipProto() int32 {
	if s.tcp && s.tc {
		return 6
	}
	return 17
}

// lookup is `R0 = bpf_map_lookup_elem(map, RFP+key); if R0 == 0 goto miss`.
func lookup(mapFD int, key int16, miss string) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
	}
}

// fetchAdd64 is `src = atomic_fetch_add((u64 *)(dst + off), src)`.
// asm.FetchAdd.Mem is not used because cilium/ebpf v0.22.0 marshals it with
// imm 0 (Instruction.Marshal computes the immediate before folding the atomic
// op into it), which the kernel runs as a plain atomic add that leaves src
// unchanged. With the immediate set here the marshalled imm is
// BPF_ADD|BPF_FETCH. TestImpairConfigs/every_3rd catches a regression.
func fetchAdd64(dst, src asm.Register, off int16) asm.Instruction {
	const bpfFetch = 0x01
	return asm.Instruction{
		OpCode:   asm.AddAtomic.OpCode(asm.DWord),
		Dst:      dst,
		Src:      src,
		Offset:   off,
		Constant: bpfFetch, // BPF_ADD is 0x00
	}
}
