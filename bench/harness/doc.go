// Package harness drives every peer the same way: the same payload
// (128 B by default), the same pinning (A's loop on core 0, B's on core
// 1, each a locked OS thread), the same warm-up count, HDR histograms
// for every latency, perf counters opened on the measuring thread, and
// the same stop rules. It owns the workloads (rtt, oneway, throughput,
// loss, classic) and returns results; it never prints a verdict and
// never formats a report (package report does).
package harness
