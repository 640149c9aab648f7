package explain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz"
)

// The repository's model and policy.
const (
	rootModel  = "../../model.conf"
	rootPolicy = "../../policy.csv"
)

const (
	getOrder    = "orders/get_order"
	updateOrder = "orders/update_order_status"
	refundOrder = "orders/refund_order"
	sendReply   = "orders/send_customer_reply"
)

var demoTools = []string{getOrder, updateOrder, refundOrder, sendReply}

// load writes policy beside a copy of the repository model and loads it; it returns the policy
// and the policy file's path.
func load(t *testing.T, policy string, o authz.Options) (*authz.Policy, string) {
	t.Helper()
	model, err := os.ReadFile(rootModel)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mp, pp := filepath.Join(dir, "model.conf"), filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(mp, model, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pp, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(mp, pp, o)
	if err != nil {
		t.Fatalf("LoadPolicy:\n%v", err)
	}
	return p, pp
}

func req(principal, obj, args string, roles ...string) authz.Request {
	r := authz.Request{Subject: authz.Subject{Principal: principal, Roles: roles}, Object: obj, Action: authz.ActCall}
	if args != "" {
		r.Args = []byte(args)
	}
	return r
}

// featuresPolicy has deny lines, conditional allows and denies, principal attributes, inherited
// roles and credential roles (the same as authz's agreement test).
const featuresPolicy = `p, deny_all_refunds, orders/refund_order, call, deny
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

// TestExplainAgreesWithDecide runs a matrix of subjects x objects x argument sets through Explain
// and through the policy's own answers (Decide, Visible, ApprovalRule), and requires them to agree.
func TestExplainAgreesWithDecide(t *testing.T) {
	repo, err := authz.LoadPolicy(rootModel, rootPolicy, authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	features, _ := load(t, featuresPolicy, authz.Options{Servers: []string{"orders"}})
	approvals, _ := load(t, approvalPolicy, authz.Options{Servers: []string{"orders"}})
	policies := map[string]*authz.Policy{"repo": repo, "features": features, "approvals": approvals}
	subjects := []authz.Subject{
		{Principal: "alice"}, {Principal: "bob"}, {Principal: "carol"}, {Principal: "local"},
		{Principal: "mallory"}, {Principal: "frank"}, {Principal: "erin"},
		{Principal: "gina", Attrs: map[string]string{"region": "eu"}},
		{Principal: "gina"},
		{Principal: "dave", Roles: []string{"supervisor", "deny_all_refunds"}},
		{Principal: "dave", Roles: []string{"gold"}, Attrs: map[string]string{"tier": "gold"}},
		{Principal: "dave", Roles: []string{"support_agent", "auditor"}},
		{Principal: "supervisor"}, {Principal: "dave", Roles: []string{"carol"}},
	}
	objects := append([]string{"orders/x/y", "search/query", "orders/cancel_order"}, demoTools...)
	argSets := []string{
		"", `{}`, `not json`,
		`{"order_id": 4821, "status": "cancelled"}`,
		`{"amount": 100}`, `{"amount": 5000}`, `{"amount": "lots"}`,
		`{"region": "eu"}`, `{"channel": "sms"}`,
	}
	n := 0
	for name, p := range policies {
		for _, s := range subjects {
			for _, obj := range objects {
				for _, args := range argSets {
					r := authz.Request{Subject: s, Object: obj, Action: authz.ActCall}
					if args != "" {
						r.Args = []byte(args)
					}
					d := p.Decide(r)
					x := Explain(p, r)
					n++
					if x.Allowed != d.Allowed || (x.Internal == nil) != (d.Internal == nil) {
						t.Errorf("%s: %+v on %s with %s: Decide %v (%v), Explain %v (%v)\n%s",
							name, s, obj, args, d.Allowed, d.Internal, x.Allowed, x.Internal, x.Summary)
					}
					if v := p.Visible(s, obj); x.Visible != v {
						t.Errorf("%s: %+v on %s: Explain.Visible %v, Visible %v", name, s, obj, x.Visible, v)
					}
					if d.Allowed && len(x.DecidedBy) == 0 {
						t.Errorf("%s: allowed without a deciding line: %+v", name, x)
					}
					if d.Rule != "" && !slices.Contains(x.DecidedBy, d.Rule) {
						t.Errorf("%s: Decide's rule %s is not among Explain's %v", name, d.Rule, x.DecidedBy)
					}
					want := ""
					if rule, needed := p.ApprovalRule(r); needed && d.Allowed {
						want = rule
					}
					if x.Approval != want {
						t.Errorf("%s: %+v on %s with %s: Explain.Approval %q, ApprovalRule %q", name, s, obj, args, x.Approval, want)
					}
				}
			}
		}
	}
	t.Logf("%d requests agreed", n)
}

func TestExplainReport(t *testing.T) {
	p, file := load(t, featuresPolicy, authz.Options{})
	x := Explain(p, req("carol", refundOrder, `{"amount": 500}`, "deny_all_refunds"))
	if x.Allowed || x.Visible {
		t.Fatalf("allowed %v visible %v, want denied and hidden", x.Allowed, x.Visible)
	}
	if want := []string{"agent", "deny_all_refunds", "lead", "supervisor"}; !reflect.DeepEqual(x.Roles, want) {
		t.Errorf("roles %v, want %v", x.Roles, want)
	}
	if !reflect.DeepEqual(x.CredentialRoles, []string{"deny_all_refunds"}) {
		t.Errorf("credential roles %v", x.CredentialRoles)
	}
	var got []string
	for _, l := range x.Lines {
		got = append(got, fmt.Sprintf("%s %s %s cond=%q result=%q applied=%v decisive=%v",
			strings.TrimPrefix(l.Rule, file), l.Effect, l.Text, l.Condition, l.CondResult, l.Applied, l.Decisive))
	}
	want := []string{
		`:1 deny p, deny_all_refunds, orders/refund_order, call, deny cond="" result="" applied=true decisive=true`,
		`:2 allow p, agent, orders/*, call, allow cond="" result="" applied=true decisive=false`,
		`:3 deny p, agent, orders/refund_order, call, deny, amount > 100 cond="amount > 100" result="true" applied=true decisive=true`,
		`:6 allow p, supervisor, orders/*, call, allow cond="" result="" applied=true decisive=false`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !reflect.DeepEqual(x.DecidedBy, []string{file + ":1", file + ":3"}) || !strings.Contains(x.Summary, "deny line wins") {
		t.Errorf("decided by %v: %s", x.DecidedBy, x.Summary)
	}

	// A condition that errors is shown, and the allow line did not apply.
	x = Explain(p, req("gina", getOrder, `{"order_id": 1}`))
	// Not visible either: every call reads principal.region, which gina does not have.
	if x.Allowed || len(x.Lines) != 1 || x.Lines[0].Applied || !strings.HasPrefix(x.Lines[0].CondResult, "error: ") ||
		!strings.Contains(x.Summary, "no allow line's condition holds") || x.Visible {
		t.Errorf("gina without region: %+v", x)
	}
	r := req("gina", getOrder, `{"order_id": 1, "region": "eu"}`)
	r.Subject.Attrs = map[string]string{"region": "eu"}
	if x = Explain(p, r); !x.Allowed || !x.Visible || x.Summary != "allowed by "+file+":5" {
		t.Errorf("gina with region: %+v", x)
	}
	// Nothing matches: default deny.
	x = Explain(p, req("mallory", getOrder, `{}`))
	if x.Allowed || len(x.Lines) != 0 || !strings.Contains(x.Summary, "anything not allowed is denied") {
		t.Errorf("mallory: %+v", x)
	}
}

// TestExplainApprovals: an allowed call that an a line applies to needs approval, and the summary
// says which line; a denied call never does (an approval never turns a deny into an allow).
func TestExplainApprovals(t *testing.T) {
	p, file := load(t, approvalPolicy, authz.Options{Servers: []string{"orders"}, Principals: []string{"alice", "bob", "carol", "dave"}})
	ref := func(line int) string { return fmt.Sprintf("%s:%d", file, line) }
	tests := []struct {
		name    string
		req     authz.Request
		allowed bool
		rule    int // 0: no approval needed
	}{
		{"by role through g, above the limit", req("bob", refundOrder, `{"amount": 80}`), true, 2},
		{"boundary: 50 is not above 50", req("bob", refundOrder, `{"amount": 50}`), true, 0},
		{"by credential role", req("dave", refundOrder, `{"amount": 51}`, "support_agent"), true, 2},
		{"condition error fails closed", req("bob", refundOrder, `{}`), true, 2},
		{"quoted condition with commas, holds", req("bob", sendReply, `{"channel": "sms"}`), true, 5},
		{"by principal", req("alice", updateOrder, `{}`), true, 3},
		{"by wildcard object through a credential role", req("carol", getOrder, `{}`, "auditor"), true, 4},
		{"other subject: supervisor refunds freely", req("carol", refundOrder, `{"amount": 500}`), true, 0},
		{"unknown principal", req("zed", refundOrder, `{"amount": 80}`), false, 0},
		{"denied call: approval never turns a deny into an allow", req("bob", "orders/cancel_order", `{}`), false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := Explain(p, tc.req)
			if x.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %s", x.Allowed, tc.allowed, x.Summary)
			}
			want := ""
			if tc.rule != 0 {
				want = ref(tc.rule)
			}
			if x.Approval != want {
				t.Fatalf("Approval = %q, want %q (summary %q)", x.Approval, want, x.Summary)
			}
			if want != "" && !strings.Contains(x.Summary, "but needs approval ("+want+")") {
				t.Fatalf("summary %q does not say it needs approval (%s)", x.Summary, want)
			}
			if want == "" && strings.Contains(x.Summary, "approval") {
				t.Fatalf("summary %q mentions approval", x.Summary)
			}
		})
	}
	// The denied call still lists the a line that matched, not as decisive.
	x := Explain(p, req("bob", "orders/cancel_order", `{}`))
	if len(x.ApprovalLines) != 1 || x.ApprovalLines[0].Rule != ref(9) || !x.ApprovalLines[0].Applied || x.ApprovalLines[0].Decisive {
		t.Fatalf("denied call's approval lines: %+v", x.ApprovalLines)
	}
}

// TestExplainApprovalLines: every a line matching subject, object and action is listed with how
// its condition came out, and the first that applies is marked.
func TestExplainApprovalLines(t *testing.T) {
	p, file := load(t, `a, support_agent, orders/refund_order, call, amount > 50
a, support_agent, orders/*, call, amount > 1000
a, viewer, orders/refund_order, call
p, support_agent, orders/refund_order, call, allow
g, bob, support_agent
`, authz.Options{})
	x := Explain(p, req("bob", refundOrder, `{"amount": 60}`))
	if len(x.ApprovalLines) != 2 {
		t.Fatalf("ApprovalLines = %+v", x.ApprovalLines)
	}
	a, b := x.ApprovalLines[0], x.ApprovalLines[1]
	if a.Effect != "approval" || a.CondResult != "true" || !a.Applied || !a.Decisive || a.Condition != "amount > 50" {
		t.Fatalf("first line %+v", a)
	}
	if b.CondResult != "false" || b.Applied || b.Decisive {
		t.Fatalf("second line %+v", b)
	}
	want := fmt.Sprintf("allowed by %s:4, but needs approval (%s:1)", file, file)
	if x.Summary != want || x.Approval != file+":1" {
		t.Fatalf("summary %q, approval %q; want %q", x.Summary, x.Approval, want)
	}
	x = Explain(p, req("bob", refundOrder, `{"amount": "lots"}`))
	if len(x.ApprovalLines) != 2 || !strings.HasPrefix(x.ApprovalLines[0].CondResult, "error: ") || !x.ApprovalLines[0].Applied {
		t.Fatalf("error line %+v", x.ApprovalLines)
	}
	if x.Approval != file+":1" {
		t.Fatalf("condition error must fail closed; approval %q", x.Approval)
	}
	x = Explain(p, req("bob", refundOrder, `{"amount": 10}`))
	if x.Approval != "" || len(x.ApprovalLines) != 2 || strings.Contains(x.Summary, "approval") {
		t.Fatalf("below the limit: %+v", x)
	}
}

// TestExplainRoles: a principal named like a role is denied and told why; credential roles that
// are not roles of the policy are listed as dropped, and the summary says so.
func TestExplainRoles(t *testing.T) {
	policy, err := os.ReadFile(rootPolicy)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := load(t, string(policy)+"p, erin, orders/get_order, call, allow\n", authz.Options{Servers: []string{"orders"}, Principals: []string{"erin"}})
	for _, principal := range []string{"supervisor", "support_agent", "viewer"} {
		x := Explain(p, req(principal, refundOrder, `{"amount": 5000}`, "supervisor"))
		if x.Allowed || x.Visible || !errors.Is(x.Internal, authz.ErrPrincipalIsRole) || len(x.Roles) != 0 ||
			!strings.Contains(x.Summary, "is the name of a role") {
			t.Errorf("Explain(%s): %+v", principal, x)
		}
	}
	refund := `{"order_id": 1, "amount": 5000, "reason": "x"}`
	for _, roles := range [][]string{{"carol"}, {"local"}, {"alice", "bob"}, {"erin"}, {"nobody"}} {
		x := Explain(p, req("mallory", refundOrder, refund, roles...))
		if x.Allowed || len(x.Roles) != 0 || !reflect.DeepEqual(x.DroppedRoles, roles) || !reflect.DeepEqual(x.CredentialRoles, roles) ||
			!strings.Contains(x.Summary, "were ignored (not roles of this policy)") {
			t.Errorf("Explain with roles %v: roles %v dropped %v: %s", roles, x.Roles, x.DroppedRoles, x.Summary)
		}
	}
	x := Explain(p, req("mallory", refundOrder, refund, "supervisor", "carol", "supervisor"))
	if !x.Allowed || !reflect.DeepEqual(x.Roles, []string{"supervisor"}) || !reflect.DeepEqual(x.DroppedRoles, []string{"carol"}) ||
		!reflect.DeepEqual(x.CredentialRoles, []string{"supervisor", "carol", "supervisor"}) {
		t.Errorf("Explain: roles %v dropped %v credential %v", x.Roles, x.DroppedRoles, x.CredentialRoles)
	}
}

// TestExplainRefusals: no policy, or a request missing a field, is denied with a sentence saying
// why.
func TestExplainRefusals(t *testing.T) {
	var none *authz.Policy
	x := Explain(none, req("carol", getOrder, `{}`))
	if x.Allowed || !errors.Is(x.Internal, authz.ErrNoPolicy) || x.Summary != "denied: no policy is loaded" {
		t.Fatalf("nil policy: %+v", x)
	}
	p, err := authz.LoadPolicy(rootModel, rootPolicy, authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []authz.Request{
		{Subject: authz.Subject{Roles: []string{"supervisor"}}, Object: getOrder, Action: authz.ActCall},
		{Subject: authz.Subject{Principal: "carol"}, Action: authz.ActCall},
		{Subject: authz.Subject{Principal: "carol"}, Object: getOrder},
	} {
		x := Explain(p, r)
		if x.Allowed || x.Internal != nil || x.Visible || !strings.Contains(x.Summary, "must all be given") {
			t.Errorf("%+v: %+v", r, x)
		}
	}
}
