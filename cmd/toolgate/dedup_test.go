package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
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

// Through the real gateway: a non-idempotent call whose answer is too large
// to keep for replay (over a quarter of limits.dedup.max_bytes) reaches its
// caller whole, and its repeat is refused with duplicate_call instead of
// running a second time; a new idempotency key runs it on purpose.
func TestAnswerTooLargeToKeepIsNotRunTwiceEndToEnd(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	write(t, cfg, strings.Replace(mustRead(t, cfg), "dedup: {window: 0s}", "dedup: {window: 1m, max_bytes: 1048576}", 1))
	url, logs := httpGateway(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	alice := connectHTTP(t, url, aliceKey)
	const args = `{"label":"big","pad":200000}` // twice that kept (text and envelope): over 256 KiB
	res, env := callE2E(t, alice, "hostile__tick", args)
	data, _ := env["data"].(map[string]any)
	if env["ok"] != true || fmt.Sprint(data["executions"]) != "1" || len(fmt.Sprint(data["pad"])) != 200000 || len(res.Content) != 1 {
		t.Fatalf("first call: ok=%v executions=%v pad %d bytes", env["ok"], data["executions"], len(fmt.Sprint(data["pad"])))
	}
	_, env = callE2E(t, alice, "hostile__tick", args)
	if env["error_code"] != "duplicate_call" || env["retryable"] != false || !strings.Contains(fmt.Sprint(env["message"]), "not kept for replay") {
		t.Fatalf("repeat: %v, want duplicate_call, not retryable", env)
	}
	if !strings.Contains(logs.String(), "answer too large to keep for replay") {
		t.Fatal("the log does not say the answer was not kept")
	}
	keyed := mcp.CallToolRequest{}
	keyed.Params.Name, keyed.Params.Arguments = "hostile__tick", json.RawMessage(args)
	keyed.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"io.toolgate/idempotency-key": "on-purpose"}}
	again, err := alice.CallTool(t.Context(), keyed)
	if err != nil {
		t.Fatal(err)
	}
	env, _ = again.StructuredContent.(map[string]any)
	if data, _ := env["data"].(map[string]any); env["ok"] != true || fmt.Sprint(data["executions"]) != "2" {
		t.Fatalf("with a new idempotency key: ok=%v executions=%v, want it run (2)", env["ok"], data["executions"])
	}
}
