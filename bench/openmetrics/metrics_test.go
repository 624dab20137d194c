package openmetrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/counters"
	"github.com/walcast/walcast/counters/metrics"
	"github.com/walcast/walcast/datapath/mem"
)

type clock struct{ start time.Time }

func (c clock) Now() int64 { return int64(time.Since(c.start)) + 1 }

// TestMetricsParse: a Producer and a Consumer over a lossy link; their
// /metrics, scraped over HTTP, parses with Prometheus's text parser and
// every sample equals the slot it was made from (read through the file).
func TestMetricsParse(t *testing.T) {
	dir := t.TempDir()
	ctr := cast.Counters{Dir: dir}
	net := mem.NewNetwork(clock{time.Now()})
	net.Impair(mem.AddrA, mem.AddrB, mem.Impairment{Seed: 5, DropProb: 0.03})
	a, _ := net.Listen(mem.AddrA, mem.AddrB)
	b, _ := net.Listen(mem.AddrB, mem.AddrA)
	p, err := cast.NewProducer(cast.ProducerConfig{To: mem.AddrB, Path: a, Dir: t.TempDir(), Stream: 3, Advanced: cast.ProducerAdvanced{Counters: ctr}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := cast.NewConsumer(cast.ConsumerConfig{From: mem.AddrA, Path: b, Stream: 3, NoCatchUp: true, Advanced: cast.ConsumerAdvanced{SkipBootstrap: true, Counters: ctr}})
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
