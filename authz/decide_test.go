package authz

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
)

// The repository's default model and policy.
const (
	rootModel  = "../model.conf"
	rootPolicy = "../policy.csv"
)

var demoTools = []string{
	"orders/get_order",
	"orders/update_order_status",
	"orders/refund_order",
	"orders/send_customer_reply",
}

// loadRoot loads the repository's model and policy without configured servers.
func loadRoot(t *testing.T) *Policy {
	t.Helper()
	p, err := LoadPolicy(rootModel, rootPolicy, Options{})
	if err != nil {
		t.Fatalf("LoadPolicy(%s, %s): %v", rootModel, rootPolicy, err)
	}
	return p
}

// decide asks whether principal may perform act on obj, with no arguments and no credential
// roles (so a line whose condition reads arguments fails closed).
func decide(p *Policy, principal, obj, act string) (allowed bool, internal error) {
	d := p.Decide(Request{Subject: Subject{Principal: principal}, Object: obj, Action: act})
	return d.Allowed, d.Internal
}

// visibleErr filters objs to those principal could call with some arguments, as tools/list does,
// in their order, and returns the first evaluation error with a count of the objects that failed.
func visibleErr(p *Policy, principal string, objs []string) ([]string, error) {
	out := make([]string, 0, len(objs))
	var first error
	failed := 0
	for _, obj := range objs {
		ok, err := p.visibleAct(Subject{Principal: principal}, obj, ActCall)
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		if ok {
			out = append(out, obj)
		}
	}
	if first != nil {
		return out, fmt.Errorf("%d of %d decisions failed; first: %w", failed, len(objs), first)
	}
	return out, nil
}

// visibleOf is visibleErr without the error, as the gateway's Visible answers.
func visibleOf(p *Policy, principal string, objs []string) []string {
	out := []string{}
	for _, obj := range objs {
		if p.Visible(Subject{Principal: principal}, obj) {
			out = append(out, obj)
		}
	}
	return out
}

// writeTemp writes content to name in a fresh temp dir and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readRoot(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDemoDecisions(t *testing.T) {
	// The same table runs against the repository files and against temp copies of them, so the
	// answers depend on the file content, not on where it lives.
	copies := map[string][2]string{
		"repo-root": {rootModel, rootPolicy},
		"temp-copy": {
			writeTemp(t, "model.conf", readRoot(t, rootModel)),
			writeTemp(t, "policy.csv", readRoot(t, rootPolicy)),
		},
	}
	tests := []struct {
		principal, obj string
		want           bool
	}{
		// support_agent: every orders tool but refunds (deny overrides allow).
		{"alice", "orders/get_order", true},
		{"alice", "orders/update_order_status", true},
		{"alice", "orders/send_customer_reply", true},
		{"alice", "orders/refund_order", false},
		{"local", "orders/update_order_status", true},
		{"local", "orders/refund_order", false},
		// viewer: get_order only.
		{"bob", "orders/get_order", true},
		{"bob", "orders/update_order_status", false},
		{"bob", "orders/refund_order", false},
		{"bob", "orders/send_customer_reply", false},
		{"bob", "orders/../orders/get_order", false},
		{"bob", "orders/get_order/../refund_order", false},
		{"bob", "orders/get_order ", false},
		{"bob", "search/get_order", false},
		{"bob", "other/orders/get_order", false},
		// supervisor: everything on orders, refunds included; nothing elsewhere.
		{"carol", "orders/refund_order", true},
		{"carol", "orders/get_order", true},
		{"carol", "search/query", false},
		// Unknown principals, and roles are not matched case-insensitively.
		{"mallory", "orders/get_order", false},
		{"Alice", "orders/get_order", false},
		{"alice ", "orders/get_order", false},
		{"", "orders/get_order", false},
		// Other servers are not covered by orders/*.
		{"alice", "payments/refund", false},
		{"alice", "ordersx/get_order", false},
	}
	for name, files := range copies {
		p, err := LoadPolicy(files[0], files[1], Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/%s@%s", name, tc.principal, tc.obj), func(t *testing.T) {
				got, internal := decide(p, tc.principal, tc.obj, ActCall)
				if internal != nil {
					t.Fatalf("internal error: %v", internal)
				}
				if got != tc.want {
					t.Fatalf("Decide(%q, %q, call) = %v, want %v", tc.principal, tc.obj, got, tc.want)
				}
			})
		}
	}
}

func TestDecideOtherActionsDenied(t *testing.T) {
	p := loadRoot(t)
	for _, act := range []string{"", "Call", "read", "*"} {
		if ok, _ := decide(p, "carol", "orders/get_order", act); ok {
			t.Errorf("action %q allowed", act)
		}
	}
	if ok, _ := decide(p, "carol", "", ActCall); ok {
		t.Error("empty object allowed")
	}
}

// TestKeyMatchPitfall pins Casbin's keyMatch: everything after "*" matches
// anything, "/" and ".." included, and "orders/*" even matches "orders/". This is why the gateway
// enforces only on canonical catalog IDs "<server>/<tool>" and never on a client-supplied string:
// with a raw string, "orders/../payments/refund" would be authorised by "orders/*".
func TestKeyMatchPitfall(t *testing.T) {
	p := loadRoot(t)
	for _, obj := range []string{
		"orders/a/b",
		"orders/../payments/refund",
		"orders/",
	} {
		ok, err := decide(p, "carol", obj, ActCall)
		if err != nil || !ok {
			t.Errorf("keyMatch behaviour changed: carol on %q = %v, %v (pinned: allowed)", obj, ok, err)
		}
	}
	// An object without "*" is compared exactly.
	if ok, _ := decide(p, "bob", "orders/get_order/x", ActCall); ok {
		t.Error("exact object matched a longer ID")
	}
}

// TestCasbinCSVLoaderSkipsCommentsAndBlankLines checks that LoadPolicy reads the repository policy the
// way Casbin's own CSV line loader reads each line ("#" comment lines and blank lines skipped, the
// optional condition padded with ""), and that CR LF line ends work with Casbin's file adapter
// and with LoadPolicy alike.
func TestCasbinCSVLoaderSkipsCommentsAndBlankLines(t *testing.T) {
	ours := loadRoot(t)
	var want [][]string
	for _, l := range strings.Split(readRoot(t, rootPolicy), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || !strings.HasPrefix(l, "p,") {
			continue
		}
		f, err := splitFields(l)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) == 5 {
			f = append(f, "")
		}
		want = append(want, f[1:])
	}
	if got := mustPolicy(t, ours.se.GetPolicy); !reflect.DeepEqual(got, want) {
		t.Fatalf("p rules differ:\n ours %v\n want %v", got, want)
	}
	if n := len(mustPolicy(t, ours.se.GetGroupingPolicy)); n != 4 {
		t.Fatalf("read %d g rules from %s, want 4", n, rootPolicy)
	}
	if ours.Rules() != 11 {
		t.Fatalf("Rules() = %d, want 11", ours.Rules())
	}

	// Casbin's own file adapter cannot read the repository files: it refuses a line without the
	// optional condition. That is why LoadPolicy feeds Casbin through its own adapter, which pads.
	if _, err := casbin.NewSyncedEnforcer(rootModel, rootPolicy); err == nil || !strings.Contains(err.Error(), "invalid policy rule size") {
		t.Errorf("pin changed: casbin's file adapter now reads lines without a condition (%v); the padding is belt and braces", err)
	}

	policy := "# comment\r\n\r\n   # indented comment\r\n\tp, r, s/*, call, allow\r\n\r\ng, u, r\r\n"
	path := writeTemp(t, "crlf.csv", policy)
	plain, err := casbin.NewSyncedEnforcer(writeTemp(t, "legacy.conf", legacyModel), path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := plain.Enforce("u", "s/t", "call"); !ok || err != nil {
		t.Fatalf("casbin file adapter: %v %v", ok, err)
	}
	p, err := LoadPolicy(rootModel, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := decide(p, "u", "s/t", ActCall); !ok || err != nil {
		t.Fatalf("LoadPolicy: %v %v", ok, err)
	}
}

// legacyModel is the model toolgate shipped before argument conditions: three request fields, no
// cond. Plain Casbin pins use it (Casbin cannot evaluate toolgate's cond and hasRole), and
// LoadPolicy still accepts it.
const legacyModel = `[request_definition]
r = sub, obj, act
[policy_definition]
p = sub, obj, act, eft
[role_definition]
g = _, _
[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))
[matchers]
m = g(r.sub, p.sub) && keyMatch(r.obj, p.obj) && r.act == p.act
`

func mustPolicy(t *testing.T, f func() ([][]string, error)) [][]string {
	t.Helper()
	p, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEmptyPolicyRefused: a policy without p lines would deny everything; LoadPolicy (so
// `toolgate check` and the Store alike) refuses it.
func TestEmptyPolicyRefused(t *testing.T) {
	for _, policy := range []string{"", "# nothing yet\n", "g, alice, support_agent\n"} {
		pp := writeTemp(t, "policy.csv", policy)
		_, err := LoadPolicy(rootModel, pp, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), pp+": no permission (p) lines") || !strings.Contains(err.Error(), "refusing it") {
			t.Errorf("LoadPolicy(%q): %v", policy, err)
		}
	}
	// A policy whose only p lines are broken reports the broken lines, not "no p lines".
	pp := writeTemp(t, "policy.csv", "p, a, s/t, call, Allow\n")
	if _, err := LoadPolicy(rootModel, pp, Options{}); err == nil || strings.Contains(err.Error(), "no permission") {
		t.Errorf("broken p line: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	goodModel := readRoot(t, rootModel)
	tests := []struct {
		name   string
		model  string // "" with missingModel: file absent
		policy string
		// where the error must point: "model" or "policy" file, and the line (0: any/no line).
		file string
		line int
		want string // substring of the reason
	}{
		{name: "lone comma", policy: "# x\n,\n", file: "policy", line: 2, want: "empty"},
		{name: "effect Allow", policy: "p, a, s/t, call, allow\np, a, s/t, call, Allow\n", file: "policy", line: 2, want: `effect "Allow"`},
		{name: "effect DENY", policy: "p, a, s/t, call, DENY\n", file: "policy", line: 1, want: `effect "DENY"`},
		{name: "effect typo", policy: "p, a, s/t, call, dney\n", file: "policy", line: 1, want: "effect"},
		{name: "trailing space in subject", policy: "p, alice , s/t, call, allow\n", file: "policy", line: 1, want: "whitespace"},
		{name: "trailing space in role line", policy: "\ng, alice\t, viewer\n", file: "policy", line: 2, want: "principal (field 2) \"alice\\t\" has leading or trailing whitespace"},
		{name: "trailing space in quoted effect", policy: "p, a, s/t, call, \"deny \"\n", file: "policy", line: 1, want: "effect (field 5) \"deny \" has leading or trailing whitespace"},
		{name: "trailing space in object", policy: "p, a, s/t , call, deny\n", file: "policy", line: 1, want: "object (field 3)"},
		{name: "quoted leading space", policy: "p, \" alice\", s/t, call, allow\n", file: "policy", line: 1, want: "whitespace"},
		{name: "dollar in subject", policy: "p, x$$y, s/t, call, allow\n", file: "policy", line: 1, want: `"$"`},
		{name: "dollar in object", policy: "p, x, s/t$$z, call, allow\n", file: "policy", line: 1, want: `"$"`},
		{name: "dollar in role line", policy: "g, a$, r\n", file: "policy", line: 1, want: `"$"`},
		{name: "empty object", policy: "p, a, , call, allow\n", file: "policy", line: 1, want: "empty"},
		{name: "inline comment", policy: "p, a, s/t, call, deny # refunds\n", file: "policy", line: 1, want: `"#"`},
		{name: "unknown action", policy: "p, a, s/t, cal, deny\n", file: "policy", line: 1, want: `action "cal"`},
		{name: "missing effect column", policy: "p, a, s/t, call\n", file: "policy", line: 1, want: "3 fields"},
		{name: "extra g field", policy: "g, a, r, extra\n", file: "policy", line: 1, want: "3 fields"},
		{name: "short g line", policy: "g, a\n", file: "policy", line: 1, want: "1 fields"},
		{name: "unknown line type", policy: "x, a, s/t, call, allow\n", file: "policy", line: 1, want: `"x"`},
		{name: "undefined p2", policy: "p2, a, s/t, call, allow\n", file: "policy", line: 1, want: "not defined"},
		{name: "bad quote", policy: "p, \"a, s/t, call, allow\n", file: "policy", line: 1, want: "CSV"},
		{name: "model garbage", model: "this is not a model\n", policy: "", file: "model", want: "invalid model"},
		{name: "model without matchers", model: "[request_definition]\nr = sub, obj, act\n[policy_definition]\np = sub, obj, act\n[policy_effect]\ne = some(where (p.eft == allow))\n", file: "model"},
		{name: "model with two-field request", model: strings.Replace(goodModel, "r = sub, obj, act, args", "r = sub, obj", 1), file: "model", want: "must be exactly r = sub, obj, act, args"},
		{name: "model with three-field request", model: strings.Replace(goodModel, "r = sub, obj, act, args", "r = sub, obj, act", 1), file: "model", want: "must be exactly r = sub, obj, act, args"},
		{name: "policy cut mid-line", policy: "p, a, s/t, call, allow, amount <= 100\np, a, s/u, call, allow", file: "policy", want: "the last line has no newline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := tc.model
			if model == "" {
				model = goodModel
			}
			mp := writeTemp(t, "model.conf", model)
			pp := writeTemp(t, "policy.csv", tc.policy)
			p, err := LoadPolicy(mp, pp, Options{})
			if err == nil {
				t.Fatalf("LoadPolicy accepted it (version %s)", p.Version())
			}
			if p != nil {
				t.Fatal("LoadPolicy returned a policy with an error")
			}
			file := pp
			if tc.file == "model" {
				file = mp
			}
			prefix := file + ":"
			if tc.line > 0 {
				prefix = fmt.Sprintf("%s:%d: ", file, tc.line)
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			var le *LoadError
			if !errors.As(err, &le) || le.File != file || (tc.line > 0 && le.Line != tc.line) {
				t.Fatalf("error is not a *LoadError for %s:%d: %#v", file, tc.line, err)
			}
		})
	}
}

func TestLoadMissingFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.conf")
	if _, err := LoadPolicy(missing, rootPolicy, Options{}); err == nil || !strings.HasPrefix(err.Error(), missing+": ") {
		t.Errorf("missing model: %v", err)
	}
	missing = filepath.Join(dir, "nope.csv")
	if _, err := LoadPolicy(rootModel, missing, Options{}); err == nil || !strings.HasPrefix(err.Error(), missing+": ") {
		t.Errorf("missing policy: %v", err)
	}
	// A directory is not a file either.
	if _, err := LoadPolicy(rootModel, dir, Options{}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory as policy: %v", err)
	}
}

// TestCasbinPanicsOnLoneComma pins the Casbin behaviour LoadPolicy guards against, and checks that the
// adapter turns such a panic into an error naming file and line (a second line of defence behind
// the pre-validation, which already rejects ",").
func TestCasbinPanicsOnLoneComma(t *testing.T) {
	m, err := model.NewModelFromString(legacyModel)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Log("casbin no longer panics on a lone comma; the recover in bytesAdapter is now belt and braces")
			}
		}()
		_, _ = casbin.NewSyncedEnforcer(writeTemp(t, "legacy.conf", legacyModel), writeTemp(t, "comma.csv", ",\n"))
	}()

	a := &bytesAdapter{file: "p.csv", lines: []policyLine{{num: 1, text: "p, a, s/t, call, allow"}, {num: 7, text: ","}}}
	err = a.LoadPolicy(m)
	if err == nil || !strings.HasPrefix(err.Error(), "p.csv:7: ") {
		t.Fatalf("adapter error = %v, want p.csv:7: ...", err)
	}
}

func TestDecideEnforceErrorDenies(t *testing.T) {
	mp := writeTemp(t, "model.conf", regexRootModel(t))
	pp := writeTemp(t, "policy.csv", "p, alice, ^orders/(get$, call, allow\np, bob, ^orders/get_order$, call, allow\n")
	if _, err := LoadPolicy(mp, pp, Options{}); err == nil || !strings.Contains(err.Error(), pp+":1: ") {
		t.Fatalf("LoadPolicy accepted an invalid regex: %v", err)
	}
	// Past the lint (the test-only switch), Casbin fails at enforce: deny, and report it.
	p, err := LoadPolicy(mp, pp, Options{skipRegexLint: true, Principals: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	ok, internal := decide(p, "alice", "orders/get_order", ActCall)
	if ok {
		t.Fatal("enforce error allowed the call")
	}
	if internal == nil {
		t.Fatal("enforce error not reported")
	}
	t.Logf("internal error (log only), %d bytes", len(internal.Error()))

	// The same error through Visible: denied, and reported.
	if got := visibleOf(p, "alice", demoTools); len(got) != 0 {
		t.Fatalf("Visible = %v, want none", got)
	}
	got, err := visibleErr(p, "alice", demoTools)
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "4 of 4") {
		t.Fatalf("visibleErr = %v, %v", got, err)
	}
}

func TestVisible(t *testing.T) {
	p := loadRoot(t)
	all := append([]string{"search/query"}, demoTools...)
	tests := []struct {
		principal string
		want      []string
	}{
		// refund_order is allowed for amounts up to 100, so it is listed.
		{"alice", []string{"orders/get_order", "orders/update_order_status", "orders/refund_order", "orders/send_customer_reply"}},
		{"bob", []string{"orders/get_order"}},
		{"carol", demoTools},
		{"mallory", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.principal, func(t *testing.T) {
			got, err := visibleErr(p, tc.principal, all)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("visibleErr = %v, want %v", got, tc.want)
			}
			if v := visibleOf(p, tc.principal, all); !reflect.DeepEqual(v, tc.want) {
				t.Fatalf("Visible = %v, want %v", v, tc.want)
			}
		})
	}
	if got := visibleOf(p, "carol", nil); len(got) != 0 {
		t.Fatalf("Visible(nil) = %v", got)
	}
}

func TestVersion(t *testing.T) {
	a, b := loadRoot(t), loadRoot(t)
	if len(a.Version()) != 12 || a.Version() != b.Version() {
		t.Fatalf("versions %q, %q: want equal, 12 hex digits", a.Version(), b.Version())
	}
	changed, err := LoadPolicy(rootModel, writeTemp(t, "policy.csv", readRoot(t, rootPolicy)+"g, dave, viewer\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Version() == a.Version() {
		t.Fatal("version did not change with the policy")
	}
}

func TestDecideConcurrent(t *testing.T) {
	p := loadRoot(t)
	type q struct {
		principal, obj string
		want           bool
	}
	qs := []q{
		{"alice", "orders/update_order_status", true},
		{"alice", "orders/refund_order", false},
		{"bob", "orders/get_order", true},
		{"bob", "orders/refund_order", false},
		{"carol", "orders/refund_order", true},
		{"mallory", "orders/get_order", false},
	}
	const goroutines, iterations = 32, 300
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < iterations; i++ {
				c := qs[(g+i)%len(qs)]
				ok, err := decide(p, c.principal, c.obj, ActCall)
				if err != nil || ok != c.want {
					errs <- fmt.Sprintf("%s %s: %v %v", c.principal, c.obj, ok, err)
					return
				}
				if i%50 == 0 {
					_ = visibleOf(p, c.principal, demoTools)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// TestCasbinPitfallsPinned shows, with Casbin's own file adapter, the misreadings LoadPolicy refuses:
// a right-padded field is kept as is, and a capitalised effect is silently "not allow" (for a
// deny line: silently not deny, which opens the door).
func TestCasbinPitfallsPinned(t *testing.T) {
	policy := "p, alice , s/t, call, allow\n" +
		"p, r, s/*, call, allow\n" +
		"p, r, s/secret, call, Deny\n" +
		"g, bob, r\n"
	plain, err := casbin.NewSyncedEnforcer(writeTemp(t, "legacy.conf", legacyModel), writeTemp(t, "policy.csv", policy))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := plain.Enforce("alice", "s/t", "call"); ok {
		t.Error("casbin now trims fields on the right; the whitespace check is belt and braces")
	}
	if ok, _ := plain.Enforce("alice ", "s/t", "call"); !ok {
		t.Error("pin changed: casbin no longer keeps the trailing space in the subject")
	}
	if ok, _ := plain.Enforce("bob", "s/secret", "call"); !ok {
		t.Error("pin changed: effect \"Deny\" now denies in casbin")
	}
	if _, err := LoadPolicy(rootModel, writeTemp(t, "policy.csv", policy), Options{}); err == nil {
		t.Fatal("LoadPolicy accepted the policy")
	}
}
