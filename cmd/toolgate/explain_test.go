package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// explain works offline on the repo's own config and policy, agrees with
// the gateway's decisions at the condition boundary, and names the lines.
func TestExplainOnRepoPolicy(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t)) // main sets it; the repo config refers to it
	cases := []struct {
		args     []string
		wantCode int
		want     []string
	}{
		{[]string{"alice", "orders__update_order_status"}, 0, []string{"decision: allow", "roles: support_agent", "policy.csv:"}},
		{[]string{"alice", "orders/refund_order", `{"order_id":4821,"amount":100,"reason":"x"}`}, 0, []string{"decision: allow", "[condition true]"}},
		{[]string{"alice", "orders__refund_order", `{"order_id":4821,"amount":100.01,"reason":"x"}`}, 1, []string{"decision: deny", "[condition false]"}},
		{[]string{"carol", "orders__refund_order", `{"order_id":4821,"amount":5000,"reason":"x"}`}, 0, []string{"decision: allow", "roles: supervisor"}},
		{[]string{"bob", "orders__update_order_status"}, 1, []string{"decision: deny", "roles: viewer", "denied by default"}},
		{[]string{"mallory", "orders/get_order"}, 1, []string{"roles: (none)"}},
		{[]string{"--role", "supervisor", "mallory", "orders__refund_order", `{"order_id":1,"amount":1e6,"reason":"x"}`}, 0, []string{"decision: allow", "supervisor"}},
		{[]string{"alice", "nosuch__tool"}, 2, nil},
		{[]string{"alice", "orders__get_order", `{"broken`}, 2, nil},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			code := explain(append([]string{"--config", "../../toolgate.yaml"}, c.args...), &out)
			if code != c.wantCode {
				t.Fatalf("exit %d, want %d:\n%s", code, c.wantCode, out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// tools --as shows exactly what that principal's tools/list would.
func TestToolsAsPrincipal(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t))
	cfg := writeConfig(t, fmt.Sprintf("  orders:\n    command: \"${TOOLGATE_SELF}\"\n    args: [demo-orders]\n    env: {%s: toolgate, GORACE: \"atexit_sleep_ms=0\"}\n", execRole))
	policy, _ := os.ReadFile("../../policy.csv")
	write(t, strings.TrimSuffix(cfg, "toolgate.yaml")+"policy.csv", string(policy))
	var out bytes.Buffer
	if code := tools([]string{"--config", cfg, "--as", "bob"}, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "orders__get_order") || strings.Contains(out.String(), "orders__refund_order") || !strings.Contains(out.String(), "1 of 4 tools") {
		t.Fatalf("bob's catalog:\n%s", out.String())
	}
	out.Reset()
	tools([]string{"--config", cfg, "--as", "alice"}, &out)
	if !strings.Contains(out.String(), "orders__refund_order") || !strings.Contains(out.String(), "4 of 4 tools") {
		t.Fatalf("alice's catalog (refund is conditional, so listed):\n%s", out.String())
	}
}
