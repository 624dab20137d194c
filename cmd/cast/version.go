package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print the build's version, VCS revision (and whether the tree was modified) and Go runtime", run: runVersion})
}

func runVersion(args []string) error {
	fs := newFlagSet("version", "", "Prints the module version, the VCS revision the binary was built from, its commit\ntime and \"modified\" when the working tree had uncommitted changes (from the\nbuild info `go build` embeds in a git checkout), the Go version and the platform.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(os.Stdout, versionLine(bi, ok))
	return nil
}

// versionLine is `cast version`'s output for the build info bi.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	v, rev, at, modified := "(devel)", "", "", ""
	if ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	vcs := "revision unknown (built without VCS information)"
	if rev != "" {
		vcs = "revision " + rev
		if at != "" {
			vcs += " (" + at + ")"
		}
		switch modified {
		case "true":
			vcs += " modified"
		case "false":
			vcs += " clean"
		}
	}
	return fmt.Sprintf("walcast %s %s %s %s/%s", v, vcs, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
