package authz

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// fixVerb: every problem tells the admin what to do.
var fixVerb = regexp.MustCompile(`\b(write|delete|add|give|wrap|start from)\b`)

// TestLintReportsEveryProblem: a file with many problems gets one line per problem, in line
// order, each "file:line: what is wrong; write X instead" (or another fix).
func TestLintReportsEveryProblem(t *testing.T) {
	policy := `# a policy full of mistakes
p, support_agent, orders/*, call, Allow
p, alice , orders/get_order, call, allow
,
p, viewer, orders/get_order, cal, allow
p, viewer, search/query, call, allow
p, viewer, *, call, allow
p, x$$y, orders/get_order, call, allow
p, viewer, orders/get_order, call, deny # no comment here
x, viewer, orders/get_order, call, allow
p2, viewer, orders/get_order, call, allow
p, viewer, orders/get_order, call
p, viewer, orders/get_order, call, allow, amount <=
p, viewer, orders/get_order, call, allow,
g, a, b
g, b, a
p, "viewer, orders/get_order, call, allow
g, fine, viewer
p, viewer, orders/get_order, call, allow, amount <= 100
`
	f, le := loadErr(t, "", policy, Options{Servers: []string{"orders"}})
	want := []struct {
		line int
		has  string
	}{
		{2, `effect "Allow" must be exactly "allow" or "deny" (lower case); write allow instead`},
		{3, `subject (field 2) "alice " has leading or trailing whitespace`},
		{4, `line type is empty`},
		{5, `action "cal" is unknown; write call (tools), read (resources) or get (prompts) instead`},
		{6, `names server "search", which is not configured (configured: orders)`},
		{7, `object (field 3) "*" is a wildcard over every server; name the server: write orders/* instead`},
		{8, `contains "$"`},
		{9, `contains "#": comments must be on a line of their own; write "deny" instead`},
		{10, `line type "x" is neither a permission (p) nor a role (g) line`},
		{11, `line type "p2" is not defined in the model; write p instead`},
		{12, `has 3 fields after the line type, the model defines 4 or 5`},
		{13, `condition "amount <=" does not compile`},
		{14, `the condition after the last comma is empty; delete the trailing comma`},
		{15, `g lines 15, 16 form a cycle of roles (a -> b, b -> a)`},
		{17, `not a valid CSV line`},
	}
	if len(le.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(le.Problems), len(want), le)
	}
	for i, w := range want {
		if i >= len(le.Problems) {
			break
		}
		got := le.Problems[i]
		prefix := fmt.Sprintf("%s:%d: ", f.policy, w.line)
		if !strings.HasPrefix(got.Error(), prefix) || !strings.Contains(got.Error(), w.has) {
			t.Errorf("problem %d:\n got %s\nwant %s...%s", i, got, prefix, w.has)
		}
	}
	for _, p := range le.Problems {
		if !fixVerb.MatchString(p.Reason) {
			t.Errorf("problem does not say what to write instead: %s", p)
		}
	}
}

func TestLintObjects(t *testing.T) {
	servers := Options{Servers: []string{"orders", "search"}}
	good := []string{"orders/get_order", "orders/*", "search/query", "orders/get_*"}
	for _, obj := range good {
		loadWith(t, "", fmt.Sprintf("p, r, %s, call, allow\n", obj), servers)
	}
	bad := map[string]string{
		"*":                 "wildcard over every server",
		"orders":            "must be <server>/<tool> or <server>/*",
		"orders/":           "names no tool; write orders/* instead",
		"*/get_order":       "wildcard over servers",
		"ord*/get_order":    "wildcard over servers",
		"payments/refund":   `names server "payments", which is not configured (configured: orders, search)`,
		"/get_order":        "must be <server>/<tool>",
		"ordersx/get_order": `names server "ordersx"`,
	}
	for obj, want := range bad {
		f, le := loadErr(t, "", fmt.Sprintf("p, r, %s, call, allow\n", obj), servers)
		if len(le.Problems) != 1 || !strings.HasPrefix(le.Problems[0].Error(), f.policy+":1: ") || !strings.Contains(le.Problems[0].Reason, want) {
			t.Errorf("%s: %v, want %q", obj, le, want)
		}
	}
	// Without configured servers (unit tests, the legacy Load), objects are not checked.
	loadWith(t, "", "p, r, *, call, allow\n", Options{})
}

// regexRootModel is the repository model with regexMatch instead of keyMatch.
func regexRootModel(t *testing.T) string {
	return strings.Replace(readRoot(t, rootModel), "keyMatch(r.obj, p.obj)", "regexMatch(r.obj, p.obj)", 1)
}

func TestLintRegexObjects(t *testing.T) {
	m := regexRootModel(t)
	o := Options{Servers: []string{"orders"}}
	p := loadWith(t, m, "p, r, ^orders/(get|update)_order$, call, allow\ng, u, r\n", o)
	for obj, want := range map[string]bool{"orders/get_order": true, "orders/update_order": true, "orders/get_order2": false, "xorders/get_order": false} {
		if d := p.Decide(req("u", obj, `{}`)); d.Allowed != want || d.Internal != nil {
			t.Errorf("%s: %+v", obj, d)
		}
	}
	bad := map[string]string{
		"orders/get":             `not anchored at both ends (regexMatch finds the pattern anywhere: "read" matches "unread"); write "^orders/get$" instead`,
		"^orders/get":            "not anchored",
		"orders/get$":            "not anchored",
		"^orders/get$|^x$":       `contains "$"`,
		"^orders/get|delete$":    `not anchored at both ends`,
		"^orders/(get$":          "not a valid regular expression",
		"^(orders|search)/x$":    "must start with ^<server>/",
		"^search/x$":             `names server "search", which is not configured`,
		"^orders/get$$":          `contains "$"`,
		"^orders/[a-z]+_order$ ": "whitespace",
	}
	for obj, want := range bad {
		line := "p, r, " + obj + ", call, allow\n"
		if strings.HasSuffix(obj, " ") {
			line = `p, r, "` + obj + `", call, allow` + "\n"
		}
		f, le := loadErr(t, m, line, o)
		if len(le.Problems) != 1 || !strings.HasPrefix(le.Problems[0].Error(), f.policy+":1: ") || !strings.Contains(le.Problems[0].Reason, want) {
			t.Errorf("%q: %v\nwant %q", obj, le, want)
		}
	}
}

func TestLintRoleGraph(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("p, r0, s/t, call, allow\n")
		prev := "u"
		for i := n; i >= 1; i-- {
			// u -> r(n-1) -> ... -> r0: n links from u to r0
			fmt.Fprintf(&b, "g, %s, r%d\n", prev, i-1)
			prev = fmt.Sprintf("r%d", i-1)
		}
		return b.String()
	}
	p := loadWith(t, "", chain(maxRoleDepth), Options{})
	if d := p.Decide(req("u", "s/t", `{}`)); !d.Allowed {
		t.Fatalf("a chain of %d links does not reach: %+v", maxRoleDepth, d)
	}
	f, le := loadErr(t, "", chain(maxRoleDepth+1), Options{})
	if len(le.Problems) != 1 || !strings.HasPrefix(le.Problems[0].Error(), f.policy+":12: role chain u -> r10 -> r9") ||
		!strings.Contains(le.Problems[0].Reason, "is 11 levels deep; Casbin follows at most 10") {
		t.Fatalf("deep chain: %v", le)
	}

	cycles := []struct{ policy, want string }{
		{"g, a, a\n", `:2: g line makes "a" a member of itself; delete it`},
		{"g, a, b\ng, b, c\ng, c, a\n", ":2: g lines 2, 3, 4 form a cycle of roles (a -> b, b -> c, c -> a)"},
		{"g, x, y\ng, a, b\ng, b, a\ng, c, d\ng, d, c\n", ":3: g lines 3, 4 form a cycle"},
	}
	for _, c := range cycles {
		f, le := loadErr(t, "", "p, a, s/t, call, allow\n"+c.policy, Options{})
		if !strings.Contains(le.Error(), f.policy+c.want) {
			t.Errorf("cycle %q:\n%v\nwant %s", c.policy, le, c.want)
		}
	}
	// Two separate cycles are two problems.
	_, le = loadErr(t, "", "g, a, b\ng, b, a\ng, c, d\ng, d, c\n", Options{})
	if len(le.Problems) != 2 {
		t.Errorf("two cycles: %v", le)
	}
}

// matcherFix is the end of every matcher problem: what to write instead.
const matcherFix = "write m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft) instead"

func TestLintModel(t *testing.T) {
	root := readRoot(t, rootModel)
	const rootMatcher = "m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft)"
	matcher := func(m string) string { return strings.Replace(root, rootMatcher, m, 1) }
	tests := []struct {
		name, model, want string
	}{
		{"matcher without cond", strings.Replace(root, " && cond(r.args, p.cond, p.eft)", "", 1),
			"the matcher never calls cond(r.args, p.cond, p.eft), so every condition would be ignored"},
		{"matcher without hasRole", strings.Replace(root, "(g(r.sub, p.sub) || hasRole(r.args, p.sub))", "g(r.sub, p.sub)", 1),
			"the matcher never calls hasRole(r.args, p.sub)"},
		{"matcher without g", strings.Replace(root, "(g(r.sub, p.sub) || hasRole(r.args, p.sub))", "hasRole(r.args, p.sub)", 1),
			"the matcher never calls g(r.sub, p.sub)"},
		// The reviewer's matcher: a top-level || lets a credential role reach every tool.
		{"hasRole outside the conjunction", matcher("m = g(r.sub, p.sub) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft) || hasRole(r.args, p.sub)"),
			"joins its parts with a top-level ||"},
		{"g and hasRole both required", matcher("m = g(r.sub, p.sub) && hasRole(r.args, p.sub) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft)"),
			"join them as (g(r.sub, p.sub) || hasRole(r.args, p.sub))"},
		{"extra part", matcher(rootMatcher + " && r.sub != 'x'"), `contains "!= 'x'"`},
		{"extra call", matcher(rootMatcher + " && keyMatch(r.sub, p.sub)"), "has the part keyMatch(r.sub, p.sub)"},
		{"two object checks", matcher(rootMatcher + " && regexMatch(r.obj, p.obj)"), "does not match the object exactly once"},
		{"an || inside a part", matcher("m = (g(r.sub, p.sub) || hasRole(r.args, p.sub) || r.sub == r.sub) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft)"),
			"has the part g(r.sub, p.sub) || hasRole(r.args, p.sub) || r.sub == r.sub"},
		{"cond on other fields", matcher("m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.sub)"),
			"has the part cond(r.args, p.cond, p.sub)"},
		{"keyMatch2", strings.Replace(root, "keyMatch(r.obj, p.obj)", "keyMatch2(r.obj, p.obj)", 1), "has the part keyMatch2(r.obj, p.obj)"},
		{"no action check", strings.Replace(root, " && r.act == p.act", "", 1), "does not compare r.act == p.act exactly once"},
		{"matcher cut short", matcher("m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond"), "cannot be read"},
		{"allow-override effect", strings.Replace(root, "e = some(where (p.eft == allow)) && !some(where (p.eft == deny))", "e = some(where (p.eft == allow))", 1),
			`policy effect "some(where (p.eft == allow))" is not deny-override`},
		{"effect with other spacing", strings.Replace(root, "(p.eft == allow)", "(p.eft==allow)", 1), "spelled exactly as Casbin recognises it"},
		{"no eft", strings.Replace(root, "p = sub, obj, act, eft, cond", "p = sub, obj, act, cond", 1), "has no eft field"},
		{"cond not last", strings.Replace(root, "p = sub, obj, act, eft, cond", "p = sub, obj, act, cond, eft", 1), "must have the cond field last"},
		{"no cond field", strings.Replace(root, "p = sub, obj, act, eft, cond", "p = sub, obj, act, eft", 1), "has no cond field"},
		// The reviewer's other model: three request fields and no hasRole loaded, and a deny
		// role granted by a credential was silently dropped.
		{"three-field request", strings.Replace(strings.Replace(root, "r = sub, obj, act, args", "r = sub, obj, act", 1), "(g(r.sub, p.sub) || hasRole(r.args, p.sub))", "g(r.sub, p.sub)", 1),
			"request definition r = sub, obj, act must be exactly r = sub, obj, act, args"},
		{"renamed request field", strings.Replace(root, "r = sub, obj, act, args", "r = sub, obj, act, a", 1), "must be exactly r = sub, obj, act, args"},
		{"eval", strings.Replace(root, "r.act == p.act", "r.act == p.act && eval(p.sub)", 1), "eval()"},
		{"domains", strings.Replace(root, "g = _, _", "g = _, _, _", 1), "no domains"},
		{"second role type", strings.Replace(root, "g = _, _", "g = _, _\ng2 = _, _", 1), "role definition g2 is not used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.model == root {
				t.Fatal("the replacement did not apply")
			}
			f, le := loadErr(t, tc.model, "p, a, s/t, call, allow\n", Options{})
			found := false
			for _, p := range le.Problems {
				if p.File == f.model && strings.Contains(p.Reason, tc.want) {
					found = true
					if p.Line == 0 {
						t.Errorf("no line for %s", p)
					}
					if strings.HasPrefix(p.Reason, "the matcher ") && !strings.Contains(p.Reason, matcherFix) {
						t.Errorf("matcher problem without the fix: %s", p)
					}
				}
			}
			if !found {
				t.Fatalf("problems:\n%v\nwant %q", le, tc.want)
			}
		})
	}
}

// TestLintModelAcceptsEquivalentMatchers: spacing, redundant parentheses, the order of the parts
// and of the two sides of || and ==, and regexMatch for keyMatch, are the same matcher.
func TestLintModelAcceptsEquivalentMatchers(t *testing.T) {
	root := readRoot(t, rootModel)
	const rootMatcher = "m = (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) && r.act == p.act && cond(r.args, p.cond, p.eft)"
	for _, m := range []string{
		"m = (g(r.sub,p.sub)||hasRole(r.args,p.sub))&&keyMatch(r.obj,p.obj)&&r.act==p.act&&cond(r.args,p.cond,p.eft)",
		"m = ((hasRole(r.args, p.sub) || g(r.sub, p.sub))) && (keyMatch(r.obj, p.obj) && (p.act == r.act)) && (cond(r.args, p.cond, p.eft))",
		"m = cond(r.args, p.cond, p.eft) && r.act == p.act && keyMatch(r.obj, p.obj) && (g(r.sub, p.sub) || hasRole(r.args, p.sub))",
	} {
		model := strings.Replace(root, rootMatcher, m, 1)
		p := loadWith(t, model, readRoot(t, rootPolicy), Options{Servers: []string{"orders"}})
		if d := p.Decide(req("alice", refundOrder, `{"amount": 50}`)); !d.Allowed {
			t.Errorf("%s: %+v", m, d)
		}
		if d := p.Decide(req("alice", refundOrder, `{"amount": 500}`)); d.Allowed {
			t.Errorf("%s: allowed 500", m)
		}
	}
	p := loadWith(t, regexRootModel(t), "p, viewer, ^orders/get_order$, call, allow\ng, bob, viewer\n", Options{})
	if !p.Decide(req("bob", getOrder, `{}`)).Allowed {
		t.Error("regexMatch model")
	}
}

func TestLintWarnings(t *testing.T) {
	p := loadWith(t, "", `p, support_agent, s/*, call, allow
p, support_agent, s/*, call, allow
g, alice, suport_agent
g, bob, support_agent
g, carol, nobody_knows_this_role
`, Options{})
	w := strings.Join(p.Warnings(), "\n")
	for _, want := range []string{
		":2: same rule as line 1; delete one of them (removing only one would not revoke it)",
		`:3: role "suport_agent" grants nothing: no p line names it; did you mean "support_agent"?`,
		`:5: role "nobody_knows_this_role" grants nothing: no p line names it`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings:\n%s\nwant %s", w, want)
		}
	}
	if p.Rules() != 4 {
		t.Errorf("Rules() = %d, want 4 (duplicates once)", p.Rules())
	}
}

// TestLoadErrorsShape: *LoadErrors unwraps to its problems; Error is one problem per line.
func TestLoadErrorsShape(t *testing.T) {
	f, le := loadErr(t, "", "p, a, s/t, call, Allow\np, b, s/t, call, Deny\n", Options{})
	lines := strings.Split(le.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], f.policy+":1: ") || !strings.HasPrefix(lines[1], f.policy+":2: ") {
		t.Fatalf("Error():\n%s", le.Error())
	}
	var first *LoadError
	var err error = le
	if !asLoadError(err, &first) || first.Line != 1 {
		t.Fatalf("errors.As: %v", first)
	}
}
