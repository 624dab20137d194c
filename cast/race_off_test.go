//go:build !race

package cast

const raceSlowdown = 1
