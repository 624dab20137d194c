// Command burn keeps CPUs busy so that tests can be run on a saturated
// machine: `make stress-test` starts it beside the large real-socket
// tests and stops it when they end.
//
// Usage: burn [-n workers] [-for duration]
//
// Each worker is a busy loop on its own locked OS thread. burn exits on
// SIGINT or SIGTERM, after -for (a safety net: it never outlives a test
// run that was killed), or as soon as its parent process is gone, so it
// cannot be left behind.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 1, "busy workers (one CPU each)")
	limit := flag.Duration("for", time.Hour, "exit after this long at most")
	flag.Parse()
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "burn: -n must be ≥ 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*n + 1)
	var stop atomic.Bool
	var spins atomic.Uint64
	for range *n {
		go func() {
			runtime.LockOSThread()
			var k uint64
			for !stop.Load() {
				for range 1 << 16 {
					k = k*6364136223846793005 + 1442695040888963407
				}
				spins.Add(1)
			}
			_ = k
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	parent := os.Getppid()
	fmt.Fprintf(os.Stderr, "burn: %d workers started\n", *n)
	end := time.After(*limit)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	why := ""
	for why == "" {
		select {
		case s := <-sig:
			why = s.String()
		case <-end:
			why = "-for elapsed"
		case <-tick.C:
			if os.Getppid() != parent {
				why = "parent gone"
			}
		}
	}
	stop.Store(true)
	fmt.Fprintf(os.Stderr, "burn: %d workers stopped after %v (%s), %d M spins\n", *n, time.Since(start).Round(time.Second), why, spins.Load()*(1<<16)/1e6)
}
