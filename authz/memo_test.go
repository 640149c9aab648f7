package authz

import (
	"encoding/json"
	"strconv"
	"testing"
)

// The memo never changes an answer: arguments still decide conditional
// lines, attributes and credential roles are part of the question, and the
// memo stops growing at its bound.
func TestMemoKeepsAnswersExact(t *testing.T) {
	policy := "p, agent, s/refund, call, allow, amount <= 100\n" +
		"p, agent, s/get, call, allow\n" +
		"p, agent, s/region, call, allow, principal.region == 'eu'\n" +
		"p, admin, s/*, call, allow\n" +
		"g, alice, agent\n"
	f := newFiles(t, readRoot(t, rootModel), policy)
	p, err := LoadPolicy(f.model, f.policy, Options{})
	if err != nil {
		t.Fatal(err)
	}
	alice := Subject{Principal: "alice"}
	ask := func(s Subject, obj, args string) bool {
		return p.Decide(Request{Subject: s, Object: obj, Action: ActCall, Args: json.RawMessage(args)}).Allowed
	}
	for range 3 { // asked repeatedly: the memo answers the later ones
		if !ask(alice, "s/refund", `{"amount":50}`) || ask(alice, "s/refund", `{"amount":500}`) {
			t.Fatal("the condition stopped deciding")
		}
		if !ask(alice, "s/get", `{}`) || ask(alice, "s/other", `{}`) {
			t.Fatal("plain lines answer wrongly")
		}
		eu := Subject{Principal: "alice", Attrs: map[string]string{"region": "eu"}}
		us := Subject{Principal: "alice", Attrs: map[string]string{"region": "us"}}
		if !p.Visible(eu, "s/region") || p.Visible(us, "s/region") {
			t.Fatal("attributes are not part of the question")
		}
		withRole := Subject{Principal: "alice", Roles: []string{"admin"}}
		if !ask(withRole, "s/other", `{}`) || !p.Visible(withRole, "s/other") {
			t.Fatal("credential roles are not part of the question")
		}
	}
	if p.conditionMayApply("s/get", ActCall) || !p.conditionMayApply("s/refund", ActCall) {
		t.Error("conditionMayApply misjudges")
	}
	for i := range maxMemo + 10 {
		p.Visible(Subject{Principal: "alice", Attrs: map[string]string{"n": strconv.Itoa(i)}}, "s/get")
	}
	if n := p.memo.size.Load(); n > maxMemo {
		t.Errorf("memo holds %d answers, bound %d", n, maxMemo)
	}
}

func BenchmarkDecideMemo(b *testing.B) {
	f := newFiles(b, readRoot(b, rootModel), "p, agent, s/get, call, allow\ng, alice, agent\n")
	p, err := LoadPolicy(f.model, f.policy, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Subject: Subject{Principal: "alice"}, Object: "s/get", Action: ActCall, Args: json.RawMessage(`{}`)}
	b.ReportAllocs()
	for b.Loop() {
		if !p.Decide(req).Allowed {
			b.Fatal("denied")
		}
	}
}
