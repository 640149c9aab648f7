package authz

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestStore(t *testing.T, f files) (*Store, *logSink) {
	t.Helper()
	log, sink := newLog()
	s, err := NewStore(f.model, f.policy, Options{Servers: []string{"orders"}}, log)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return s, sink
}

// withoutLine returns policy without the line that is exactly line.
func withoutLine(t *testing.T, policy, line string) string {
	t.Helper()
	out := strings.Replace(policy, line+"\n", "", 1)
	if out == policy {
		t.Fatalf("policy has no line %q", line)
	}
	return out
}

func TestNewStoreFirstLoadMustSucceed(t *testing.T) {
	f := newFiles(t, readRoot(t, rootModel), "p, a, s/t, call, Allow\n")
	if _, err := NewStore(f.model, f.policy, Options{}, nil); err == nil || !strings.Contains(err.Error(), f.policy+":1: ") {
		t.Fatalf("NewStore: %v", err)
	}
	f = newFiles(t, readRoot(t, rootModel), readRoot(t, rootPolicy))
	if _, err := NewStore(f.model, f.policy, Options{Servers: []string{"search"}}, nil); err == nil || !strings.Contains(err.Error(), `names server "orders", which is not configured`) {
		t.Fatalf("NewStore with other servers: %v", err)
	}
}

// TestReloadKeepsLastGood: every kind of bad file leaves the policy in force untouched, is logged
// at Error with the file and the problems, and is counted.
func TestReloadKeepsLastGood(t *testing.T) {
	rootModelText, rootPolicyText := readRoot(t, rootModel), readRoot(t, rootPolicy)
	tests := []struct {
		name  string
		apply func(t *testing.T, f files)
		want  string // in the error and in the log's problems
	}{
		{"missing policy file", func(t *testing.T, f files) { os.Remove(f.policy) }, "cannot read"},
		{"missing model file", func(t *testing.T, f files) { os.Remove(f.model) }, "cannot read"},
		{"lone comma line", func(t *testing.T, f files) { replaceFile(t, f.policy, rootPolicyText+",\n") }, "line type is empty"},
		{"effect typo", func(t *testing.T, f files) {
			replaceFile(t, f.policy, strings.Replace(rootPolicyText, "p, viewer, orders/get_order, call, allow", "p, viewer, orders/get_order, call, Allow", 1))
		}, `effect "Allow"`},
		{"empty file", func(t *testing.T, f files) { replaceFile(t, f.policy, "") }, "no permission (p) lines"},
		{"broken model", func(t *testing.T, f files) { replaceFile(t, f.model, "[request_definition]\nr = sub, obj\n") }, "model.conf"},
		{"model loses deny-override", func(t *testing.T, f files) {
			replaceFile(t, f.model, strings.Replace(rootModelText, "&& !some(where (p.eft == deny))", "", 1))
		}, "not deny-override"},
		{"unknown server", func(t *testing.T, f files) {
			replaceFile(t, f.policy, rootPolicyText+"p, viewer, payments/*, call, allow\n")
		}, `names server "payments"`},
		{"bad condition", func(t *testing.T, f files) {
			replaceFile(t, f.policy, rootPolicyText+"p, viewer, orders/refund_order, call, allow, amount <==\n")
		}, "does not compile"},
		{"a directory", func(t *testing.T, f files) { os.Remove(f.policy); os.Mkdir(f.policy, 0o700) }, "cannot read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := rootFiles(t)
			s, sink := newTestStore(t, f)
			var notified atomic.Int32
			s.Subscribe(func(old, new *Policy) { notified.Add(1) })
			before := s.Current()
			tc.apply(t, f)

			err := s.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload = %v, want an error with %q", err, tc.want)
			}
			if s.Current() != before {
				t.Fatal("the policy in force changed")
			}
			if d := s.Current().Decide(req("alice", updateOrder, `{}`)); !d.Allowed {
				t.Fatal("the last good policy no longer decides")
			}
			if notified.Load() != 0 {
				t.Fatal("subscribers notified of a failed reload")
			}
			st := s.Stats()
			if st.Failures != 1 || st.Successes != 0 || !strings.Contains(st.LastError, tc.want) || st.LastErrorAt.IsZero() || st.Version != before.Version() {
				t.Fatalf("stats %+v", st)
			}
			logs := sink.find("ERROR", "policy reload refused")
			if len(logs) != 1 || logs[0]["policy"] != f.policy || logs[0]["in_force"] != before.Version() ||
				!strings.Contains(fmt.Sprint(logs[0]["problems"]), tc.want) {
				t.Fatalf("log: %v", logs)
			}
			// Two failures count twice.
			_ = s.Reload()
			if s.Stats().Failures != 2 {
				t.Fatalf("stats after a second failure: %+v", s.Stats())
			}
		})
	}
}

func TestReloadSwapsAndNotifies(t *testing.T) {
	f := rootFiles(t)
	s, sink := newTestStore(t, f)
	type swap struct{ old, new *Policy }
	swaps := make(chan swap, 4)
	s.Subscribe(func(old, new *Policy) { swaps <- swap{old, new} })
	var second atomic.Int32
	s.Subscribe(func(old, new *Policy) { second.Add(1) })
	first := s.Current()

	// Unchanged files: nothing swapped, nobody notified.
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if s.Current() != first || len(swaps) != 0 || s.Stats().Unchanged != 1 {
		t.Fatalf("unchanged reload swapped: %+v", s.Stats())
	}

	// bob becomes a support agent.
	replaceFile(t, f.policy, strings.Replace(readRoot(t, rootPolicy), "g, bob, viewer", "g, bob, support_agent", 1))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case sw := <-swaps:
		if sw.old != first || sw.new != s.Current() || sw.new.Version() == first.Version() {
			t.Fatalf("notified %v -> %v", sw.old.Version(), sw.new.Version())
		}
	default:
		t.Fatal("not notified")
	}
	if second.Load() != 1 {
		t.Fatal("second subscriber not notified")
	}
	if !s.Current().Decide(req("bob", updateOrder, `{}`)).Allowed {
		t.Fatal("the new policy is not in force")
	}
	st := s.Stats()
	if st.Successes != 1 || st.Failures != 0 || st.Version != s.Current().Version() || st.Rules != s.Current().Rules() {
		t.Fatalf("stats %+v", st)
	}
	if len(sink.find("INFO", "policy reloaded")) != 1 {
		t.Fatal("swap not logged")
	}

	// A panicking subscriber is logged; the swap stands and later subscribers still run.
	s2, sink2 := newTestStore(t, f)
	var after atomic.Int32
	s2.Subscribe(func(old, new *Policy) { panic("subscriber bug") })
	s2.Subscribe(func(old, new *Policy) { after.Add(1) })
	replaceFile(t, f.policy, readRoot(t, rootPolicy))
	if err := s2.Reload(); err != nil {
		t.Fatal(err)
	}
	if after.Load() != 1 || len(sink2.find("ERROR", "subscriber panicked")) != 1 || s2.Stats().Successes != 1 {
		t.Fatal("panicking subscriber")
	}
}

// TestReloadWarnings: a reload logs the new policy's warnings.
func TestReloadWarnings(t *testing.T) {
	f := rootFiles(t)
	s, sink := newTestStore(t, f)
	replaceFile(t, f.policy, readRoot(t, rootPolicy)+"g, dave, suport_agent\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if w := sink.find("WARN", "probably not what was meant"); len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]["problem"]), `did you mean "support_agent"`) {
		t.Fatalf("warnings: %v", w)
	}
}

// TestRevokeThenCall: with goroutines deciding in a loop, after the Reload that removes alice's
// role returns, every Decide that starts afterwards denies her. Run under -race.
func TestRevokeThenCall(t *testing.T) {
	f := rootFiles(t)
	s, _ := newTestStore(t, f)
	call := req("alice", updateOrder, `{"order_id": 4821, "status": "shipped"}`)
	if !s.Current().Decide(call).Allowed {
		t.Fatal("alice is not allowed to begin with")
	}

	const workers, afterRevoke = 8, 200
	var revoked atomic.Bool
	var stale atomic.Int64
	var wg sync.WaitGroup
	started := make(chan struct{}, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen, signalled := 0, false
			for seen < afterRevoke {
				after := revoked.Load() // read before taking the policy
				d := s.Current().Decide(call)
				if after {
					seen++
					if d.Allowed {
						stale.Add(1)
					}
				}
				if !signalled {
					started <- struct{}{}
					signalled = true
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-started
	}
	replaceFile(t, f.policy, withoutLine(t, readRoot(t, rootPolicy), "g, alice, support_agent"))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	wg.Wait()
	if n := stale.Load(); n != 0 {
		t.Fatalf("%d decisions after the reload still allowed alice", n)
	}
	if s.Current().Decide(call).Allowed || s.Current().Visible(Subject{Principal: "alice"}, updateOrder) {
		t.Fatal("alice still allowed")
	}
}

// TestReloadConcurrent: reloads racing each other and decisions stay consistent (-race).
func TestReloadConcurrent(t *testing.T) {
	f := rootFiles(t)
	s, _ := newTestStore(t, f)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				_ = s.Reload()
				_ = s.Stats()
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if !s.Current().Decide(req("carol", refundOrder, `{"amount": 1}`)).Allowed {
					t.Error("carol denied")
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := s.Stats(); st.Unchanged != 80 || st.Failures != 0 {
		t.Fatalf("stats %+v", st)
	}
	_ = time.Now
}

// TestOnReloadHearsEveryAttempt: refused, unchanged and swapped reloads all reach the hook, with the
// policy in force afterwards.
func TestOnReloadHearsEveryAttempt(t *testing.T) {
	f := rootFiles(t)
	s, _ := newTestStore(t, f)
	type heard struct {
		version string
		err     bool
	}
	var got []heard
	s.OnReload(func(p *Policy, err error) { got = append(got, heard{p.Version(), err != nil}) })
	first := s.Current().Version()
	text := readRoot(t, rootPolicy)
	replaceFile(t, f.policy, text+",\n")
	_ = s.Reload() // refused
	replaceFile(t, f.policy, text)
	_ = s.Reload() // unchanged
	replaceFile(t, f.policy, text+"p, viewer, orders/*, call, deny\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	want := []heard{{first, true}, {first, false}, {s.Current().Version(), false}}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[2].version == first {
		t.Errorf("heard %v, want %v", got, want)
	}
}

// TestSetPrincipals: the configured principals change without a reload of the files. A principal
// that only p lines name holds them from the next decision on, later reloads keep the new
// principals, nothing is swapped when no name changes sides, and a principal named like a role
// changes nothing.
func TestSetPrincipals(t *testing.T) {
	f := newFiles(t, readRoot(t, rootModel), readRoot(t, rootPolicy)+"p, dave, orders/get_order, call, allow\n")
	s, sink := newTestStore(t, f)
	var swaps, reloads atomic.Int32
	s.Subscribe(func(old, new *Policy) { swaps.Add(1) })
	s.OnReload(func(*Policy, error) { reloads.Add(1) })
	first := s.Current()
	if s.Decide(req("dave", getOrder, `{}`)).Allowed {
		t.Fatal("dave allowed while he is a role")
	}

	old, next, err := s.SetPrincipals([]string{"local", "dave"})
	if err != nil {
		t.Fatal(err)
	}
	if old != first || next != s.Current() || next == first || next.Version() != first.Version() {
		t.Fatalf("old %p next %p current %p first %p", old, next, s.Current(), first)
	}
	if d := s.Decide(req("dave", getOrder, `{}`)); !d.Allowed {
		t.Fatalf("dave after SetPrincipals: %+v", d)
	}
	if swaps.Load() != 0 || reloads.Load() != 0 || s.Stats().Successes != 0 {
		t.Errorf("subscribers %d, reload hooks %d, stats %+v: SetPrincipals is not a policy reload", swaps.Load(), reloads.Load(), s.Stats())
	}
	if recs := sink.find("INFO", "policy principals updated"); len(recs) != 1 || fmt.Sprint(recs[0]["now_principals"]) != "[dave]" {
		t.Errorf("log: %v", recs)
	}

	// The same roles: nothing swapped.
	if old, next, err := s.SetPrincipals([]string{"dave", "local", "mallory"}); err != nil || old != next || s.Current() != next {
		t.Errorf("a change of no consequence swapped: %v", err)
	}

	// A reload of changed files keeps dave a principal.
	replaceFile(t, f.policy, readRoot(t, rootPolicy)+"p, dave, orders/*, call, allow\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if d := s.Decide(req("dave", updateOrder, `{}`)); !d.Allowed {
		t.Errorf("dave after a reload: %+v", d)
	}

	// A principal a g line gives as a role: refused, nothing changes.
	cur := s.Current()
	if _, _, err := s.SetPrincipals([]string{"dave", "supervisor"}); err == nil || !strings.Contains(err.Error(), f.policy+":") ||
		!strings.Contains(err.Error(), `"supervisor" is a configured principal`) {
		t.Errorf("supervisor as a principal: %v", err)
	}
	if s.Current() != cur || !s.Current().IsRole("supervisor") {
		t.Error("a refused SetPrincipals changed the policy")
	}
	replaceFile(t, f.policy, readRoot(t, rootPolicy)+"p, dave, orders/get_order, call, allow\n")
	if err := s.Reload(); err != nil || s.Current() == cur { // the refused principals are not those of later loads
		t.Errorf("a reload after a refused SetPrincipals: %v", err)
	}

	// dave no longer configured: a role again.
	if _, _, err := s.SetPrincipals([]string{"local"}); err != nil {
		t.Fatal(err)
	}
	if s.Decide(req("dave", getOrder, `{}`)).Allowed {
		t.Error("dave allowed after his principal was removed")
	}
}
