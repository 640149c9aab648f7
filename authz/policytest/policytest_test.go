package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz"
)

const testPolicy = `p, support_agent, orders/get_order, call, allow
p, support_agent, orders/refund_order, call, allow, amount <= 100
p, support_agent, orders/update_order_status, call, allow
p, support_agent, orders/update_order_status, call, deny, status == 'cancelled'
p, supervisor, orders/*, call, allow
p, viewer, orders/get_order, call, allow
p, viewer, orders/list_orders, call, allow, region == principal.region
p, viewer, docs/file:///srv/*, read, allow
a, support_agent, orders/refund_order, call, amount > 50
g, alice, support_agent
g, bob, viewer
g, carol, supervisor
s, orders/refund_order, call, orders:refund
`

// env loads testPolicy with the repository's model.
func env(t *testing.T) (Env, string) {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	mp, pp := filepath.Join(dir, "model.conf"), filepath.Join(dir, "policy.csv")
	for path, s := range map[string]string{mp: string(model), pp: testPolicy} {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := authz.LoadPolicy(mp, pp, authz.Options{Servers: []string{"orders", "docs"}, Principals: []string{"alice", "bob", "carol", "erin"}})
	if err != nil {
		t.Fatal(err)
	}
	return Env{
		Policy:     p,
		Principals: []string{"alice", "bob", "carol", "erin"},
		Attributes: map[string]map[string]string{"bob": {"region": "eu"}},
		JWT:        &JWT{PrincipalClaim: "sub", RolesClaim: "realm.roles", AttributeClaims: []string{"region"}},
		ToolID: func(name string) (string, error) {
			if rest, ok := strings.CutPrefix(name, "orders__"); ok {
				return "orders/" + rest, nil
			}
			if strings.Contains(name, "/") {
				return name, nil
			}
			return "", errors.New("no server prefix")
		},
	}, dir
}

func parse(t *testing.T, yaml string) *File {
	t.Helper()
	f, err := Parse("cases.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

// byName runs the cases and returns each result by case name.
func byName(t *testing.T, f *File, e Env) map[string]Result {
	t.Helper()
	out := map[string]Result{}
	for _, r := range Run(f, e) {
		out[r.Case.Name] = r
	}
	return out
}

func TestPassingAndFailingCases(t *testing.T) {
	e, _ := env(t)
	f := parse(t, `cases:
  - name: alice reads an order
    principal: alice
    tool: orders__get_order
    args: {order_id: 1}
    expect: allow
    rule: policy.csv:1
  - name: bob may not update
    principal: bob
    tool: orders/update_order_status
    args: {order_id: 1, status: shipped}
    expect: deny
    rule: none
  - name: wrong expectation
    principal: bob
    tool: orders__update_order_status
    args: {order_id: 1, status: shipped}
    expect: allow
  - name: wrong rule
    principal: alice
    tool: orders__get_order
    expect: allow
    rule: policy.csv:5
`)
	got := byName(t, f, e)
	for name, pass := range map[string]bool{"alice reads an order": true, "bob may not update": true, "wrong expectation": false, "wrong rule": false} {
		if got[name].Pass != pass {
			t.Errorf("%s: pass %v, want %v (%+v)", name, got[name].Pass, pass, got[name])
		}
	}
	var out bytes.Buffer
	Print(&out, f, Run(f, e), false)
	text := out.String()
	for _, want := range []string{
		"FAIL  wrong expectation (cases.yaml:14)",
		"expected: allow\n",
		"decided:  deny (no line decided: denied by default)",
		"FAIL  wrong rule (cases.yaml:19)",
		"expected: allow by policy.csv:5",
		"policy.csv:1",
		"4 case(s): 2 passed, 2 failed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "alice reads an order") {
		t.Errorf("a passing case is printed without -v:\n%s", text)
	}
}

func TestConditionsAndApprovals(t *testing.T) {
	e, _ := env(t)
	f := parse(t, `cases:
  - {name: small refund, principal: alice, tool: orders__refund_order, args: {amount: 30}, expect: allow, rule: policy.csv:2}
  - {name: refund needing approval, principal: alice, tool: orders__refund_order, args: {amount: 80}, expect: approval, rule: policy.csv:9}
  - {name: large refund, principal: alice, tool: orders__refund_order, args: {amount: 150}, expect: deny, rule: none}
  - {name: supervisor refunds any amount, principal: carol, tool: orders__refund_order, args: {amount: 5000}, expect: allow, rule: policy.csv:5}
  - {name: cancel is denied, principal: alice, tool: orders__update_order_status, args: {status: cancelled}, expect: deny, rule: policy.csv:4}
  - {name: ship is allowed, principal: alice, tool: orders__update_order_status, args: {status: shipped}, expect: allow}
  - {name: refund without args, principal: alice, tool: orders__refund_order, expect: deny}
  - {name: region from the api key, principal: bob, tool: orders__list_orders, args: {region: eu}, expect: allow}
  - {name: region override, principal: bob, attributes: {region: us}, tool: orders__list_orders, args: {region: eu}, expect: deny}
  - {name: resource read, principal: bob, resource: "docs/file:///srv/a.txt", expect: allow}
  - {name: resource not a call, principal: bob, resource: "docs/file:///srv/a.txt", action: call, expect: deny}
`)
	for name, r := range byName(t, f, e) {
		if !r.Pass {
			var out bytes.Buffer
			Print(&out, &File{Path: "cases.yaml", Cases: []Case{*r.Case}}, []Result{r}, true)
			t.Errorf("%s failed:\n%s", name, out.String())
		}
	}
	r := byName(t, f, e)["refund without args"]
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "gives no args") {
		t.Errorf("a case without the args a condition reads is not pointed out: %+v", r)
	}
}

func TestJWTRolesAndClaims(t *testing.T) {
	e, _ := env(t)
	f := parse(t, `cases:
  - name: token role
    principal: dora@example.com
    roles: [support_agent]
    tool: orders__refund_order
    args: {amount: 10}
    expect: allow
  - name: claims
    claims: {sub: dora@example.com, realm: {roles: [viewer]}, region: eu}
    tool: orders__list_orders
    args: {region: eu}
    expect: allow
  - name: claims as a string of roles
    claims: {sub: dora@example.com, realm: {roles: "viewer supervisor"}, scope: "orders:refund"}
    tool: orders__refund_order
    args: {amount: 1000}
    expect: allow
    rule: policy.csv:5
  - name: a token role naming a principal is ignored
    principal: dora@example.com
    roles: [alice]
    tool: orders__get_order
    expect: allow
`)
	got := byName(t, f, e)
	for _, name := range []string{"token role", "claims", "claims as a string of roles"} {
		if !got[name].Pass {
			t.Errorf("%s: %+v", name, got[name])
		}
	}
	if r := got["a token role naming a principal is ignored"]; r.Pass || r.Got != Deny || !strings.Contains(strings.Join(r.Notes, " "), "alice") {
		t.Errorf("a roles claim naming a principal: %+v", r)
	}
	// Without auth.jwt, claims are refused rather than read.
	e.JWT = nil
	if r := byName(t, f, e)["claims"]; r.Pass || !strings.Contains(r.Why, "auth.jwt") {
		t.Errorf("claims without auth.jwt: %+v", r)
	}
}

func TestUnknownPrincipalFails(t *testing.T) {
	e, _ := env(t)
	f := parse(t, `cases:
  - {name: misspelt, principal: alcie, tool: orders__get_order, expect: deny}
  - {name: configured without lines, principal: erin, tool: orders__get_order, expect: deny}
`)
	got := byName(t, f, e)
	if r := got["misspelt"]; r.Pass || r.Got != "" || !strings.Contains(r.Why, `unknown principal "alcie"`) {
		t.Errorf("an unknown principal passes or is silently denied: %+v", r)
	}
	if r := got["configured without lines"]; !r.Pass {
		t.Errorf("a configured principal without rights is denied, not unknown: %+v", r)
	}
}

func TestCatalog(t *testing.T) {
	e, _ := env(t)
	e.Catalog = &Catalog{
		Tools: map[string]Tool{
			"orders/get_order": {Name: "orders__get_order"},
			"orders/refund_order": {Name: "orders__refund_order", Check: func(args json.RawMessage) (json.RawMessage, error) {
				var v struct {
					Amount *float64 `json:"amount"`
				}
				if json.Unmarshal(args, &v) != nil || v.Amount == nil {
					return nil, errors.New("amount: expected a number")
				}
				return args, nil
			}},
		},
		Down:    map[string]string{"docs": "connection refused"},
		Blocked: map[string]string{"orders/update_order_status": "blocked by pinning: its definition changed"},
	}
	f := parse(t, `cases:
  - {name: not in the catalog, principal: carol, tool: orders__delete_order, expect: allow}
  - {name: schema refuses, principal: alice, tool: orders__refund_order, args: {amount: "30"}, expect: allow}
  - {name: schema refuses and deny expected, principal: alice, tool: orders__refund_order, args: {amount: "30"}, expect: deny}
  - {name: in the catalog, principal: alice, tool: orders__get_order, expect: allow}
  - {name: blocked by pinning, principal: alice, tool: orders__update_order_status, args: {status: shipped}, expect: allow}
`)
	got := byName(t, f, e)
	if r := got["not in the catalog"]; r.Pass || !strings.Contains(r.Why, "orders/delete_order is not in the catalog") || !strings.Contains(r.Why, "orders/get_order") {
		t.Errorf("a tool not in the catalog: %+v", r)
	}
	if r := got["schema refuses"]; r.Pass || r.Got != Deny || !strings.Contains(r.Why, "invalid_arguments") {
		t.Errorf("arguments the schema refuses: %+v", r)
	}
	if r := got["blocked by pinning"]; !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "blocked by pinning") {
		t.Errorf("a blocked tool is decided by the policy, with a note: %+v", r)
	}
	if !got["schema refuses and deny expected"].Pass || !got["in the catalog"].Pass {
		t.Errorf("%+v\n%+v", got["schema refuses and deny expected"], got["in the catalog"])
	}
	// Without the catalog, the same tool is not checked: the policy alone decides (carol may call orders/*).
	e.Catalog = nil
	if r := byName(t, f, e)["not in the catalog"]; !r.Pass {
		t.Errorf("offline: %+v", r)
	}
}

func TestStrictDecoding(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"cases:\n  - name: a\n    principal: alice\n    tool: orders__get_order\n    expect: allow\n    expected: deny\n", `cases.yaml:6: unknown field "expected"`},
		{"case:\n  - name: a\n", `cases.yaml:1: unknown field "case"`},
		{"cases:\n  - name: a\n    principal: alice\n    tool: x/y\n    expect: maybe\n", `cases.yaml:2: case 1 ("a"): expect "maybe"`},
		{"cases:\n  - name: a\n    principal: alice\n    expect: allow\n", "expected exactly one of tool, resource and prompt"},
		{"cases:\n  - {name: a, principal: alice, tool: x/y, expect: allow}\n  - {name: a, principal: bob, tool: x/y, expect: allow}\n", `cases.yaml:3: case name "a" is used twice (also at line 2)`},
		{"cases:\n  - name: a\n    name: b\n", "cases.yaml:3"},
		{"", "no cases"},
		{"cases:\n  - {name: a, principal: alice, tool: x/y, expect: allow, rule: 12}\n", `rule "12": expected file:line`},
	} {
		_, err := Parse("cases.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	decided := []string{"/etc/toolgate/policy.csv:12"}
	for want, ok := range map[string]bool{
		"":                            true,
		"policy.csv:12":               true,
		"toolgate/policy.csv:12":      true,
		"/etc/toolgate/policy.csv:12": true,
		"olicy.csv:12":                false,
		"policy.csv:1":                false,
		"none":                        false,
	} {
		if ruleMatches(want, decided) != ok {
			t.Errorf("ruleMatches(%q) = %v", want, !ok)
		}
	}
	if !ruleMatches("none", nil) {
		t.Error(`"none" does not match a default deny`)
	}
}

// TestScopeCases: a case with claims is a token caller, limited by s lines: one lacking the scope
// expects insufficient_scope (decided by the s line), one with it runs on to approvals; a case
// without claims (an API key, stdio) is not limited; a malformed scope claim fails the case, as the
// gateway refuses such a token.
func TestScopeCases(t *testing.T) {
	e, _ := env(t)
	f := parse(t, `cases:
  - {name: lacking the scope, claims: {sub: alice, scope: "openid"}, tool: orders__refund_order, args: {amount: 30}, expect: insufficient_scope, rule: policy.csv:13}
  - {name: with the scope, claims: {sub: alice, scp: ["orders:refund"]}, tool: orders__refund_order, args: {amount: 30}, expect: allow}
  - {name: with the scope and an approval, claims: {sub: alice, scope: "orders:refund"}, tool: orders__refund_order, args: {amount: 80}, expect: approval}
  - {name: denied before scopes matter, claims: {sub: alice}, tool: orders__refund_order, args: {amount: 500}, expect: deny}
  - {name: an API key has no scopes, principal: alice, tool: orders__refund_order, args: {amount: 30}, expect: allow}
  - {name: a malformed scp, claims: {sub: alice, scp: [1]}, tool: orders__refund_order, args: {amount: 30}, expect: allow}
`)
	got := byName(t, f, e)
	for name, r := range got {
		if name == "a malformed scp" {
			if r.Pass || !strings.Contains(r.Why, "the scp claim holds a value that is not a string; the gateway refuses such a token") {
				t.Errorf("%s: %+v", name, r)
			}
			continue
		}
		if !r.Pass {
			var out bytes.Buffer
			Print(&out, &File{Path: "cases.yaml", Cases: []Case{*r.Case}}, []Result{r}, true)
			t.Errorf("%s failed:\n%s", name, out.String())
		}
	}
	if r := got["lacking the scope"]; !strings.Contains(r.Why, "lacks the scope orders:refund") {
		t.Errorf("why: %q", r.Why)
	}
}
