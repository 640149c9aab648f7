//go:build !race

package harness_test

var raceFlags []string
