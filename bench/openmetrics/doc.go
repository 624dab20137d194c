// Package openmetrics holds the check of walcast's hand-written
// Prometheus exposition (counters/metrics) against Prometheus's own text
// parser, which the core module does not depend on.
package openmetrics
