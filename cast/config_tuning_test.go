package cast

import (
	"reflect"
	"testing"
	"time"

	"github.com/walcast/walcast/cast/protocol"
	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
)

// TestTuningMirrors keeps each tuning type complete: it has every
// exported field of its package's config but those the cast config owns,
// with the same type, and its conversion copies each of them.
func TestTuningMirrors(t *testing.T) {
	check := func(name string, tuning, target reflect.Type, owned ...string) {
		skip := map[string]bool{}
		for _, f := range owned {
			skip[f] = true
		}
		for i := 0; i < target.NumField(); i++ {
			f := target.Field(i)
			if !f.IsExported() || skip[f.Name] {
				continue
			}
			g, ok := tuning.FieldByName(f.Name)
			switch {
			case !ok:
				t.Errorf("%s lacks %s.%s: add it (and to its conversion)", name, target, f.Name)
			case g.Type != f.Type:
				t.Errorf("%s.%s is %v, %s.%s %v", name, f.Name, g.Type, target, f.Name, f.Type)
			}
		}
		for _, f := range owned {
			if _, ok := tuning.FieldByName(f); ok {
				t.Errorf("%s has %s, which the cast config owns", name, f)
			}
		}
		if tuning.NumField()+len(owned) != countExported(target) {
			t.Errorf("%s has %d fields, %s %d exported (%d owned)", name, tuning.NumField(), target, countExported(target), len(owned))
		}
	}
	check("SenderTuning", reflect.TypeOf(SenderTuning{}), reflect.TypeOf(protocol.SenderConfig{}), "Dest", "NakSource", "AcceptAnyNakSource")
	check("ReceiverTuning", reflect.TypeOf(ReceiverTuning{}), reflect.TypeOf(protocol.ReceiverConfig{}), "Sender", "Start", "StartNow")
	check("WALTuning", reflect.TypeOf(WALTuning{}), reflect.TypeOf(wal.Config{}), "Dir", "Stream")
	check("ReplayServerTuning", reflect.TypeOf(ReplayServerTuning{}), reflect.TypeOf(replay.ServerConfig{}), "TLS", "Plaintext")
	check("ReplayClientTuning", reflect.TypeOf(ReplayClientTuning{}), reflect.TypeOf(replay.ClientConfig{}),
		"Endpoints", "Stream", "TLS", "Plaintext", "TipPath", "StartTip")

	// The conversions copy every field: fill each with a non-zero value
	// and compare field by field.
	copied := func(name string, tuning, got reflect.Value) {
		for i := 0; i < tuning.NumField(); i++ {
			f := tuning.Type().Field(i)
			g := got.FieldByName(f.Name)
			if f.Type.Kind() == reflect.Func {
				if g.IsNil() {
					t.Errorf("%s.%s not copied", name, f.Name)
				}
				continue
			}
			if !reflect.DeepEqual(g.Interface(), tuning.Field(i).Interface()) {
				t.Errorf("%s.%s not copied: %v, want %v", name, f.Name, g.Interface(), tuning.Field(i).Interface())
			}
		}
	}
	snd := SenderTuning{MaxFrame: 1, RingSlots: 2, HeartbeatInterval: 3, RetxDedupWindow: 4, MaxColdInFlight: 5, MaxColdQueued: 6,
		MaxColdRecords: 7, ColdRate: 8, ColdBurst: 9, Coalesce: true, NoFlowControl: true, ReceiverTimeout: 10, MaxReceivers: 11,
		FlowPolicy: protocol.FlowTagged, Tagged: []uint64{12}, ProbeFloor: 13, RTTProbeInterval: 14, ID: 15, InitialWindow: 16, InitialWait: 17}
	copied("SenderTuning", reflect.ValueOf(snd), reflect.ValueOf(snd.Config()))
	rcv := ReceiverTuning{MaxFrame: 1, ReorderSlots: 2, NakDebounce: 3, MaxNakRetries: 4, HeartbeatInterval: 5, SilenceIntervals: 6,
		MaxNakRunsPerPump: 7, NoStatus: true, ID: 8, StatusInterval: 9, NakFloor: 10, NakBackoff: 11, OverrunEvidence: 12}
	copied("ReceiverTuning", reflect.ValueOf(rcv), reflect.ValueOf(rcv.Config()))
	wt := WALTuning{SegmentSize: 1, BufferSize: 2, FlushInterval: 3, FlushRecords: 4, FlushBytes: 5, MaxFlushLag: 6,
		BlockOnBackpressure: true, Retention: 7, SeqReserve: 8, VerifySealed: true, Repair: true, DisableDirectIO: true}
	wc := wt.config("d", 9)
	if wc.Dir != "d" || wc.Stream != 9 {
		t.Errorf("WAL config Dir %q Stream %d", wc.Dir, wc.Stream)
	}
	copied("WALTuning", reflect.ValueOf(wt), reflect.ValueOf(wc))
	st := ReplayServerTuning{AnyClient: true, HandshakeTimeout: 1, WriteTimeout: 2, BufferBytes: 3, ReadBufferBytes: 4,
		KeepaliveInterval: 5, MaxConns: 6, OnDisconnect: func(replay.ConnReport) {}}
	copied("ReplayServerTuning", reflect.ValueOf(st), reflect.ValueOf(st.config(nil, true)))
	ct := ReplayClientTuning{TipInterval: 1, ConnectTimeout: 2, ReadTimeout: 3, IdleTimeout: 4, KeepAlive: 5,
		Backoff: []time.Duration{6}, Jitter: 0.5, RetryBudget: 7, BufferBytes: 8, OnEvent: func(replay.Event) {}}
	copied("ReplayClientTuning", reflect.ValueOf(ct), reflect.ValueOf(ct.config()))
}

func countExported(t reflect.Type) int {
	n := 0
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			n++
		}
	}
	return n
}
