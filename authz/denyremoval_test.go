package authz

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// denyPolicy has two deny lines; bob, a support agent, may not refund.
const denyPolicy = `p, support_agent, orders/*, call, allow
p, bob, orders/refund_order, call, deny
p, support_agent, orders/update_order_status, call, deny, status == 'deleted'
g, bob, support_agent
g, alice, support_agent
`

const (
	denyBob    = "p, bob, orders/refund_order, call, deny"
	denyStatus = "p, support_agent, orders/update_order_status, call, deny, status == 'deleted'"
)

func denyStore(t *testing.T, refuse bool) (*Store, files, *logSink, *[]ReloadEvent) {
	t.Helper()
	f := newFiles(t, readRoot(t, rootModel), denyPolicy)
	s, sink := newTestStore(t, f)
	s.RefuseDenyRemoval(refuse)
	var evs []ReloadEvent
	s.OnReloadEvent(func(ev ReloadEvent) { evs = append(evs, ev) })
	return s, f, sink, &evs
}

// TestReloadRemovingDeniesReported: a reload that drops deny lines is applied (the default), and
// its hooks see the counts and the removed lines as text, and it is logged at Warn.
func TestReloadRemovingDeniesReported(t *testing.T) {
	s, f, sink, evs := denyStore(t, false)
	old := s.Current()
	if s.Decide(req("bob", refundOrder, `{"amount": 5}`)).Allowed {
		t.Fatal("bob may refund to begin with")
	}
	replaceFile(t, f.policy, withoutLine(t, denyPolicy, denyBob))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if len(*evs) != 1 {
		t.Fatalf("events %v", *evs)
	}
	ev := (*evs)[0]
	want := []string{f.policy + ":2: " + denyBob}
	if ev.Err != nil || !ev.Applied() || ev.Previous != old || ev.Candidate != s.Current() || ev.Policy != s.Current() ||
		fmt.Sprint(ev.RemovedDenies) != fmt.Sprint(want) || ev.Marker ||
		ev.Previous.Denies() != 2 || ev.Candidate.Denies() != 1 {
		t.Fatalf("event %+v", ev)
	}
	if !s.Decide(req("bob", refundOrder, `{"amount": 5}`)).Allowed {
		t.Fatal("the reload was not applied")
	}
	if w := sink.find("WARN", "removes deny lines"); len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]["removed"]), denyBob) {
		t.Fatalf("warning %v", w)
	}

	// Moving a deny line (or adding one) removes nothing; editing its condition removes the old one.
	moved := denyStatus + "\n" + withoutLine(t, denyPolicy, denyStatus)
	replaceFile(t, f.policy, moved)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if ev := (*evs)[1]; !ev.Applied() || ev.RemovedDenies != nil {
		t.Fatalf("moved: %+v", ev)
	}
	replaceFile(t, f.policy, strings.Replace(moved, "'deleted'", "'purged'", 1))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if ev := (*evs)[2]; !ev.Applied() || len(ev.RemovedDenies) != 1 || !strings.HasSuffix(ev.RemovedDenies[0], ":1: "+denyStatus) {
		t.Fatalf("condition edited: %+v", ev)
	}
	// A broken file: no candidate, nothing removed.
	replaceFile(t, f.policy, "p, x\n")
	if err := s.Reload(); err == nil {
		t.Fatal("broken file applied")
	}
	if ev := (*evs)[3]; ev.Err == nil || ev.Candidate != nil || ev.RemovedDenies != nil || ev.Applied() {
		t.Fatalf("broken: %+v", ev)
	}
}

// TestRefuseDenyRemoval: with the switch on, a reload that removes a deny line is refused (last good
// policy stays, failure counted, hooks see the removed lines) unless the file carries the marker
// naming the version in force; the marker permits that one reload only.
func TestRefuseDenyRemoval(t *testing.T) {
	s, f, sink, evs := denyStore(t, true)
	good := s.Current()
	cut := withoutLine(t, withoutLine(t, denyPolicy, denyBob), denyStatus) // every deny line gone

	replaceFile(t, f.policy, cut)
	err := s.Reload()
	var dre *DenyRemovalError
	if !errors.As(err, &dre) || len(dre.Removed) != 2 || dre.InForce != good.Version() ||
		!strings.Contains(err.Error(), "# toolgate: allow-deny-removal "+good.Version()) || !strings.Contains(err.Error(), denyBob) {
		t.Fatalf("Reload = %v", err)
	}
	if s.Current() != good || s.Decide(req("bob", refundOrder, `{"amount": 5}`)).Allowed {
		t.Fatal("the refused policy is in force")
	}
	if st := s.Stats(); st.Failures != 1 || st.Successes != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(sink.find("ERROR", "policy reload refused")) != 1 {
		t.Fatal("refusal not logged")
	}
	ev := (*evs)[0]
	if ev.Err == nil || ev.Applied() || ev.Policy != good || ev.Candidate == nil || ev.Candidate.Denies() != 0 || len(ev.RemovedDenies) != 2 {
		t.Fatalf("event %+v", ev)
	}

	// A marker for another version, or without one, does not permit it.
	for _, m := range []string{"# toolgate: allow-deny-removal 000000000000\n", "# toolgate: allow-deny-removal\n"} {
		replaceFile(t, f.policy, m+cut)
		if err := s.Reload(); !errors.As(err, &dre) || !strings.Contains(dre.Marker, "must name") && !strings.Contains(dre.Marker, "names version 000000000000") {
			t.Fatalf("marker %q: %v", m, err)
		}
	}

	// The marker naming the version in force: applied, and reported as such.
	withMarker := "#  toolgate:  allow-deny-removal " + good.Version() + "\n" + cut
	replaceFile(t, f.policy, withMarker)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	ev = (*evs)[len(*evs)-1]
	if !ev.Applied() || !ev.Marker || len(ev.RemovedDenies) != 2 || s.Current().Denies() != 0 {
		t.Fatalf("event %+v", ev)
	}
	if !s.Decide(req("bob", refundOrder, `{"amount": 5}`)).Allowed {
		t.Fatal("the permitted reload was not applied")
	}

	// One-shot: the stale marker stays in the file, and the next removal is refused again.
	replaceFile(t, f.policy, withMarker+denyBob+"\n")
	if err := s.Reload(); err != nil { // adding a deny line needs no marker
		t.Fatal(err)
	}
	replaceFile(t, f.policy, withMarker)
	if err := s.Reload(); !errors.As(err, &dre) || len(dre.Removed) != 1 || !strings.Contains(dre.Marker, "names version "+good.Version()) {
		t.Fatalf("second removal with a stale marker: %v", err)
	}

	// Off again: applied.
	s.RefuseDenyRemoval(false)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
}
