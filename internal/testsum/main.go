// Command testsum reads `go test -json` on stdin, passes the human-readable
// output through, and ends with the list of skipped tests (with the reason
// each printed) and one closing line "tests: N passed, N failed, N skipped".
// It exits 1 when any test or package failed, so a skip is always visible
// and a failure is never lost in a pipe.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	os.Exit(summarize(os.Stdin, os.Stdout))
}

// summarize copies the readable part of the `go test -json` stream r to w,
// then the skips and the closing line; it returns the exit status.
func summarize(r io.Reader, w io.Writer) int {
	var passed, failed, skipped int
	pkgFailed := false
	out := map[string][]string{} // package/test -> output lines (for skip reasons)
	var skips []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(w, string(line)) // not JSON (e.g. a build error): pass through
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				// Package-level lines: ok/FAIL summaries and build errors.
				fmt.Fprint(w, e.Output)
			} else {
				out[key] = append(out[key], e.Output)
			}
		case "pass":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				passed++
			}
			delete(out, key)
		case "fail", "build-fail":
			if e.Test == "" {
				pkgFailed = true
				continue
			}
			if !strings.Contains(e.Test, "/") {
				failed++
			}
			fmt.Fprint(w, strings.Join(out[key], ""))
			delete(out, key)
		case "skip":
			if e.Test != "" {
				if !strings.Contains(e.Test, "/") {
					skipped++
				}
				reason := ""
				for _, l := range out[key] {
					l = strings.TrimSpace(l)
					if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- SKIP") {
						reason = l
					}
				}
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason))
			}
			delete(out, key)
		}
	}
	if len(skips) > 0 {
		sort.Strings(skips)
		fmt.Fprintln(w, "skipped tests:")
		for _, s := range skips {
			fmt.Fprintln(w, "  "+s)
		}
	}
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed {
		return 1
	}
	return 0
}
