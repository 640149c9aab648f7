package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const ttl = time.Hour

func open(t *testing.T) (*FileStore, *clock, string) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "toolgate.approvals.json")
	s, err := Open(path, ttl, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, path
}

var args = json.RawMessage(`{"amount":20,"order_id":4821}`)

func check(t *testing.T, s *FileStore, hash string, want Outcome) Request {
	t.Helper()
	out, r, err := s.Check(context.Background(), Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: hash, Args: args, Rule: "policy.csv:31"})
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Fatalf("Check = %v (%s), want %v", out, r.State, want)
	}
	return r
}

func TestPendingCreatedOncePerTriple(t *testing.T) {
	s, _, _ := open(t)
	a := check(t, s, "h1", Pending)
	if !strings.HasPrefix(a.ID, "apr_") || len(a.ID) != 26 || a.State != StatePending || a.Rule != "policy.csv:31" {
		t.Fatalf("unexpected request %+v", a)
	}
	if string(a.Args) != string(args) {
		t.Errorf("args %s", a.Args)
	}
	b := check(t, s, "h1", Pending)
	if b.ID != a.ID {
		t.Errorf("repeat created %s, want the same %s", b.ID, a.ID)
	}
	if n := len(listed(t, s, StatePending)); n != 1 {
		t.Errorf("%d pending, want 1", n)
	}
	// Changed arguments, another principal or another tool: separate requests.
	c := check(t, s, "h2", Pending)
	_, d, _ := s.Check(context.Background(), Call{Principal: "bob", Tool: "orders/refund_order", ArgsHash: "h1", Args: args})
	_, e, _ := s.Check(context.Background(), Call{Principal: "alice", Tool: "orders/cancel_order", ArgsHash: "h1", Args: args})
	ids := map[string]bool{a.ID: true, c.ID: true, d.ID: true, e.ID: true}
	if len(ids) != 4 {
		t.Errorf("want 4 distinct requests, got %v", ids)
	}
}

func TestApproveRunsOnce(t *testing.T) {
	s, _, _ := open(t)
	p := check(t, s, "h1", Pending)
	if _, err := s.Approve(p.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	// Approving covers exactly these arguments.
	if other := check(t, s, "h2", Pending); other.ID == p.ID {
		t.Fatal("other arguments share the approval")
	}
	got := check(t, s, "h1", Proceed)
	if got.ID != p.ID || got.State != StateUsed || got.DecidedBy != "carol" {
		t.Errorf("consumed %+v", got)
	}
	again := check(t, s, "h1", Pending)
	if again.ID == p.ID {
		t.Error("second call reused the used approval")
	}
	if _, err := s.Approve(p.ID, "carol"); !errors.Is(err, ErrNotPending) {
		t.Errorf("approving a used request: %v, want ErrNotPending", err)
	}
}

func TestConcurrentChecksConsumeOnce(t *testing.T) {
	s, _, _ := open(t)
	p := check(t, s, "h1", Pending)
	if _, err := s.Approve(p.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	proceeded := 0
	for range 8 {
		wg.Go(func() {
			out, _, err := s.Check(context.Background(), Call{Principal: "alice", Tool: "orders/refund_order", ArgsHash: "h1", Args: args})
			if err != nil {
				t.Error(err)
			}
			if out == Proceed {
				mu.Lock()
				proceeded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if proceeded != 1 {
		t.Errorf("%d calls proceeded, want 1", proceeded)
	}
}

func TestDeny(t *testing.T) {
	s, clk, _ := open(t)
	p := check(t, s, "h1", Pending)
	if _, err := s.Deny(p.ID, "carol", "refunds over 10 need a ticket"); err != nil {
		t.Fatal(err)
	}
	d := check(t, s, "h1", Denied)
	if d.ID != p.ID || d.Reason != "refunds over 10 need a ticket" || d.DecidedBy != "carol" {
		t.Errorf("denied %+v", d)
	}
	check(t, s, "h1", Denied) // stays denied
	if _, err := s.Approve(p.ID, "x"); !errors.Is(err, ErrNotPending) {
		t.Errorf("approving a denied request: %v", err)
	}
	clk.add(ttl)
	if n := check(t, s, "h1", Pending); n.ID == p.ID {
		t.Error("denial did not lapse after the ttl")
	}
}

func TestExpiry(t *testing.T) {
	s, clk, _ := open(t)
	p := check(t, s, "h1", Pending)
	clk.add(ttl - time.Second)
	check(t, s, "h1", Pending)
	clk.add(time.Second)
	if got := listed(t, s, StateExpired); len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("expired = %+v", got)
	}
	if _, err := s.Approve(p.ID, "carol"); !errors.Is(err, ErrExpired) {
		t.Errorf("approving an expired request: %v, want ErrExpired", err)
	}
	if _, err := s.Deny(p.ID, "carol", ""); !errors.Is(err, ErrExpired) {
		t.Errorf("denying an expired request: %v, want ErrExpired", err)
	}
	q := check(t, s, "h1", Pending)
	if q.ID == p.ID {
		t.Fatal("expired request returned again")
	}

	// An approval not used within the ttl expires too.
	if _, err := s.Approve(q.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	clk.add(ttl)
	if r := check(t, s, "h1", Pending); r.ID == q.ID {
		t.Error("expired approval consumed")
	}
}

func TestUnknownID(t *testing.T) {
	s, _, _ := open(t)
	if _, err := s.Approve("apr_nope", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Approve: %v", err)
	}
	if _, err := s.Deny("apr_nope", "x", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Deny: %v", err)
	}
}

func TestRestartKeepsRequests(t *testing.T) {
	s, clk, path := open(t)
	p := check(t, s, "h1", Pending)
	q := check(t, s, "h2", Pending)
	if _, err := s.Approve(q.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, ttl, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if got := check(t, s2, "h1", Pending); got.ID != p.ID || !got.CreatedAt.Equal(p.CreatedAt) {
		t.Errorf("after reopen got %+v, want %s", got, p.ID)
	}
	if got := check(t, s2, "h2", Proceed); got.ID != q.ID {
		t.Errorf("approval lost on reopen: %+v", got)
	}
	// The first store sees the second's change (shared file): the approval is used.
	if got := check(t, s, "h2", Pending); got.ID == q.ID {
		t.Error("approval consumed twice across two stores")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestCorruptFile(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"empty", "", "the file is empty"},
		{"not JSON", "{", "unexpected EOF"},
		{"wrong version", `{"version":2,"requests":[]}`, "version 2"},
		{"no requests", `{"version":1}`, `no "requests"`},
		{"unknown field", `{"version":1,"requests":[],"x":1}`, "unknown field"},
		{"bad state", `{"version":1,"requests":[{"id":"apr_abcdefgh","principal":"a","tool":"s/t","args_hash":"h","state":"maybe",` +
			`"created_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T13:00:00Z"}]}`, `unknown state "maybe"`},
		{"no principal", `{"version":1,"requests":[{"id":"apr_abcdefgh","tool":"s/t","args_hash":"h","state":"pending",` +
			`"created_at":"2026-11-30T12:00:00Z","expires_at":"2026-11-30T13:00:00Z"}]}`, "no principal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.json")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, ttl, nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, want an error naming %s and containing %q", err, path, tt.want)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	s, clk, _ := open(t)
	p := check(t, s, "h1", Pending)
	if _, err := s.Approve(p.ID, "c"); err != nil {
		t.Fatal(err)
	}
	check(t, s, "h1", Proceed)
	clk.add(FinishedRetention + time.Second)
	check(t, s, "h2", Pending) // a write prunes
	for _, r := range listed(t, s) {
		if r.ID == p.ID {
			t.Errorf("used request older than a day kept: %+v", r)
		}
	}
}

// consume approves a new request for hash and consumes it, returning what Check returned.
func consume(t *testing.T, s *FileStore, hash string) Request {
	t.Helper()
	req := check(t, s, hash, Pending)
	if _, err := s.Approve(req.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	used := check(t, s, hash, Proceed)
	if used.ID != req.ID || used.State != StateUsed || used.Consumption == "" {
		t.Fatalf("consumed: %+v", used)
	}
	return used
}

// Restore undoes one consumption, once: the request is approved again as the approver left it, and
// the next identical call runs; a stale consumption (restored already, or restored and consumed again)
// is refused, as are a request that is not used, an expired approval and one a newer request
// supersedes. Another process sharing the file can restore what this one consumed.
func TestRestore(t *testing.T) {
	s, clk, path := open(t)
	var reported []Request
	s.OnDecision(func(r Request) { reported = append(reported, r) })
	req := check(t, s, "h1", Pending)
	approved, err := s.Approve(req.ID, "carol")
	if err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	first := check(t, s, "h1", Proceed)
	restored, err := s.Restore(context.Background(), first)
	if err != nil || restored.State != StateApproved || restored.DecidedBy != "carol" ||
		!restored.DecidedAt.Equal(approved.DecidedAt) || !restored.ExpiresAt.Equal(approved.ExpiresAt) {
		t.Fatalf("restored: %+v, %v (approved %+v)", restored, err, approved)
	}
	if len(reported) != 2 || reported[1].ID != req.ID || reported[1].State != StateApproved || reported[1].Reason != RestoredReason {
		t.Fatalf("decisions reported: %+v", reported)
	}
	if got, _ := s.Get(req.ID); got.State != StateApproved || got.Reason != "" {
		t.Fatalf("stored after the restore: %+v", got)
	}
	if _, err := s.Restore(context.Background(), first); !errors.Is(err, ErrNotRestorable) {
		t.Fatalf("restoring twice: %v", err)
	}
	clk.add(time.Minute)
	second := check(t, s, "h1", Proceed)
	if second.ID != req.ID || second.Consumption == first.Consumption {
		t.Fatalf("the restored approval consumed again: %+v (first %+v)", second, first)
	}
	if _, err := s.Restore(context.Background(), first); !errors.Is(err, ErrNotRestorable) {
		t.Fatalf("restoring a consumption by another check: %v", err)
	}
	if got, _ := s.Get(req.ID); got.State != StateUsed {
		t.Fatalf("after a stale restore: %+v", got)
	}
	other, err := Open(path, ttl, clk.now) // another process sharing the file
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Restore(context.Background(), second); err != nil || r.State != StateApproved {
		t.Fatalf("restore through another process: %+v, %v", r, err)
	}
	check(t, s, "h1", Proceed)
	check(t, s, "h1", Pending) // used for good: a new request
	if len(reported) != 2 {
		t.Fatalf("%d decisions reported; the other process's restore is its own", len(reported))
	}

	pending := check(t, s, "h2", Pending)
	if _, err := s.Restore(context.Background(), Request{ID: pending.ID, Consumption: first.Consumption}); !errors.Is(err, ErrNotRestorable) {
		t.Fatalf("restoring a pending request: %v", err)
	}
	if _, err := s.Restore(context.Background(), Request{ID: "apr_nosuchrequest", Consumption: first.Consumption}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restoring an unknown request: %v", err)
	}

	late := consume(t, s, "h3")
	clk.add(ttl)
	if _, err := s.Restore(context.Background(), late); !errors.Is(err, ErrNotRestorable) || !errors.Is(err, ErrExpired) {
		t.Fatalf("restoring after the expiry: %v", err)
	}
	if got, _ := s.Get(late.ID); got.State != StateUsed {
		t.Fatalf("an expired approval after a refused restore: %+v", got)
	}

	superseded := consume(t, s, "h4")
	newer := check(t, s, "h4", Pending) // an identical call asked for a new approval meanwhile
	if _, err := s.Restore(context.Background(), superseded); !errors.Is(err, ErrNotRestorable) {
		t.Fatalf("restoring under a newer request: %v", err)
	}
	if got := check(t, s, "h4", Pending); got.ID != newer.ID {
		t.Fatalf("the newer request no longer decides: %+v", got)
	}
}

// List reads the file again each time; when it cannot (here: a damaged file), it fails rather than
// answer the copy it read last.
func TestListFailsOnDamagedFile(t *testing.T) {
	s, _, path := open(t)
	check(t, s, "h1", Pending)
	if got := listed(t, s, StatePending); len(got) != 1 {
		t.Fatalf("pending: %+v", got)
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List(StatePending); err == nil || got != nil {
		t.Fatalf("list of a damaged file: %+v, %v", got, err)
	}
	if _, err := s.Get("apr_anything"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("get from a damaged file: %v, want the file's error", err)
	}
}
