// Package metrics exposes counters files in the Prometheus text
// exposition format (version 0.0.4): [Write] for any writer, [Handler]
// for an HTTP /metrics endpoint. It is written by hand (the format is a
// few lines of text) so that the core module has no dependency; the
// bench module checks it with Prometheus's own parser. Package cast does
// not import it: a program that wants /metrics imports it itself.
//
// Names: walcast_ + the slot's name; counters end in _total, ns values
// are converted to seconds (_ns becomes _seconds). Every family has a
// HELP line; every sample carries the writer's pid as a label beside
// the slot's own labels (stream, role, loop, receiver: a receiver's id
// is a label, never a value, so that no id loses precision in a float).
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/walcast/walcast/counters"
)

type sample struct {
	labels string
	value  string
}

type family struct {
	name, typ, help string
	samples         []sample
}

// Name is the exposed metric name of a slot name of kind k.
func Name(name string, k counters.Kind) string {
	n := "walcast_" + name
	if k.IsNs() {
		n = strings.TrimSuffix(n, "_ns") + "_seconds"
	}
	if k.IsCounter() {
		n += "_total"
	}
	return n
}

// Value is the exposed value of v (ns kinds in seconds).
func Value(v uint64, k counters.Kind) string {
	if k.IsNs() {
		return strconv.FormatFloat(float64(v)/1e9, 'g', -1, 64)
	}
	return strconv.FormatUint(v, 10)
}

// Write writes the values of snaps (stale files skipped) as one
// exposition: each family's samples together, families sorted by name.
func Write(w io.Writer, snaps []*counters.Snapshot) error {
	fams := map[string]*family{}
	up := &family{name: "walcast_process_start_time_seconds", typ: "gauge", help: "When the walcast process started (Unix time)."}
	for _, s := range snaps {
		if s.State == counters.Stale {
			continue
		}
		pid := strconv.Itoa(s.PID)
		up.samples = append(up.samples, sample{`pid="` + pid + `"`, strconv.FormatFloat(float64(s.Start)/1e9, 'f', 3, 64)})
		for _, v := range s.Values {
			n := Name(v.Name, v.Kind)
			f := fams[n]
			if f == nil {
				typ := "gauge"
				if v.Kind.IsCounter() {
					typ = "counter"
				}
				f = &family{name: n, typ: typ, help: helpFor(v.Name)}
				fams[n] = f
			}
			f.samples = append(f.samples, sample{labelText(pid, v.Labels), Value(v.Value, v.Kind)})
		}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	bw := bufio.NewWriter(w)
	all := []*family{up}
	for _, n := range names {
		all = append(all, fams[n])
	}
	for _, f := range all {
		if len(f.samples) == 0 {
			continue
		}
		fmt.Fprintf(bw, "# HELP %s %s\n", f.name, strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(f.help))
		fmt.Fprintf(bw, "# TYPE %s %s\n", f.name, f.typ)
		seen := map[string]bool{}
		for _, s := range f.samples {
			if seen[s.labels] {
				continue // two slots with one label: the first wins
			}
			seen[s.labels] = true
			fmt.Fprintf(bw, "%s{%s} %s\n", f.name, s.labels, s.value)
		}
	}
	return bw.Flush()
}

// labelText is pid="…" and the slot's labels, sorted by name, values
// escaped as the format wants.
func labelText(pid string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		if k != "pid" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(`pid="` + pid + `"`)
	for _, k := range keys {
		b.WriteString("," + k + `="` + escape(l[k]) + `"`)
	}
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// Handler serves the counters files of dir (empty: counters.DefaultDir())
// at every path: all live processes, or only pid when pid > 0 (a program
// serving its own: os.Getpid()).
func Handler(dir string, pid int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snaps, _, err := counters.List(dir)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if pid > 0 {
			var mine []*counters.Snapshot
			for _, s := range snaps {
				if s.PID == pid {
					mine = append(mine, s)
				}
			}
			snaps = mine
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		Write(w, snaps)
	})
}
