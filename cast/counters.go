package cast

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unsafe"

	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/replay"
)

// Counters says whether and where a loop publishes its counters for
// other processes (`cast stat`, package counters) and how its slots are
// labelled. The zero value publishes to counters.DefaultDir().
type Counters struct {
	// Off writes nothing: no file, no slots.
	Off bool
	// Dir is the directory of the counters files (default
	// counters.DefaultDir(): /dev/shm/walcast where /dev/shm is usable,
	// else under os.TempDir()).
	Dir string
	// Stream labels the loop's slots (stream="N"): the WAL stream id for
	// a Producer or Consumer.
	Stream uint32
	// StallThreshold is the time above which an iteration's work part
	// (not its park or idle step) counts as a stall (default 1 ms).
	StallThreshold time.Duration
	// Keep leaves the loop's slots, with their final values, in the
	// counters file after Close, until the process's last
	// counters.File.Release (which removes the file): for a program that
	// holds the file (counters.Acquire) past its loops' end so that
	// readers see the final values. The slots of a kept loop, and its
	// labels, are never reused (a later loop of the same stream and role
	// gets a loop label).
	Keep bool
}

// statField is one number of a stats struct and the slot it goes to.
type statField struct {
	off  uintptr
	size uintptr // 8, 4 (uint32/int32) or 1 (bool)
	c    counters.Counter
}

// statSet publishes one stats struct type field by field: its integer
// fields (and those of nested structs, name-prefixed) each get a slot,
// named by the field in snake case; time.Duration fields are ns gauges.
// Built once; publish allocates nothing.
type statSet struct {
	fields []statField
}

// statNames tunes the slot names of one struct type: rename maps a
// field path (Go names, dot-joined) to its slot name, gauges lists the
// field paths that are levels, not counts.
type statNames struct {
	rename map[string]string
	gauges map[string]bool
	skip   map[string]bool
}

func newStatSet(f *counters.File, t reflect.Type, prefix, labels string, n statNames, owned *[]counters.Counter) statSet {
	var s statSet
	var walk func(t reflect.Type, base uintptr, path, name string)
	walk = func(t reflect.Type, base uintptr, path, name string) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			p := path + sf.Name
			nm := name + snake(sf.Name)
			if r, ok := n.rename[p]; ok {
				nm = r
			}
			if n.skip[p] {
				continue
			}
			kind := counters.KindCounter
			if n.gauges[p] {
				kind = counters.KindGauge
			}
			var size uintptr
			switch {
			case sf.Type == reflect.TypeFor[time.Duration]():
				kind, size = counters.KindGaugeNs, 8
			case sf.Type.Kind() == reflect.Struct:
				walk(sf.Type, base+sf.Offset, p+".", nm+"_")
				continue
			case sf.Type.Kind() == reflect.Uint64 || sf.Type.Kind() == reflect.Int64 || sf.Type.Kind() == reflect.Int && sf.Type.Size() == 8:
				size = 8
			case sf.Type.Kind() == reflect.Uint32 || sf.Type.Kind() == reflect.Int32 || sf.Type.Kind() == reflect.Int && sf.Type.Size() == 4:
				size = 4
			case sf.Type.Kind() == reflect.Bool:
				kind, size = counters.KindGauge, 1
			default:
				continue // arrays, strings, slices, pointers: not a number
			}
			if sf.Type.Kind() == reflect.Int || sf.Type.Kind() == reflect.Int32 {
				kind = counters.KindGauge // sizes and levels
			}
			c := slot(f, kind, prefix+nm+labels, owned)
			s.fields = append(s.fields, statField{off: base + sf.Offset, size: size, c: c})
		}
	}
	walk(t, 0, "", "")
	return s
}

// publish stores the fields of the struct at p (of the set's type).
func (s *statSet) publish(p unsafe.Pointer) {
	for i := range s.fields {
		f := &s.fields[i]
		a := unsafe.Add(p, f.off)
		switch f.size {
		case 8:
			f.c.Store(*(*uint64)(a))
		case 4:
			f.c.Store(uint64(*(*uint32)(a)))
		case 1:
			f.c.Store(uint64(*(*uint8)(a)))
		}
	}
}

// slot takes a counter named label, remembering it in owned for Free; a
// full file (or counters off) yields the zero Counter, which stores
// nothing.
func slot(f *counters.File, kind counters.Kind, label string, owned *[]counters.Counter) counters.Counter {
	c, err := f.Counter(kind, label)
	if err != nil {
		return counters.Counter{}
	}
	*owned = append(*owned, c)
	return c
}

// snake turns a Go field name into a metric name part: RetxHot →
// retx_hot, RTTSamples → rtt_samples, IOYields → io_yields.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// labels writes {k="v",…} of pairs (k1, v1, k2, v2, …).
func labels(kv ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(kv[i+1])
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func u32s(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// streamLabels hands out the labels of a stream's slots: {stream, role}
// for the first loop of the process with that pair, and the loop's id
// added for any other at the same time (two producers of stream 0 in one
// benchmark), so that no two slots share a label.
var streamLabels struct {
	mu sync.Mutex
	n  map[string]int
}

func claimLabels(stream uint32, role, loop string) (lab string, release func()) {
	key := u32s(stream) + "/" + role
	streamLabels.mu.Lock()
	defer streamLabels.mu.Unlock()
	if streamLabels.n == nil {
		streamLabels.n = map[string]int{}
	}
	streamLabels.n[key]++
	lab = labels("stream", u32s(stream), "role", role)
	if streamLabels.n[key] > 1 {
		lab = labels("stream", u32s(stream), "role", role, "loop", loop)
	}
	return lab, func() {
		streamLabels.mu.Lock()
		streamLabels.n[key]--
		streamLabels.mu.Unlock()
	}
}

// forStream is c with its slots labelled with stream s.
func (c Counters) forStream(s uint32) Counters {
	c.Stream = s
	return c
}

// producerLevels are the Producer's own numbers published beside its
// loop's.
type producerLevels struct {
	Published  uint64 // records Publish and TryPublish accepted
	DurableSeq uint64 // highest seq durable in the WAL
}

// sampleCounters publishes the Producer's, its WAL's and its replay
// server's counters (sampler goroutine; they are safe to read from any).
func (p *Producer) sampleCounters() {
	names := statNames{gauges: map[string]bool{"DurableSeq": true}, rename: map[string]string{"Published": "records_published"}}
	sampleStats(p.loop, "", "producer", names, func() producerLevels {
		v := producerLevels{Published: p.accepted.Load()}
		if p.w != nil {
			v.DurableSeq = p.w.Durable()
		}
		return v
	})
	if p.w != nil {
		sampleStats(p.loop, "wal_", "producer", walNames, p.w.Stats)
	}
	if p.srv != nil {
		sampleStats(p.loop, "replay_", "producer", statNames{gauges: map[string]bool{"Active": true, "BufferBytes": true}}, p.srv.Stats)
	}
}

var walNames = statNames{
	gauges: map[string]bool{"NextSeq": true, "Durable": true, "Oldest": true},
	skip:   map[string]bool{"Recovery": true},
	rename: map[string]string{"Durable": "durable_seq", "NextSeq": "next_seq", "Oldest": "oldest_seq"},
}

// consumerLevels are the Consumer's own counters (its Receiver's and
// loop's are the loop's slots).
type consumerLevels struct {
	Tip           uint64
	UDPRecords    uint64
	TCPRecords    uint64
	Escalations   uint64
	Faults        uint64
	Reconnects    uint64
	CatchUps      uint64
	Skips         uint64
	LostSeqs      uint64
	StaleRestarts uint64
	LastRecovery  time.Duration
}

// sampleCounters publishes the Consumer's counters and its replay
// client's beside its loop's.
func (c *Consumer) sampleCounters() {
	sampleStats(c.loop, "consumer_", "consumer", statNames{gauges: map[string]bool{"Tip": true}, rename: map[string]string{"Tip": "tip_seq"}},
		func() consumerLevels {
			s := c.Stats()
			return consumerLevels{Tip: s.Tip, UDPRecords: s.UDPRecords, TCPRecords: s.TCPRecords, Escalations: s.Escalations,
				Faults: s.Faults, Reconnects: s.Reconnects, CatchUps: s.CatchUps, Skips: s.Skips, LostSeqs: s.LostSeqs,
				StaleRestarts: s.StaleRestarts, LastRecovery: s.LastRecovery}
		})
	sampleStats(c.loop, "replay_client_", "consumer", statNames{}, func() replay.ClientStats {
		if cl := c.client(); cl != nil {
			return cl.Stats()
		}
		return replay.ClientStats{}
	})
}
