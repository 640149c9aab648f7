package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
)

const basePolicy = `p, support_agent, orders/get_order, call, allow
p, support_agent, orders/refund_order, call, allow, amount <= 100
p, support_agent, orders/update_order_status, call, allow
p, viewer, orders/get_order, call, allow
g, alice, support_agent
g, bob, viewer
`

// load writes the repository's model and policy into dir and loads them.
func load(t testing.TB, dir, name, policy string) *authz.Policy {
	t.Helper()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	mp, pp := filepath.Join(dir, "model.conf"), filepath.Join(dir, name)
	if err := os.WriteFile(mp, model, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pp, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(mp, pp, authz.Options{Servers: []string{"orders"}, Principals: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type call struct {
	principal, tool, args string
	at                    time.Time
}

// trail writes calls as the gateway's record link would (plus a reload record and an unresolved
// call), with the arguments kept or not, and returns its files.
func trail(t testing.TB, includeArgs bool, redact []string, calls []call) [][]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(audit.Options{Path: path, Fsync: audit.FsyncNever, IncludeArgs: includeArgs, Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(audit.Record{Kind: audit.KindPolicyReload, Decision: audit.DecisionApplied}); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(audit.Record{Kind: audit.KindCall, Principal: "alice", Decision: audit.DecisionDenied, ErrorCode: "tool_not_found", Args: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if err := l.Append(audit.Record{Time: c.at, Kind: audit.KindCall, Principal: c.principal, Tool: c.tool, Args: json.RawMessage(c.args), Decision: audit.DecisionAllowed}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := audit.TrailFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func sampleCalls() []call {
	return []call{
		{"alice", "orders/get_order", `{"order_id":1}`, t0},
		{"alice", "orders/get_order", `{"order_id":2}`, t0.Add(time.Minute)},
		{"alice", "orders/refund_order", `{"order_id":1,"amount":30}`, t0.Add(2 * time.Minute)},
		{"alice", "orders/refund_order", `{"order_id":1,"amount":150}`, t0.Add(3 * time.Minute)},
		{"alice", "orders/update_order_status", `{"order_id":1,"status":"cancelled"}`, t0.Add(4 * time.Minute)},
		{"alice", "orders/update_order_status", `{"order_id":1,"status":"shipped"}`, t0.Add(5 * time.Minute)},
		{"bob", "orders/get_order", `{"order_id":1}`, t0.Add(6 * time.Minute)},
		{"bob", "orders/update_order_status", `{"order_id":1,"status":"shipped"}`, t0.Add(7 * time.Minute)},
	}
}

func run(t *testing.T, candidate string, trails [][]string, o Options) *Report {
	t.Helper()
	dir := t.TempDir()
	o.Current = load(t, dir, "policy.csv", basePolicy)
	o.Candidate = load(t, dir, "candidate.csv", candidate)
	o.Configured = []string{"alice", "bob"}
	rep, err := Run(o, trails)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestNothingChanges(t *testing.T) {
	// The same lines, reordered and commented: nothing changes, and the calls a condition decides
	// are unchanged even without their arguments (both policies match the same lines).
	reordered := "# reordered\n" + strings.Join([]string{
		"p, viewer, orders/get_order, call, allow",
		"p, support_agent, orders/update_order_status, call, allow",
		"p, support_agent, orders/refund_order, call, allow, amount <= 100",
		"p, support_agent, orders/get_order, call, allow",
		"g, alice, support_agent",
		"g, bob, viewer",
	}, "\n") + "\n"
	rep := run(t, reordered, trail(t, false, nil, sampleCalls()), Options{})
	if !rep.Empty() || rep.Calls != 8 || rep.Unchanged != 8 || rep.Unresolved != 1 || rep.Records != 10 || len(rep.Changes) != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestCandidateRemovesAnAllow(t *testing.T) {
	candidate := strings.Replace(basePolicy, "p, support_agent, orders/get_order, call, allow\n", "", 1)
	rep := run(t, candidate, trail(t, false, nil, sampleCalls()), Options{})
	if rep.Changed != 2 || rep.Unknown != 0 || len(rep.Changes) != 1 {
		t.Fatalf("report %+v", rep)
	}
	c := rep.Changes[0]
	if c.Principal != "alice" || c.Tool != "orders/get_order" || c.Calls != 2 ||
		c.Now.Decision != Allow || !strings.HasSuffix(c.Now.Rule, "policy.csv:1") ||
		c.After.Decision != Deny || c.After.Rule != "" || !c.First.Equal(t0) || !c.Last.Equal(t0.Add(time.Minute)) ||
		!strings.HasSuffix(c.Example, "audit.log:3") || c.TokenSubject {
		t.Fatalf("change %+v", c)
	}
	// bob's get_order is memoized, not decided again per call.
	if rep.Memoized < 3 {
		t.Errorf("memoized %d of the argument-free calls", rep.Memoized)
	}
}

func TestCandidateAddsAConditionalDeny(t *testing.T) {
	candidate := "p, support_agent, orders/update_order_status, call, deny, status == 'cancelled'\n" + basePolicy
	// With the arguments in the trail, only the cancellation changes.
	rep := run(t, candidate, trail(t, true, nil, sampleCalls()), Options{})
	if rep.Changed != 1 || rep.Unknown != 0 || len(rep.Changes) != 1 {
		t.Fatalf("report %+v", rep)
	}
	c := rep.Changes[0]
	if c.Principal != "alice" || c.Tool != "orders/update_order_status" || c.Now.Decision != Allow ||
		c.After.Decision != Deny || !strings.HasSuffix(c.After.Rule, "candidate.csv:1") {
		t.Fatalf("change %+v", c)
	}
	// Without them, both of alice's update calls are unknown, never guessed; bob's is unchanged.
	rep = run(t, candidate, trail(t, false, nil, sampleCalls()), Options{})
	if rep.Changed != 0 || rep.Unknown != 2 || len(rep.Unknowns) != 1 || rep.Unknowns[0].Calls != 2 ||
		!strings.Contains(rep.Unknowns[0].Why, "include_args is off") || rep.Empty() {
		t.Fatalf("report %+v", rep)
	}
	// A redacted field makes the copy incomplete: unknown too, and said so.
	rep = run(t, candidate, trail(t, true, []string{"status"}, sampleCalls()), Options{})
	if rep.Unknown != 2 || !strings.Contains(rep.Unknowns[0].Why, "redact") {
		t.Fatalf("report %+v", rep)
	}
	// Redacting another field leaves status readable, but the copy is not what was sent: unknown.
	rep = run(t, candidate, trail(t, true, []string{"order_id"}, sampleCalls()), Options{})
	if rep.Unknown != 2 {
		t.Fatalf("report %+v", rep)
	}
}

func TestConditionChangeAndApproval(t *testing.T) {
	candidate := strings.Replace(basePolicy, "amount <= 100", "amount <= 20", 1) + "a, support_agent, orders/refund_order, call, amount > 10\n"
	rep := run(t, candidate, trail(t, true, nil, sampleCalls()), Options{})
	// The refund of 30: allow -> deny. The refund of 150: deny -> deny (unchanged).
	if rep.Changed != 1 || rep.Changes[0].Now.Decision != Allow || rep.Changes[0].After.Decision != Deny {
		t.Fatalf("report %+v", rep)
	}
	candidate = basePolicy + "a, support_agent, orders/refund_order, call, amount > 10\n"
	rep = run(t, candidate, trail(t, true, nil, sampleCalls()), Options{})
	if rep.Changed != 1 || rep.Changes[0].After.Decision != Approval || !strings.HasSuffix(rep.Changes[0].After.Rule, "candidate.csv:7") {
		t.Fatalf("report %+v", rep)
	}
}

func TestWindowAndTokenSubjects(t *testing.T) {
	calls := append(sampleCalls(), call{"dora@example.com", "orders/get_order", `{}`, t0.Add(time.Hour)})
	candidate := basePolicy + "g, dora@example.com, viewer\n"
	rep := run(t, candidate, trail(t, false, nil, calls), Options{Since: t0.Add(30 * time.Minute)})
	if rep.Calls != 1 || rep.OutsideWindow != 8 || rep.Changed != 1 || !rep.Changes[0].TokenSubject {
		t.Fatalf("report %+v", rep)
	}
	rep = run(t, candidate, trail(t, false, nil, calls), Options{Until: t0.Add(time.Minute)})
	if rep.Calls != 1 || rep.OutsideWindow != 8 {
		t.Fatalf("report %+v", rep)
	}
}

// BenchmarkReplay replays a generated trail (TOOLGATE_REPLAY_RECORDS records, default 100,000)
// through a candidate that changes a conditional line, and reports decisions (calls replayed) per
// second, reading and decoding the trail included. "mixed": 70% of the calls are decided without
// arguments (memoized per principal and tool), 30% are refunds whose condition reads the recorded
// arguments (each different, so each is decided by both policies). "memoized": every call is
// decided without arguments.
func BenchmarkReplay(b *testing.B) {
	n := 100_000
	if s := os.Getenv("TOOLGATE_REPLAY_RECORDS"); s != "" {
		fmt.Sscan(s, &n)
	}
	for _, bc := range []struct {
		name        string
		conditional int // in 10
	}{{"mixed", 3}, {"memoized", 0}} {
		b.Run(bc.name, func(b *testing.B) { benchReplay(b, n, bc.conditional) })
	}
}

func benchReplay(b *testing.B, n, conditional int) {
	path := filepath.Join(b.TempDir(), "audit.log")
	l, err := audit.Open(audit.Options{Path: path, Fsync: audit.FsyncNever, IncludeArgs: true, MaxBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	principals := []string{"alice", "bob", "carol", "dave"}
	tools := []string{"orders/get_order", "orders/update_order_status", "orders/list_orders"}
	for i := range n {
		r := audit.Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Kind: audit.KindCall, Principal: principals[i%len(principals)],
			Session: "mcp-session-5f0c2d9e", Decision: audit.DecisionAllowed, Attempts: 1, DurationMS: 3, PolicyVersion: "60241d87bb74"}
		if i%10 < conditional {
			r.Tool, r.Args = "orders/refund_order", json.RawMessage(fmt.Sprintf(`{"order_id":%d,"amount":%d,"reason":"damaged"}`, i, i%500))
		} else {
			r.Tool, r.Args = tools[i%len(tools)], json.RawMessage(fmt.Sprintf(`{"order_id":%d}`, i))
		}
		if err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	trails, err := audit.TrailFiles(path)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	policy := basePolicy + "g, carol, support_agent\ng, dave, viewer\n"
	o := Options{
		Current: load(b, dir, "policy.csv", policy),
		// It revokes a line no condition reads (get_order) and changes a condition (refunds), so
		// the refunds are decided with their arguments by both policies.
		Candidate: load(b, dir, "candidate.csv", strings.Replace(strings.Replace(policy,
			"p, support_agent, orders/get_order, call, allow\n", "", 1), "amount <= 100", "amount <= 50", 1)),
		Configured: principals,
	}
	b.ResetTimer()
	start := time.Now()
	calls := 0
	for range b.N {
		rep, err := Run(o, trails)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Calls != n || rep.Changed == 0 || rep.Unknown != 0 {
			b.Fatalf("report %+v", rep.Summary())
		}
		calls += rep.Calls
	}
	b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "decisions/s")
}

// A line that is not a record stops the replay with its file:line, whatever was read before it.
func TestBadLineStopsTheReplay(t *testing.T) {
	calls := make([]call, 0, 2000)
	for i := range 2000 {
		calls = append(calls, call{"alice", "orders/get_order", fmt.Sprintf(`{"order_id":%d}`, i), t0})
	}
	trails := trail(t, false, nil, calls)
	f, err := os.OpenFile(trails[0][0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage\n")
	f.Close()
	dir := t.TempDir()
	p := load(t, dir, "policy.csv", basePolicy)
	_, err = Run(Options{Current: p, Candidate: p}, trails)
	if err == nil || !strings.Contains(err.Error(), trails[0][0]+":2003: not an audit record") {
		t.Fatalf("error %v", err)
	}
}
