package benchkit

import (
	"errors"
	"fmt"
	"strings"
)

// Probe is one row of the probe matrix printed at the top of every
// benchmark report: whether a kernel feature the transport can use works
// on this machine, and what was seen.
type Probe struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// probeFunc returns what it saw, or an error wrapping ErrUnsupported when
// the feature is missing (other errors mean the probe itself failed).
type probeFunc func(dir string) (string, error)

var probeList = []struct {
	name string
	fn   probeFunc
}{
	{"GSO (UDP_SEGMENT)", probeGSO},
	{"GRO (UDP_GRO)", probeGRO},
	{"busy poll / NAPI id", probeBusyPoll},
	{"O_DIRECT", probeODirect},
	{"XDP", probeXDP},
	{"perf events", probePerf},
}

// Probes runs every probe. dir is where the O_DIRECT probe creates (and
// removes) its scratch file; "" means the OS temp dir. It never fails:
// a probe that errors is a row saying why.
func Probes(dir string) []Probe {
	out := make([]Probe, 0, len(probeList))
	for _, p := range probeList {
		d, err := p.fn(dir)
		switch {
		case err == nil:
			out = append(out, Probe{Name: p.name, OK: true, Detail: d})
		case errors.Is(err, ErrUnsupported):
			out = append(out, Probe{Name: p.name, Detail: joinDetail(d, err.Error())})
		default:
			out = append(out, Probe{Name: p.name, Detail: joinDetail(d, "probe failed: "+err.Error())})
		}
	}
	return out
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// ProbeTable renders the matrix as a Markdown table.
func ProbeTable(ps []Probe) string {
	var b strings.Builder
	b.WriteString("| feature | works | detail |\n|---|---|---|\n")
	for _, p := range ps {
		ok := "no"
		if p.OK {
			ok = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Name, ok, strings.ReplaceAll(p.Detail, "|", "/"))
	}
	return b.String()
}
