//go:build race

package cast

// raceSlowdown scales the real-socket tests' rates down under -race,
// which slows the cores 5-20×.
const raceSlowdown = 5
