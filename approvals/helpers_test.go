package approvals

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// The helpers the guard's tests share with the pipeline's and duplicate
// suppression's (pipeline/execute_test.go, dedup/link_test.go).

type countingUpstream = pipelinetest.Counting

var (
	broken, notSent, getOrder = pipelinetest.Broken, pipelinetest.NotSent, pipelinetest.GetOrder
	resilient                 = pipelinetest.Resilient
)

// okAnswer is an upstream that answers every call with a plain result.
func okAnswer(context.Context, int32) (json.RawMessage, error) {
	return json.RawMessage(pipelinetest.OKText), nil
}

// holdSlot makes another call, on an upstream of its own that answers only
// once released, take an in-flight slot of limit on "orders", as a busy
// server's calls would. Call it inside a synctest bubble; the slot is
// freed when release returns.
func holdSlot(t *testing.T, limit *pipeline.Limiter) (release func()) {
	t.Helper()
	done := make(chan struct{})
	other := pipelinetest.NewBuilder(t, &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		<-done
		return json.RawMessage(pipelinetest.OKText), nil
	}})
	other.Resilience.InFlight = map[string]*pipeline.Limiter{"orders": limit}
	go other.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":999}`)})
	synctest.Wait() // the other call now holds the slot
	return func() {
		close(done)
		synctest.Wait()
	}
}

// dedupPipeline: "orders" tools are not retry-safe; answers replay for a
// minute, idempotency keys for a day.
func dedupPipeline(t *testing.T, up pipeline.Upstreams) *pipelinetest.Builder {
	return dedupShared(t, up, nil)
}

// dedupShared is dedupPipeline with shared (when not nil) as the level
// replicas share.
func dedupShared(t *testing.T, up pipeline.Upstreams, shared dedup.Shared) *pipelinetest.Builder {
	p := pipelinetest.NewBuilder(t, up)
	g := dedup.NewGuard(dedup.Options{MaxEntries: 100, Window: time.Minute, KeyWindow: 24 * time.Hour, Shared: shared})
	p.Guards = []pipeline.Link{g.Link()}
	return p
}

// replicas is n pipelines, each with its own table, sharing one store and
// one upstream.
func replicas(t *testing.T, n int, up pipeline.Upstreams, shared dedup.Shared) []*pipelinetest.Builder {
	ps := make([]*pipelinetest.Builder, n)
	for i := range ps {
		ps[i] = dedupShared(t, up, shared)
	}
	return ps
}

// fakeShared is a dedup.Shared in memory that several pipelines (replicas)
// share; err makes every Claim fail as an unreachable store would.
type fakeShared struct {
	mu      sync.Mutex
	err     error
	entries map[dedup.Key]*fakeEntry
}

type fakeEntry struct {
	done     chan struct{}
	answer   []byte
	released bool
}

func newFakeShared() *fakeShared { return &fakeShared{entries: map[dedup.Key]*fakeEntry{}} }

func (f *fakeShared) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeShared) Claim(ctx context.Context, key dedup.Key, _ time.Duration) (dedup.Claim, error) {
	for {
		f.mu.Lock()
		if f.err != nil {
			f.mu.Unlock()
			return dedup.Claim{}, f.err
		}
		e := f.entries[key]
		if e == nil || e.released {
			e = &fakeEntry{done: make(chan struct{})}
			f.entries[key] = e
			f.mu.Unlock()
			return dedup.Claim{Lease: &fakeLease{f: f, e: e}}, nil
		}
		f.mu.Unlock()
		sharing := dedup.Replayed
		select {
		case <-e.done:
		default:
			sharing = dedup.Joined
			select {
			case <-e.done:
			case <-ctx.Done():
				return dedup.Claim{}, ctx.Err()
			}
		}
		if e.answer != nil {
			return dedup.Claim{Answer: e.answer, Sharing: sharing}, nil
		}
		// released: claim again
	}
}

type fakeLease struct {
	f *fakeShared
	e *fakeEntry
}

func (l *fakeLease) Done(_ context.Context, answer []byte) error {
	l.e.answer = answer
	close(l.e.done)
	return nil
}

func (l *fakeLease) Release(context.Context) error {
	l.f.mu.Lock()
	l.e.released = true
	l.f.mu.Unlock()
	close(l.e.done)
	return nil
}

// listed is s.List, failing the test when the store cannot be read.
func listed(t *testing.T, s Store, states ...State) []Request {
	t.Helper()
	reqs, err := s.List(states...)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return reqs
}
