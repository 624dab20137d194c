package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print the build's version and Go runtime", run: runVersion})
}

func runVersion(args []string) error {
	fs := newFlagSet("version", "", "Prints the module version, the Go version and the platform.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(os.Stdout, "walcast %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
