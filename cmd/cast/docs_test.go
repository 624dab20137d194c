package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsFlagsExist: every `cast CMD … -flag` the README and docs/*.md
// show (inline code and lines of code blocks) names a command that
// exists and flags its -h lists, so the docs cannot drift from the CLI.
func TestDocsFlagsExist(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	invocation := regexp.MustCompile(`(?:^|[\s(` + "`" + `&;|])(?:bin/)?cast ([^` + "`" + `&;|\n]*)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var snippets []string
		inBlock := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inBlock = !inBlock
				continue
			}
			if inBlock {
				snippets = append(snippets, l)
				continue
			}
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(l, -1) {
				snippets = append(snippets, m[1])
			}
		}
		for _, s := range snippets {
			s = strings.SplitN(s, " #", 2)[0] // shell comments
			// `recv -json`: a command named without "cast" in front.
			if f := strings.Fields(s); len(f) > 1 && strings.HasPrefix(f[1], "-") {
				if _, ok := commands[f[0]]; ok {
					s = "cast " + s
				}
			}
			for _, m := range invocation.FindAllStringSubmatch(s, -1) {
				if bad := checkInvocation(strings.Fields(m[1])); bad != "" {
					t.Errorf("%s: `cast %s`: %s", filepath.Base(f), m[1], bad)
				}
				checked++
			}
		}
	}
	if checkInvocation([]string{"send", "-no-such"}) == "" || checkInvocation([]string{"replay", "tail", "-wal"}) == "" || checkInvocation([]string{"frob"}) == "" {
		t.Fatal("checkInvocation accepts what -h does not list")
	}
	if checked < 30 {
		t.Fatalf("only %d cast invocations found in the docs: the scan is broken", checked)
	}
}

// checkInvocation returns what is wrong with `cast args…` as the docs show
// it ("" when nothing is, or when it is not a runnable example).
func checkInvocation(args []string) string {
	if len(args) == 0 || !regexp.MustCompile(`^[a-z]+$`).MatchString(args[0]) {
		return "" // `cast -h`, `cast CMD -h`, `cast CMD: reason`
	}
	if _, ok := commands[args[0]]; !ok {
		if args[0] == "is" || args[0] == "and" || args[0] == "on" {
			return "" // prose ("walcast is …")
		}
		return "no such command"
	}
	cmd := args[:1]
	rest := args[1:]
	switch args[0] {
	case "wal", "replay", "tune", "bench":
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return ""
		}
		sub := rest[0]
		if strings.ContainsAny(sub, `|\…`) {
			return "" // a list of subcommands
		}
		if args[0] == "bench" {
			if _, ok := suiteWorkloads[sub]; ok {
				return "" // cast-bench's flags
			}
		}
		cmd, rest = append(cmd, sub), rest[1:]
	}
	code, help := runInProcess(append(append([]string{}, cmd...), "-h")...)
	if code != 0 {
		return fmt.Sprintf("-h exits %d", code)
	}
	for _, a := range rest {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "-h" {
			continue
		}
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
			continue
		}
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `\b`).MatchString(help) {
			return "-" + name + " is not a flag of `cast " + strings.Join(cmd, " ") + "`"
		}
	}
	return ""
}
