package authz

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const scopePolicy = `p, support_agent, orders/*, call, allow
p, support_agent, orders/order, read, allow
s, orders/refund_order, call, orders:write
s, orders/refund_order, call, orders:refund
s, orders/*, call, orders:read
s, orders/order, read, orders:read
g, alice, support_agent
`

func scoped(principal string, scopes ...string) Subject {
	return Subject{Principal: principal, Scoped: true, Scopes: scopes}
}

// TestCheckScopes: a request needs every scope the s lines matching its object and action name;
// a token lacking some gets them as Missing, with the lines; a credential without scopes (an API
// key, stdio) is not limited by s lines at all.
func TestCheckScopes(t *testing.T) {
	p := loadWith(t, "", scopePolicy, Options{Servers: []string{"orders"}})
	line := func(n int) string { return fmt.Sprintf("%s:%d", p.policyPath, n) }
	cases := []struct {
		name      string
		sub       Subject
		obj, act  string
		missing   []string
		rules     []string
		needed    []string
		noMissing bool
	}{
		{name: "a token with every scope", sub: scoped("alice", "orders:read", "orders:refund", "orders:write"),
			obj: "orders/refund_order", act: ActCall, needed: []string{"orders:read", "orders:refund", "orders:write"}, noMissing: true},
		{name: "a token lacking two", sub: scoped("alice", "orders:read"),
			obj: "orders/refund_order", act: ActCall, needed: []string{"orders:read", "orders:refund", "orders:write"},
			missing: []string{"orders:refund", "orders:write"}, rules: []string{line(3), line(4)}},
		{name: "a token with no scope at all", sub: scoped("alice"),
			obj: "orders/get_order", act: ActCall, needed: []string{"orders:read"}, missing: []string{"orders:read"}, rules: []string{line(5)}},
		{name: "an API key or stdio: no scopes, not limited", sub: Subject{Principal: "alice"},
			obj: "orders/refund_order", act: ActCall, needed: []string{"orders:read", "orders:refund", "orders:write"}, noMissing: true},
		{name: "the action must match", sub: scoped("alice"),
			obj: "orders/order", act: ActGet, noMissing: true},
		{name: "a resource read", sub: scoped("alice", "orders:write"),
			obj: "orders/order", act: ActRead, needed: []string{"orders:read"}, missing: []string{"orders:read"}, rules: []string{line(6)}},
		{name: "another server's tool", sub: scoped("alice"), obj: "billing/charge", act: ActCall, noMissing: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 2 { // the second answer comes from the memo
				got := p.CheckScopes(Request{Subject: c.sub, Object: c.obj, Action: c.act})
				if !slices.Equal(got.Needed, c.needed) {
					t.Errorf("needed %v, want %v", got.Needed, c.needed)
				}
				if c.noMissing {
					if len(got.Missing) != 0 || len(got.Rules) != 0 {
						t.Errorf("missing %v by %v, want none", got.Missing, got.Rules)
					}
					continue
				}
				if !slices.Equal(got.Missing, c.missing) || !slices.Equal(got.Rules, c.rules) {
					t.Errorf("missing %v by %v, want %v by %v", got.Missing, got.Rules, c.missing, c.rules)
				}
			}
		})
	}
	if got := p.ScopesNamed(); !slices.Equal(got, []string{"orders:read", "orders:refund", "orders:write"}) {
		t.Errorf("ScopesNamed = %v", got)
	}
	if p.ScopeLines() != 4 {
		t.Errorf("ScopeLines = %d", p.ScopeLines())
	}
	// Scope lines change no decision: Casbin never sees them.
	if d := p.Decide(Request{Subject: scoped("alice"), Object: "orders/refund_order", Action: ActCall, Args: []byte(`{}`)}); !d.Allowed {
		t.Errorf("Decide: %+v", d)
	}
	if !slices.Contains(p.Lines(), "s, orders/refund_order, call, orders:write") {
		t.Errorf("Lines leaves out the s lines: %v", p.Lines())
	}
	var none *Policy
	if got := none.CheckScopes(Request{Subject: scoped("alice"), Object: "orders/x", Action: ActCall}); got.Missing != nil || none.ScopesNamed() != nil {
		t.Errorf("nil policy: %+v", got)
	}
}

// TestScopeLinesRegexModel: with regexMatch in the model, an s line's object is an anchored
// pattern, matched like a p line's.
func TestScopeLinesRegexModel(t *testing.T) {
	m := strings.Replace(readRoot(t, rootModel), "keyMatch(r.obj, p.obj)", "regexMatch(r.obj, p.obj)", 1)
	p := loadWith(t, m, "p, support_agent, ^orders/.*$, call, allow\ns, ^orders/(refund|cancel)_order$, call, orders:write\ng, bob, support_agent\n",
		Options{Servers: []string{"orders"}})
	if got := p.CheckScopes(Request{Subject: scoped("bob"), Object: "orders/cancel_order", Action: ActCall}); !slices.Equal(got.Missing, []string{"orders:write"}) {
		t.Errorf("cancel_order: %+v", got)
	}
	if got := p.CheckScopes(Request{Subject: scoped("bob"), Object: "orders/get_order", Action: ActCall}); len(got.Needed) != 0 {
		t.Errorf("get_order: %+v", got)
	}
}

// TestLintScopeLines: every way to write an s line wrong is refused at load, naming the line and
// what to write.
func TestLintScopeLines(t *testing.T) {
	policy := `p, support_agent, orders/*, call, allow
s, orders/refund_order, call
s, support_agent, orders/refund_order, call, orders:write
s, orders/refund_order, approve, orders:write
s, orders/refund_order, call, orders write
s, orders/refund_order, call, "orders:""write"
s, search/query, call, search:read
s, orders/refund_order, call, orders:write # the big one
s, orders/refund_order, call, ` + strings.Repeat("x", 257) + `
s, orders/refund_order, call, orders:wr$te
s, orders/refund_order, call,
x, orders/refund_order, call, orders:write
g, bob, support_agent
`
	f, le := loadErr(t, "", policy, Options{Servers: []string{"orders"}})
	want := []struct {
		line int
		has  string
	}{
		{2, `a scope line has 3 (object, action, scope)`},
		{3, `a scope line has no subject`},
		{4, `action "approve" cannot need a scope`},
		{5, `scope "orders write" holds a character a scope cannot`},
		{6, `holds a character a scope cannot`},
		{7, `names server "search", which is not configured`},
		{8, `comments must be on a line of their own`},
		{9, `is longer than 256 bytes`},
		{10, `contains "$"`},
		{11, `scope (field 4) is empty`},
		{12, `nor an approval (a) or scope (s) line`},
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
	}
}

// TestScopeLineDuplicateWarns: a repeated s line loads, with a warning, like a repeated p line.
func TestScopeLineDuplicateWarns(t *testing.T) {
	p := loadWith(t, "", "p, a, orders/*, call, allow\ns, orders/x, call, orders:write\ns, orders/x, call, orders:write\n", Options{Servers: []string{"orders"}})
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], ":3: same rule as line 2") {
		t.Fatalf("warnings: %v", w)
	}
	if got := p.CheckScopes(Request{Subject: scoped("a"), Object: "orders/x", Action: ActCall}); !slices.Equal(got.Missing, []string{"orders:write"}) || len(got.Rules) != 2 {
		t.Fatalf("check: %+v", got)
	}
}

func TestScopeProblem(t *testing.T) {
	for s, want := range map[string]string{
		"orders:write": "", "https://graph.microsoft.com/.default": "", "a!#[]~": "",
		"": "is empty", "a b": "holds a character", `a"b`: "holds a character", `a\b`: "holds a character",
		"a\tb": "holds a character", "é": "holds a character", strings.Repeat("a", 257): "longer than 256",
	} {
		got := ScopeProblem(s)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("ScopeProblem(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestScopeMemoBounded: what CheckScopes remembers counts against the memo's bound, since a
// resource URI is the client's own string.
func TestScopeMemoBounded(t *testing.T) {
	p := loadWith(t, "", scopePolicy, Options{Servers: []string{"orders"}})
	p.memo.size.Store(maxMemo - 1)
	for i := range 3 {
		p.CheckScopes(Request{Subject: scoped("alice"), Object: fmt.Sprintf("orders/file:///%d", i), Action: ActRead})
	}
	n := 0
	p.memo.scopes.Range(func(any, any) bool { n++; return true })
	if n != 1 || p.memo.size.Load() != maxMemo {
		t.Fatalf("%d answers kept, size %d", n, p.memo.size.Load())
	}
}
