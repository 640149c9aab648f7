package authz

// One test per Casbin pitfall in docs/design.md, Casbin pitfalls. Each pins Casbin's behaviour (so that a
// Casbin upgrade that changes it is noticed) and shows what toolgate does about it.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/util"
)

// Pitfall: keyMatch only compares the prefix before "*"; the rest matches anything, "/", "." and
// ".." included. toolgate enforces only on canonical catalog IDs, so this is documented, not
// linted: "orders/*" means every tool of orders, and the caller never passes a client string.
func TestPitfallKeyMatchPrefix(t *testing.T) {
	for _, key := range []string{"orders/get_order", "orders/../payments/refund", "orders/a/b", "orders/"} {
		if !util.KeyMatch(key, "orders/*") {
			t.Errorf("pin changed: keyMatch(%q, orders/*) is now false", key)
		}
	}
	p := loadWith(t, readRoot(t, rootModel), readRoot(t, rootPolicy), Options{Servers: []string{"orders"}})
	if d := p.Decide(req("carol", "orders/../payments/refund", `{}`)); !d.Allowed {
		t.Error("pin changed: orders/* no longer covers a path with ..")
	}
	// The lint at least keeps a pattern inside one configured server.
	_, le := loadErr(t, "", "p, r, ord*, call, allow\n", Options{Servers: []string{"orders"}})
	if !strings.Contains(le.Error(), "wildcard over every server") {
		t.Errorf("lint: %v", le)
	}
}

// Pitfall: regexMatch is unanchored ("read" matches "unread"). The lint refuses a pattern that is
// not ^...$ as a whole.
func TestPitfallRegexMatchUnanchored(t *testing.T) {
	if !util.RegexMatch("orders/unread", "read") {
		t.Error("pin changed: regexMatch is now anchored")
	}
	if !util.RegexMatch("xorders/get_order", "^orders/get_order|^x") {
		t.Error("pin changed: alternation")
	}
	m := regexRootModel(t)
	for _, pat := range []string{"orders/read", "^orders/read", "orders/read$", "^orders/read|^orders/write$"} {
		f, le := loadErr(t, m, "p, r, "+pat+", call, allow\n", Options{})
		if !strings.HasPrefix(le.Error(), f.policy+":1: ") || !(strings.Contains(le.Error(), "not anchored") || strings.Contains(le.Error(), `"$"`)) {
			t.Errorf("%s: %v", pat, le)
		}
	}
	loadWith(t, m, "p, r, ^orders/(read|write)$, call, allow\n", Options{})
}

// Pitfall: an invalid regex loads fine and fails only at Enforce, with an error carrying a whole
// goroutine stack. The lint refuses it; if one gets through, Decide denies and puts the error in
// Internal (for the log, never a client).
func TestPitfallInvalidRegex(t *testing.T) {
	legacyRegex := strings.Replace(legacyModel, "keyMatch", "regexMatch", 1)
	f := newFiles(t, legacyRegex, "p, alice, ^orders/(get$, call, allow\n")
	plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatalf("pin changed: casbin now refuses an invalid regex at load: %v", err)
	}
	if _, err := plain.Enforce("alice", "orders/get", "call"); err == nil || !strings.Contains(err.Error(), "goroutine") {
		t.Errorf("pin changed: enforce error %v", err)
	}

	m := regexRootModel(t)
	f, le := loadErr(t, m, "p, alice, ^orders/(get$, call, allow\n", Options{})
	if !strings.HasPrefix(le.Error(), f.policy+":1: object (field 3) \"^orders/(get$\" is not a valid regular expression") {
		t.Errorf("lint: %v", le)
	}

	p, err := LoadPolicy(f.model, f.policy, Options{skipRegexLint: true, Principals: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decide(req("alice", "orders/get", `{}`))
	if d.Allowed || d.Internal == nil || !strings.Contains(d.Internal.Error(), "goroutine") {
		t.Fatalf("Decide past the lint: %+v", d)
	}
	if tr, err := p.Trace(req("alice", "orders/get", `{}`)); err == nil {
		t.Fatalf("Trace past the lint: %+v", tr)
	}
	if p.Visible(Subject{Principal: "alice"}, "orders/get") {
		t.Fatal("Visible past the lint")
	}
}

// Pitfall: an effect typo ("Allow", "Deny") silently means not-allow / not-deny. The lint
// refuses anything but exactly allow or deny, and says which to write.
func TestPitfallEffectTypo(t *testing.T) {
	f := newFiles(t, legacyModel, "p, r, s/*, call, allow\np, r, s/secret, call, Deny\ng, bob, r\n")
	plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := plain.Enforce("bob", "s/secret", "call"); !ok {
		t.Error("pin changed: effect \"Deny\" now denies in casbin")
	}
	for eft, fix := range map[string]string{"Allow": "allow", "ALLOW": "allow", "Deny": "deny", "dney": "deny", "allowed": "allow", "permit": "allow"} {
		f, le := loadErr(t, "", "p, r, s/t, call, "+eft+"\n", Options{})
		if !strings.HasPrefix(le.Error(), f.policy+":1: effect \""+eft+"\" must be exactly \"allow\" or \"deny\" (lower case); write "+fix+" instead") {
			t.Errorf("%s: %v", eft, le)
		}
	}
}

// Pitfall: fields are not trimmed on the right: "p, alice ,..." yields subject "alice ".
func TestPitfallRightPaddedField(t *testing.T) {
	f := newFiles(t, legacyModel, "p, alice , s/t, call, allow\n")
	plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := plain.Enforce("alice ", "s/t", "call"); !ok {
		t.Error("pin changed: casbin no longer keeps the trailing space")
	}
	for _, line := range []string{
		"p, alice , s/t, call, allow",
		"p, alice, s/t , call, allow",
		"p, alice, s/t, call , allow",
		`p, alice, s/t, call, "allow "`,
		"g, alice\t, r",
		`p, alice, s/t, call, allow, "amount <= 100 "`,
	} {
		f, le := loadErr(t, "", line+"\n", Options{})
		if !strings.HasPrefix(le.Error(), f.policy+":1: ") || !strings.Contains(le.Error(), "has leading or trailing whitespace") || !strings.Contains(le.Error(), "; write ") {
			t.Errorf("%q: %v", line, le)
		}
	}
}

// nonTestSources returns the package's non-test Go source.
func nonTestSources(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	if len(out) == 0 {
		t.Fatal("no sources found")
	}
	return out
}

// Pitfall: EnableEnforce(false) makes every request allowed. Nothing in this package calls it,
// and the Casbin enforcer is unexported (no method hands it out), so nothing outside can.
func TestPitfallEnableEnforceNeverReachable(t *testing.T) {
	f := newFiles(t, legacyModel, "p, r, s/t, call, deny\n")
	plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatal(err)
	}
	plain.EnableEnforce(false)
	if ok, _ := plain.Enforce("mallory", "anything", "call"); !ok {
		t.Error("pin changed: EnableEnforce(false) no longer allows everything")
	}
	for name, src := range nonTestSources(t) {
		if strings.Contains(src, "EnableEnforce") {
			t.Errorf("%s mentions EnableEnforce", name)
		}
		for _, line := range strings.Split(src, "\n") {
			if strings.HasPrefix(line, "func (") && strings.Contains(line, ") ") && strings.Contains(line, "casbin.") {
				t.Errorf("%s: a method exposes a casbin type: %s", name, line)
			}
		}
	}
}

// Pitfall: a policy line "," panics inside Casbin's loader. toolgate reports it as file:line,
// and a reload keeps the last good policy.
func TestPitfallLoneCommaNoPanic(t *testing.T) {
	f := newFiles(t, legacyModel, ",\n")
	func() {
		defer func() {
			if recover() == nil {
				t.Log("casbin no longer panics on a lone comma; the recover in the adapter is belt and braces")
			}
		}()
		_, _ = casbin.NewSyncedEnforcer(f.model, f.policy)
	}()
	f, le := loadErr(t, "", "p, r, s/t, call, allow\n,\n", Options{})
	if !strings.HasPrefix(le.Error(), f.policy+":2: line type is empty") {
		t.Errorf("lint: %v", le)
	}
	s, _ := newTestStore(t, rootFiles(t))
	before := s.Current()
	replaceFile(t, s.policyPath, readRoot(t, rootPolicy)+",\n")
	if err := s.Reload(); err == nil || s.Current() != before {
		t.Fatalf("reload with a lone comma: %v", err)
	}
}

// Pitfall: an empty file loads in Casbin as an empty policy that denies everything. LoadPolicy
// refuses it, so `toolgate check`, the Store's start and its reloads all do.
func TestPitfallEmptyFileRefusedOnReload(t *testing.T) {
	f := newFiles(t, legacyModel, "")
	plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatalf("pin changed: casbin refuses an empty file: %v", err)
	}
	if ok, _ := plain.Enforce("alice", "s/t", "call"); ok {
		t.Fatal("empty policy allowed")
	}
	for _, empty := range []string{"", "\n\n", "# everything commented out\n# p, r, s/t, call, allow\n", "g, alice, support_agent\n"} {
		fs := newFiles(t, readRoot(t, rootModel), empty)
		if _, err := LoadPolicy(fs.model, fs.policy, Options{}); err == nil || !strings.Contains(err.Error(), "no permission (p) lines") {
			t.Errorf("LoadPolicy on %q: %v", empty, err)
		}
		if _, err := NewStore(fs.model, fs.policy, Options{}, nil); err == nil || !strings.Contains(err.Error(), "no permission (p) lines") {
			t.Errorf("NewStore on %q: %v", empty, err)
		}
		s, _ := newTestStore(t, rootFiles(t))
		before := s.Current()
		replaceFile(t, s.policyPath, empty)
		if err := s.Reload(); err == nil || s.Current() != before || !strings.Contains(err.Error(), "refusing it") {
			t.Errorf("Reload on %q: %v", empty, err)
		}
	}
}

// Pitfall: a file truncated mid-write loads "successfully" in Casbin when the cut falls on a line
// boundary, or leaves a partial line Casbin misreads. toolgate refuses a partial line (the lint
// catches it), refuses an empty result, and warns loudly when the deny lines or most rules vanish.
func TestPitfallTruncatedFile(t *testing.T) {
	full := "p, agent, orders/refund_order, call, deny, amount > 100\n" +
		"p, agent, orders/*, call, allow\n" +
		"p, viewer, orders/get_order, call, allow\n" +
		"g, alice, agent\n" +
		"g, bob, viewer\n"
	f := newFiles(t, readRoot(t, rootModel), full)
	log, sink := newLog()
	s, err := NewStore(f.model, f.policy, Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	good := s.Current()

	// Cut inside a line: refused, whatever the cut.
	for _, n := range []int{10, 30, 45, 51, 70} {
		replaceFile(t, f.policy, full[:n])
		if err := s.Reload(); err == nil {
			t.Errorf("cut at %d (%q) accepted", n, full[:n])
		}
		if s.Current() != good {
			t.Fatalf("cut at %d swapped the policy", n)
		}
	}
	// A number cut short is still a number ("amount > 100" cut to "amount > 10"), and the line
	// lints: the missing newline is what refuses it.
	replaceFile(t, f.policy, full[:strings.Index(full, "100")+2])
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "the last line has no newline") || s.Current() != good {
		t.Errorf("cut inside a number: %v", err)
	}
	// Cut inside a quoted condition: refused.
	replaceFile(t, f.policy, `p, agent, orders/update_order_status, call, deny, "status in ['cancelled', 'del`)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "not a valid CSV line") {
		t.Errorf("cut in a quoted condition: %v", err)
	}
	// Cut at a line boundary after the deny line was lost (a file that kept only its tail):
	// applied, with a loud warning.
	replaceFile(t, f.policy, full[strings.Index(full, "p, agent, orders/*"):])
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if len(sink.find("WARN", "removes every deny line")) != 1 {
		t.Errorf("no warning for the lost deny lines: %v", sink.recs)
	}
	// Most rules gone: applied, with a loud warning.
	replaceFile(t, f.policy, "p, agent, orders/*, call, allow\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if w := sink.find("WARN", "removes more than half of the rules"); len(w) != 1 || w[0]["rules_before"] != 4.0 || w[0]["rules_after"] != 1.0 {
		t.Errorf("no warning for the shrinkage: %v", w)
	}
	if st := s.Stats(); st.Failures != 7 || st.Successes != 2 {
		t.Errorf("stats %+v", st)
	}
}

// Pitfall: SyncedEnforcer.StartAutoLoadPolicy swallows reload errors. toolgate runs its own watch
// loop (Store.Watch) and never starts Casbin's.
func TestPitfallStartAutoLoadPolicyNotUsed(t *testing.T) {
	for name, src := range nonTestSources(t) {
		for _, banned := range []string{"StartAutoLoadPolicy", "AutoLoad", "LoadPolicy()"} {
			if strings.Contains(src, banned) {
				t.Errorf("%s mentions %s", name, banned)
			}
		}
	}
}

// Pitfall: SyncedCachedEnforcer kept a revoked principal allowed after reload, and its cache key
// joins fields with "$$" so ("x$$y","z") and ("x","y$$z") collide. toolgate uses the uncached
// SyncedEnforcer, builds a new one per reload, and rejects "$" in every policy field.
func TestPitfallCachedEnforcerNotUsed(t *testing.T) {
	f := newFiles(t, legacyModel, "p, x$$y, z, call, allow\n")
	cached, err := casbin.NewSyncedCachedEnforcer(f.model, f.policy)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := cached.Enforce("x$$y", "z", "call"); !ok {
		t.Fatal("cached: the rule does not apply")
	}
	if ok, _ := cached.Enforce("x", "y$$z", "call"); !ok {
		t.Log("casbin's cache key no longer collides on $$")
	}
	for name, src := range nonTestSources(t) {
		if strings.Contains(src, "CachedEnforcer") {
			t.Errorf("%s mentions CachedEnforcer", name)
		}
	}
	for _, line := range []string{"p, x$$y, z/t, call, allow", "p, x, z/t$$u, call, allow", "g, a$, r", "g, a, r$", "p, x, z/t, call, allow, $env.a == 1"} {
		f, le := loadErr(t, "", line+"\n", Options{})
		if !strings.HasPrefix(le.Error(), f.policy+":1: ") || !strings.Contains(le.Error(), `"$"`) {
			t.Errorf("%s: %v", line, le)
		}
	}
}

// Pitfall: the default role manager stops at 10 levels of role inheritance. A deeper chain is a
// load error (TestLintRoleGraph checks the message).
func TestPitfallRoleDepthLimit(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("p, r0, s/t, call, allow\n")
		for i := n; i >= 1; i-- {
			member := "u"
			if i < n {
				member = "r" + strconv.Itoa(i)
			}
			b.WriteString("g, " + member + ", r" + strconv.Itoa(i-1) + "\n")
		}
		return b.String()
	}
	for n, want := range map[int]bool{maxRoleDepth: true, maxRoleDepth + 1: false} {
		f := newFiles(t, legacyModel, chain(n))
		plain, err := casbin.NewSyncedEnforcer(f.model, f.policy)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := plain.Enforce("u", "s/t", "call"); ok != want {
			t.Errorf("pin changed: casbin with %d links: %v, want %v", n, ok, want)
		}
	}
	loadWith(t, "", chain(maxRoleDepth), Options{})
	if _, le := loadErr(t, "", chain(maxRoleDepth+1), Options{}); !strings.Contains(le.Error(), "Casbin follows at most 10") {
		t.Errorf("lint: %v", le)
	}
}
