package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
)

// Shadow groups the recorded disagreements by principal, tool and outcomes, keeps the versions that
// disagreed and the time span, counts only the calls inside the window, and stops at a bad line.
func TestShadowDisagreements(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(audit.Options{Path: path, Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	denies := func(v string) *audit.Shadow {
		return &audit.Shadow{Decision: audit.DecisionDenied, Version: v, LiveDecision: audit.DecisionAllowed, LiveRule: "policy.csv:4"}
	}
	allows := &audit.Shadow{Decision: audit.DecisionAllowed, Rule: "candidate.csv:7", Version: "v1", LiveDecision: audit.DecisionDenied}
	for _, r := range []audit.Record{
		{Time: t0, Kind: audit.KindCall, Principal: "bob", Tool: "orders/get_order", Decision: audit.DecisionAllowed, Shadow: denies("v1")},
		{Time: t0.Add(time.Minute), Kind: audit.KindCall, Principal: "alice", Tool: "orders/get_order", Decision: audit.DecisionAllowed},
		{Time: t0.Add(2 * time.Minute), Kind: audit.KindPolicyReload, Decision: audit.DecisionApplied},
		{Time: t0.Add(3 * time.Minute), Kind: audit.KindCall, Principal: "bob", Tool: "orders/get_order", Decision: audit.DecisionFailed, Shadow: denies("v2")},
		{Time: t0.Add(4 * time.Minute), Kind: audit.KindCall, Principal: "bob", Tool: "orders/refund_order", Decision: audit.DecisionDenied, Shadow: allows},
		{Time: t0.Add(time.Hour), Kind: audit.KindCall, Principal: "bob", Tool: "orders/get_order", Decision: audit.DecisionAllowed, Shadow: denies("v2")},
	} {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	trails, err := audit.TrailFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Shadow(ShadowOptions{Until: t0.Add(30 * time.Minute)}, trails)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 6 || rep.Calls != 4 || rep.OutsideWindow != 1 || rep.Disagreed != 3 || rep.ShadowAllows != 1 || rep.ShadowDenies != 2 ||
		len(rep.Disagreements) != 2 || rep.Empty() {
		t.Fatalf("report %+v", rep)
	}
	get, refund := rep.Disagreements[0], rep.Disagreements[1]
	if get.Tool != "orders/get_order" || get.Direction != ShadowDenies || get.Calls != 2 || !get.First.Equal(t0) ||
		!get.Last.Equal(t0.Add(3*time.Minute)) || strings.Join(get.ShadowVersions, ",") != "v1,v2" ||
		get.Live != (Outcome{Decision: Allow, Rule: "policy.csv:4"}) || get.Shadow != (Outcome{Decision: Deny}) || get.Example != path+":1" {
		t.Errorf("get_order group %+v", get)
	}
	if refund.Tool != "orders/refund_order" || refund.Direction != ShadowAllows || refund.Calls != 1 ||
		refund.Shadow != (Outcome{Decision: Allow, Rule: "candidate.csv:7"}) || refund.Live != (Outcome{Decision: Deny}) {
		t.Errorf("refund_order group %+v", refund)
	}
	if rep, err := Shadow(ShadowOptions{Since: t0.Add(2 * time.Hour)}, trails); err != nil || !rep.Empty() || rep.Calls != 0 {
		t.Errorf("an empty window: %+v %v", rep, err)
	}

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage\n")
	f.Close()
	if _, err := Shadow(ShadowOptions{}, trails); err == nil || !strings.Contains(err.Error(), path+":7: not an audit record") {
		t.Fatalf("bad line: %v", err)
	}
}
