package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Through the real gateway and a real upstream that counts its executions:
// two identical calls of a non-idempotent tool in flight run once; a repeat
// replays, marked; different arguments or another principal execute.
func TestDuplicateCallsRunOnceEndToEnd(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	write(t, cfg, strings.Replace(mustRead(t, cfg), "dedup: {window: 0s}", "dedup: {window: 1m}", 1))
	write(t, strings.TrimSuffix(cfg, "toolgate.yaml")+"policy.csv", testPolicy(servers)+"p, reader, hostile/tick, call, allow\n")
	url, _ := httpGateway(t, cfg)
	alice := connectHTTP(t, url, aliceKey)
	executions := func(env map[string]any) string { return fmt.Sprint(env["data"].(map[string]any)["executions"]) }
	var wg sync.WaitGroup
	results := make([]map[string]any, 2)
	for i := range results {
		wg.Go(func() { _, results[i] = callE2E(t, alice, "hostile__tick", `{"ms":300,"label":"a"}`) })
	}
	wg.Wait()
	if executions(results[0]) != "1" || executions(results[1]) != "1" {
		t.Fatalf("two identical calls in flight: %v / %v", results[0], results[1])
	}
	_, env := callE2E(t, alice, "hostile__tick", `{"label":"a","ms":300}`)
	if executions(env) != "1" || env["replayed"] != true {
		t.Fatalf("repeat: %v, want the recorded answer marked replayed", env)
	}
	if _, env = callE2E(t, alice, "hostile__tick", `{"label":"b"}`); executions(env) != "2" || env["replayed"] != nil {
		t.Fatalf("different arguments: %v", env)
	}
	if _, env = callE2E(t, connectHTTP(t, url, bobKey), "hostile__tick", `{"ms":300,"label":"a"}`); executions(env) != "3" {
		t.Fatalf("another principal shared alice's result: %v", env)
	}
}
