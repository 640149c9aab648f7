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

// TestWithPrincipals: the same policy with other configured principals answers as a load of the
// same files with them would: a name only p lines mention is a principal while configured and a
// role otherwise, nothing remembered from before carries over, and a principal that a g line
// gives as a role is refused with the load's problem.
func TestWithPrincipals(t *testing.T) {
	policy := readRoot(t, rootPolicy) + "p, dave, orders/get_order, call, allow\n"
	o := Options{Servers: []string{"orders"}, Principals: []string{"alice"}}
	p := loadWith(t, "", policy, o)
	// Asked (and remembered) before: dave is a role, so denied.
	if d := p.Decide(req("dave", getOrder, `{}`)); d.Allowed || !errors.Is(d.Internal, ErrPrincipalIsRole) {
		t.Fatalf("dave before: %+v", d)
	}
	if p.Visible(Subject{Principal: "dave"}, getOrder) {
		t.Fatal("dave sees get_order before")
	}

	q, err := p.WithPrincipals([]string{"alice", "dave"})
	if err != nil {
		t.Fatal(err)
	}
	if q.IsRole("dave") || !p.IsRole("dave") {
		t.Errorf("IsRole(dave): new %v, old %v", q.IsRole("dave"), p.IsRole("dave"))
	}
	if d := q.Decide(req("dave", getOrder, `{}`)); !d.Allowed {
		t.Errorf("dave after: %+v", d)
	}
	if !q.Visible(Subject{Principal: "dave"}, getOrder) || q.Visible(Subject{Principal: "dave"}, updateOrder) {
		t.Error("dave's tools after")
	}
	if q.Version() != p.Version() || q.Rules() != p.Rules() || !reflect.DeepEqual(q.Principals(), []string{"alice", "dave"}) {
		t.Errorf("version %s/%s rules %d/%d principals %v", q.Version(), p.Version(), q.Rules(), p.Rules(), q.Principals())
	}
	// As a load of the same files with those principals.
	loaded := loadWith(t, "", policy, Options{Servers: []string{"orders"}, Principals: []string{"alice", "dave"}})
	if !reflect.DeepEqual(q.roleNames, loaded.roleNames) {
		t.Errorf("roles %v, a load gives %v", q.roleNames, loaded.roleNames)
	}
	// And back: without dave configured, dave is a role again.
	r, err := q.WithPrincipals([]string{"alice"})
	if err != nil || !r.IsRole("dave") || r.Decide(req("dave", getOrder, `{}`)).Allowed {
		t.Errorf("dave removed: %v, IsRole %v", err, r != nil && r.IsRole("dave"))
	}

	// A principal named like a role: refused, as a load refuses it.
	_, err = p.WithPrincipals([]string{"alice", "supervisor"})
	var le *LoadErrors
	if !errors.As(err, &le) || len(le.Problems) != 1 || le.Problems[0].Line == 0 ||
		!strings.Contains(le.Problems[0].Reason, `"supervisor" is a configured principal`) {
		t.Errorf("supervisor as a principal: %v", err)
	}
}

// TestWithPrincipalsCopiesEveryField: WithPrincipals builds its Policy field by field; a field
// added to Policy must be copied there (or listed here as derived from the principals).
func TestWithPrincipalsCopiesEveryField(t *testing.T) {
	policy := readRoot(t, rootPolicy) + "p, viewer, orders/refund_order, call, deny\n" + // a deny line,
		"a, support_agent, orders/cancel_order, call\n" + // an approval line,
		"s, orders/cancel_order, call, orders:write\n" + // a scope line,
		"g, erin, suport_agent\n" // and a warning (a role that grants nothing)
	p := loadWith(t, "", policy, Options{Servers: []string{"orders"}})
	q, err := p.WithPrincipals([]string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	derived := map[string]bool{"roleNames": true, "principals": true, "memo": true}
	pv, qv := reflect.ValueOf(p).Elem(), reflect.ValueOf(q).Elem()
	for i := 0; i < pv.NumField(); i++ {
		name := pv.Type().Field(i).Name
		if derived[name] {
			continue
		}
		if pv.Field(i).IsZero() {
			t.Errorf("field %s is zero in the root policy, so this test cannot tell it was copied", name)
			continue
		}
		same := false
		switch pv.Field(i).Kind() {
		case reflect.Map, reflect.Pointer, reflect.Slice:
			same = pv.Field(i).Pointer() == qv.Field(i).Pointer()
		default:
			same = pv.Field(i).Equal(qv.Field(i))
		}
		if !same {
			t.Errorf("WithPrincipals does not copy field %s", name)
		}
	}
}
