package openmetrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/counters/metrics"
	"github.com/walcast/walcast/datapath/mem"
	"github.com/walcast/walcast/wire"
)

type clock struct{ start time.Time }

func (c clock) Now() int64 { return int64(time.Since(c.start)) + 1 }

// TestMetricsParse: a Producer and a Consumer over a lossy link, without
// and with keys; their /metrics, scraped over HTTP, parses with
// Prometheus's text parser and every sample equals the slot it was made
// from (read through the file). With keys the auth families are there,
// with their HELP and every refusal reason for both roles; without, none.
func TestMetricsParse(t *testing.T) {
	keys := &cast.Keys{Send: wire.Key{ID: 2, Secret: [16]byte{1, 2, 3}}}
	t.Run("plain", func(t *testing.T) { testMetricsParse(t, nil) })
	t.Run("keyed", func(t *testing.T) { testMetricsParse(t, keys) })
}

func testMetricsParse(t *testing.T, keys *cast.Keys) {
	dir := t.TempDir()
	ctr := cast.Counters{Dir: dir}
	net := mem.NewNetwork(clock{time.Now()})
	net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Seed: 5, DropProb: 0.03})
	a, _ := net.Listen(mem.AddrA, mem.AddrB)
	b, _ := net.Listen(mem.AddrB, mem.AddrA)
	p, err := cast.NewProducer(cast.ProducerConfig{To: mem.AddrB, Path: a, Dir: t.TempDir(), Stream: 3, Keys: keys, Advanced: cast.ProducerAdvanced{Counters: ctr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := cast.NewConsumer(cast.ConsumerConfig{From: mem.AddrA, Path: b, Stream: 3, NoCatchUp: true, Keys: keys, Advanced: cast.ConsumerAdvanced{SkipBootstrap: true, Counters: ctr}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, func(r cast.Record) error {
			if r.Seq == n {
				close(got)
			}
			return nil
		})
	}()
	payload := make([]byte, 64)
	for range n {
		if err := p.Publish(ctx, 100, payload); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-got:
	case err := <-done:
		t.Fatalf("consumer: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not delivered")
	}
	time.Sleep(5 * counters.SampleInterval) // quiet: every slot settled

	before, err := counters.Read(snapPath(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(metrics.Handler(dir, os.Getpid()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); expfmt.ResponseFormat(resp.Header).FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("content type %q", ct)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytesReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	snaps, _, err := counters.List(dir)
	if err != nil || len(snaps) != 1 {
		t.Fatalf("List: %v, %d", err, len(snaps))
	}
	checked := 0
	for _, v := range snaps[0].Values {
		f := fams[metrics.Name(v.Name, v.Kind)]
		if f == nil {
			t.Errorf("no family %s", metrics.Name(v.Name, v.Kind))
			continue
		}
		for _, m := range f.Metric {
			match := len(m.Label) == len(v.Labels)+1
			for _, l := range m.Label {
				if l.GetName() != "pid" && v.Labels[l.GetName()] != l.GetValue() {
					match = false
				}
			}
			if !match {
				continue
			}
			var x float64
			if m.Counter != nil {
				x = m.Counter.GetValue()
			} else {
				x = m.Gauge.GetValue()
			}
			// The stream is live (heartbeats, loop time): the scrape lies
			// between the reads of the file before and after it.
			lo, _ := before.Find(v.Label)
			scale := 1.0
			if v.Kind.IsNs() {
				scale = 1e9
			}
			a, z := float64(min(lo, v.Value))/scale, float64(max(lo, v.Value))/scale
			jitters := v.Name == "receiver_silence_ns" || v.Name == "srtt_ns" || v.Name == "receiver_srtt_ns" // rise and fall
			if !jitters && (x < a || x > z) {
				t.Errorf("%s: scraped %v, file %v before and %v after", v.Label, x, float64(lo)/scale, float64(v.Value)/scale)
			}
			checked++
		}
	}
	if checked < len(snaps[0].Values) {
		t.Errorf("%d of %d slots found in the scrape", checked, len(snaps[0].Values))
	}
	ns := fams["walcast_naks_sent_total"]
	if ns == nil || ns.GetType().String() != "COUNTER" {
		t.Fatalf("walcast_naks_sent_total: %v", ns)
	}
	for name, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s: no HELP", name)
		}
	}
	// Flags are gauges; a receiver's row is labelled with its id.
	if f := fams["walcast_initial_released"]; f == nil || f.GetType().String() != "GAUGE" {
		t.Errorf("walcast_initial_released: %v", f)
	}
	rows := fams["walcast_receiver_delivered_seq"]
	id := fmt.Sprint(p.Receivers()[0].ID)
	if rows == nil || len(rows.Metric) != 1 || label(rows.Metric[0], "receiver") != id {
		t.Errorf("receiver rows %v, want one with receiver=%q", rows, id)
	}
	if s := c.Stats(); s.Receiver.NaksSent == 0 {
		t.Fatal("no NAK at 3 % loss")
	}
	checkAuthFamilies(t, fams, keys != nil)
	t.Logf("%d families, %d samples checked", len(fams), checked)
}

// label is the value of m's label name ("" if none).
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkAuthFamilies: with keys, walcast_auth_sealed_total,
// walcast_auth_opened_total (both non-zero for each role) and
// walcast_auth_refused_total with every reason for each role, counters
// with their own HELP; without keys none of them.
func checkAuthFamilies(t *testing.T, fams map[string]*dto.MetricFamily, keyed bool) {
	t.Helper()
	names := []string{"walcast_auth_sealed_total", "walcast_auth_opened_total", "walcast_auth_refused_total"}
	if !keyed {
		for _, n := range names {
			if fams[n] != nil {
				t.Errorf("%s without keys", n)
			}
		}
		return
	}
	for _, n := range names {
		f := fams[n]
		if f == nil {
			t.Errorf("no family %s", n)
			continue
		}
		if f.GetType() != dto.MetricType_COUNTER || strings.Contains(f.GetHelp(), "walcast counter") {
			t.Errorf("%s: type %v, help %q", n, f.GetType(), f.GetHelp())
		}
		got := map[string]float64{}
		for _, m := range f.Metric {
			if label(m, "stream") != "3" {
				t.Errorf("%s: %v", n, m.GetLabel())
			}
			got[label(m, "role")+"/"+label(m, "reason")] = m.GetCounter().GetValue()
		}
		if n != "walcast_auth_refused_total" {
			if len(got) != 2 || got["producer/"] == 0 || got["consumer/"] == 0 {
				t.Errorf("%s: %v, want both roles non-zero", n, got)
			}
			continue
		}
		for _, role := range []string{"producer", "consumer"} {
			for _, r := range []string{"short", "version", "key_id", "tag", "replay"} {
				if v, ok := got[role+"/"+r]; !ok || v != 0 {
					t.Errorf("%s{role=%q,reason=%q} = %v (listed %v), want 0", n, role, r, v, ok)
				}
			}
		}
		if len(got) != 10 {
			t.Errorf("%s: %d samples: %v", n, len(got), got)
		}
	}
}
