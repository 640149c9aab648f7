package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// The demo as shipped (toolgate.yaml, model.conf and policy.csv of the
// repository): a support agent who updates an order and reads it back sees
// the new status, not a read from before the update replayed by duplicate
// suppression; an identical write is still replayed, never run twice.
func TestDemoConfigReadsAfterAWrite(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"model.conf", "policy.csv"} {
		write(t, filepath.Join(dir, f), mustRead(t, filepath.Join("../..", f)))
	}
	// The demo upstream is ${TOOLGATE_SELF} demo-orders: this test binary,
	// told by its environment to act as toolgate. A stdio upstream inherits
	// only an allowlist of the gateway's variables, so the one change the
	// test makes to the demo config is that environment.
	const upstream = "    args: [demo-orders]\n"
	cfg := mustRead(t, "../../toolgate.yaml")
	if strings.Count(cfg, upstream) != 1 {
		t.Fatalf("toolgate.yaml: no single %q line to add the test's environment to", upstream)
	}
	cfg = strings.Replace(cfg, upstream, upstream+fmt.Sprintf("    env: {%s: toolgate, GORACE: \"atexit_sleep_ms=0\"}\n", execRole), 1)
	write(t, filepath.Join(dir, "toolgate.yaml"), cfg)
	t.Setenv("TOOLGATE_SELF", self(t))
	url, logs := httpGateway(t, filepath.Join(dir, "toolgate.yaml"))
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	c := connectHTTP(t, url, "tg_demo_alice_support") // the README's demo key
	status := func(env map[string]any) any {
		data, _ := env["data"].(map[string]any)
		return data["status"]
	}
	if _, env := callE2E(t, c, "orders__get_order", `{"order_id":4821}`); env["ok"] != true || status(env) != "processing" {
		t.Fatalf("first read: %v", env)
	}
	update := `{"order_id":4821,"status":"shipped"}`
	if _, env := callE2E(t, c, "orders__update_order_status", update); env["ok"] != true || env["replayed"] != nil {
		t.Fatalf("update: %v", env)
	}
	if _, env := callE2E(t, c, "orders__get_order", `{"order_id":4821}`); env["ok"] != true || status(env) != "shipped" || env["replayed"] != nil {
		t.Fatalf("read after the update: status %v, replayed %v; want shipped, not replayed (%v)", status(env), env["replayed"], env)
	}
	if _, env := callE2E(t, c, "orders__update_order_status", update); env["ok"] != true || env["replayed"] != true {
		t.Fatalf("the same update again was not replayed: %v", env)
	}
}
