package authz

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestIsRole pins the definition: principals are g left sides never on a right side (and
// Options.Principals); roles are every other name the policy mentions (g right sides, p
// subjects).
func TestIsRole(t *testing.T) {
	policy := `p, support_agent, orders/get_order, call, allow
p, supervisor, orders/*, call, allow
p, auditor, orders/get_order, call, allow
p, erin, orders/get_order, call, allow
p, alice, orders/send_customer_reply, call, allow
g, alice, support_agent
g, carol, supervisor
g, supervisor, support_agent
g, bob, viewer
`
	p := loadWith(t, "", policy, Options{})
	for name, want := range map[string]bool{
		"support_agent": true,  // g right side
		"supervisor":    true,  // both sides: a role inheriting a role
		"viewer":        true,  // g right side, no p line
		"auditor":       true,  // p subject only: a role credentials grant
		"erin":          true,  // p subject only, not a configured principal
		"alice":         false, // g left side (her own p line does not make her a role)
		"carol":         false,
		"bob":           false,
		"mallory":       false, // unknown
		"":              false,
	} {
		if got := p.IsRole(name); got != want {
			t.Errorf("IsRole(%q) = %v, want %v", name, got, want)
		}
	}
	// A configured principal is a principal even with p lines only.
	p = loadWith(t, "", policy, Options{Principals: []string{"erin", "mallory"}})
	if p.IsRole("erin") || !p.IsRole("auditor") {
		t.Errorf("with Principals: erin %v auditor %v", p.IsRole("erin"), p.IsRole("auditor"))
	}
	if d := p.Decide(req("erin", getOrder, `{}`)); !d.Allowed {
		t.Errorf("erin as a configured principal: %+v", d)
	}
	var nilPolicy *Policy
	if nilPolicy.IsRole("supervisor") {
		t.Error("nil policy has roles")
	}
}

// TestConfiguredPrincipalGivenAsRole: a configured principal that a g line gives as a role is a
// load error (check and serve refuse it alike).
func TestConfiguredPrincipalGivenAsRole(t *testing.T) {
	f, le := loadErr(t, "", readRoot(t, rootPolicy), Options{Servers: []string{"orders"}, Principals: []string{"local", "supervisor"}})
	if len(le.Problems) != 1 || !strings.HasPrefix(le.Problems[0].Error(), f.policy+":") ||
		!strings.Contains(le.Problems[0].Reason, `"supervisor" is a configured principal`) {
		t.Fatalf("problems: %v", le)
	}
	// The configured principals of the demo are fine.
	loadWith(t, "", readRoot(t, rootPolicy), Options{Servers: []string{"orders"}, Principals: []string{"local", "alice", "bob"}})
}

// TestPrincipalNamedLikeRoleDenied: Casbin's g(x, x) is true, so a JWT with sub "supervisor" would
// hold the supervisor lines. Decide, Visible and Trace deny it, with ErrPrincipalIsRole.
func TestPrincipalNamedLikeRoleDenied(t *testing.T) {
	p := loadWith(t, "", readRoot(t, rootPolicy), Options{Servers: []string{"orders"}})
	for _, principal := range []string{"supervisor", "support_agent", "viewer"} {
		for _, roles := range [][]string{nil, {"supervisor"}} {
			r := req(principal, refundOrder, `{"order_id": 1, "amount": 5000, "reason": "x"}`, roles...)
			d := p.Decide(r)
			if d.Allowed || !errors.Is(d.Internal, ErrPrincipalIsRole) || !strings.Contains(d.Internal.Error(), principal) {
				t.Errorf("Decide(%s): %+v", principal, d)
			}
			for _, obj := range demoTools {
				if p.Visible(Subject{Principal: principal, Roles: roles}, obj) {
					t.Errorf("%s sees %s", principal, obj)
				}
			}
			if tr, err := p.Trace(r); !errors.Is(err, ErrPrincipalIsRole) || len(tr.Roles) != 0 || len(tr.Lines) != 0 {
				t.Errorf("Trace(%s): %+v, %v", principal, tr, err)
			}
		}
	}
	if ok, internal := decide(p, "supervisor", getOrder, ActCall); ok || !errors.Is(internal, ErrPrincipalIsRole) {
		t.Errorf("decide: %v %v", ok, internal)
	}
	if got, err := visibleErr(p, "supervisor", demoTools); len(got) != 0 || !errors.Is(err, ErrPrincipalIsRole) {
		t.Errorf("visibleErr: %v %v", got, err)
	}
	// The principals themselves are unaffected.
	if d := p.Decide(req("carol", refundOrder, `{"amount": 5000}`)); !d.Allowed {
		t.Errorf("carol: %+v", d)
	}
}

// TestCredentialRolesOnlyRoles: a roles claim naming a principal (carol, local) or an unknown name
// is dropped, so it gives neither that principal's roles nor its own p lines. Decide, Visible and
// Trace agree, and Trace lists what was dropped.
func TestCredentialRolesOnlyRoles(t *testing.T) {
	p := loadWith(t, "", readRoot(t, rootPolicy)+"p, erin, orders/get_order, call, allow\n", Options{Servers: []string{"orders"}, Principals: []string{"erin"}})
	refund := `{"order_id": 1, "amount": 5000, "reason": "x"}`
	for _, roles := range [][]string{{"carol"}, {"local"}, {"alice", "bob"}, {"erin"}, {"nobody"}, {""}} {
		r := req("mallory", refundOrder, refund, roles...)
		if d := p.Decide(r); d.Allowed || d.Internal != nil {
			t.Errorf("mallory with roles %v: %+v", roles, d)
		}
		for _, obj := range demoTools {
			if p.Visible(r.Subject, obj) {
				t.Errorf("mallory with roles %v sees %s", roles, obj)
			}
		}
		tr, err := p.Trace(r)
		if allowed, _ := traceAllows(tr); allowed || err != nil || len(tr.Roles) != 0 || !reflect.DeepEqual(tr.DroppedRoles, roles) {
			t.Errorf("Trace with roles %v: roles %v dropped %v (%v)", roles, tr.Roles, tr.DroppedRoles, err)
		}
	}
	// A real role still works, beside a dropped one; Trace lists what was used.
	r := req("mallory", refundOrder, refund, "supervisor", "carol", "supervisor")
	if d := p.Decide(r); !d.Allowed {
		t.Errorf("mallory as supervisor: %+v", d)
	}
	tr, _ := p.Trace(r)
	if allowed, _ := traceAllows(tr); !allowed || !reflect.DeepEqual(tr.Roles, []string{"supervisor"}) || !reflect.DeepEqual(tr.DroppedRoles, []string{"carol"}) {
		t.Errorf("Trace: roles %v dropped %v", tr.Roles, tr.DroppedRoles)
	}
	// Roles through g lines are listed with the credential's.
	tr, _ = p.Trace(req("alice", getOrder, `{}`, "viewer"))
	if !reflect.DeepEqual(tr.Roles, []string{"support_agent", "viewer"}) || len(tr.DroppedRoles) != 0 {
		t.Errorf("alice + viewer: roles %v dropped %v", tr.Roles, tr.DroppedRoles)
	}
}

// TestPrincipalRolesInConditions: principal.roles holds the roles used for the decision, never a
// dropped credential role.
func TestPrincipalRolesInConditions(t *testing.T) {
	p := loadWith(t, "", `p, anyone, s/t, call, allow, "'carol' in principal.roles || 'nobody' in principal.roles"
p, anyone, s/u, call, allow, "'viewer' in principal.roles"
p, viewer, s/none, call, allow
g, carol, x
g, mallory, anyone
`, Options{})
	if d := p.Decide(req("mallory", "s/t", `{}`, "carol", "nobody")); d.Allowed {
		t.Errorf("dropped roles reached principal.roles: %+v", d)
	}
	if d := p.Decide(req("mallory", "s/u", `{}`, "viewer")); !d.Allowed {
		t.Errorf("accepted role missing from principal.roles: %+v", d)
	}
}
