package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
)

// auditRecords reads every record of a gateway's trail (after it verified).
func auditRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	if _, err := audit.Verify(path); err != nil {
		t.Fatalf("the gateway's own trail does not verify: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// Every outcome a call can have through the real gateway leaves one audit
// record with its decision and error_code, the canonical tool and the
// arguments' digest (never the arguments: include_args is off by default).
// rate_limited (TestRateLimitsEndToEnd), tool_changed
// (TestRugPullBlockedUntilApproved) and internal_error (TestAuditFailClosed)
// are checked in their own tests.
func TestEveryCallOutcomeIsAudited(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "    max_result_bytes: 2000\n    tools:\n      sleep: {timeout: 300ms}\n") +
		stdioUpstream(t, "down", "", "-exit-at-start", "3")
	cfg := writeConfig(t, servers)
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"),
		mustRead(t, filepath.Join(filepath.Dir(cfg), "policy.csv"))+"a, caller, hostile/tick, call, label == 'needs-ok'\n")
	url, _, gw := httpGatewayFull(t, cfg)
	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)

	cases := []struct {
		c          *client.Client
		tool, args string
		code       string
		decision   audit.Decision
		canonical  string
	}{
		{alice, "hostile__echo", `{"secret":"s3cr3t"}`, "", audit.DecisionAllowed, "hostile/echo"},
		{alice, "hostile__nope", `{}`, "tool_not_found", audit.DecisionDenied, ""},
		{bob, "hostile__sleep", `{"ms":1}`, "tool_not_allowed", audit.DecisionDenied, "hostile/sleep"},
		{alice, "hostile__sleep", `{"ms":"x"}`, "invalid_arguments", audit.DecisionDenied, "hostile/sleep"},
		{alice, "hostile__fail", `{"message":"boom"}`, "tool_failed", audit.DecisionFailed, "hostile/fail"},
		{alice, "hostile__garbage", `{}`, "upstream_error", audit.DecisionFailed, "hostile/garbage"},
		{alice, "hostile__bad_output", `{}`, "invalid_result", audit.DecisionFailed, "hostile/bad_output"},
		{alice, "hostile__big", `{"bytes":5000}`, "result_too_large", audit.DecisionFailed, "hostile/big"},
		{alice, "hostile__sleep", `{"ms":5000}`, "tool_timeout", audit.DecisionFailed, "hostile/sleep"},
		{alice, "down__anything", `{}`, "upstream_unavailable", audit.DecisionFailed, "down/anything"},
		{alice, "hostile__tick", `{"label":"needs-ok"}`, "approval_required", audit.DecisionApprovalRequired, "hostile/tick"},
	}
	for _, tc := range cases {
		_, env := callE2E(t, tc.c, tc.tool, tc.args)
		if got, _ := env["error_code"].(string); got != tc.code {
			t.Fatalf("%s: error_code %q, want %q (%v)", tc.tool, got, tc.code, env)
		}
	}
	// The approver denies the held call: its repeat answers approval_denied.
	pending := listed(t, gw.Approvals(), approvals.StatePending)
	if len(pending) != 1 {
		t.Fatalf("pending approvals: %v", pending)
	}
	if _, err := gw.Approvals().Deny(pending[0].ID, "carol", "not today"); err != nil {
		t.Fatal(err)
	}
	if _, env := callE2E(t, alice, "hostile__tick", `{"label":"needs-ok"}`); env["error_code"] != "approval_denied" {
		t.Fatalf("after the denial: %v", env)
	}

	records := auditRecords(t, gw.Audit().Path())
	var calls []audit.Record
	var approvalsSeen int
	for _, r := range records {
		switch r.Kind {
		case audit.KindCall:
			calls = append(calls, r)
		case audit.KindApproval:
			approvalsSeen++
			if r.Principal != "carol" || r.Decision != audit.DecisionDenied || r.Tool != "hostile/tick" ||
				r.PolicyVersion == "" || r.Details["rule_digest"] == nil || r.Details["rule_digest"] == "" {
				t.Errorf("approval record %+v", r)
			}
		}
	}
	if approvalsSeen != 1 || len(calls) != len(cases)+1 {
		t.Fatalf("%d call records and %d approval records, want %d and 1", len(calls), approvalsSeen, len(cases)+1)
	}
	for i, tc := range cases {
		r := calls[i]
		if r.ErrorCode != tc.code || r.Decision != tc.decision || r.Tool != tc.canonical || !strings.HasPrefix(r.ArgsDigest, "sha256:") {
			t.Errorf("%s (%s): record %+v", tc.tool, tc.code, r)
		}
		if r.Principal == "" || r.PolicyVersion == "" || r.Args != nil {
			t.Errorf("%s: principal %q, policy %q, args %s (args must not be kept by default)", tc.tool, r.Principal, r.PolicyVersion, r.Args)
		}
	}
	if last := calls[len(calls)-1]; last.ErrorCode != "approval_denied" || last.Decision != audit.DecisionDenied {
		t.Errorf("the denied repeat: %+v", last)
	}
	if d := audit.Digest(json.RawMessage(`{"secret":"s3cr3t"}`)); calls[0].ArgsDigest != d {
		t.Errorf("digest %s, want %s", calls[0].ArgsDigest, d)
	}
	raw := mustRead(t, gw.Audit().Path())
	if strings.Contains(raw, "s3cr3t") {
		t.Error("the arguments reached the trail although include_args is off")
	}
}

// With audit.fail_closed, a trail that cannot be written stops calls from
// running (internal_error, not sent upstream), shows in /readyz and the
// metrics, and calls run again once it can be written.
func TestAuditFailClosed(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+"audit: {fail_closed: true}\n")
	url, _, gw := httpGatewayFull(t, cfg)
	admin := httptest.NewServer(gw.AdminHandler())
	defer admin.Close()
	c := connectHTTP(t, url, aliceKey)
	trail := gw.Audit().Path()

	if _, env := callE2E(t, c, "hostile__tick", `{"label":"before"}`); env["ok"] != true {
		t.Fatalf("with a working trail: %v", env)
	}
	// The trail's file is replaced by a directory: it cannot be written.
	if err := os.Rename(trail, trail+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(trail, 0o700); err != nil {
		t.Fatal(err)
	}
	callE2E(t, c, "hostile__tick", `{"label":"noticed"}`) // runs; its record fails and is reported
	_, env := callE2E(t, c, "hostile__tick", `{"label":"refused"}`)
	if env["error_code"] != "internal_error" || strings.Contains(fmt.Sprint(env["message"]), trail) {
		t.Fatalf("with a broken trail and fail_closed: %v", env)
	}
	if code, body := scrape(t, admin, "/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "audit:") {
		t.Errorf("/readyz with a broken trail: %d %q", code, body)
	}
	// Repaired: the next record is written, and calls run again.
	if err := os.Remove(trail); err != nil {
		t.Fatal(err)
	}
	callE2E(t, c, "hostile__tick", `{"label":"refused-again"}`) // its record is what clears the error
	if _, env := callE2E(t, c, "hostile__tick", `{"label":"after"}`); env["ok"] != true {
		t.Fatalf("after the repair: %v", env)
	}
	// Six calls, two refused: the upstream ran four (before, noticed, after, this one).
	if _, env := callE2E(t, c, "hostile__tick", `{"label":"count"}`); env["ok"] != true || fmt.Sprint(env["data"]) != "map[executions:4]" {
		t.Errorf("tick executions %v, want 4: a refused call ran upstream", env["data"])
	}
	if gw.Audit().Err() != nil {
		t.Errorf("trail still failing: %v", gw.Audit().Err())
	}
}

// Policy reloads are recorded, refused ones with the operator's reason.
func TestPolicyReloadsAudited(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	_, _, gw := httpGatewayFull(t, cfg)
	policy := filepath.Join(filepath.Dir(cfg), "policy.csv")
	good := mustRead(t, policy)
	write(t, policy, good+"p, caller, hostile/*, calll, allow\n")
	if err := gw.Policy().Reload(); err == nil {
		t.Fatal("a misspelt action was accepted")
	}
	write(t, policy, good+"p, reader, hostile/big, call, allow\n")
	if err := gw.Policy().Reload(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range auditRecords(t, gw.Audit().Path()) {
		if r.Kind == audit.KindPolicyReload {
			got = append(got, string(r.Decision)+" "+r.PolicyVersion)
			if r.Decision == audit.DecisionRejected && !strings.Contains(r.Reason, "policy.csv:") {
				t.Errorf("rejected reload without its file:line: %q", r.Reason)
			}
		}
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "rejected ") || got[1] != "applied "+gw.Policy().Current().Version() || got[0] == got[1] {
		t.Errorf("reload records %v", got)
	}
}
