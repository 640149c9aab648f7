package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
)

const (
	denyLine   = "p, alice, echoes/fail, call, deny"
	denyPolicy = "p, alice, echoes/*, call, allow\n" + denyLine + "\n"
)

// TestReloadRecordRemovedDenies: the audit record of a reload that removes deny lines says how many
// there were before and after and lists the removed lines; one the switch refused is rejected and
// lists them too; a reload that removes none has the counts and no list.
func TestReloadRecordRemovedDenies(t *testing.T) {
	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	modelPath, policyPath := filepath.Join(dir, "model.conf"), filepath.Join(dir, "policy.csv")
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(modelPath, string(model))
	write(policyPath, denyPolicy)
	s, err := authz.NewStore(modelPath, policyPath, authz.Options{Servers: []string{"echoes"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	s.OnReloadEvent(func(ev authz.ReloadEvent) { recs = append(recs, reloadRecord(ev, nil)) })
	removed := []string{policyPath + ":2: " + denyLine}

	// Refused by the switch: rejected, with the lines.
	s.RefuseDenyRemoval(true)
	write(policyPath, "p, alice, echoes/*, call, allow\n")
	if err := s.Reload(); err == nil {
		t.Fatal("refused reload applied")
	}
	r := recs[0]
	if r.Decision != audit.DecisionRejected || !strings.Contains(r.Reason, "allow-deny-removal") ||
		fmt.Sprint(r.Details["removed_deny_lines"]) != fmt.Sprint(removed) || r.Details["deny_lines_before"] != 1 ||
		r.Details["deny_lines_after"] != 0 || r.Details["deny_lines"] != 1 || r.Details["deny_removal_marker"] != false {
		t.Fatalf("refused: %+v", r)
	}

	// Applied (switch off): applied, with the lines.
	s.RefuseDenyRemoval(false)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	r = recs[1]
	if r.Decision != audit.DecisionApplied || fmt.Sprint(r.Details["removed_deny_lines"]) != fmt.Sprint(removed) ||
		r.Details["deny_lines_before"] != 1 || r.Details["deny_lines_after"] != 0 || r.Details["deny_lines"] != 0 {
		t.Fatalf("applied: %+v", r)
	}

	// Adding a deny line back: counts, no list.
	write(policyPath, denyPolicy)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	r = recs[2]
	if _, listed := r.Details["removed_deny_lines"]; listed || r.Decision != audit.DecisionApplied || r.Details["deny_lines_after"] != 1 {
		t.Fatalf("added: %+v", r)
	}
}

// TestDenyRemovalRefusedByConfig: with authz.refuse_deny_removal the gateway keeps the deny line in
// force, writes the rejected reload with the removed line to the audit trail, and counts it; the
// marker lets the next reload through, which is audited and counted as applied.
func TestDenyRemovalRefusedByConfig(t *testing.T) {
	cfgPath := writeGateway(t, "", "authz: {refuse_deny_removal: true}\n")
	dir := filepath.Dir(cfgPath)
	policyPath := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(policyPath, []byte(denyPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := New(context.Background(), Options{ConfigPath: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	good := gw.Policy().Current()
	if err := os.WriteFile(policyPath, []byte("p, alice, echoes/*, call, allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.Reload()
	if gw.Policy().Current() != good {
		t.Fatal("the reload removing the deny line was applied")
	}
	marked := fmt.Sprintf("# %s %s\np, alice, echoes/*, call, allow\n", authz.DenyRemovalMarker, good.Version())
	if err := os.WriteFile(policyPath, []byte(marked), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.Reload()
	if gw.Policy().Current().Denies() != 0 {
		t.Fatal("the marked reload was not applied")
	}

	rec := httptest.NewRecorder()
	gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`toolgate_policy_reloads_removing_denies_total{result="refused"} 1`,
		`toolgate_policy_reloads_removing_denies_total{result="applied"} 1`,
		"toolgate_policy_deny_lines 0",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	gw.Close()
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var reloads []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == audit.KindPolicyReload {
			reloads = append(reloads, r)
		}
	}
	if len(reloads) != 2 {
		t.Fatalf("policy reload records: %+v", reloads)
	}
	want := fmt.Sprint([]any{policyPath + ":2: " + denyLine})
	if r := reloads[0]; r.Decision != audit.DecisionRejected || fmt.Sprint(r.Details["removed_deny_lines"]) != want || r.PolicyVersion != good.Version() {
		t.Errorf("refused reload recorded as %+v", r)
	}
	if r := reloads[1]; r.Decision != audit.DecisionApplied || fmt.Sprint(r.Details["removed_deny_lines"]) != want || r.Details["deny_removal_marker"] != true {
		t.Errorf("marked reload recorded as %+v", r)
	}
}
