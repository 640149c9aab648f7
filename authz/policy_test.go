package authz

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The demo's tools and the argument sets the matrix tries on each.
const (
	getOrder    = "orders/get_order"
	updateOrder = "orders/update_order_status"
	refundOrder = "orders/refund_order"
	sendReply   = "orders/send_customer_reply"
)

// TestRootPolicyDecisionMatrix loads the REAL repository model.conf and policy.csv (with the demo's
// configured server) and checks every principal on every demo tool, with refunds at the
// condition's boundary. Every row also checks that Trace agrees with Decide.
func TestRootPolicyDecisionMatrix(t *testing.T) {
	p, err := LoadPolicy(rootModel, rootPolicy, Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatalf("the repository policy does not load:\n%v", err)
	}
	if w := p.Warnings(); len(w) != 0 {
		t.Errorf("the repository policy has warnings: %v", w)
	}
	type call struct {
		obj, args string
	}
	var (
		get    = call{getOrder, `{"order_id": 4821}`}
		update = call{updateOrder, `{"order_id": 4821, "status": "shipped"}`}
		reply  = call{sendReply, `{"order_id": 4821, "message": "Your order has shipped."}`}
		refund = func(amount string) call {
			return call{refundOrder, `{"order_id": 4821, "amount": ` + amount + `, "reason": "damaged"}`}
		}
		refund100  = refund("100")
		refund100f = refund("100.0")
		refund1e2  = refund("1e2")
		refund9999 = refund("99.99")
		refundOver = refund("100.01")
		refundBig  = refund("5000")
		refundStr  = refund(`"100"`)
		refundNone = call{refundOrder, `{"order_id": 4821, "reason": "damaged"}`}
		refundNull = refund("null")
		refundNo   = call{refundOrder, ``} // no arguments at all
	)
	all := []call{get, update, reply, refund100, refund100f, refund1e2, refund9999, refundOver, refundBig, refundStr, refundNone, refundNull, refundNo}
	supportAllowed := map[call]bool{get: true, update: true, reply: true, refund100: true, refund100f: true, refund1e2: true, refund9999: true}
	want := map[string]map[call]bool{
		"alice":   supportAllowed,
		"local":   supportAllowed,
		"bob":     {get: true},
		"carol":   {get: true, update: true, reply: true, refund100: true, refund100f: true, refund1e2: true, refund9999: true, refundOver: true, refundBig: true, refundStr: true, refundNone: true, refundNull: true, refundNo: true},
		"mallory": {},
	}
	for _, principal := range []string{"alice", "bob", "carol", "local", "mallory"} {
		for _, c := range all {
			name := fmt.Sprintf("%s/%s/%s", principal, strings.TrimPrefix(c.obj, "orders/"), c.args)
			t.Run(name, func(t *testing.T) {
				r := req(principal, c.obj, c.args)
				d := p.Decide(r)
				if d.Internal != nil {
					t.Fatalf("internal error: %v", d.Internal)
				}
				if d.Allowed != want[principal][c] {
					t.Fatalf("Decide = %v, want %v (rule %q, cond error %v)", d.Allowed, want[principal][c], d.Rule, d.CondErr)
				}
				tr, err := p.Trace(r)
				if allowed, _ := traceAllows(tr); allowed != d.Allowed || err != nil {
					t.Fatalf("Trace allows = %v (%v), Decide = %v\n%+v", allowed, err, d.Allowed, tr)
				}
			})
		}
	}

	// The deciding line is named.
	if d, want := p.Decide(req("alice", refundOrder, `{"amount": 50}`)), lineOf(t, rootPolicy, "p, support_agent, orders/refund_order, call, allow, amount <= 100"); d.Rule != want {
		t.Errorf("alice refund 50 decided by %q, want %s", d.Rule, want)
	}
	if d, want := p.Decide(req("carol", refundOrder, `{"amount": 5000}`)), lineOf(t, rootPolicy, "p, supervisor, orders/*, call, allow"); d.Rule != want {
		t.Errorf("carol refund decided by %q, want %s", d.Rule, want)
	}
	if d := p.Decide(req("alice", refundOrder, `{"amount": 500}`)); d.Rule != "" || d.CondErr != nil {
		t.Errorf("alice refund 500: rule %q, cond error %v (want default deny, no error)", d.Rule, d.CondErr)
	}
	if d := p.Decide(req("alice", refundOrder, `{}`)); d.CondErr == nil || !strings.Contains(d.CondErr.Error(), `missing field "amount"`) {
		t.Errorf("alice refund without amount: cond error %v", d.CondErr)
	}
}

// TestRootPolicyVisible: what tools/list shows. A conditional allow makes a tool visible.
func TestRootPolicyVisible(t *testing.T) {
	p, err := LoadPolicy(rootModel, rootPolicy, Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"alice":   demoTools,
		"local":   demoTools,
		"bob":     {getOrder},
		"carol":   demoTools,
		"mallory": nil,
	}
	for principal, w := range want {
		var got []string
		for _, obj := range append(demoTools, "search/query") {
			if p.Visible(Subject{Principal: principal}, obj) {
				got = append(got, obj)
			}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s sees %v, want %v", principal, got, w)
		}
	}
}

// agreementPolicy exercises everything Trace must model: deny lines, conditional allows and
// denies, principal attributes, inherited roles and credential roles.
const agreementPolicy = `p, deny_all_refunds, orders/refund_order, call, deny
p, agent, orders/*, call, allow
p, agent, orders/refund_order, call, deny, amount > 100
p, agent, orders/update_order_status, call, deny, status == 'cancelled'
p, regional, orders/get_order, call, allow, region == principal.region
p, supervisor, orders/*, call, allow
p, gold, orders/send_customer_reply, call, allow, principal.tier == 'gold'
p, erin, orders/get_order, call, allow
g, lead, agent
g, alice, agent
g, carol, supervisor
g, carol, lead
g, frank, deny_all_refunds
g, frank, supervisor
g, gina, regional
`

// TestTraceAgreesWithDecide runs a matrix of subjects x objects x argument sets through both and
// requires the same answer, on the repository policy and on a policy with every feature.
func TestTraceAgreesWithDecide(t *testing.T) {
	policies := map[string]*Policy{
		"repo":     loadWith(t, readRoot(t, rootModel), readRoot(t, rootPolicy), Options{Servers: []string{"orders"}}),
		"features": loadWith(t, "", agreementPolicy, Options{Servers: []string{"orders"}}),
		// erin, on p lines only, is a role unless the configuration names it as a principal.
		"features, erin a principal": loadWith(t, "", agreementPolicy, Options{Servers: []string{"orders"}, Principals: []string{"erin", "mallory"}}),
		"regex model": loadWith(t, regexRootModel(t), `p, agent, ^orders/(get|update)_order(_status)?$, call, allow
p, agent, ^orders/refund_order$, call, allow, amount <= 100
p, supervisor, ^orders/.*$, call, allow
p, supervisor, ^orders/update_order_status$, call, deny, status == 'cancelled'
g, alice, agent
g, carol, supervisor
`, Options{Servers: []string{"orders"}}),
	}
	subjects := []Subject{
		{Principal: "alice"}, {Principal: "bob"}, {Principal: "carol"}, {Principal: "local"},
		{Principal: "mallory"}, {Principal: "frank"}, {Principal: "erin"},
		{Principal: "gina", Attrs: map[string]string{"region": "eu"}},
		{Principal: "gina"},
		{Principal: "dave", Roles: []string{"supervisor"}},
		{Principal: "dave", Roles: []string{"supervisor", "deny_all_refunds"}},
		{Principal: "dave", Roles: []string{"lead"}},
		{Principal: "dave", Roles: []string{"gold"}, Attrs: map[string]string{"tier": "gold"}},
		{Principal: "dave", Roles: []string{"gold"}, Attrs: map[string]string{"tier": "silver"}},
		{Principal: "alice", Roles: []string{"viewer", "supervisor"}},
		// Names crossing over: a principal named like a role is denied; a credential role
		// naming a principal is dropped.
		{Principal: "support_agent"}, {Principal: "supervisor"}, {Principal: "lead"}, {Principal: "regional"},
		{Principal: "dave", Roles: []string{"carol"}}, {Principal: "dave", Roles: []string{"local", "gina"}},
		{Principal: "dave", Roles: []string{"erin"}},
	}
	objects := append([]string{"orders/", "orders/x/y", "search/query", "ordersx/get_order"}, demoTools...)
	argSets := []string{
		"", `{}`, `null`, `[1]`, `not json`,
		`{"order_id": 4821}`,
		`{"order_id": 4821, "status": "shipped"}`, `{"order_id": 4821, "status": "cancelled"}`,
		`{"amount": 100}`, `{"amount": 100.01}`, `{"amount": 5000}`, `{"amount": "lots"}`, `{"amount": null}`,
		`{"region": "eu"}`, `{"region": "us"}`,
		`{"message": "hi"}`,
	}
	n := 0
	for name, p := range policies {
		for _, s := range subjects {
			for _, obj := range objects {
				for _, args := range argSets {
					r := Request{Subject: s, Object: obj, Action: ActCall}
					if args != "" {
						r.Args = []byte(args)
					}
					d := p.Decide(r)
					tr, err := p.Trace(r)
					allowed, decidedBy := traceAllows(tr)
					n++
					if p.IsRole(s.Principal) {
						if d.Allowed || allowed || p.Visible(s, obj) || !errors.Is(d.Internal, ErrPrincipalIsRole) || !errors.Is(err, ErrPrincipalIsRole) {
							t.Errorf("%s: principal %q is a role: Decide %+v, Trace %+v (%v)", name, s.Principal, d, tr, err)
						}
						continue
					}
					if d.Allowed != allowed || d.Internal != nil || err != nil {
						t.Errorf("%s: %+v on %s with %s: Decide %v (%v), Trace %v (%v)\n%+v",
							name, s, obj, args, d.Allowed, d.Internal, allowed, err, tr)
					}
					if d.Allowed && !p.Visible(s, obj) {
						t.Errorf("%s: %+v on %s with %s: allowed but not visible", name, s, obj, args)
					}
					if d.Allowed && len(decidedBy) == 0 {
						t.Errorf("%s: allowed without a deciding line: %+v", name, tr)
					}
					if d.Rule != "" && !contains(decidedBy, d.Rule) {
						t.Errorf("%s: Decide's rule %s is not among Trace's %v", name, d.Rule, decidedBy)
					}
				}
			}
		}
	}
	t.Logf("%d requests agreed", n)
}

// TestTraceReport: the trace lists every matching line in file order with how its condition came
// out, and the roles the decision used. (What authz/explain says of it is tested there.)
func TestTraceReport(t *testing.T) {
	f := newFiles(t, readRoot(t, rootModel), agreementPolicy)
	p, err := LoadPolicy(f.model, f.policy, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := req("carol", refundOrder, `{"amount": 500}`, "deny_all_refunds")
	tr, err := p.Trace(r)
	if err != nil {
		t.Fatal(err)
	}
	if allowed, _ := traceAllows(tr); allowed || p.Visible(r.Subject, refundOrder) {
		t.Fatalf("allowed %v visible %v, want denied and hidden", allowed, p.Visible(r.Subject, refundOrder))
	}
	if want := []string{"agent", "deny_all_refunds", "lead", "supervisor"}; !reflect.DeepEqual(tr.Roles, want) {
		t.Errorf("roles %v, want %v", tr.Roles, want)
	}
	var got []string
	for _, l := range tr.Lines {
		got = append(got, fmt.Sprintf("%s %s %s cond=%q result=%q applied=%v",
			strings.TrimPrefix(l.Rule, f.policy), l.Effect, l.Text, l.Condition, l.CondResult, l.Applied))
	}
	want := []string{
		`:1 deny p, deny_all_refunds, orders/refund_order, call, deny cond="" result="" applied=true`,
		`:2 allow p, agent, orders/*, call, allow cond="" result="" applied=true`,
		`:3 deny p, agent, orders/refund_order, call, deny, amount > 100 cond="amount > 100" result="true" applied=true`,
		`:6 allow p, supervisor, orders/*, call, allow cond="" result="" applied=true`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, by := traceAllows(tr); !reflect.DeepEqual(by, []string{f.policy + ":1", f.policy + ":3"}) {
		t.Errorf("decided by %v", by)
	}

	// A condition that errors is shown, and the allow line did not apply.
	tr, _ = p.Trace(req("gina", getOrder, `{"order_id": 1}`))
	// Not visible either: every call reads principal.region, which gina does not have.
	if allowed, _ := traceAllows(tr); allowed || len(tr.Lines) != 1 || tr.Lines[0].Applied || !strings.HasPrefix(tr.Lines[0].CondResult, "error: ") ||
		p.Visible(Subject{Principal: "gina"}, getOrder) {
		t.Errorf("gina without region: %+v", tr)
	}
	r = req("gina", getOrder, `{"order_id": 1, "region": "eu"}`)
	r.Subject.Attrs = map[string]string{"region": "eu"}
	if tr, _ = p.Trace(r); !tr.Lines[0].Applied || tr.Lines[0].CondResult != "true" || !p.Visible(r.Subject, getOrder) {
		t.Errorf("gina with region: %+v", tr)
	}
	// Nothing matches: an empty trace (default deny).
	if tr, err = p.Trace(req("mallory", getOrder, `{}`)); err != nil || len(tr.Lines) != 0 || len(tr.Roles) != 0 {
		t.Errorf("mallory: %+v, %v", tr, err)
	}
}

// TestCredentialRolesDenyOverride: roles from the credential add to the g lines, and a deny
// reached through any role, from either source, wins.
func TestCredentialRolesDenyOverride(t *testing.T) {
	p := loadWith(t, "", agreementPolicy, Options{})
	tests := []struct {
		name string
		r    Request
		want bool
	}{
		{"credential role grants", req("dave", refundOrder, `{"amount": 5000}`, "supervisor"), true},
		{"no role, no access", req("dave", refundOrder, `{"amount": 5}`), false},
		{"credential deny beats credential allow", req("dave", refundOrder, `{"amount": 5}`, "supervisor", "deny_all_refunds"), false},
		{"credential deny beats g-line allow", req("carol", refundOrder, `{"amount": 5}`, "deny_all_refunds"), false},
		{"g-line deny beats credential allow", req("frank", refundOrder, `{"amount": 5}`, "supervisor"), false},
		{"inherited conditional deny via credential role", req("dave", refundOrder, `{"amount": 500}`, "supervisor", "lead"), false},
		{"inherited conditional deny does not apply below the limit", req("dave", refundOrder, `{"amount": 50}`, "supervisor", "lead"), true},
		{"credential role on another tool", req("dave", getOrder, `{}`, "lead"), true},
		{"empty credential role ignored", req("dave", getOrder, `{}`, ""), false},
		{"roles are case-sensitive", req("dave", getOrder, `{}`, "Supervisor"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := p.Decide(tc.r); d.Allowed != tc.want || d.Internal != nil {
				t.Fatalf("Decide = %v (%v), want %v", d.Allowed, d.Internal, tc.want)
			}
		})
	}
}

func TestNilPolicyDenies(t *testing.T) {
	var p *Policy
	if d := p.Decide(req("carol", getOrder, `{}`)); d.Allowed || d.Internal == nil {
		t.Fatalf("nil policy: %+v", d)
	}
	if p.Visible(Subject{Principal: "carol"}, getOrder) {
		t.Fatal("nil policy: visible")
	}
	if tr, err := p.Trace(req("carol", getOrder, `{}`)); !errors.Is(err, ErrNoPolicy) || len(tr.Lines) != 0 {
		t.Fatalf("nil policy: %+v, %v", tr, err)
	}
	if p.Version() != "" || p.Rules() != 0 {
		t.Fatal("nil policy has a version")
	}
}

func TestDecideEmptyFieldsDenied(t *testing.T) {
	p := loadWith(t, readRoot(t, rootModel), readRoot(t, rootPolicy), Options{})
	for _, r := range []Request{
		{Subject: Subject{Roles: []string{"supervisor"}}, Object: getOrder, Action: ActCall},
		{Subject: Subject{Principal: "carol"}, Action: ActCall},
		{Subject: Subject{Principal: "carol"}, Object: getOrder},
		{Subject: Subject{Principal: "carol"}, Object: getOrder, Action: "Call"},
	} {
		if d := p.Decide(r); d.Allowed {
			t.Errorf("%+v allowed", r)
		}
	}
}

// lineOf returns "path:line" of the line that is exactly text.
func lineOf(t *testing.T, path, text string) string {
	t.Helper()
	for i, l := range strings.Split(readRoot(t, path), "\n") {
		if strings.TrimSpace(l) == text {
			return fmt.Sprintf("%s:%d", path, i+1)
		}
	}
	t.Fatalf("%s has no line %q", path, text)
	return ""
}

// BenchmarkDecide: one decision on the repository policy, with a condition to evaluate.
func BenchmarkDecide(b *testing.B) {
	p, err := LoadPolicy(rootModel, rootPolicy, Options{Servers: []string{"orders"}})
	if err != nil {
		b.Fatal(err)
	}
	r := req("alice", refundOrder, `{"order_id": 4821, "amount": 80, "reason": "damaged"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !p.Decide(r).Allowed {
				b.Fatal("denied")
			}
		}
	})
}
