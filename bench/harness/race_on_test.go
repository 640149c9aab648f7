//go:build race

package harness_test

// raceFlags builds the toolgate binary the way this test binary was built:
// the race detector's package archives are then already in the build cache.
var raceFlags = []string{"-race"}
