// Package report turns a suite run into what people read: a plain table
// on stdout, results.json, report.md, PNG plots (gonum/plot) and the
// README's figures block. It formats; it does not measure.
package report
