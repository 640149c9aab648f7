package main

import (
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
)

// A client of `toolgate serve --stdio` gets more than mcp-go's default of
// five calls at once: eight calls that each wait until all eight are in
// flight (the upstream's gather tool) all complete. With five workers they
// would wait for each other until their deadline. (Each call's i makes it
// distinct: identical calls in flight would be joined by duplicate
// suppression.)
func TestStdioClientCallsRunConcurrently(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", "    tools:\n      gather: {timeout: 5s}\n"))
	c := connectStdio(t, cfg)
	const n = 8
	var wg sync.WaitGroup
	envs := make([]map[string]any, n)
	for i := range n {
		wg.Go(func() {
			_, envs[i] = callE2E(t, c, "hostile__gather", fmt.Sprintf(`{"n":%d,"key":"stdio","i":%d}`, n, i))
		})
	}
	wg.Wait()
	for i, env := range envs {
		if env["ok"] != true {
			t.Errorf("call %d: %v", i, env)
		}
	}
}

// serve raises the GC target unless the operator set GOGC.
func TestTuneGCLeavesGOGCAlone(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "")
	tuneGC()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "50")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent changed to %d", got)
	}
}
