// Package latency is a preallocated latency recorder with exact
// (nearest-rank) percentiles. It imports only the standard library, so any
// package's tests and benchmarks can use it, including those that
// internal/benchkit itself depends on (cast, replay).
package latency
