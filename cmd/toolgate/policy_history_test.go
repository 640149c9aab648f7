package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
)

// policy history lists the trail's reloads newest first, with each one's versions, line counts,
// lines and access changes; records without a report (a file that did not load) get one line;
// other kinds are left out.
func TestPolicyHistoryFromTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := []audit.Record{
		{Time: t0, Kind: audit.KindPolicyReload, Decision: audit.DecisionApplied, PolicyVersion: "bbbbbbbbbbbb",
			Details: map[string]any{"previous_version": "aaaaaaaaaaaa", "candidate_version": "bbbbbbbbbbbb",
				"lines_added": []string{"p, viewer, orders/list, call, allow"}, "lines_removed": []string{"p, alice, orders/refund, call, deny"},
				"access_gained": []authz.AccessChange{{Principal: "alice", Tool: "orders/refund", Before: "denied", After: "allowed"},
					{Principal: "bob", Tool: "orders/list", Before: "denied", After: "conditional"}},
				"access_lost": []authz.AccessChange{}}},
		{Time: t0.Add(time.Minute), Kind: audit.KindCall, Principal: "alice", Tool: "orders/refund", Decision: audit.DecisionAllowed},
		{Time: t0.Add(2 * time.Minute), Kind: audit.KindPolicyReload, Decision: audit.DecisionRejected, PolicyVersion: "bbbbbbbbbbbb",
			Reason: "policy.csv:3: effect must be allow or deny\nmore"},
		{Time: t0.Add(3 * time.Minute), Kind: audit.KindPolicyReload, Decision: audit.DecisionApplied, PolicyVersion: "cccccccccccc",
			Details: map[string]any{"previous_version": "bbbbbbbbbbbb", "candidate_version": "cccccccccccc",
				"lines_added": []string{}, "lines_removed": []string{"p, viewer, orders/list, call, allow"},
				"access_gained": []authz.AccessChange{}, "access_lost": []authz.AccessChange{{Principal: "bob", Tool: "orders/list", Before: "conditional", After: "denied"}}}},
	}
	for _, r := range recs {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := policyHistory([]string{"--audit", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := `2026-12-01T10:03:00Z  applied   bbbbbbbbbbbb → cccccccccccc  +0/−1 lines  gained 0, lost 1 pairs
    - p, viewer, orders/list, call, allow
    lost:   bob orders/list (conditional → denied)

2026-12-01T10:02:00Z  rejected  policy bbbbbbbbbbbb in force; the files did not load: policy.csv:3: effect must be allow or deny

2026-12-01T10:00:00Z  applied   aaaaaaaaaaaa → bbbbbbbbbbbb  +1/−1 lines  gained 2, lost 0 pairs
    - p, alice, orders/refund, call, deny
    + p, viewer, orders/list, call, allow
    gained: alice orders/refund (denied → allowed)
    gained: bob orders/list (denied → conditional)
`
	if out.String() != want {
		t.Fatalf("history:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if code := policyHistory([]string{"--audit", path, "-n", "1"}, &out, &errOut); code != 0 || strings.Count(out.String(), "  applied  ") != 1 || !strings.Contains(out.String(), "→ cccccccccccc") {
		t.Fatalf("-n 1: exit %d:\n%s", code, out.String())
	}
	for _, args := range [][]string{{"--audit", path, "--config", "x.yaml"}, {"extra"}, {"-n", "-1"}} {
		if code := policyHistory(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	errOut.Reset()
	if code := policyHistory([]string{"--audit", filepath.Join(t.TempDir(), "none.jsonl")}, &out, &errOut); code != 2 || errOut.Len() == 0 {
		t.Errorf("a trail that does not exist: exit %d, %q", code, errOut.String())
	}
}
