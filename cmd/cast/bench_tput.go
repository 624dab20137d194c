package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

// tputRunners are the casting rows of `cast bench throughput`; each is
// compared with the raw GSO/GRO floor of the same size.
var tputRunners = []func(benchkit.ThroughputConfig) ([]benchkit.Row, error){
	func(c benchkit.ThroughputConfig) ([]benchkit.Row, error) {
		var rows []benchkit.Row
		for _, v := range []struct{ wal, coalesce bool }{{false, false}, {true, false}, {true, true}} {
			r, err := benchkit.ThroughputCasting(c, v.wal, v.coalesce)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r)
		}
		return rows, nil
	},
}

func benchThroughput(args []string) error {
	fs := newFlagSet("bench throughput", "[flags]", "One-way blast on loopback: raw sendmmsg and raw GSO/GRO (the floors) and casting\nover datapath/mmsg, at each frame size. Ratios are against raw-gso-gro of the\nsame size and run.")
	c := benchkit.DefaultThroughputConfig()
	sizes := fs.String("sizes", "144,1443", "frame sizes in bytes, comma-separated")
	fs.DurationVar(&c.Duration, "d", c.Duration, "sending time per row")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per sendmmsg/recvmmsg")
	fs.IntVar(&c.Window, "window", c.Window, "records in flight at most (the sender waits for the receiver; 0: unpaced)")
	pin := fs.String("pin", "0,1", "CPUs of the sender and receiver threads, or none")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("d", c.Duration, time.Millisecond, time.Hour); err != nil {
		return err
	}
	if err := checkRange("batch", c.Batch, 1, 1024); err != nil {
		return err
	}
	if err := checkRange("window", c.Window, 0, 1<<30); err != nil {
		return err
	}
	var err error
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	var ss []int
	for _, s := range strings.Split(*sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return usagef("-sizes: %v", err)
		}
		if err := checkRange("sizes", v, 24, 65507); err != nil {
			return err
		}
		ss = append(ss, v)
	}
	var rows []benchkit.Row
	for _, size := range ss {
		c.Size = size
		plain := c
		plain.GSO, plain.GRO = false, false
		r0, err := benchkit.ThroughputRaw(plain)
		if err != nil {
			return err
		}
		floor, err := benchkit.ThroughputRaw(c)
		if err != nil {
			return err
		}
		r0.CompareTo(floor)
		rows = append(rows, r0, floor)
		for _, run := range tputRunners {
			rs, err := run(c)
			if err != nil {
				return err
			}
			for i := range rs {
				rs[i].CompareTo(floor)
			}
			rows = append(rows, rs...)
		}
	}
	printRows(os.Stdout, rows, *jsonOut, fmt.Sprintf("throughput: %v per row, batch %d, window %d, pins %s, %s", c.Duration, c.Batch, c.Window, *pin, time.Now().UTC().Format(time.RFC3339)))
	return nil
}
