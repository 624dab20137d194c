package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/walcast/walcast/internal/benchkit"
)

// tputRun is one throughput row after the floors.
type tputRun struct {
	name string
	wal  bool // compared with the network and disk floors, not the network's alone
	run  func(benchkit.ThroughputConfig) (benchkit.Row, error)
}

// tputRunners are the rows of `cast bench throughput` after the floors, in
// the order the cost adds up: the datapath alone, the protocol, the WAL.
var tputRunners = []tputRun{
	{"floor+frame", false, benchkit.ThroughputFloorFrame},
	{"raw-gso-gro", false, benchkit.ThroughputRaw},
	{"casting-mmsg", false, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		return benchkit.ThroughputCasting(c, false, false)
	}},
	{"casting-mmsg+wal", true, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		return benchkit.ThroughputCasting(c, true, false)
	}},
	{"casting-mmsg+wal+coalesce", true, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		return benchkit.ThroughputCasting(c, true, true)
	}},
}

// tputAuthRunners are the rows `-auth` adds: the protocol without the WAL,
// with and without coalescing, with and without keys.
var tputAuthRunners = []tputRun{
	{"casting-mmsg+auth", false, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		c.Keys = benchKeys
		return benchkit.ThroughputCasting(c, false, false)
	}},
	{"casting-mmsg+coalesce", false, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		return benchkit.ThroughputCasting(c, false, true)
	}},
	{"casting-mmsg+coalesce+auth", false, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
		c.Keys = benchKeys
		return benchkit.ThroughputCasting(c, false, true)
	}},
}

func benchThroughput(args []string) error {
	fs := newFlagSet("bench throughput", "[flags]", "One-way blast on loopback, at each frame size. The floors share no code with what\nthey measure: floor-gso-gro (raw UDP_SEGMENT sends and UDP_GRO receives on two\npinned threads), floor-odirect (1 MiB O_DIRECT writes + fdatasync in -dir, as\nrecords/s of the frame size) and wal-alone (one goroutine appending to a\nwal.Writer, no network). Then floor+frame, the floor plus the wire format's\nper-record work (each record copied into a ring of the hot ring's size and\nsealed with CRC32C, decoded and checked on receive: the bound for any\nimplementation that retransmits from memory), raw-gso-gro over datapath/mmsg\n(the datapath's cost), casting-mmsg (the protocol's) and casting-mmsg+wal\n(the WAL's). Rows without the WAL are compared with floor-gso-gro; rows with it\nwith the slower of floor-gso-gro and floor-odirect, and the note gives the\nratio to the slower of floor-gso-gro and wal-alone. Rows run interleaved -runs times.\nRun it under the bench lock: flock /tmp/walcast-bench.lock cast bench throughput")
	c := benchkit.DefaultThroughputConfig()
	sizes := fs.String("sizes", "144,1443", "frame sizes in bytes, comma-separated")
	fs.DurationVar(&c.Duration, "d", c.Duration, "sending time per row")
	fs.IntVar(&c.Batch, "batch", c.Batch, "datagrams per recvmmsg, and records per send call: with GSO at most one UDP_SEGMENT send's worth (65000 bytes: 45 frames at 1443 B) in every row, the floor's unit")
	fs.IntVar(&c.Window, "window", c.Window, "records in flight at most (the sender waits for the receiver; 0: unpaced)")
	fs.StringVar(&c.Dir, "dir", os.TempDir(), "directory for the WAL-on rows and the disk floors")
	runs := fs.Int("runs", 3, "interleaved runs of every row")
	pin := fs.String("pin", "0,1", "CPUs of the sender and receiver threads, or none")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
	auth := fs.Bool("auth", false, "also run casting-mmsg+auth, casting-mmsg+coalesce and casting-mmsg+coalesce+auth (every datagram authenticated; docs/auth.md)")
	ctrs := countersFlag(fs)
	rowsFlag := fs.String("rows", "", "rows to run after floor-gso-gro, comma-separated (default: all; the disk floors run only with a WAL row)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	runners := tputRunners
	if *auth {
		runners = append(runners[:len(runners):len(runners)], tputAuthRunners...)
	}
	runners, err := withCounters(*ctrs, runners, func(r tputRun) (tputRun, bool) {
		run := r.run
		return tputRun{r.name + "+nocounters", r.wal, func(c benchkit.ThroughputConfig) (benchkit.Row, error) {
			c.NoCounters = true
			return run(c)
		}}, strings.HasPrefix(r.name, "casting-")
	})
	if err != nil {
		return err
	}
	if *rowsFlag != "" {
		if runners, err = pickTputRows(*rowsFlag, runners); err != nil {
			return err
		}
	}
	anyWAL := false
	for _, r := range runners {
		anyWAL = anyWAL || r.wal
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
	if err := checkRange("runs", *runs, 1, 100); err != nil {
		return err
	}
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	sz, err := parseFrameSizes(*sizes)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	title := fmt.Sprintf("throughput: %v per row, batch %d, window %d, pins %s, dir %s, %d runs, %s, load %s",
		c.Duration, c.Batch, c.Window, *pin, c.Dir, *runs, time.Now().UTC().Format(time.RFC3339), benchkit.LoadAvg())
	floors := 1
	if anyWAL {
		floors = 3
	}
	rs := newRowStream("bench throughput", title, *runs*len(sz)*(floors+len(runners)), false, *jsonOut)
	rows, err := rs.run(ctx, func() error {
		for run := 1; run <= *runs; run++ {
			for _, size := range sz {
				c.Size = size
				at := func(name string) { rs.next(fmt.Sprintf("run %d, %d B, %s", run, size, name)) }
				at("floor-gso-gro")
				net, err := benchkit.ThroughputFloor(c)
				if err != nil {
					return err
				}
				net.Run = run
				rs.add(net)
				// runAll runs the runners with the WAL (or without it),
				// each compared with what compare says.
				runAll := func(wal bool, compare func(*benchkit.Row)) error {
					for _, tr := range runners {
						if tr.wal != wal {
							continue
						}
						at(tr.name)
						r, err := tr.run(c)
						if err != nil {
							return fmt.Errorf("%s %d B: %w", tr.name, size, err)
						}
						compare(&r)
						r.Run = run
						rs.add(r)
					}
					return nil
				}
				// The rows without the WAL right after their floor, the
				// disk floors right before the WAL rows: on a shared host
				// whose speed drifts within seconds, a ratio of rows far
				// apart in time measures the drift.
				if err := runAll(false, func(r *benchkit.Row) { r.CompareTo(net) }); err != nil {
					return err
				}
				if !anyWAL {
					continue
				}
				at("floor-odirect")
				disk, err := benchkit.DiskFloor(c.Dir, size, c.Duration)
				if err != nil {
					return err
				}
				disk.Run = run
				disk.CompareTo(net)
				rs.add(disk)
				at("wal-alone")
				alone, err := benchkit.WALAlone(c)
				if err != nil {
					return err
				}
				alone.Run = run
				alone.CompareTo(disk)
				rs.add(alone)
				slow := net
				if disk.RecPerS < slow.RecPerS {
					slow = disk
				}
				bound := net
				if alone.RecPerS < bound.RecPerS {
					bound = alone
				}
				err = runAll(true, func(r *benchkit.Row) {
					r.CompareTo(slow)
					r.Note = fmt.Sprintf("×%s %.2f; ", bound.Name, r.RecPerS/bound.RecPerS) + r.Note
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if !*jsonOut && len(rows) > 0 {
		printSpread(os.Stdout, rows)
		fmt.Fprintf(os.Stdout, "load at the end %s\n", benchkit.LoadAvg())
	}
	return err
}

// pickTputRows keeps the runners named in list (comma-separated), in the
// command's order; a name no runner has is a usage error that lists them.
func pickTputRows(list string, runners []tputRun) ([]tputRun, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var names []string
	var out []tputRun
	for _, r := range runners {
		names = append(names, r.name)
		if want[r.name] {
			out = append(out, r)
			delete(want, r.name)
		}
	}
	for n := range want {
		return nil, usagef("-rows: no row %q (have %s; -auth adds more)", n, strings.Join(names, ", "))
	}
	return out, nil
}
