package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
)

var refundArgs = json.RawMessage(`{"order_id":7,"amount":12.50}`)

func checkOn(t *testing.T, a *Store, hash string, want approvals.Outcome) approvals.Request {
	t.Helper()
	out, r, err := a.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: hash, Args: refundArgs, Rule: "policy.csv:3"})
	if err != nil || out != want {
		t.Fatalf("Check: %v, %v (want %v)", out, err, want)
	}
	return r
}

// A request made through one replica is approved through another and
// consumed through a third, once; the next identical call needs a new
// approval. Everything a request carries survives the trip.
func TestApprovalsAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	c, _ := redistest.Open(t, srv, "t:")
	ra, rb, rc := New(a, time.Hour), New(b, time.Hour), New(c, time.Hour)
	var decided []approvals.Request
	rb.OnDecision(func(r approvals.Request) { decided = append(decided, r) })

	req := checkOn(t, ra, "h1", approvals.Pending)
	if again := checkOn(t, rc, "h1", approvals.Pending); again.ID != req.ID {
		t.Fatalf("a repeat made a second request: %s then %s", req.ID, again.ID)
	}
	if req.Principal != "alice" || req.Tool != "orders/refund" || req.ArgsHash != "h1" || string(req.Args) != string(refundArgs) ||
		req.Rule != "policy.csv:3" || req.State != approvals.StatePending || req.CreatedAt.IsZero() || !req.ExpiresAt.After(req.CreatedAt) {
		t.Fatalf("request as stored: %+v", req)
	}
	approved, err := rb.Approve(req.ID, "carol")
	if err != nil || approved.State != approvals.StateApproved || approved.DecidedBy != "carol" || len(decided) != 1 {
		t.Fatalf("approve: %+v, %v (decisions seen %d)", approved, err, len(decided))
	}
	if got := listed(t, rc, approvals.StateApproved); len(got) != 1 || got[0].ID != req.ID {
		t.Fatalf("another replica lists %+v", got)
	}
	used := checkOn(t, rc, "h1", approvals.Proceed)
	if used.ID != req.ID || used.State != approvals.StateUsed {
		t.Fatalf("consumed: %+v", used)
	}
	if next := checkOn(t, ra, "h1", approvals.Pending); next.ID == req.ID {
		t.Fatal("the approval was used twice")
	}
	if _, err := rb.Approve(req.ID, "carol"); !errors.Is(err, approvals.ErrNotPending) {
		t.Fatalf("approving a used request: %v", err)
	}
	if _, err := rb.Approve("apr_nosuch", "carol"); !errors.Is(err, approvals.ErrNotFound) {
		t.Fatalf("approving an unknown request: %v", err)
	}
	if got, err := ra.Get(req.ID); err != nil || got.State != approvals.StateUsed {
		t.Fatalf("Get: %+v, %v", got, err)
	}
}

// Many replicas check the same approved call at once: exactly one runs.
func TestApprovalConsumedOnce(t *testing.T) {
	srv := redistest.Start(t)
	var stores []*Store
	for range 3 {
		c, _ := redistest.Open(t, srv, "t:")
		stores = append(stores, New(c, time.Hour))
	}
	req := checkOn(t, stores[0], "race", approvals.Pending)
	if _, err := stores[1].Approve(req.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		proceeds int
	)
	for i := range 30 {
		wg.Go(func() {
			out, _, err := stores[i%3].Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: "race", Args: refundArgs})
			if err != nil {
				t.Error(err)
			}
			if out == approvals.Proceed {
				mu.Lock()
				proceeds++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if proceeds != 1 {
		t.Fatalf("%d checks proceeded on one approval", proceeds)
	}
}

// A denial holds on every replica, with its reason; a decided request
// cannot be decided again.
func TestApprovalDenied(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := redistest.Open(t, srv, "t:")
	b, _ := redistest.Open(t, srv, "t:")
	ra, rb := New(a, time.Hour), New(b, time.Hour)
	req := checkOn(t, ra, "h2", approvals.Pending)
	if _, err := rb.Deny(req.ID, "carol", "not this order"); err != nil {
		t.Fatal(err)
	}
	if got := checkOn(t, ra, "h2", approvals.Denied); got.Reason != "not this order" || got.ID != req.ID {
		t.Fatalf("denied: %+v", got)
	}
	if _, err := ra.Approve(req.ID, "dave"); !errors.Is(err, approvals.ErrNotPending) {
		t.Fatalf("approving a denied request: %v", err)
	}
}

// Requests expire after the ttl: an expired one cannot be approved, and
// the next identical call makes a new one.
func TestApprovalExpires(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "t:")
	a := New(c, 50*time.Millisecond)
	req := checkOn(t, a, "h3", approvals.Pending)
	pollUntil(t, func() bool { r, err := a.Get(req.ID); return err == nil && r.State == approvals.StateExpired })
	if _, err := a.Approve(req.ID, "carol"); !errors.Is(err, approvals.ErrExpired) {
		t.Fatalf("approving an expired request: %v", err)
	}
	if next := checkOn(t, a, "h3", approvals.Pending); next.ID == req.ID {
		t.Fatal("an expired request still decides identical calls")
	}
	if got := listed(t, a, approvals.StateExpired); len(got) != 1 || got[0].ID != req.ID {
		t.Fatalf("expired requests listed: %+v", got)
	}
}

// pollUntil polls cond until it holds (time passing on the server's clock).
func pollUntil(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("condition never held")
		}
	}
}

// With the server down nothing is decided: Check and Approve fail with
// approvals.ErrUnavailable (so the call is refused, never run), so does
// List (never an old copy: it could show a request pending that another
// replica decided), and everything works again after a restart.
func TestApprovalsStoreDown(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "t:")
	a := New(c, time.Hour)
	req := checkOn(t, a, "h4", approvals.Pending)
	if got := listed(t, a); len(got) != 1 {
		t.Fatalf("list: %+v", got)
	}
	srv.Kill()
	ev.WaitStatus(t, false)
	if out, _, err := a.Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: "h4", Args: refundArgs}); !errors.Is(err, approvals.ErrUnavailable) || out == approvals.Proceed {
		t.Fatalf("check with the server down: %v, %v", out, err)
	}
	if _, err := a.Approve(req.ID, "carol"); !errors.Is(err, approvals.ErrUnavailable) {
		t.Fatalf("approve with the server down: %v", err)
	}
	if _, err := a.Restore(context.Background(), approvals.Request{ID: req.ID, Consumption: "apr_token"}); !errors.Is(err, approvals.ErrUnavailable) {
		t.Fatalf("restore with the server down: %v", err)
	}
	if got, err := a.List(); !errors.Is(err, approvals.ErrUnavailable) || got != nil {
		t.Fatalf("list with the server down: %+v, %v", got, err)
	}
	if ev.ErrorsOf(state.FeatureApprovals) == 0 {
		t.Error("failures not counted")
	}
	srv.Restart()
	ev.WaitStatus(t, true)
	checkOn(t, a, "h4", approvals.Pending) // the server restarted empty: a new request
}

// Restore undoes one consumption, once, through any replica: the request is approved again as the
// approver left it and the next identical call runs, exactly once however many replicas race for it. A
// stale consumption (restored already, or restored and consumed by another check) is refused, as are a
// request that is not used, an approval superseded by a newer request, and an expired one.
func TestApprovalRestore(t *testing.T) {
	srv := redistest.Start(t)
	var stores []*Store
	for range 3 {
		c, _ := redistest.Open(t, srv, "t:")
		stores = append(stores, New(c, time.Hour))
	}
	var reported []approvals.Request
	stores[1].OnDecision(func(r approvals.Request) { reported = append(reported, r) })
	req := checkOn(t, stores[0], "h1", approvals.Pending)
	approved, err := stores[1].Approve(req.ID, "carol")
	if err != nil {
		t.Fatal(err)
	}
	first := checkOn(t, stores[2], "h1", approvals.Proceed)
	if first.Consumption == "" {
		t.Fatalf("a consumption without its token: %+v", first)
	}
	restored, err := stores[1].Restore(context.Background(), first)
	if err != nil || restored.ID != req.ID || restored.State != approvals.StateApproved || restored.DecidedBy != "carol" ||
		!restored.DecidedAt.Equal(approved.DecidedAt) || !restored.ExpiresAt.Equal(approved.ExpiresAt) {
		t.Fatalf("restored: %+v, %v (approved %+v)", restored, err, approved)
	}
	if len(reported) != 2 || reported[1].State != approvals.StateApproved || reported[1].Reason != approvals.RestoredReason {
		t.Fatalf("decisions reported: %+v", reported)
	}
	if got := listed(t, stores[0], approvals.StateApproved); len(got) != 1 || got[0].ID != req.ID || got[0].Reason != "" {
		t.Fatalf("another replica lists %+v", got)
	}
	if _, err := stores[0].Restore(context.Background(), first); !errors.Is(err, approvals.ErrNotRestorable) {
		t.Fatalf("restoring twice: %v", err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		second []approvals.Request
	)
	for i := range 30 {
		wg.Go(func() {
			out, r, err := stores[i%3].Check(context.Background(), approvals.Call{Principal: "alice", Tool: "orders/refund", ArgsHash: "h1", Args: refundArgs})
			if err != nil {
				t.Error(err)
			}
			if out == approvals.Proceed {
				mu.Lock()
				second = append(second, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(second) != 1 || second[0].ID != req.ID || second[0].Consumption == first.Consumption {
		t.Fatalf("checks racing for the restored approval: %+v", second)
	}
	if _, err := stores[0].Restore(context.Background(), first); !errors.Is(err, approvals.ErrNotRestorable) {
		t.Fatalf("restoring a consumption by another check: %v", err)
	}
	// The checks that lost the race asked for a new approval: it supersedes the consumed one.
	if _, err := stores[0].Restore(context.Background(), second[0]); !errors.Is(err, approvals.ErrNotRestorable) {
		t.Fatalf("restoring under a newer request: %v", err)
	}
	if got, err := stores[0].Get(req.ID); err != nil || got.State != approvals.StateUsed {
		t.Fatalf("after refused restores: %+v, %v", got, err)
	}
	pending := checkOn(t, stores[0], "h1", approvals.Pending)
	if pending.ID == req.ID {
		t.Fatal("the newer request no longer decides")
	}
	if _, err := stores[0].Restore(context.Background(), approvals.Request{ID: pending.ID, Consumption: first.Consumption}); !errors.Is(err, approvals.ErrNotRestorable) {
		t.Fatalf("restoring a pending request: %v", err)
	}
	if _, err := stores[0].Restore(context.Background(), approvals.Request{ID: "apr_nosuch", Consumption: first.Consumption}); !errors.Is(err, approvals.ErrNotFound) {
		t.Fatalf("restoring an unknown request: %v", err)
	}
	if _, err := stores[0].Restore(context.Background(), approvals.Request{ID: req.ID}); !errors.Is(err, approvals.ErrNotRestorable) {
		t.Fatalf("restoring without a consumption: %v", err)
	}
}

// An approval consumed and then expired is not restored: it stays used.
func TestApprovalRestoreExpired(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "t:")
	a := New(c, time.Second)
	req := checkOn(t, a, "h1", approvals.Pending)
	if _, err := a.Approve(req.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	used := checkOn(t, a, "h1", approvals.Proceed)
	pollUntil(t, func() bool { // Redis's clock decides expiry
		now, err := c.Redis().Time(context.Background()).Result()
		return err == nil && !now.Before(used.ExpiresAt)
	})
	if _, err := a.Restore(context.Background(), used); !errors.Is(err, approvals.ErrNotRestorable) || !errors.Is(err, approvals.ErrExpired) {
		t.Fatalf("restoring after the expiry: %v", err)
	}
	if got, err := a.Get(req.ID); err != nil || got.State != approvals.StateUsed {
		t.Fatalf("after a refused restore: %+v, %v", got, err)
	}
}

// listed is s.List, failing the test when the store cannot be read.
func listed(t *testing.T, s approvals.Store, states ...approvals.State) []approvals.Request {
	t.Helper()
	reqs, err := s.List(states...)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return reqs
}
