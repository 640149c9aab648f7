package main

import (
	"bytes"
	"fmt"
	"io"
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

// captureStderr runs fn with os.Stderr going to a pipe and returns what it wrote.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	defer func() {
		os.Stderr = saved
		w.Close()
		r.Close()
	}()
	fn()
	os.Stderr = saved
	w.Close()
	return <-got
}

// A principal that neither the config (API keys, the stdio principal) nor the policy (g lines) names
// is said to be unknown (exit 2), never answered as a principal without rights: a misspelled name
// would otherwise read as "denied". With --role it is answered, saying that only those roles count.
func TestExplainUnknownPrincipal(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t))
	run := func(args ...string) (int, string, string) {
		var out bytes.Buffer
		var code int
		errOut := captureStderr(t, func() { code = explain(append([]string{"--config", "../../toolgate.yaml"}, args...), &out) })
		return code, out.String(), errOut
	}
	for _, name := range []string{"mallory", "alcie"} {
		code, out, errOut := run(name, "orders/get_order")
		if code != 2 || out != "" || !strings.Contains(errOut, fmt.Sprintf("unknown principal %q", name)) || !strings.Contains(errOut, "--role") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	if code, out, _ := run("--role", "viewer", "mallory", "orders/get_order"); code != 0 || !strings.Contains(out, "decision: allow") ||
		!strings.Contains(out, `no policy line names "mallory"`) {
		t.Errorf("an unknown principal with --role: exit %d:\n%s", code, out)
	}
	// Known: the stdio principal (config), an API key's principal, and a role's name (which the
	// policy answers for itself: a principal may not be named like a role).
	for _, c := range []struct {
		name string
		code int
		want string
	}{{"local", 0, "roles: support_agent"}, {"bob", 1, "roles: viewer"}, {"support_agent", 1, "name of a role"}} {
		if code, out, errOut := run(c.name, "orders/update_order_status"); code != c.code || !strings.Contains(out, c.want) || strings.Contains(out, "note: no credential") {
			t.Errorf("%s: exit %d, want %d with %q:\n%s%s", c.name, code, c.code, c.want, out, errOut)
		}
	}
}

// tools --as an unknown principal says so (exit 2) before starting any upstream, instead of
// listing "0 of N tools"; with --role it lists what those roles see.
func TestToolsAsUnknownPrincipal(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t))
	cfg := writeConfig(t, fmt.Sprintf("  orders:\n    command: \"${TOOLGATE_SELF}\"\n    args: [demo-orders]\n    env: {%s: toolgate, GORACE: \"atexit_sleep_ms=0\"}\n", execRole))
	policy, _ := os.ReadFile("../../policy.csv")
	write(t, strings.TrimSuffix(cfg, "toolgate.yaml")+"policy.csv", string(policy))
	var out bytes.Buffer
	var code int
	errOut := captureStderr(t, func() { code = tools([]string{"--config", cfg, "--as", "mallory"}, &out) })
	if code != 2 || out.Len() != 0 || !strings.Contains(errOut, `unknown principal "mallory"`) {
		t.Fatalf("tools --as mallory: exit %d, stdout %q, stderr %q", code, out.String(), errOut)
	}
	if code := tools([]string{"--config", cfg, "--as", "mallory", "--role", "viewer"}, &out); code != 0 || !strings.Contains(out.String(), "1 of 4 tools") {
		t.Fatalf("tools --as mallory --role viewer: exit %d:\n%s", code, out.String())
	}
}
