package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
)

// Rate limits through the real gateway: a tool's shared bucket and a
// principal's own; past the burst the call answers rate_limited,
// retryable, with the wait, and nothing reaches the upstream. The refusal
// is audited like any other.
func TestRateLimitsEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+"rate_limits:\n  principal: {rate: 1, per: 1h, burst: 3}\n  tools:\n    hostile/tick: {rate: 1, per: 1h, burst: 2}\n")
	url, _, gw := httpGatewayFull(t, cfg)
	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)

	for i := range 2 {
		if _, env := callE2E(t, alice, "hostile__tick", fmt.Sprintf(`{"label":"%d"}`, i)); env["ok"] != true {
			t.Fatalf("tick %d within the tool's burst: %v", i, env)
		}
	}
	_, env := callE2E(t, alice, "hostile__tick", `{"label":"third"}`)
	if env["error_code"] != "rate_limited" || env["retryable"] != true || !strings.Contains(fmt.Sprint(env["message"]), "tool hostile/tick") ||
		!strings.Contains(fmt.Sprint(env["message"]), "retry in") {
		t.Fatalf("past the tool's burst: %v", env)
	}
	// alice's own bucket (3) still has one token: the refused call took none.
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("alice's third token: %v", env)
	}
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["error_code"] != "rate_limited" || !strings.Contains(fmt.Sprint(env["message"]), "principal alice") {
		t.Fatalf("past alice's burst: %v", env)
	}
	// bob has his own principal bucket, but the tool's bucket is shared.
	if _, env := callE2E(t, bob, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("bob's first call: %v", env)
	}
	if _, env := callE2E(t, alice, "hostile__tick", `{"label":"count"}`); env["error_code"] != "rate_limited" {
		t.Fatalf("the tool bucket refilled: %v", env)
	}
	var limited int
	for _, r := range auditRecords(t, gw.Config().AuditPath()) {
		if r.Kind == audit.KindCall && r.ErrorCode == "rate_limited" && r.Decision == audit.DecisionDenied {
			limited++
		}
	}
	if limited != 3 {
		t.Errorf("%d rate_limited audit records, want 3", limited)
	}
}

// A role's limit applies to a principal holding the role through a g line,
// and not to others.
func TestRoleRateLimitEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+"rate_limits:\n  roles:\n    reader: {rate: 1, per: 1h, burst: 1}\n")
	url, _ := httpGateway(t, cfg)
	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)
	if _, env := callE2E(t, bob, "hostile__echo", `{"n":1}`); env["ok"] != true {
		t.Fatalf("bob's first call: %v", env)
	}
	if _, env := callE2E(t, bob, "hostile__echo", `{"n":2}`); env["error_code"] != "rate_limited" || !strings.Contains(fmt.Sprint(env["message"]), "role reader for bob") {
		t.Fatalf("bob past the reader role's burst: %v", env)
	}
	for i := range 3 { // alice is no reader
		if _, env := callE2E(t, alice, "hostile__echo", fmt.Sprintf(`{"n":%d}`, i)); env["ok"] != true {
			t.Fatalf("alice's call %d: %v", i, env)
		}
	}
}
