package shadow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/authz/shadow"
	"github.com/toolgate/toolgate/metrics"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// live: alice (support) may call orders/get and orders/typed; bob (viewer) orders/get; carol
// (refunds) orders/small while its amount is at most 100.
const livePolicy = `p, support, orders/get, call, allow
p, support, orders/typed, call, allow
p, viewer, orders/get, call, allow
p, refunds, orders/small, call, allow, amount <= 100
g, alice, support
g, bob, viewer
g, carol, refunds
`

// candidate: support loses orders/typed (shadow_denies), viewer gains orders/small (shadow_allows),
// and refunds go up to 500 (shadow_allows for amounts from 101 to 500).
const candidatePolicy = `p, support, orders/typed, call, deny
p, support, orders/get, call, allow
p, viewer, orders/get, call, allow
p, viewer, orders/small, call, allow
p, refunds, orders/small, call, allow, amount <= 500
g, alice, support
g, bob, viewer
g, carol, refunds
`

type env struct {
	dir, model      string
	live, candidate *authz.Store
}

func newEnv(t testing.TB) env {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	e := env{dir: dir, model: filepath.Join(dir, "model.conf")}
	write(t, e.model, string(model))
	write(t, filepath.Join(dir, "policy.csv"), livePolicy)
	write(t, filepath.Join(dir, "candidate.csv"), candidatePolicy)
	o := authz.Options{Servers: []string{"orders", "down"}}
	if e.live, err = authz.NewStore(e.model, filepath.Join(dir, "policy.csv"), o, nil); err != nil {
		t.Fatal(err)
	}
	if e.candidate, err = authz.NewStore(e.model, filepath.Join(dir, "candidate.csv"), o, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// trail collects audit records.
type trail struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (a *trail) Append(r audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
	return nil
}
func (a *trail) Err() error       { return nil }
func (a *trail) FailClosed() bool { return false }

// discard is an audit trail that keeps nothing (benchmarks).
type discard struct{}

func (discard) Append(audit.Record) error { return nil }
func (discard) Err() error                { return nil }
func (discard) FailClosed() bool          { return false }

// chain builds the test kit's chain on the live policy, with the shadow link when g is not nil.
func (e env) chain(t testing.TB, g *shadow.Guard, m *metrics.Metrics, a pipeline.AuditTrail) *pipeline.Chain {
	var link *pipeline.Link
	if g != nil {
		l := g.Link()
		link = &l
	}
	rec := &pipeline.Recorder{Metrics: m}
	if a != nil {
		rec.Audit = a
	}
	return pipelinetest.New(t, pipelinetest.Parts{
		PolicySource: func() pipeline.Policy { return e.live.Current() },
		Shadow:       link, Recorder: rec, Metrics: m,
	})
}

func call(principal, tool, args string) pipeline.Call {
	return pipeline.Call{Subject: authz.Subject{Principal: principal}, Name: tool, Args: json.RawMessage(args)}
}

// disagreements reads toolgate_policy_shadow_disagreements_total from a scrape: "tool direction" -> count.
func disagreements(t testing.TB, m *metrics.Metrics) map[string]int {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	re := regexp.MustCompile(`(?m)^toolgate_policy_shadow_disagreements_total\{direction="([^"]+)",tool="([^"]+)"\} (\d+)$`)
	out := map[string]int{}
	for _, mm := range re.FindAllStringSubmatch(rr.Body.String(), -1) {
		n, _ := strconv.Atoi(mm[3])
		out[mm[2]+" "+mm[1]] = n
	}
	return out
}

// Disagreements are counted in both directions, per tool, exactly once per call that has one,
// under concurrent calls (run with -race); calls the policies agree on are not counted, and only
// the calls with a disagreement carry the shadow field on their audit record.
func TestDisagreementsCountedInBothDirectionsUnderConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	m := metrics.New()
	a := &trail{}
	c := e.chain(t, &shadow.Guard{Policy: e.candidate.Current, Metrics: m}, m, a)
	calls := []struct {
		call   pipeline.Call
		shadow audit.Decision // "" when the policies agree
	}{
		{call("alice", "orders__get", `{"order_id":1}`), ""},
		{call("alice", "orders__typed", `{}`), audit.DecisionDenied},
		{call("bob", "orders__get", `{"order_id":1}`), ""},
		{call("bob", "orders__small", `{}`), audit.DecisionAllowed},
		{call("carol", "orders__small", `{"amount":50}`), ""},
		{call("carol", "orders__small", `{"amount":300}`), audit.DecisionAllowed},
		{call("carol", "orders__small", `{"amount":900}`), ""},
		{call("bob", "orders__nope", `{}`), ""}, // tool_not_found: nothing to compare
	}
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				tc := calls[(w+r)%len(calls)]
				c.Handle(context.Background(), tc.call)
			}
		})
	}
	wg.Wait()

	perCall := map[string]int{} // how often each call ran
	for w := range workers {
		for r := range rounds {
			perCall[fmt.Sprint((w+r)%len(calls))]++
		}
	}
	want := map[string]int{}
	for i, tc := range calls {
		if tc.shadow == "" {
			continue
		}
		dir := metrics.ShadowDenies
		if tc.shadow == audit.DecisionAllowed {
			dir = metrics.ShadowAllows
		}
		want["orders/"+tc.call.Name[len("orders__"):]+" "+dir] += perCall[fmt.Sprint(i)]
	}
	got := disagreements(t, m)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("disagreements counted %v, want %v", got, want)
	}
	if got["orders/typed "+metrics.ShadowDenies] == 0 || got["orders/small "+metrics.ShadowAllows] == 0 {
		t.Fatalf("both directions must be counted: %v", got)
	}

	shadowed := 0
	for _, r := range a.recs {
		if r.Shadow == nil {
			continue
		}
		shadowed++
		if r.Shadow.Decision == r.Shadow.LiveDecision || r.Shadow.Version != e.candidate.Current().Version() {
			t.Errorf("shadow field %+v on %s's call of %s does not record a disagreement with the candidate", *r.Shadow, r.Principal, r.Tool)
		}
		if r.Shadow.Decision == audit.DecisionAllowed && r.Decision != audit.DecisionDenied {
			t.Errorf("%s's call of %s: the shadow allows, so the live policy denied it, but the record says %s", r.Principal, r.Tool, r.Decision)
		}
	}
	total := 0
	for _, n := range want {
		total += n
	}
	if shadowed != total {
		t.Fatalf("%d audit records carry a shadow field, want one per disagreement (%d)", shadowed, total)
	}
}

// The live decision never changes: the same calls through a chain with a shadow that disagrees
// with everything, and through one without a shadow, get byte-identical answers and audit records
// that differ in the shadow field only.
func TestShadowNeverChangesTheLiveDecision(t *testing.T) {
	e := newEnv(t)
	// The inverse of the live policy, wherever it can be: every decision above disagrees.
	write(t, filepath.Join(e.dir, "candidate.csv"), `p, support, orders/*, call, deny
p, viewer, orders/*, call, allow
p, viewer, orders/get, call, deny
p, refunds, orders/small, call, allow, amount > 100
g, alice, support
g, bob, viewer
g, carol, refunds
`)
	if err := e.candidate.Reload(); err != nil {
		t.Fatal(err)
	}
	var calls []pipeline.Call
	for _, p := range []string{"alice", "bob", "carol", "dora", "support", ""} {
		for _, tool := range []string{"orders__get", "orders__typed", "orders__small", "down__anything", "orders__nope"} {
			for _, args := range []string{`{"order_id":1}`, `{}`, `{"amount":50}`, `{"amount":300}`, `{"amount":"x"}`, `[1]`, `not json`, ``} {
				calls = append(calls, call(p, tool, args))
			}
		}
	}
	run := func(g *shadow.Guard) ([]string, []audit.Record) {
		a := &trail{}
		c := e.chain(t, g, nil, a)
		var answers []string
		for _, cl := range calls {
			b, err := json.Marshal(c.Handle(context.Background(), cl))
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, string(b))
		}
		return answers, a.recs
	}
	var log bytes.Buffer
	without, plain := run(nil)
	with, shadowed := run(&shadow.Guard{Policy: e.candidate.Current, Metrics: metrics.New(),
		Log: slog.New(slog.NewTextHandler(&log, nil))})
	disagreed := 0
	for i := range calls {
		if without[i] != with[i] {
			t.Errorf("%+v: without a shadow %s\nwith one %s", calls[i], without[i], with[i])
		}
		p, s := plain[i], shadowed[i]
		if s.Shadow != nil {
			disagreed++
		}
		s.Shadow = nil
		p.Time, p.DurationMS, s.DurationMS = s.Time, 0, 0
		if fmt.Sprintf("%+v", p) != fmt.Sprintf("%+v", s) {
			t.Errorf("%+v: audit record without a shadow %+v\nwith one %+v", calls[i], p, s)
		}
	}
	if disagreed < 30 {
		t.Fatalf("only %d of %d calls disagreed; the test needs a shadow that disagrees often", disagreed, len(calls))
	}
	if n := bytes.Count(log.Bytes(), []byte("shadow policy disagrees")); n != disagreed {
		t.Fatalf("%d disagreements logged, want %d", n, disagreed)
	}
}

// A shadow policy reloaded (its Store swaps in the new file) decides the next call; a broken file
// keeps the last good shadow.
func TestShadowFollowsItsStoreReloads(t *testing.T) {
	e := newEnv(t)
	m := metrics.New()
	c := e.chain(t, &shadow.Guard{Policy: e.candidate.Current, Metrics: m}, m, nil)
	bobSmall := call("bob", "orders__small", `{}`)
	c.Handle(context.Background(), bobSmall)
	if got := disagreements(t, m)["orders/small shadow_allows"]; got != 1 {
		t.Fatalf("before the reload: %d disagreements, want 1", got)
	}
	write(t, filepath.Join(e.dir, "candidate.csv"), livePolicy)
	if err := e.candidate.Reload(); err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), bobSmall)
	if got := disagreements(t, m)["orders/small shadow_allows"]; got != 1 {
		t.Fatalf("after reloading a candidate equal to the live policy: %d disagreements, want still 1", got)
	}
	write(t, filepath.Join(e.dir, "candidate.csv"), "p, viewer, orders/small, call, maybe\n")
	if err := e.candidate.Reload(); err == nil {
		t.Fatal("a broken candidate reloaded")
	}
	c.Handle(context.Background(), bobSmall)
	if got := disagreements(t, m)["orders/small shadow_allows"]; got != 1 {
		t.Fatalf("after a broken candidate: %d disagreements, want still 1 (the last good shadow agrees)", got)
	}
}

// A nil guard, or one without a policy, lets every call through untouched.
func TestNoShadow(t *testing.T) {
	e := newEnv(t)
	for _, g := range []*shadow.Guard{nil, {}} {
		a := &trail{}
		link := g.Link()
		c := pipelinetest.New(t, pipelinetest.Parts{PolicySource: func() pipeline.Policy { return e.live.Current() },
			Shadow: &link, Recorder: &pipeline.Recorder{Audit: a}})
		c.Handle(context.Background(), call("bob", "orders__small", `{}`))
		if len(a.recs) != 1 || a.recs[0].Shadow != nil {
			t.Fatalf("%+v", a.recs)
		}
	}
}
