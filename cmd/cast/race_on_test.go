//go:build race

package main

// raceEnabled: the race detector slows the CLI's child processes several
// times; long reproductions run fewer rounds under it.
const raceEnabled = true
