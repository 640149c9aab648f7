package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// everyCallNeedsApproval is the test policy (alice may call every tool)
// under which every call waits for a human.
type everyCallNeedsApproval struct{ pipelinetest.Policy }

func (everyCallNeedsApproval) ApprovalRule(authz.Request) (string, bool) { return "test:1", true }

// withApprovals makes every call through p need an approval, kept in a
// fresh approvals file (read by the clock of the synctest bubble when
// called inside one). The approval guard runs before the guards p has
// already (duplicate suppression), as in the gateway.
func withApprovals(t *testing.T, p *pipelinetest.Builder) (*FileStore, *Guard) {
	t.Helper()
	store, err := Open(filepath.Join(t.TempDir(), "approvals.json"), time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Store: store}
	p.Policy = everyCallNeedsApproval{pipelinetest.AliceMayCall()}
	p.Guards = append([]pipeline.Link{g.Link()}, p.Guards...)
	return store, g
}

// approve makes call through p (which asks for an approval) and approves
// the request, returning its ID.
func approve(t *testing.T, p *pipelinetest.Builder, store Store, call pipeline.Call) string {
	t.Helper()
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), call))
	pending := listed(t, store, StatePending)
	if pipelinetest.Code(env) != "approval_required" || len(pending) != 1 {
		t.Fatalf("first call: %+v, pending %v", env, pending)
	}
	if _, err := store.Approve(pending[0].ID, "carol"); err != nil {
		t.Fatal(err)
	}
	return pending[0].ID
}

func stateOf(t *testing.T, store Store, id string) State {
	t.Helper()
	r, err := store.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

// runsOnce checks that the approved call now runs, once: it succeeds, the
// upstream sees it, the approval is used, and a repeat needs a new one.
func runsOnce(t *testing.T, p *pipelinetest.Builder, store Store, id string, up *countingUpstream) {
	t.Helper()
	before := up.Calls.Load()
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || up.Calls.Load() != before+1 {
		t.Fatalf("the approved call after the refusal: %+v, %d upstream calls before, %d after", env, before, up.Calls.Load())
	}
	if st := stateOf(t, store, id); st != StateUsed {
		t.Fatalf("after the approved call ran: %s", st)
	}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
	if pipelinetest.Code(env) != "approval_required" || strings.Contains(*env.Message, id) {
		t.Fatalf("its repeat: %+v", env)
	}
}

// refusedAndRestored checks the answer of an approved call that a later
// stage refused before it was sent: it says why (want) and that the
// approval still stands, and the approval is approved again.
func refusedAndRestored(t *testing.T, env envelope.Envelope, store Store, id, code, want string) {
	t.Helper()
	if pipelinetest.Code(env) != code || !env.Retryable || !strings.Contains(*env.Message, want) ||
		!strings.Contains(*env.Message, "approval (request "+id+") still stands") || strings.Contains(*env.Message, "new approval is needed") {
		t.Fatalf("the approved call refused before it was sent: %s %v", pipelinetest.Code(env), *env.Message)
	}
	if st := stateOf(t, store, id); st != StateApproved {
		t.Fatalf("the approval after the refusal: %s", st)
	}
}

// An approved call that a later stage refuses before anything is sent
// upstream (the in-flight limit, an open breaker, attempts that never left
// the gateway) does not use up its approval: it is restored, the refusal
// says so, and once the cause clears the same call runs, once, without a
// new approval.
func TestApprovalRestoredWhenNotSent(t *testing.T) {
	t.Run("in-flight limit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := &countingUpstream{Fn: okAnswer}
			p := resilient(t, up, false)
			limit := pipeline.NewLimiter(1)
			p.Resilience.InFlight = map[string]*pipeline.Limiter{"orders": limit}
			store, _ := withApprovals(t, p)
			id := approve(t, p, store, getOrder)
			release := holdSlot(t, limit) // another call holds the only slot
			refusedAndRestored(t, pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)), store, id, "upstream_unavailable", "busy")
			release()
			if up.Calls.Load() != 0 {
				t.Fatalf("%d upstream calls while the server was busy", up.Calls.Load())
			}
			runsOnce(t, p, store, id, up)
		})
	})
	t.Run("open breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
				if n <= 5 {
					return nil, broken
				}
				return json.RawMessage(pipelinetest.OKText), nil
			}}
			p := resilient(t, up, false)
			p.Resilience.Retry = nil
			for i := range 5 { // other calls, needing no approval, open the breaker
				p.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: fmt.Appendf(nil, `{"order_id":%d}`, 100+i)})
			}
			store, _ := withApprovals(t, p)
			id := approve(t, p, store, getOrder)
			refusedAndRestored(t, pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)), store, id, "upstream_unavailable", "circuit open")
			if up.Calls.Load() != 5 {
				t.Fatalf("%d upstream calls through an open breaker", up.Calls.Load()-5)
			}
			time.Sleep(31 * time.Second) // the bubble's clock: the breaker then lets a probe through
			runsOnce(t, p, store, id, up)
		})
	})
	t.Run("never sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var down atomic.Bool
			down.Store(true)
			up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
				if down.Load() {
					return nil, notSent // not connected: every attempt is refused before sending
				}
				return json.RawMessage(pipelinetest.OKText), nil
			}}
			p := resilient(t, up, false)
			store, _ := withApprovals(t, p)
			id := approve(t, p, store, getOrder)
			refusedAndRestored(t, pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)), store, id, "upstream_unavailable", "not sent")
			if up.Calls.Load() < 1 {
				t.Fatal("no attempt was made")
			}
			down.Store(false)
			runsOnce(t, p, store, id, up)
		})
	})
}

// An approved call that was sent upstream uses up its approval whatever
// its outcome, and so does one that may have been: an attempt of a
// retry-safe tool that reached the upstream, followed by retries that
// never left the gateway.
func TestApprovalUsedWhenSent(t *testing.T) {
	t.Run("sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) { return nil, broken }}
			p := resilient(t, up, false)
			store, _ := withApprovals(t, p)
			id := approve(t, p, store, getOrder)
			env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
			if pipelinetest.Code(env) != "upstream_error" || strings.Contains(*env.Message, "still stands") || up.Calls.Load() != 1 {
				t.Fatalf("the approved call that failed upstream: %+v, %d upstream calls", env, up.Calls.Load())
			}
			if st := stateOf(t, store, id); st != StateUsed {
				t.Fatalf("its approval: %s", st)
			}
			if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "approval_required" || up.Calls.Load() != 1 {
				t.Fatalf("its repeat: %+v", env)
			}
		})
	})
	t.Run("sent, then retries not sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
				if n == 1 {
					return nil, broken
				}
				return nil, notSent
			}}
			p := resilient(t, up, true)
			store, _ := withApprovals(t, p)
			id := approve(t, p, store, getOrder)
			env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
			if up.Calls.Load() < 2 {
				t.Fatalf("no retry after the first attempt: %+v", env)
			}
			if pipelinetest.Code(env) != "upstream_unavailable" || strings.Contains(*env.Message, "still stands") || !strings.Contains(*env.Message, "new approval") {
				t.Fatalf("the approved call: %s %v", pipelinetest.Code(env), *env.Message)
			}
			if st := stateOf(t, store, id); st != StateUsed {
				t.Fatalf("its approval: %s", st)
			}
		})
	})
}

// failingRestore is an approvals store whose Restore fails, as a shared
// store that went down after the check would.
type failingRestore struct{ Store }

func (failingRestore) Restore(context.Context, Request) (Request, error) {
	return Request{}, fmt.Errorf("%w: connection refused", ErrUnavailable)
}

// When the approval cannot be restored, it stays used, and the refusal
// says that running the call needs a new approval rather than "retry".
func TestApprovalNotRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: okAnswer}
		p := resilient(t, up, false)
		limit := pipeline.NewLimiter(1)
		p.Resilience.InFlight = map[string]*pipeline.Limiter{"orders": limit}
		store, guard := withApprovals(t, p)
		guard.Store = failingRestore{store}
		id := approve(t, p, store, getOrder)
		release := holdSlot(t, limit)
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		release()
		if pipelinetest.Code(env) != "upstream_unavailable" || !strings.Contains(*env.Message, "busy") || strings.Contains(*env.Message, "still stands") ||
			!strings.Contains(*env.Message, "used up its approval (request "+id+"), so running it needs a new approval") {
			t.Fatalf("refused, approval not restored: %s %v", pipelinetest.Code(env), *env.Message)
		}
		if st := stateOf(t, store, id); st != StateUsed {
			t.Fatalf("its approval: %s", st)
		}
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "approval_required" || up.Calls.Load() != 0 {
			t.Fatalf("its repeat: %+v", env)
		}
	})
}

// An approved call refused by duplicate suppression failing closed (the
// shared store down) keeps its approval: the message keeps its "retry in"
// and says the approval still stands, and the retry, once the store is
// back, runs the call once.
func TestApprovedCallRefusedByDedup(t *testing.T) {
	up := &countingUpstream{Fn: okAnswer}
	shared := newFakeShared()
	p := replicas(t, 1, up, shared)[0]
	store, _ := withApprovals(t, p)
	id := approve(t, p, store, getOrder)
	shared.setErr(errors.New("the shared state store is unavailable: connection refused"))
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
	refusedAndRestored(t, env, store, id, "rate_limited", "shared state store is unavailable")
	if up.Calls.Load() != 0 || !strings.Contains(*env.Message, "retry in") {
		t.Fatalf("approved call refused by duplicate suppression: %+v, %d executions", env, up.Calls.Load())
	}
	shared.setErr(nil)
	runsOnce(t, p, store, id, up)
}

// An approved call answered by an identical call's recorded answer (a
// replay) ran nothing on its approval, which is restored; once the replay
// window has passed, the call runs on it.
func TestApprovedCallReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: okAnswer}
		p := dedupPipeline(t, up)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || up.Calls.Load() != 1 {
			t.Fatalf("the call before approvals were required: %+v", env)
		}
		store, _ := withApprovals(t, p)
		id := approve(t, p, store, getOrder)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || !env.Replayed || up.Calls.Load() != 1 {
			t.Fatalf("the approved call within the replay window: %+v, %d executions", env, up.Calls.Load())
		}
		if st := stateOf(t, store, id); st != StateApproved {
			t.Fatalf("its approval after a replay: %s", st)
		}
		time.Sleep(2 * time.Minute) // the bubble's clock: past the replay window
		runsOnce(t, p, store, id, up)
	})
}
