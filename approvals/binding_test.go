package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

func checkCall(t *testing.T, s Store, c Call, want Outcome) Request {
	t.Helper()
	out, r, err := s.Check(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Fatalf("Check = %v (%s), want %v", out, r.State, want)
	}
	return r
}

var refund = Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: "h1", Args: args, Rule: "policy.csv:31", RuleDigest: "d-old", PolicyVersion: "v1"}

// A request is bound to the version of the rule that held it: the same call held under an edited
// rule (another digest) is a new request, and an approval given under the old rule is not consumed
// by it.
func TestBoundToTheRuleVersion(t *testing.T) {
	s, _, _ := open(t)
	first := checkCall(t, s, refund, Pending)
	if !first.Created || first.RuleDigest != "d-old" || first.PolicyVersion != "v1" {
		t.Fatalf("new request %+v", first)
	}
	if again := checkCall(t, s, refund, Pending); again.Created || again.ID != first.ID {
		t.Fatalf("the repeat %+v: want the same request, not created", again)
	}
	if _, err := s.Approve(first.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	edited := refund
	edited.RuleDigest, edited.PolicyVersion = "d-new", "v2"
	second := checkCall(t, s, edited, Pending) // not Proceed: the approval was given under d-old
	if second.ID == first.ID || !second.Created {
		t.Fatalf("under the edited rule: %+v, want a new request", second)
	}
	if st := stateOf(t, s, first.ID); st != StateApproved {
		t.Fatalf("the approval under the old rule: %s, want it untouched", st)
	}
	// Under the old rule again (the edit reverted), the approval given under it is consumed.
	if used := checkCall(t, s, refund, Proceed); used.ID != first.ID {
		t.Fatalf("consumed %s, want %s", used.ID, first.ID)
	}
	changed := refund
	changed.ArgsHash = "h2"
	if r := checkCall(t, s, changed, Pending); !r.Created {
		t.Fatalf("changed arguments: %+v, want a new request", r)
	}
}

// A rule's ttl is the request's: it expires pending after it, and its approval lives for it from
// the decision; the store's ttl applies to calls without one.
func TestRuleTTL(t *testing.T) {
	s, clk, _ := open(t)
	short := refund
	short.TTL = 10 * time.Minute
	r := checkCall(t, s, short, Pending)
	if r.TTL != 10*time.Minute || !r.ExpiresAt.Equal(r.CreatedAt.Add(10*time.Minute)) {
		t.Fatalf("request %+v", r)
	}
	clk.add(10 * time.Minute)
	if _, err := s.Approve(r.ID, "carol"); !errors.Is(err, ErrExpired) {
		t.Fatalf("approving after its ttl: %v, want ErrExpired", err)
	}
	r = checkCall(t, s, short, Pending)
	clk.add(9 * time.Minute)
	a, err := s.Approve(r.ID, "carol")
	if err != nil || !a.ExpiresAt.Equal(clk.now().Add(10*time.Minute)) {
		t.Fatalf("approved %+v %v: want it to live 10m from now", a, err)
	}
	clk.add(10 * time.Minute)
	if st := stateOf(t, s, r.ID); st != StateExpired {
		t.Fatalf("the approval after its ttl: %s", st)
	}
	if again := checkCall(t, s, short, Pending); again.ID == r.ID {
		t.Fatal("an expired approval was found again")
	}
	plain := refund
	plain.ArgsHash = "h9"
	if p := checkCall(t, s, plain, Pending); !p.ExpiresAt.Equal(p.CreatedAt.Add(ttl)) {
		t.Fatalf("without a rule ttl: expires %s, want the store's %s", p.ExpiresAt, ttl)
	}
}

// policyWith is a RuleFinder holding the given digests.
type policyWith map[string]bool

func (p policyWith) ApprovalByDigest(d string) (string, string, bool) {
	return "policy.csv:31", "a, support_agent, orders/refund_order, call", p[d]
}

// Bound refuses to decide a request whose rule the policy in force no longer has, and decides the
// others as the store does.
func TestBoundRefusesADecisionUnderAChangedRule(t *testing.T) {
	s, _, _ := open(t)
	pol := policyWith{"d-old": true}
	b := Bound(s, func() RuleFinder { return pol })
	r := checkCall(t, b, refund, Pending)
	delete(pol, "d-old")
	for name, decide := range map[string]func() (Request, error){
		"approve": func() (Request, error) { return b.Approve(r.ID, "carol") },
		"deny":    func() (Request, error) { return b.Deny(r.ID, "carol", "no") },
	} {
		if _, err := decide(); !errors.Is(err, ErrRuleGone) || !strings.Contains(err.Error(), "policy.csv:31, version d-old") {
			t.Errorf("%s under a changed rule: %v", name, err)
		}
	}
	if st := stateOf(t, s, r.ID); st != StatePending {
		t.Fatalf("after the refused decisions: %s", st)
	}
	pol["d-old"] = true
	if a, err := b.Approve(r.ID, "carol"); err != nil || a.State != StateApproved {
		t.Fatalf("approve with the rule back: %+v %v", a, err)
	}
	if _, err := b.Approve(r.ID, "carol"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("approving twice: %v", err)
	}
	if _, err := b.Approve("apr_nope", "carol"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// The guard gives a held call its rule's ttl and the rule's digest, and tells OnCreated of the
// request once, when it is created: a repeat before the decision tells nobody again.
func TestGuardAppliesTheRuleAndTellsOnce(t *testing.T) {
	p := pipelinetest.NewBuilder(t, &countingUpstream{Fn: okAnswer})
	store, g := withApprovals(t, p)
	g.Rules = Rules{{Tools: []string{"billing/*"}, TTL: time.Minute}, {Tools: []string{"orders/*"}, TTL: 5 * time.Minute}}
	type told struct {
		req  Request
		rule int
	}
	var got []told
	g.OnCreated = func(req Request, rule int) { got = append(got, told{req, rule}) }
	for range 2 {
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "approval_required" {
			t.Fatalf("held call: %+v", env)
		}
	}
	pending := listed(t, store, StatePending)
	if len(got) != 1 || len(pending) != 1 || got[0].rule != 1 || got[0].req.ID != pending[0].ID {
		t.Fatalf("told %+v, pending %+v: want the one request, once, with rule 1", got, pending)
	}
	r := pending[0]
	if r.TTL != 5*time.Minute || !r.ExpiresAt.Equal(r.CreatedAt.Add(5*time.Minute)) || r.RuleDigest != "test:1" {
		t.Fatalf("request %+v: want the orders rule's 5m ttl and the line's digest", r)
	}
}

// A call repeated after its request expired is held anew, and the new request names the one that
// lapsed: an approval not used in time, or a request nobody decided. One that was used is not named.
func TestLapsedRequestNamed(t *testing.T) {
	s, clk, _ := open(t)
	first := checkCall(t, s, refund, Pending)
	clk.add(ttl)
	second := checkCall(t, s, refund, Pending)
	if second.Lapsed == nil || second.Lapsed.ID != first.ID || second.Lapsed.DecidedBy != "" {
		t.Fatalf("after a request expired undecided: lapsed %+v", second.Lapsed)
	}
	if _, err := s.Approve(second.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	clk.add(ttl)
	third := checkCall(t, s, refund, Pending)
	if third.Lapsed == nil || third.Lapsed.ID != second.ID || third.Lapsed.DecidedBy != "carol" {
		t.Fatalf("after an approval expired unused: lapsed %+v", third.Lapsed)
	}
	if !strings.Contains(lapsedNote(third.Lapsed), "the approval of this call (request "+second.ID+") expired unused at ") ||
		!strings.Contains(lapsedNote(second.Lapsed), "the earlier request for this call ("+first.ID+") expired without a decision at ") {
		t.Errorf("notes: %q / %q", lapsedNote(third.Lapsed), lapsedNote(second.Lapsed))
	}
	if _, err := s.Approve(third.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	checkCall(t, s, refund, Proceed)
	if fourth := checkCall(t, s, refund, Pending); fourth.Lapsed != nil {
		t.Fatalf("after an approval was used: lapsed %+v", fourth.Lapsed)
	}
}

// The agent whose approval expired unused is told so when its repeat is held again.
func TestGuardSaysTheApprovalLapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pipelinetest.NewBuilder(t, &countingUpstream{Fn: okAnswer})
		store, _ := withApprovals(t, p)
		id := approve(t, p, store, getOrder)
		time.Sleep(time.Hour) // the store's ttl, on the bubble's clock: the approval lapses unused
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "approval_required" || !strings.HasPrefix(*env.Message, "the approval of this call (request "+id+") expired unused at ") {
			t.Fatalf("the repeat after the approval lapsed: %+v", *env.Message)
		}
	})
}
