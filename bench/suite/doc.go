// Package suite is the side-by-side benchmark: it runs each workload over
// every peer and walcast's own runners, compares each row with the floor
// measured in the same run, checks the README's goals and builds the
// report. Workloads whose dependency is missing are listed as not
// available with the reason; nothing is faked.
package suite
