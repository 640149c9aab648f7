package authz

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRootPolicyEndsWithNewline: the shipped policy must load under its own rule.
func TestRootPolicyEndsWithNewline(t *testing.T) {
	b, err := os.ReadFile(rootPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a newline", rootPolicy)
	}
}

// TestCutAtConditionRefused: a file cut while being saved, right before ", amount <= 100", is a
// valid unconditional allow line; it used to load and widen access. The missing newline refuses
// it, at load, at startup and on reload.
func TestCutAtConditionRefused(t *testing.T) {
	full := "g, alice, support_agent\np, support_agent, orders/get_order, call, allow\np, support_agent, orders/refund_order, call, allow, amount <= 100\n"
	cut := full[:strings.Index(full, ", amount")]
	big := req("alice", refundOrder, `{"amount": 100000}`)

	// LoadPolicy (toolgate check, explain) refuses it.
	f, le := loadErr(t, "", cut, Options{Servers: []string{"orders"}})
	if len(le.Problems) != 1 || le.Problems[0].Error() != f.policy+": "+problemNoNewline {
		t.Fatalf("problems: %v", le)
	}
	// So does a Store at startup.
	if _, err := NewStore(f.model, f.policy, Options{}, nil); err == nil || !strings.Contains(err.Error(), "the last line has no newline") {
		t.Fatalf("NewStore: %v", err)
	}
	// And on reload: the policy in force stays.
	f = newFiles(t, readRoot(t, rootModel), full)
	s, _ := newTestStore(t, f)
	before := s.Current()
	if s.Decide(big).Allowed {
		t.Fatal("refund of 100000 allowed before the cut")
	}
	if err := os.WriteFile(f.policy, []byte(cut), 0o600); err != nil { // an in-place write, caught mid-way
		t.Fatal(err)
	}
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), "may have been cut while being saved") || s.Current() != before {
		t.Fatalf("Reload: %v", err)
	}
	if s.Decide(big).Allowed {
		t.Fatal("refund of 100000 allowed after the cut")
	}
	// Every other cut inside the last line is refused too; the complete file loads again.
	for n := strings.LastIndex(full[:len(full)-1], "\n") + 2; n < len(full); n++ {
		if err := os.WriteFile(f.policy, []byte(full[:n]), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.Reload(); err == nil || s.Current() != before {
			t.Fatalf("cut at %d (%q) loaded", n, full[n-10:n])
		}
	}
	// A comment as the last line needs its newline too (the rule is about the file, not rules).
	if _, le := loadErr(t, "", full+"# the end", Options{}); !strings.Contains(le.Error(), problemNoNewline) {
		t.Errorf("comment without newline: %v", le)
	}
	// CR LF endings are fine.
	loadWith(t, "", strings.ReplaceAll(full, "\n", "\r\n"), Options{})
}

// TestReloadRereadsFiles: a reload reads the files again after parsing them and takes them only
// if nothing changed in between, so a file still being written is not taken half-way. The pause
// between the reads is a hook here: no sleeps.
func TestReloadRereadsFiles(t *testing.T) {
	rootPolicyText := readRoot(t, rootPolicy)
	f := rootFiles(t)
	s, sink := newTestStore(t, f)
	first := s.Current()

	// The writer finishes while the first read is being parsed: the first result (the file cut
	// at a line boundary, which would load and drop the deny) is discarded, and the complete
	// file is what loads.
	complete := "p, support_agent, orders/refund_order, call, deny, amount > 50\n" + rootPolicyText
	cutAtBoundary := rootPolicyText[:strings.Index(rootPolicyText, "p, support_agent, orders/refund_order")]
	if err := os.WriteFile(f.policy, []byte(cutAtBoundary), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	s.betweenReads = func() {
		if calls.Add(1) == 1 {
			if err := os.WriteFile(f.policy, []byte(complete), 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("parsed %d times, want 2 (the changed read discarded)", calls.Load())
	}
	if s.Current() == first || s.Current().Denies() != 1 {
		t.Fatalf("loaded %d deny lines, want the complete file's 1", s.Current().Denies())
	}
	if d := s.Decide(req("alice", refundOrder, `{"amount": 80}`)); d.Allowed {
		t.Fatalf("the complete file's deny does not apply: %+v", d)
	}

	// A file that keeps changing is refused, and the policy in force stays.
	before := s.Current()
	n := 0
	s.betweenReads = func() {
		n++
		body := complete + "# save " + strings.Repeat("x", n) + "\n"
		if err := os.WriteFile(f.policy, []byte(body), 0o600); err != nil {
			t.Error(err)
		}
	}
	err := s.Reload()
	if err == nil || !strings.Contains(err.Error(), "changed while being read, 3 times in a row") || s.Current() != before {
		t.Fatalf("Reload of a changing file: %v", err)
	}
	if len(sink.find("ERROR", "policy reload refused")) != 1 {
		t.Errorf("refusal not logged: %v", sink.recs)
	}
	// A change in the model between the reads counts too.
	var touched atomic.Int32
	s.betweenReads = func() {
		if touched.Add(1) == 1 {
			replaceFile(t, f.model, readRoot(t, rootModel)+"\n# touched\n")
		}
	}
	if err := s.Reload(); err != nil || touched.Load() != 2 || s.Current() == before {
		t.Fatalf("Reload after a model touch: %v (parsed %d times)", err, touched.Load())
	}
}
