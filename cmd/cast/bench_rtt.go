package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/internal/benchkit"
)

// rttRunners are the rows of `cast bench rtt` compared with the raw floor.
var rttRunners = []func(benchkit.RTTConfig) (benchkit.Row, error){benchkit.RTTCasting}

func init() {
	registerBench("rtt", "ping-pong RTT: casting over udp vs raw UDP, spin and netpoller modes", benchRTT)
	registerBench("throughput", "one-way records/s: casting over mmsg vs raw sendmmsg and GSO/GRO", benchThroughput)
}

func parsePins(s string) ([2]int, error) {
	if s == "" || s == "none" {
		return [2]int{-1, -1}, nil
	}
	a, b, ok := strings.Cut(s, ",")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return [2]int{}, usagef("-pin %q: want CPU,CPU (or none)", s)
	}
	return [2]int{x, y}, nil
}

func parseModes(s string) ([]affinity.Strategy, error) {
	if s == "both" {
		return []affinity.Strategy{affinity.Spin, affinity.Park}, nil
	}
	m, err := affinity.ParseStrategy(s)
	if err != nil {
		return nil, usagef("-mode: %v", err)
	}
	return []affinity.Strategy{m}, nil
}

func benchRTT(args []string) error {
	fs := newFlagSet("bench rtt", "[flags]", "Ping-pong round trips on loopback: casting over datapath/udp against raw UDP\nwith the same threads and idle mode (the floor), and plain goroutines on\nnet.UDPConn for reference. Ratios are against raw-udp of the same mode and run.")
	c := benchkit.DefaultRTTConfig()
	fs.IntVar(&c.N, "n", c.N, "measured round trips per row")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "round trips before measuring")
	fs.IntVar(&c.Size, "size", c.Size, "bytes per ping")
	mode := fs.String("mode", "both", "idle mode: spin, park (netpoller) or both")
	pin := fs.String("pin", "0,1", "CPUs of the client and echo threads, or none")
	jsonOut := fs.Bool("json", false, "print one JSON row per line instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("n", c.N, 1, 1<<30); err != nil {
		return err
	}
	if err := checkRange("warmup", c.Warmup, 0, 1<<30); err != nil {
		return err
	}
	if err := checkRange("size", c.Size, 16, 65507); err != nil {
		return err
	}
	var err error
	if c.CPUs, err = parsePins(*pin); err != nil {
		return err
	}
	modes, err := parseModes(*mode)
	if err != nil {
		return err
	}
	var rows []benchkit.Row
	for _, m := range modes {
		c.Mode = m
		floor, err := benchkit.RTTRawUDP(c)
		if err != nil {
			return fmt.Errorf("raw-udp %v: %w", m, err)
		}
		rows = append(rows, floor)
		for _, run := range rttRunners {
			r, err := run(c)
			if err != nil {
				return err
			}
			r.CompareTo(floor)
			rows = append(rows, r)
		}
	}
	ref, err := benchkit.RTTGoNet(c)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Name == "raw-udp" && r.Mode == affinity.Park.String() {
			ref.CompareTo(r)
		}
	}
	rows = append(rows, ref)
	printRows(os.Stdout, rows, *jsonOut, fmt.Sprintf("rtt: %d round trips of %d B, pins %s, %s", c.N, c.Size, *pin, time.Now().UTC().Format(time.RFC3339)))
	return nil
}

func printRows(w io.Writer, rows []benchkit.Row, asJSON bool, title string) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
		return
	}
	fmt.Fprintln(w, title)
	lat := len(rows) > 0 && rows[0].Latency.N > 0
	if lat {
		fmt.Fprintf(w, "%-14s %-6s %-10s %9s %9s %9s %9s %9s %7s %7s  %s\n", "name", "path", "mode", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "stddev", "×p50", "×p99", "note")
		for _, r := range rows {
			l := r.Latency
			fmt.Fprintf(w, "%-14s %-6s %-10s %9.1f %9.1f %9.1f %9.1f %9.1f %7s %7s  %s\n", r.Name, r.Path, r.Mode,
				us(l.P50), us(l.P99), us(l.P999), us(l.Max), l.StdDev/1e3, ratio(r.RatioP50), ratio(r.RatioP99), r.Note)
		}
		return
	}
	fmt.Fprintf(w, "%-20s %-6s %12s %8s %8s  %s\n", "name", "path", "records/s", "Gbit/s", "×floor", "note")
	for _, r := range rows {
		fmt.Fprintf(w, "%-20s %-6s %12.0f %8.2f %8s  %s\n", r.Name, r.Path, r.RecPerS, r.Gbps, ratio(r.RatioTput), r.Note)
	}
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

func ratio(x float64) string {
	if x == 0 || x != x {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}
