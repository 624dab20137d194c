//go:build !race

package fanout

const raceSlowdown = 1
