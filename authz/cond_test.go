package authz

import (
	"strings"
	"testing"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"github.com/expr-lang/expr"
)

// TestConditionBoundaries: allow and deny conditions at their boundaries, and the precision rule
// (integers that fit int64 exact, every other number float64).
func TestConditionBoundaries(t *testing.T) {
	p := loadWith(t, "", `p, agent, s/refund, call, allow, amount <= 100
p, agent, u/*, call, allow
p, agent, u/update, call, deny, amount > 100
p, agent, s/big, call, allow, order_id == 9007199254740993
p, agent, s/neg, call, allow, args.amount >= -5 && args.amount < 0
g, alice, agent
`, Options{})
	tests := []struct {
		obj, args string
		want      bool
	}{
		// allow amount <= 100
		{"s/refund", `{"amount": 100}`, true},
		{"s/refund", `{"amount": 100.0}`, true},
		{"s/refund", `{"amount": 1e2}`, true},
		{"s/refund", `{"amount": 99.99}`, true},
		{"s/refund", `{"amount": 100.01}`, false},
		{"s/refund", `{"amount": 101}`, false},
		{"s/refund", `{"amount": 100.000000000000001}`, true}, // float64 cannot tell it from 100: documented
		{"s/refund", `{"amount": 1e400}`, false},              // outside float64: an error, fails closed
		// deny amount > 100 (and s/* allows)
		{"u/update", `{"amount": 100}`, true},
		{"u/update", `{"amount": 100.01}`, false},
		{"u/update", `{"amount": 1000000}`, false},
		{"u/other", `{"amount": 1000000}`, true},
		// int64 exactness above 2^53
		{"s/big", `{"order_id": 9007199254740993}`, true},
		{"s/big", `{"order_id": 9007199254740992}`, false},
		// Written with a fraction it is a float64 (2^53+1 rounds to 2^53), and expr compares an int
		// with a float as two floats: the literal rounds the same way, so they are equal. Pinned.
		{"s/big", `{"order_id": 9007199254740993.0}`, true},
		{"s/big", `{"order_id": 9007199254740992.0}`, true},
		// args.<name> and negative numbers
		{"s/neg", `{"amount": -5}`, true},
		{"s/neg", `{"amount": -0.5}`, true},
		{"s/neg", `{"amount": 0}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.obj+tc.args, func(t *testing.T) {
			if d := p.Decide(req("alice", tc.obj, tc.args)); d.Allowed != tc.want || d.Internal != nil {
				t.Fatalf("Decide = %v (%v, cond error %v), want %v", d.Allowed, d.Internal, d.CondErr, tc.want)
			}
		})
	}
}

// TestConditionFailsClosed: a condition that cannot be evaluated (missing field, wrong type, null,
// arguments that are not an object) makes an allow line not apply and a deny line apply.
func TestConditionFailsClosed(t *testing.T) {
	p := loadWith(t, "", `p, agent, s/refund, call, allow, amount <= 100
p, agent, s/update, call, allow
p, agent, s/update, call, deny, amount > 100
p, agent, s/region, call, allow, region == principal.region
p, agent, s/who, call, allow, principal.name == 'alice'
g, alice, agent
`, Options{})
	tests := []struct {
		name, obj, args string
		attrs           map[string]string
		want            bool
		condErr         string
	}{
		{"allow: missing field", "s/refund", `{}`, nil, false, `missing field "amount"`},
		{"allow: no arguments", "s/refund", ``, nil, false, `missing field "amount"`},
		{"allow: wrong type", "s/refund", `{"amount": "50"}`, nil, false, "cannot use <= on a string and a number"},
		{"allow: null", "s/refund", `{"amount": null}`, nil, false, "cannot use <= on null"},
		{"allow: not an object", "s/refund", `[50]`, nil, false, "not an object"},
		{"allow: not JSON", "s/refund", `{"amount": 5`, nil, false, "not valid JSON"},
		{"allow: trailing data", "s/refund", `{"amount": 5} {}`, nil, false, "data after"},
		{"allow: holds", "s/refund", `{"amount": 50}`, nil, true, ""},
		{"deny: missing field", "s/update", `{}`, nil, false, `missing field "amount"`},
		{"deny: wrong type", "s/update", `{"amount": "lots"}`, nil, false, "cannot use > on a string and a number"},
		{"deny: not an object", "s/update", `"x"`, nil, false, "not an object"},
		{"deny: does not hold", "s/update", `{"amount": 50}`, nil, true, ""},
		// nil == nil is true in expr: without strict field reads this would allow.
		{"missing on both sides", "s/region", `{}`, nil, false, "missing field"},
		{"missing attribute", "s/region", `{"region": "eu"}`, nil, false, `missing field "region"`},
		{"null argument vs attribute", "s/region", `{"region": null}`, map[string]string{"region": "eu"}, false, "cannot use == on null"},
		{"same region", "s/region", `{"region": "eu"}`, map[string]string{"region": "eu"}, true, ""},
		{"other region", "s/region", `{"region": "us"}`, map[string]string{"region": "eu"}, false, ""},
		// A condition on the principal only does not care about broken arguments.
		{"principal only, broken args", "s/who", `not json`, nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := req("alice", tc.obj, tc.args)
			r.Subject.Attrs = tc.attrs
			d := p.Decide(r)
			if d.Allowed != tc.want || d.Internal != nil {
				t.Fatalf("Decide = %v (%v), want %v", d.Allowed, d.Internal, tc.want)
			}
			if tc.condErr == "" && d.CondErr != nil || tc.condErr != "" && (d.CondErr == nil || !strings.Contains(d.CondErr.Error(), tc.condErr)) {
				t.Fatalf("CondErr = %v, want %q", d.CondErr, tc.condErr)
			}
		})
	}

	// Pin why field reads are strict: plain expr reads a missing key as nil, and nil == nil.
	out, err := expr.Eval("region == principal.region", map[string]any{"principal": map[string]any{}})
	if err != nil || out != true {
		t.Errorf("pin changed: plain expr gives %v, %v for a missing field on both sides; the strict reads are now belt and braces", out, err)
	}
}

// TestConditionPrincipal: principal.name, principal.roles (g lines and credential roles) and
// principal.<attribute>.
func TestConditionPrincipal(t *testing.T) {
	p := loadWith(t, "", `p, agent, s/a, call, allow, principal.name == 'alice'
p, agent, s/b, call, allow, 'lead' in principal.roles
p, agent, s/c, call, allow, "principal.tier in ['gold', 'platinum']"
p, agent, s/d, call, allow, len(principal.roles) == 2
p, lead, s/unused, call, allow
g, alice, agent
g, bob, agent
`, Options{})
	tests := []struct {
		name string
		r    Request
		want bool
	}{
		{"name", req("alice", "s/a", `{}`), true},
		{"other name", req("bob", "s/a", `{}`), false},
		{"credential role in roles", req("bob", "s/b", `{}`, "lead"), true},
		{"role not held", req("bob", "s/b", `{}`), false},
		{"attribute", Request{Subject: Subject{Principal: "bob", Attrs: map[string]string{"tier": "gold"}}, Object: "s/c", Action: ActCall}, true},
		{"attribute other value", Request{Subject: Subject{Principal: "bob", Attrs: map[string]string{"tier": "tin"}}, Object: "s/c", Action: ActCall}, false},
		{"attribute missing", req("bob", "s/c", `{}`), false},
		{"name and roles are reserved", Request{Subject: Subject{Principal: "bob", Roles: []string{"lead"}, Attrs: map[string]string{"name": "alice", "roles": "x"}}, Object: "s/d", Action: ActCall}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := p.Decide(tc.r); d.Allowed != tc.want || d.Internal != nil {
				t.Fatalf("Decide = %v (%v, %v), want %v", d.Allowed, d.Internal, d.CondErr, tc.want)
			}
		})
	}
	// name and roles win over attributes of the same name.
	if d := p.Decide(Request{Subject: Subject{Principal: "bob", Attrs: map[string]string{"name": "alice"}}, Object: "s/a", Action: ActCall}); d.Allowed {
		t.Error("an attribute named name overrode the principal's name")
	}
}

// TestConditionQuoting pins what Casbin's CSV line loader does with quotes (toolgate parses lines
// with the same settings): a condition with a comma must be wrapped in double quotes; inside
// them a double quote is written twice; single-quoted strings need no CSV quoting at all.
func TestConditionQuoting(t *testing.T) {
	m, err := model.NewModelFromString(readRoot(t, rootModel))
	if err != nil {
		t.Fatal(err)
	}
	pins := []struct {
		line, cond, err string
	}{
		{`p, a, s/t, call, allow, "status in ['shipped', 'delivered']"`, `status in ['shipped', 'delivered']`, ""},
		{`p, a, s/t, call, allow, status == 'shipped'`, `status == 'shipped'`, ""},
		{`p, a, s/t, call, allow, "status == ""shipped"""`, `status == "shipped"`, ""},
		{`p, a, s/t, call, allow,"amount <= 100"`, `amount <= 100`, ""},
		{`p, a, s/t, call, allow, x # not a comment`, `x # not a comment`, ""},
		{`p, a, s/t, call, allow, status in ['shipped', 'delivered']`, "", "invalid policy rule size"},
		{`p, a, s/t, call, allow, status == "shipped"`, "", `bare "`},
		{`p, a, s/t, call, allow, "x" + "y"`, "", `extraneous or missing "`},
	}
	for _, pin := range pins {
		m["p"]["p"].Policy, m["p"]["p"].PolicyMap = nil, map[string]int{}
		err := persist.LoadPolicyLine(pin.line, m)
		if pin.err != "" {
			if err == nil || !strings.Contains(err.Error(), pin.err) {
				t.Errorf("casbin on %s: %v, want an error with %q", pin.line, err, pin.err)
			}
			continue
		}
		if err != nil || len(m["p"]["p"].Policy) != 1 || m["p"]["p"].Policy[0][4] != pin.cond {
			t.Errorf("casbin on %s: %v %q, want condition %q", pin.line, err, m["p"]["p"].Policy, pin.cond)
		}
	}

	// The same lines through toolgate.
	p := loadWith(t, "", `p, a, s/in, call, allow, "status in ['shipped', 'delivered']"
p, a, s/eq, call, allow, "status == ""shipped"""
p, a, s/sq, call, allow, status == 'shipped'
`, Options{Principals: []string{"a"}})
	for _, obj := range []string{"s/in", "s/eq", "s/sq"} {
		if d := p.Decide(req("a", obj, `{"status": "shipped"}`)); !d.Allowed {
			t.Errorf("%s: %+v", obj, d)
		}
		if d := p.Decide(req("a", obj, `{"status": "lost"}`)); d.Allowed {
			t.Errorf("%s allowed lost", obj)
		}
	}

	// And the lint says how to fix the failing forms.
	f, le := loadErr(t, "", `p, a, s/t, call, allow, status in ['shipped', 'delivered']
p, a, s/t, call, allow, status == "shipped"
`, Options{})
	wants := []string{
		f.policy + `:1: "p" line has 6 fields after the line type, the model defines 4 or 5 (p = sub, obj, act, eft, cond); if the condition contains commas, wrap it in double quotes: write "status in ['shipped', 'delivered']" instead`,
		f.policy + `:2: not a valid CSV line: bare " in non-quoted-field; write strings in a condition with single quotes (status == 'shipped')`,
	}
	if len(le.Problems) != 2 {
		t.Fatalf("problems:\n%v", le)
	}
	for i, w := range wants {
		if !strings.HasPrefix(le.Problems[i].Error(), w) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, le.Problems[i], w)
		}
	}
}

// TestConditionLint: a condition that does not compile, or uses what conditions forbid, is a
// load error naming file:line.
func TestConditionLint(t *testing.T) {
	bad := []struct{ cond, want string }{
		{"amount <=", "does not compile"},
		{"amount + 1", "not true or false"},
		{"-amount", "not true or false"},
		{"approved", "write approved == true"},
		{"args.flags.urgent", "only reads a value"},
		{"'text'", "expected bool"},
		{"repeat('a', 1000000000) == ''", "repeat() is not available"},
		{"now() > 0", "now() is not available"},
		{"get(args, 'amount') == nil", "get() is not available"},
		{"exec('rm -rf /')", "exec() is not available"},
		{"args.amount?.x == 1", "?. is not supported"},
		{"(amount ?? 0) <= 100", "?? is not supported"},
		{"let x = amount; x <= 100", "let is not supported"},
		{"amount <= 100 # small refunds", "comments must be on a line of their own"},
		{"$env.amount <= 100", `contains "$"`},
		{strings.Repeat("a && ", 300) + "a", "limit is 1024"},
		{strings.Repeat("(", 100) + "a" + strings.Repeat(")", 100), ""},
	}
	for i, b := range bad {
		t.Run(b.cond[:min(len(b.cond), 30)], func(t *testing.T) {
			policy := "# line 1\np, a, s/t, call, allow\np, a, s/t, call, allow, \"" + strings.ReplaceAll(b.cond, `"`, `""`) + "\"\n"
			f := newFiles(t, readRoot(t, rootModel), policy)
			p, err := LoadPolicy(f.model, f.policy, Options{})
			if b.want == "" {
				if err != nil {
					t.Logf("deep nesting refused: %v", err)
				} else {
					_ = p.Decide(req("a", "s/t", `{"a": true}`))
				}
				return
			}
			if err == nil {
				t.Fatalf("case %d loaded", i)
			}
			if !strings.HasPrefix(err.Error(), f.policy+":3: ") || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("error %q, want %s:3: ...%s", err, f.policy, b.want)
			}
		})
	}
}

// TestConditionBounded: evaluation stays bounded whatever the arguments: expr's memory budget stops
// a huge range, and such an error fails closed.
func TestConditionBounded(t *testing.T) {
	p := loadWith(t, "", `p, a, s/t, call, allow, len(1..n) > 0
p, a, s/u, call, allow, "all(items, # > 0)"
`, Options{Principals: []string{"a"}})
	if d := p.Decide(req("a", "s/t", `{"n": 100000000}`)); d.Allowed || d.CondErr == nil || !strings.Contains(d.CondErr.Error(), "memory budget") {
		t.Fatalf("huge range: %+v", d)
	}
	if d := p.Decide(req("a", "s/t", `{"n": 10}`)); !d.Allowed {
		t.Fatalf("small range: %+v", d)
	}
	if d := p.Decide(req("a", "s/u", `{"items": [1, 2, 3]}`)); !d.Allowed {
		t.Fatalf("predicate: %+v", d)
	}
	if d := p.Decide(req("a", "s/u", `{"items": [1, -2, 3]}`)); d.Allowed {
		t.Fatalf("predicate: %+v", d)
	}
}

// TestConditionsCompiledOnce: Decide, Visible and Trace never compile a condition.
func TestConditionsCompiledOnce(t *testing.T) {
	before := condCompiles.Load()
	p := loadWith(t, "", "p, a, s/t, call, allow, amount <= 100\np, a, s/u, call, deny, amount > 5\n", Options{Principals: []string{"a"}})
	loaded := condCompiles.Load()
	if loaded-before != 2 {
		t.Fatalf("load compiled %d conditions, want 2", loaded-before)
	}
	for i := 0; i < 100; i++ {
		p.Decide(req("a", "s/t", `{"amount": 5}`))
		p.Visible(Subject{Principal: "a"}, "s/u")
	}
	_, _ = p.Trace(req("a", "s/t", `{"amount": 5}`))
	if n := condCompiles.Load(); n != loaded {
		t.Fatalf("deciding compiled %d conditions", n-loaded)
	}
}

// TestVisibleWithConditions: a conditional allow shows a tool, a conditional deny does not hide it,
// an unconditional deny does, and a condition on the principal alone is evaluated.
func TestVisibleWithConditions(t *testing.T) {
	p := loadWith(t, "", `p, a, s/cond_allow, call, allow, amount <= 100
p, a, s/cond_deny, call, allow
p, a, s/cond_deny, call, deny, amount > 100
p, a, s/hard_deny, call, allow
p, a, s/hard_deny, call, deny
p, a, s/tier, call, allow, principal.tier == 'gold'
p, a, s/tier_deny, call, allow
p, a, s/tier_deny, call, deny, principal.tier != 'gold'
`, Options{Principals: []string{"a"}})
	gold := Subject{Principal: "a", Attrs: map[string]string{"tier": "gold"}}
	plain := Subject{Principal: "a"}
	tests := []struct {
		s    Subject
		obj  string
		want bool
	}{
		{plain, "s/cond_allow", true},
		{plain, "s/cond_deny", true},
		{plain, "s/hard_deny", false},
		{plain, "s/none", false},
		{gold, "s/tier", true},
		{plain, "s/tier", false}, // missing attribute: the allow fails closed
		{gold, "s/tier_deny", true},
		{plain, "s/tier_deny", false}, // missing attribute: the deny fails closed, i.e. applies
		{Subject{Principal: "b"}, "s/cond_allow", false},
	}
	for _, tc := range tests {
		if got := p.Visible(tc.s, tc.obj); got != tc.want {
			t.Errorf("Visible(%v, %s) = %v, want %v", tc.s, tc.obj, got, tc.want)
		}
	}
}

func TestDecodeArgsNumbers(t *testing.T) {
	args, err := decodeArgs([]byte(`{"i": 42, "big": 9223372036854775807, "over": 9223372036854775808, "f": 1.5, "e": 2e3, "nested": {"n": [1, 2.5]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"i": int64(42), "big": int64(9223372036854775807), "over": 9223372036854775808.0, "f": 1.5, "e": 2000.0}
	for k, v := range want {
		if args[k] != v {
			t.Errorf("%s = %#v, want %#v", k, args[k], v)
		}
	}
	n := args["nested"].(map[string]any)["n"].([]any)
	if n[0] != int64(1) || n[1] != 2.5 {
		t.Errorf("nested = %#v", n)
	}
}

// TestConditionFieldForms: the forms the package doc promises.
func TestConditionFieldForms(t *testing.T) {
	p := loadWith(t, "", `p, a, s/nested, call, allow, amount.currency == 'EUR' && amount.value <= 100
p, a, s/list, call, allow, items[0] == 'first' && items[-1] == 'last'
p, a, s/args, call, allow, args.args == 1 && args.principal == 2
p, a, s/doc, call, allow, "region in ['eu', 'uk'] && region == principal.region"
p, a, s/deny, call, allow
p, a, s/deny, call, deny, status == 'cancelled'
`, Options{Principals: []string{"a"}})
	tests := []struct {
		obj, args string
		want      bool
	}{
		{"s/nested", `{"amount": {"currency": "EUR", "value": 80}}`, true},
		{"s/nested", `{"amount": {"currency": "USD", "value": 80}}`, false},
		{"s/nested", `{"amount": {"value": 80}}`, false},
		{"s/nested", `{"amount": 80}`, false},
		{"s/list", `{"items": ["first", "x", "last"]}`, true},
		{"s/list", `{"items": []}`, false},
		{"s/args", `{"args": 1, "principal": 2}`, true},
		{"s/doc", `{"region": "eu"}`, true},
		{"s/doc", `{"region": "us"}`, false},
		{"s/deny", `{"status": "shipped"}`, true},
		{"s/deny", `{"status": "cancelled"}`, false},
	}
	for _, tc := range tests {
		r := req("a", tc.obj, tc.args)
		r.Subject.Attrs = map[string]string{"region": "eu"}
		if d := p.Decide(r); d.Allowed != tc.want || d.Internal != nil {
			t.Errorf("%s %s: %v (%v, %v), want %v", tc.obj, tc.args, d.Allowed, d.Internal, d.CondErr, tc.want)
		}
	}
}

// TestVisibleReadsPrincipal: a condition that also reads arguments is decided for visibility by
// what it reads of the principal. region == principal.region used to list the tool for a
// principal without a region attribute, though every call is denied.
func TestVisibleReadsPrincipal(t *testing.T) {
	p := loadWith(t, "", `p, viewer, orders/get_order, call, allow, region == principal.region
p, viewer, orders/update_order_status, call, allow, amount < 10 || region == principal.region
p, viewer, orders/refund_order, call, allow, "principal.tier == 'gold' && amount < 5"
p, viewer, orders/send_customer_reply, call, allow, "principal.tier == 'gold' ? amount < 5 : region == principal.region"
p, viewer, orders/list_orders, call, allow
p, viewer, orders/list_orders, call, deny, "region != principal.region || !(principal.tier in ['gold'])"
p, viewer, orders/cancel, call, allow, "any(items, # == principal.region) && region == 'x'"
p, viewer, orders/x, call, allow, "amount > 10 && principal.tier == 'gold'"
p, viewer, orders/y, call, allow, "lower(principal.tier) == 'gold' && region == principal.region"
g, bob, viewer
`, Options{})
	none := Subject{Principal: "bob"}
	eu := Subject{Principal: "bob", Attrs: map[string]string{"region": "eu"}}
	gold := Subject{Principal: "bob", Attrs: map[string]string{"tier": "gold"}}
	both := Subject{Principal: "bob", Attrs: map[string]string{"tier": "gold", "region": "eu"}}
	silverEU := Subject{Principal: "bob", Attrs: map[string]string{"tier": "silver", "region": "eu"}}
	tests := []struct {
		s    Subject
		obj  string
		want bool
	}{
		{none, "orders/get_order", false}, // every call fails on principal.region
		{eu, "orders/get_order", true},
		{none, "orders/update_order_status", true}, // amount < 10 may hold before the read
		{gold, "orders/refund_order", true},
		{silverEU, "orders/refund_order", false}, // the principal part is false
		{none, "orders/refund_order", false},     // the principal part fails
		{gold, "orders/send_customer_reply", true},
		{silverEU, "orders/send_customer_reply", true},
		{Subject{Principal: "bob", Attrs: map[string]string{"tier": "silver"}}, "orders/send_customer_reply", false},
		{none, "orders/send_customer_reply", false},
		// deny whose condition cannot be false without region, or without tier gold: hidden.
		{none, "orders/list_orders", false},
		{silverEU, "orders/list_orders", false},
		{both, "orders/list_orders", true},
		// a read inside a closure may never happen (no items): visible.
		{none, "orders/cancel", true},
		{none, "orders/x", false},
		{gold, "orders/x", true},
		{Subject{Principal: "bob", Attrs: map[string]string{"tier": "GOLD", "region": "eu"}}, "orders/y", true},
		{Subject{Principal: "bob", Attrs: map[string]string{"tier": "GOLD"}}, "orders/y", false},
	}
	for _, tc := range tests {
		if got := p.Visible(tc.s, tc.obj); got != tc.want {
			t.Errorf("Visible(%v, %s) = %v, want %v", tc.s.Attrs, tc.obj, got, tc.want)
		}
		// Soundness: a tool that is hidden is never allowed, whatever the arguments.
		if !tc.want {
			for _, args := range []string{`{}`, `{"region": "eu", "amount": 1, "items": ["eu"]}`, `{"region": "x", "amount": 100, "items": []}`, `{"region": "us", "amount": 0}`} {
				r := Request{Subject: tc.s, Object: tc.obj, Action: ActCall, Args: []byte(args)}
				if d := p.Decide(r); d.Allowed {
					t.Errorf("%s hidden from %v but allowed with %s", tc.obj, tc.s.Attrs, args)
				}
			}
		}
	}
}
