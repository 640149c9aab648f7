package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz/replay"
)

// demoDir copies the repository's demo (toolgate.yaml, model.conf, policy.csv, policy_test.yaml)
// into a temp directory, with the one change a test needs: the demo upstream, this test binary,
// is told by its environment to act as toolgate. extra is appended to toolgate.yaml.
func demoDir(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"model.conf", "policy.csv", "policy_test.yaml"} {
		write(t, filepath.Join(dir, f), mustRead(t, filepath.Join("../..", f)))
	}
	const upstream = "    args: [demo-orders]\n"
	cfg := mustRead(t, "../../toolgate.yaml")
	if strings.Count(cfg, upstream) != 1 {
		t.Fatalf("toolgate.yaml: no single %q line to add the test's environment to", upstream)
	}
	cfg = strings.Replace(cfg, upstream, upstream+fmt.Sprintf("    env: {%s: toolgate, GORACE: \"atexit_sleep_ms=0\"}\n", execRole), 1)
	write(t, filepath.Join(dir, "toolgate.yaml"), cfg+extra)
	t.Setenv("TOOLGATE_SELF", self(t))
	return dir
}

func runPolicyCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := policyCommand(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The shipped cases file passes against the shipped policy, with the demo upstream's real catalog:
// CI runs the repository's own policy tests.
func TestShippedPolicyCases(t *testing.T) {
	dir := demoDir(t, "")
	code, out, errOut := runPolicyCmd("test", "-v", "--config", filepath.Join(dir, "toolgate.yaml"), filepath.Join(dir, "policy_test.yaml"))
	if code != 0 || !strings.Contains(out, "catalog: 4 tool(s)") || !strings.Contains(out, " 0 failed") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestPolicyTestCommand(t *testing.T) {
	dir := demoDir(t, "")
	cfg := filepath.Join(dir, "toolgate.yaml")
	cases := filepath.Join(dir, "cases.yaml")
	write(t, cases, `cases:
  - name: alice refunds 150
    principal: alice
    tool: orders__refund_order
    args: {order_id: 4821, amount: 150, reason: damaged}
    expect: allow
  - name: misspelt principal
    principal: alcie
    tool: orders__get_order
    args: {order_id: 4821}
    expect: deny
  - name: no such tool
    principal: carol
    tool: orders__delete_order
    args: {order_id: 4821}
    expect: allow
  - name: the schema refuses a string amount
    principal: alice
    tool: orders__refund_order
    args: {order_id: 4821, amount: "10", reason: damaged}
    expect: allow
`)
	code, out, _ := runPolicyCmd("test", "--config", cfg, cases)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"FAIL  alice refunds 150 (" + cases + ":2)",
		"expected: allow\n",
		"decided:  deny (no line decided: denied by default)",
		"policy.csv:37 p, support_agent, orders/refund_order, call, allow, amount <= 100    [condition false]",
		"FAIL  misspelt principal", `unknown principal "alcie"`,
		"FAIL  no such tool", "orders/delete_order is not in the catalog",
		"FAIL  the schema refuses a string amount", "invalid_arguments",
		"4 case(s): 0 passed, 4 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Offline, the catalog's checks are skipped, and said to be.
	code, out, _ = runPolicyCmd("test", "--offline", "--config", cfg, cases)
	if code != 1 || !strings.Contains(out, "not checked to exist") || strings.Contains(out, "not in the catalog") {
		t.Fatalf("offline: exit %d\n%s", code, out)
	}

	// A candidate with --policy: with a refund limit of 200, the first case passes.
	candidate := filepath.Join(dir, "candidate.csv")
	write(t, candidate, strings.Replace(mustRead(t, filepath.Join(dir, "policy.csv")), "call, allow, amount <= 100", "call, allow, amount <= 200", 1))
	// The case file is shared: policy.csv:37 stands for line 37 of the candidate under test.
	for _, rule := range []string{"candidate.csv:37", "policy.csv:37"} {
		write(t, cases, "cases:\n  - {name: alice refunds 150, principal: alice, tool: orders__refund_order, args: {order_id: 4821, amount: 150, reason: damaged}, expect: allow, rule: "+rule+"}\n")
		if code, out, _ := runPolicyCmd("test", "--offline", "--config", cfg, "--policy", candidate, cases); code != 0 {
			t.Fatalf("candidate, rule %s: exit %d\n%s", rule, code, out)
		}
	}

	// An unknown key is a file:line error, exit 2.
	write(t, cases, "cases:\n  - name: a\n    principal: alice\n    tool: orders__get_order\n    expect: allow\n    expcet: deny\n")
	if code, _, errOut := runPolicyCmd("test", "--offline", "--config", cfg, cases); code != 2 || !strings.Contains(errOut, cases+`:6: unknown field "expcet"`) {
		t.Fatalf("unknown key: exit %d\n%s", code, errOut)
	}
}

// policy diff replays a trail the gateway wrote for real calls through candidates: one that
// changes nothing, one that removes an allow, one that adds a deny with a condition.
func TestPolicyDiffOnRealCalls(t *testing.T) {
	dir := demoDir(t, "audit: {include_args: true}\nlimits:\n  dedup: {window: 0s}\n")
	cfg := filepath.Join(dir, "toolgate.yaml")
	url, logs, gw := httpGatewayFull(t, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()
	alice, bob := connectHTTP(t, url, "tg_demo_alice_support"), connectHTTP(t, url, "tg_demo_bob_viewer")
	for _, c := range []struct {
		who        string
		tool, args string
		ok         bool
	}{
		{"alice", "orders__get_order", `{"order_id":4821}`, true},
		{"alice", "orders__update_order_status", `{"order_id":4821,"status":"shipped"}`, true},
		{"alice", "orders__update_order_status", `{"order_id":4822,"status":"cancelled"}`, true},
		{"alice", "orders__refund_order", `{"order_id":4821,"amount":30,"reason":"late"}`, true},
		{"alice", "orders__refund_order", `{"order_id":4821,"amount":150,"reason":"late"}`, false},
		{"bob", "orders__get_order", `{"order_id":4821}`, true},
		{"bob", "orders__get_order", `{"order_id":4822}`, true},
		{"bob", "orders__update_order_status", `{"order_id":4821,"status":"delivered"}`, false},
	} {
		client := alice
		if c.who == "bob" {
			client = bob
		}
		if _, env := callE2E(t, client, c.tool, c.args); env["ok"] != c.ok {
			t.Fatalf("%s %s %s: %v", c.who, c.tool, c.args, env)
		}
	}
	trail := gw.Audit().Path()
	policy := mustRead(t, filepath.Join(dir, "policy.csv"))

	same := filepath.Join(dir, "same.csv")
	write(t, same, "# a comment changes nothing\n"+policy)
	code, out, errOut := runPolicyCmd("diff", "--config", cfg, "--against", same)
	if code != 0 || !strings.Contains(out, "8 call(s) replayed") || !strings.Contains(out, "no recorded call would be decided otherwise") {
		t.Fatalf("unchanged: exit %d\n%s%s", code, out, errOut)
	}

	noViewer := filepath.Join(dir, "no-viewer.csv")
	write(t, noViewer, strings.Replace(policy, "p, viewer, orders/get_order, call, allow\n", "", 1))
	code, out, _ = runPolicyCmd("diff", "--config", cfg, "--audit", trail, "--against", noViewer)
	for _, want := range []string{
		"8 call(s) replayed", "2 would change",
		"bob  orders/get_order  2 call(s)",
		"now:   allow by " + filepath.Join(dir, "policy.csv") + ":43",
		"after: deny (no line: denied by default)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("removed allow: output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 || strings.Contains(out, "alice") {
		t.Errorf("removed allow: exit %d\n%s", code, out)
	}

	noCancel := filepath.Join(dir, "no-cancel.csv")
	write(t, noCancel, strings.Replace(policy, "p, support_agent, orders/get_order, call, allow\n",
		"p, support_agent, orders/update_order_status, call, deny, status == 'cancelled'\np, support_agent, orders/get_order, call, allow\n", 1))
	code, out, _ = runPolicyCmd("diff", "--config", cfg, "--against", noCancel, "--json")
	var rep struct {
		replay.Report
		IncludeArgs bool `json:"include_args"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if code != 1 || rep.Calls != 8 || rep.Changed != 1 || rep.Unknown != 0 || len(rep.Changes) != 1 || !rep.IncludeArgs {
		t.Fatalf("conditional deny: exit %d\n%s", code, out)
	}
	c := rep.Changes[0]
	if c.Principal != "alice" || c.Tool != "orders/update_order_status" || c.Calls != 1 || c.Now.Decision != replay.Allow ||
		c.After.Decision != replay.Deny || c.After.Rule != noCancel+":31" {
		t.Fatalf("conditional deny: change %+v", c)
	}

	// A window that ends before the calls replays none of them.
	if code, out, _ := runPolicyCmd("diff", "--config", cfg, "--against", noViewer, "--until", "2000-01-01"); code != 0 || !strings.Contains(out, "0 call(s) replayed") {
		t.Fatalf("--until: exit %d\n%s", code, out)
	}
}
