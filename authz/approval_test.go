package authz

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/casbin/casbin/v2/model"
)

// approvalPolicy: line numbers matter (tests name them).
const approvalPolicy = `# approvals
a, support_agent, orders/refund_order, call, amount > 50
a, alice, orders/update_order_status, call
a, auditor, orders/*, call
a, support_agent, orders/send_customer_reply, call, "channel in ['sms', 'phone']"
p, support_agent, orders/*, call, allow
p, supervisor, orders/*, call, allow
p, support_agent, orders/cancel_order, call, deny
a, support_agent, orders/cancel_order, call
g, alice, support_agent
g, bob, support_agent
g, carol, supervisor
`

func TestApprovalRule(t *testing.T) {
	p := loadWith(t, "", approvalPolicy, Options{Servers: []string{"orders"}, Principals: []string{"alice", "bob", "carol", "dave"}})
	ref := func(line int) string { return fmt.Sprintf("%s:%d", p.policyPath, line) }
	tests := []struct {
		name    string
		req     Request
		allowed bool
		rule    int // 0: no approval needed
	}{
		{"by role through g, above the limit", req("bob", "orders/refund_order", `{"amount": 80}`), true, 2},
		{"boundary: 50 is not above 50", req("bob", "orders/refund_order", `{"amount": 50}`), true, 0},
		{"boundary: 50.01 is above 50", req("bob", "orders/refund_order", `{"amount": 50.01}`), true, 2},
		{"by credential role", req("dave", "orders/refund_order", `{"amount": 51}`, "support_agent"), true, 2},
		{"condition error: missing argument fails closed", req("bob", "orders/refund_order", `{}`), true, 2},
		{"condition error: wrong type fails closed", req("bob", "orders/refund_order", `{"amount": "80"}`), true, 2},
		{"condition error: args not an object fails closed", req("bob", "orders/refund_order", `[1]`), true, 2},
		{"quoted condition with commas, holds", req("bob", "orders/send_customer_reply", `{"channel": "sms"}`), true, 5},
		{"quoted condition with commas, does not hold", req("bob", "orders/send_customer_reply", `{"channel": "email"}`), true, 0},
		{"by principal", req("alice", "orders/update_order_status", `{}`), true, 3},
		{"principal line not for another member of the role", req("bob", "orders/update_order_status", `{}`), true, 0},
		{"by wildcard object through a credential role", req("carol", "orders/get_order", `{}`, "auditor"), true, 4},
		{"other subject: supervisor refunds freely", req("carol", "orders/refund_order", `{"amount": 500}`), true, 0},
		{"other object", req("bob", "orders/get_order", `{}`), true, 0},
		{"dropped credential role (a principal's name) gives no approval line", req("dave", "orders/update_order_status", `{}`, "alice"), false, 0},
		{"unknown principal", req("zed", "orders/refund_order", `{"amount": 80}`), false, 0},
		{"denied call: approval never turns a deny into an allow", req("bob", "orders/cancel_order", `{}`), false, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.req)
			if d.Allowed != tc.allowed {
				t.Fatalf("Decide allowed = %v, want %v (%+v)", d.Allowed, tc.allowed, d)
			}
			rule, needed := p.ApprovalRule(tc.req)
			want := ""
			if tc.rule != 0 {
				want = ref(tc.rule)
			}
			if needed != (tc.rule != 0) || rule != want {
				t.Fatalf("ApprovalRule = (%q, %v), want (%q, %v)", rule, needed, want, tc.rule != 0)
			}
			tr, err := p.Trace(tc.req)
			if allowed, _ := traceAllows(tr); allowed != d.Allowed || err != nil {
				t.Fatalf("Trace allows = %v (%v), Decide %v", allowed, err, d.Allowed)
			}
			if got := firstApplied(tr.ApprovalLines); got != want {
				t.Fatalf("Trace's first applied a line = %q, ApprovalRule's %q (%+v)", got, want, tr.ApprovalLines)
			}
		})
	}
}

func TestApprovalRuleNoPolicyAndRolePrincipal(t *testing.T) {
	var p *Policy
	if r, ok := p.ApprovalRule(req("bob", "orders/refund_order", `{"amount": 80}`)); ok || r != "" {
		t.Fatalf("nil policy: (%q, %v)", r, ok)
	}
	p = loadWith(t, "", approvalPolicy, Options{})
	// A principal named like a role is denied, and gets no approval line either.
	if r, ok := p.ApprovalRule(req("support_agent", "orders/refund_order", `{"amount": 80}`)); ok || r != "" {
		t.Fatalf("role as principal: (%q, %v)", r, ok)
	}
	if r, ok := p.ApprovalRule(Request{Subject: Subject{Principal: "bob"}, Object: "orders/refund_order"}); ok || r != "" {
		t.Fatalf("empty action: (%q, %v)", r, ok)
	}
	if p.Approvals() != 5 || p.Permissions() != 3 || p.Rules() != 6 {
		t.Fatalf("Approvals %d, Permissions %d, Rules %d", p.Approvals(), p.Permissions(), p.Rules())
	}
}

// TestApprovalTraceLines: Trace lists every a line matching subject, object and action, with how
// its condition came out.
func TestApprovalTraceLines(t *testing.T) {
	policy := `a, support_agent, orders/refund_order, call, amount > 50
a, support_agent, orders/*, call, amount > 1000
a, viewer, orders/refund_order, call
p, support_agent, orders/refund_order, call, allow
g, bob, support_agent
`
	p := loadWith(t, "", policy, Options{})
	tr, err := p.Trace(req("bob", "orders/refund_order", `{"amount": 60}`))
	if err != nil || len(tr.ApprovalLines) != 2 {
		t.Fatalf("ApprovalLines = %+v (%v)", tr.ApprovalLines, err)
	}
	a, b := tr.ApprovalLines[0], tr.ApprovalLines[1]
	if a.Rule != p.policyPath+":1" || a.Effect != "approval" || a.CondResult != "true" || !a.Applied || a.Condition != "amount > 50" {
		t.Fatalf("first line %+v", a)
	}
	if b.Rule != p.policyPath+":2" || b.CondResult != "false" || b.Applied {
		t.Fatalf("second line %+v", b)
	}
	if allowed, by := traceAllows(tr); !allowed || !reflect.DeepEqual(by, []string{p.policyPath + ":4"}) {
		t.Fatalf("allowed %v by %v", allowed, by)
	}
	tr, _ = p.Trace(req("bob", "orders/refund_order", `{"amount": "lots"}`))
	if len(tr.ApprovalLines) != 2 || !strings.HasPrefix(tr.ApprovalLines[0].CondResult, "error: ") || !tr.ApprovalLines[0].Applied {
		t.Fatalf("condition error must fail closed: %+v", tr.ApprovalLines)
	}
	tr, _ = p.Trace(req("bob", "orders/refund_order", `{"amount": 10}`))
	if len(tr.ApprovalLines) != 2 || firstApplied(tr.ApprovalLines) != "" {
		t.Fatalf("below the limit: %+v", tr.ApprovalLines)
	}
}

// TestApprovalLinesNeverReachCasbin: Casbin's own loader refuses an a line (the model has no
// such section), and a policy of a lines plus one p line loads, with Casbin holding only the p
// line.
func TestApprovalLinesNeverReachCasbin(t *testing.T) {
	m, err := model.NewModelFromString(readRoot(t, rootModel))
	if err != nil {
		t.Fatal(err)
	}
	if err := loadLine(policyLine{num: 1, text: "a, support_agent, orders/refund_order, call"}, m); err == nil {
		t.Fatal("casbin's loader accepted an a line; this test no longer shows why a lines must be diverted")
	} else {
		t.Logf("casbin's own loader: %v", err)
	}
	policy := `a, support_agent, orders/refund_order, call, amount > 50
a, support_agent, orders/get_order, call
a, bob, orders/*, call
p, support_agent, orders/*, call, allow
`
	p := loadWith(t, "", policy, Options{Servers: []string{"orders"}, Principals: []string{"bob"}})
	got, err := p.se.GetPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0][0] != "support_agent" || got[0][3] != "allow" {
		t.Fatalf("casbin holds %v, want only the p line", got)
	}
	for _, sec := range []string{"a"} {
		if _, ok := p.se.GetModel()[sec]; ok {
			t.Fatalf("casbin model has a %q section", sec)
		}
	}
	if r, ok := p.ApprovalRule(req("bob", "orders/get_order", `{}`, "support_agent")); !ok || r != p.policyPath+":2" {
		t.Fatalf("ApprovalRule = (%q, %v)", r, ok)
	}
	// Only a lines: still refused as a policy without permissions.
	_, le := loadErr(t, "", "a, support_agent, orders/get_order, call\n", Options{})
	if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Reason, "no permission (p) lines") {
		t.Fatalf("problems: %v", le)
	}
}

// TestLintApprovalLines: a lines are linted like p lines, each problem with file:line and a fix.
func TestLintApprovalLines(t *testing.T) {
	policy := `p, support_agent, orders/*, call, allow
a, support_agent , orders/refund_order, call
a, support_agent, orders/refund_order, cal
a, support_agent, search/query, call
a, support_agent, *, call
a, x$y, orders/refund_order, call
a, support_agent, orders/refund_order, call, amount >
a, support_agent, orders/refund_order, call,
a, support_agent, orders/refund_order
a, support_agent, orders/refund_order, call, allow, amount > 50
a, support_agent, orders/refund_order, call, amount in [1, 2]
a, , orders/refund_order, call
a, support_agent, orders/refund_order # why, call
a, support_agent, orders/refund_order, call, amount > 50
g, bob, support_agent
`
	f, le := loadErr(t, "", policy, Options{Servers: []string{"orders"}})
	want := []struct {
		line int
		has  string
	}{
		{2, `leading or trailing whitespace`},
		{3, `action "cal" is unknown; write call (tools), read (resources) or get (prompts) instead`},
		{4, `names server "search", which is not configured`},
		{5, `wildcard over every server`},
		{6, `contains "$"`},
		{7, `does not compile`},
		{8, `condition after the last comma is empty`},
		{9, `an approval line has 3 or 4`},
		{10, `an approval line has no effect`},
		{11, `wrap it in double quotes: write "amount in [1, 2]"`},
		{12, `subject (field 2) is empty`},
		{13, `comments must be on a line of their own`},
	}
	if len(le.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(le.Problems), len(want), le)
	}
	for i, w := range want {
		got := le.Problems[i]
		if got.File != f.policy || got.Line != w.line || !strings.Contains(got.Reason, w.has) {
			t.Errorf("problem %d = %v; want %s:%d containing %q", i, got, f.policy, w.line, w.has)
		}
		if !fixVerb.MatchString(got.Reason) {
			t.Errorf("problem %d does not say what to do: %v", i, got)
		}
		if !strings.HasPrefix(got.Error(), fmt.Sprintf("%s:%d: ", f.policy, w.line)) {
			t.Errorf("problem %d prints as %q", i, got.Error())
		}
	}
	var one *LoadError
	if !errors.As(le, &one) || one.Line != 2 {
		t.Fatalf("errors.As: %v", one)
	}
	// The effect hint shows the line to write.
	if !strings.Contains(le.Problems[8].Reason, `write "a, support_agent, orders/refund_order, call, amount > 50" instead`) {
		t.Errorf("effect hint: %s", le.Problems[9].Reason)
	}
}

// TestApprovalRegexModel: with regexMatch in the model, an a line's object is an anchored
// pattern, linted and matched like a p line's.
func TestApprovalRegexModel(t *testing.T) {
	m := strings.Replace(readRoot(t, rootModel), "keyMatch(r.obj, p.obj)", "regexMatch(r.obj, p.obj)", 1)
	if m == readRoot(t, rootModel) {
		t.Fatal("model has no keyMatch to replace")
	}
	policy := `p, support_agent, ^orders/.*$, call, allow
a, support_agent, ^orders/(refund|cancel)_order$, call
g, bob, support_agent
`
	p := loadWith(t, m, policy, Options{Servers: []string{"orders"}})
	if r, ok := p.ApprovalRule(req("bob", "orders/refund_order", `{}`)); !ok || r != p.policyPath+":2" {
		t.Fatalf("refund: (%q, %v)", r, ok)
	}
	if _, ok := p.ApprovalRule(req("bob", "orders/get_order", `{}`)); ok {
		t.Fatal("get_order needs no approval")
	}
	_, le := loadErr(t, m, "p, support_agent, ^orders/.*$, call, allow\na, support_agent, orders/refund, call\n", Options{Servers: []string{"orders"}})
	if len(le.Problems) != 1 || le.Problems[0].Line != 2 || !strings.Contains(le.Problems[0].Reason, "not anchored") {
		t.Fatalf("problems: %v", le)
	}
}

// TestApprovalRepoPolicy: the repository's policy.csv loads and, as shipped, needs no approval
// anywhere (the a line there is a commented example), so the demo behaves as before.
func TestApprovalRepoPolicy(t *testing.T) {
	f := rootFiles(t)
	p, err := LoadPolicy(f.model, f.policy, Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Approvals() != 0 {
		t.Fatalf("repo policy has %d approval lines", p.Approvals())
	}
	if !strings.Contains(readRoot(t, rootPolicy), "#     a, support_agent, orders/refund_order, call, amount > 50\n") {
		t.Fatal("repo policy.csv lacks the commented approval example")
	}
}

// TestStoreApprovalRule: the Store answers from the current policy, concurrently.
func TestStoreApprovalRule(t *testing.T) {
	f := newFiles(t, readRoot(t, rootModel), approvalPolicy)
	lg, _ := newLog()
	s, err := NewStore(f.model, f.policy, Options{}, lg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, ok := s.ApprovalRule(req("bob", "orders/refund_order", `{"amount": 80}`)); !ok || !strings.HasSuffix(r, ":2") {
				t.Errorf("(%q, %v)", r, ok)
			}
		}()
	}
	wg.Wait()
}

// TestApprovalDigest: an approval is bound to what its a line means, not where it is: moving it or
// editing other lines keeps its digest; editing any of its fields, or the model, changes it.
func TestApprovalDigest(t *testing.T) {
	const base = `p, support_agent, orders/*, call, allow
a, support_agent, orders/refund_order, call, amount > 50
g, bob, support_agent
`
	o := Options{Servers: []string{"orders"}}
	model := readRoot(t, rootModel)
	digestOf := func(m, policy string) string {
		t.Helper()
		p := loadWith(t, m, policy, o)
		ref, ok := p.ApprovalRule(req("bob", "orders/refund_order", `{"amount": 80}`))
		if !ok {
			t.Fatalf("not held under:\n%s", policy)
		}
		d := p.ApprovalDigest(ref)
		if len(d) != 16 {
			t.Fatalf("digest %q of %s", d, ref)
		}
		if at, text, ok := p.ApprovalByDigest(d); !ok || at != ref || !strings.HasPrefix(text, "a, ") {
			t.Fatalf("ApprovalByDigest(%s) = %q %q %v", d, at, text, ok)
		}
		return d
	}
	want := digestOf(model, base)
	for name, policy := range map[string]string{
		"moved":        "a, support_agent, orders/refund_order, call, amount > 50\np, support_agent, orders/*, call, allow\ng, bob, support_agent\n",
		"other edited": base + "g, alice, support_agent\n# a comment\n",
	} {
		if d := digestOf(model, policy); d != want {
			t.Errorf("%s: digest %s, want %s", name, d, want)
		}
	}
	for name, policy := range map[string]string{
		"condition": strings.Replace(base, "amount > 50", "amount > 10", 1),
		"subject":   strings.Replace(base, "a, support_agent", "a, bob", 1),
		"object":    strings.Replace(base, "orders/refund_order, call, amount", "orders/*, call, amount", 1),
	} {
		if d := digestOf(model, policy); d == want {
			t.Errorf("%s edited: digest unchanged %s", name, d)
		}
	}
	if d := digestOf(model+"\n", base); d == want {
		t.Error("model edited: digest unchanged")
	}
	p := loadWith(t, model, base, o)
	if d := p.ApprovalDigest(p.policyPath + ":1"); d != "" {
		t.Errorf("a p line's digest: %q", d)
	}
	if _, _, ok := p.ApprovalByDigest("0000000000000000"); ok {
		t.Error("an unknown digest was found")
	}
}
