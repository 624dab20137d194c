//go:build race

package fanout

// raceSlowdown scales the rates of runs whose receivers must keep up on
// their own (the max policy) down under -race, which slows the cores 5-20x.
const raceSlowdown = 5
