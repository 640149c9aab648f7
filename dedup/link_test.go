package dedup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

type countingUpstream = pipelinetest.Counting

var notSent, getOrder = pipelinetest.NotSent, pipelinetest.GetOrder

// replica is a test chain with duplicate suppression, and its guard.
type replica struct {
	*pipelinetest.Builder
	dedup *Guard
}

// dedupPipeline: "orders" tools are not retry-safe; answers replay for a
// minute, idempotency keys for a day.
func dedupPipeline(t *testing.T, up pipeline.Upstreams) *replica {
	p := &replica{Builder: pipelinetest.NewBuilder(t, up),
		dedup: NewGuard(Options{MaxEntries: 100, Window: time.Minute, KeyWindow: 24 * time.Hour})}
	p.Guards = []pipeline.Link{p.dedup.Link()}
	return p
}

func TestDuplicateSuppression(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			<-release
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := dedupPipeline(t, up)
		call := func(c pipeline.Call) (envOK bool, replayed bool) {
			env := pipelinetest.Envelope(t, p.Handle(context.Background(), c))
			return env.OK, env.Replayed
		}
		// Two identical calls in flight: one execution, both answered.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if ok, _ := call(pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); !ok {
					t.Error("joined call failed")
				}
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if n := up.Calls.Load(); n != 1 {
			t.Fatalf("%d executions for two identical calls in flight", n)
		}
		// A repeat inside the window (key order and spacing differ) replays.
		if ok, replayed := call(pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{ "order_id" : 1.0 }`)}); !ok || !replayed || up.Calls.Load() != 1 {
			t.Fatalf("repeat inside the window: ok=%v replayed=%v executions=%d", ok, replayed, up.Calls.Load())
		}
		// Different arguments, or another principal, execute.
		call(pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":2}`)})
		p.Policy = pipelinetest.Policy{Allow: map[string]bool{"alice orders/get": true, "bob orders/get": true}}
		call(pipeline.Call{Subject: pipelinetest.Bob, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
		if n := up.Calls.Load(); n != 3 {
			t.Fatalf("%d executions; different arguments and principals must not share", n)
		}
		// Outside the window the call executes again.
		time.Sleep(time.Minute)
		if _, replayed := call(pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); replayed || up.Calls.Load() != 4 {
			t.Fatalf("after the window: replayed=%v executions=%d", replayed, up.Calls.Load())
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := dedupPipeline(t, up)
		first := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`), IdempotencyKey: "k-1"}
		p.Handle(context.Background(), first)
		time.Sleep(time.Hour) // past the argument window, inside the key's
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), first)); !env.Replayed || up.Calls.Load() != 1 {
			t.Fatalf("same key an hour later: replayed=%v executions=%d", env.Replayed, up.Calls.Load())
		}
		reused := first
		reused.Args = []byte(`{"order_id":2}`)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), reused)); pipelinetest.Code(env) != "invalid_arguments" || up.Calls.Load() != 1 {
			t.Fatalf("key reused with other arguments: %s, executions %d", pipelinetest.Code(env), up.Calls.Load())
		}
	})
}

// An answer over a quarter of MaxBytes reaches its caller whole but is not
// kept for replay; its repeat within the window is not run a second time
// either: it is refused with duplicate_call, and the log says why. A new
// idempotency key runs it on purpose; after the window it runs again; a
// smaller answer is replayed as usual.
func TestAnswersTooLargeToKeepAreNotRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("z", 300<<10)
		up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
			if n == 4 {
				return json.RawMessage(pipelinetest.OKText), nil
			}
			return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}})
		}}
		var logs bytes.Buffer
		p := &replica{Builder: pipelinetest.NewBuilder(t, up), dedup: NewGuard(Options{Window: time.Minute, KeyWindow: time.Hour,
			MaxBytes: 1 << 20, Log: slog.New(slog.NewJSONHandler(&logs, nil))})}
		p.Guards = []pipeline.Link{p.dedup.Link()}
		call := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
		res := p.Handle(context.Background(), call)
		if env := pipelinetest.Envelope(t, res); !env.OK || len(res.Content) != 1 || len(res.Content[0].(mcp.TextContent).Text) != len(big) {
			t.Fatalf("first call: ok=%v, want the whole %d-byte answer", env.OK, len(big))
		}
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), call))
		if pipelinetest.Code(env) != "duplicate_call" || up.Calls.Load() != 1 || env.Retryable {
			t.Fatalf("repeat: %s retryable=%v after %d executions, want duplicate_call, not retryable, after 1", pipelinetest.Code(env), env.Retryable, up.Calls.Load())
		}
		if env.Message == nil || !strings.Contains(*env.Message, "not kept for replay") || !strings.Contains(*env.Message, "new idempotency key") {
			t.Fatalf("refusal message: %v", env.Message)
		}
		if !strings.Contains(logs.String(), "answer too large to keep for replay") {
			t.Fatalf("log:\n%s", logs.String())
		}
		keyed := call
		keyed.IdempotencyKey = "again"
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), keyed)); !env.OK || up.Calls.Load() != 2 {
			t.Fatalf("with a new idempotency key: ok=%v executions=%d, want it run (2)", env.OK, up.Calls.Load())
		}
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), keyed)); pipelinetest.Code(env) != "duplicate_call" || up.Calls.Load() != 2 {
			t.Fatalf("the key's repeat: %s executions=%d, want duplicate_call after 2", pipelinetest.Code(env), up.Calls.Load())
		}
		if !strings.Contains(logs.String(), `"level":"WARN"`) {
			t.Fatalf("an answer under an idempotency key that is not kept is a warning; log:\n%s", logs.String())
		}
		time.Sleep(time.Minute)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), call)); !env.OK || up.Calls.Load() != 3 {
			t.Fatalf("after the window: ok=%v executions=%d, want it run (3)", env.OK, up.Calls.Load())
		}
		small := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":2}`)}
		p.Handle(context.Background(), small)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), small)); !env.Replayed || up.Calls.Load() != 4 {
			t.Fatalf("a small answer: replayed=%v executions=%d, want replayed after 4", env.Replayed, up.Calls.Load())
		}
	})
}

// With include_retry_safe, a retry-safe call whose answer was not kept
// simply runs again (repeating it is harmless), and a failure the bytes
// bound passes over is replayed as the failure it was.
func TestAnswersNotKeptRetrySafeAndFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("z", 300<<10)
		up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}})
		}}
		p := &replica{Builder: pipelinetest.NewBuilder(t, up), dedup: NewGuard(Options{Window: time.Minute, MaxBytes: 1 << 20, RetrySafeToo: true})}
		p.Guards = []pipeline.Link{p.dedup.Link()}
		p.RetrySafe = func(*upstreams.Tool) bool { return true }
		for i := range 2 {
			if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || up.Calls.Load() != int32(i+1) {
				t.Fatalf("retry-safe call %d: ok=%v after %d executions", i+1, env.OK, up.Calls.Load())
			}
		}

		failing := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"no such order"}],"isError":true}`), nil
		}}
		f := &replica{Builder: pipelinetest.NewBuilder(t, failing), dedup: NewGuard(Options{Window: time.Minute, MaxBytes: 1 << 20})}
		f.Guards = []pipeline.Link{f.dedup.Link()}
		f.Handle(context.Background(), getOrder)
		f.dedup.table.mu.Lock()
		for f.dedup.table.whole.oldest != nil { // as the bound would: strip every answer kept
			f.dedup.table.evictBytes()
		}
		f.dedup.table.mu.Unlock()
		if env := pipelinetest.Envelope(t, f.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "tool_failed" || !env.Replayed || failing.Calls.Load() != 1 {
			t.Fatalf("a failure passed over by the bound: %s replayed=%v after %d executions, want tool_failed replayed after 1", pipelinetest.Code(env), env.Replayed, failing.Calls.Load())
		}
	})
}

// Answers pushed out by MaxBytes leave what says they ran: the oldest one's
// repeat is refused with duplicate_call, not run again, and the newest is
// still replayed whole.
func TestAnswersEvictedByBytesAreNotRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		text := strings.Repeat("y", 100<<10) // twice that recorded (the text and the envelope): under a quarter of 1 MiB; six are over it
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
		}}
		p := &replica{Builder: pipelinetest.NewBuilder(t, up), dedup: NewGuard(Options{Window: time.Minute, MaxBytes: 1 << 20})}
		p.Guards = []pipeline.Link{p.dedup.Link()}
		order := func(n int) pipeline.Call {
			return pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: fmt.Appendf(nil, `{"order_id":%d}`, n)}
		}
		for n := range 6 {
			p.Handle(context.Background(), order(n))
		}
		if b := p.dedup.table.Bytes(); b > 1<<20 {
			t.Fatalf("the table holds %d bytes, over MaxBytes", b)
		}
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), order(0))); pipelinetest.Code(env) != "duplicate_call" || up.Calls.Load() != 6 {
			t.Fatalf("the oldest answer's repeat: %s after %d executions, want duplicate_call after 6", pipelinetest.Code(env), up.Calls.Load())
		}
		res := p.Handle(context.Background(), order(5))
		if env := pipelinetest.Envelope(t, res); !env.Replayed || len(res.Content[0].(mcp.TextContent).Text) != len(text) || up.Calls.Load() != 6 {
			t.Fatalf("the newest answer's repeat: replayed=%v executions=%d, want it replayed whole", env.Replayed, up.Calls.Load())
		}
	})
}

// A call that never reached the upstream is not recorded: its repeat runs.
// Retry-safe tools are not deduplicated.
func TestDedupSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
			if n == 1 {
				return nil, notSent
			}
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := dedupPipeline(t, up)
		c := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
		p.Handle(context.Background(), c)
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), c)); !env.OK || env.Replayed {
			t.Fatalf("repeat of a never-sent call: ok=%v replayed=%v", env.OK, env.Replayed)
		}
		p.RetrySafe = func(*upstreams.Tool) bool { return true }
		p.Handle(context.Background(), c)
		if n := up.Calls.Load(); n != 3 {
			t.Fatalf("retry-safe tool deduplicated: %d executions", n)
		}
	})
}

// fakeShared is a Shared in memory that several pipelines (replicas)
// share; err makes every Claim fail as an unreachable store would, and
// recoverUntil makes it refuse claims as a store that lost its data does.
type fakeShared struct {
	mu           sync.Mutex
	err          error
	recoverUntil time.Time
	entries      map[Key]*fakeEntry
	released     int
}

type fakeEntry struct {
	done     chan struct{}
	answer   []byte
	released bool
	lost     bool
}

func newFakeShared() *fakeShared { return &fakeShared{entries: map[Key]*fakeEntry{}} }

func (f *fakeShared) Claim(ctx context.Context, key Key, _ time.Duration) (Claim, error) {
	for {
		f.mu.Lock()
		if f.err != nil {
			f.mu.Unlock()
			return Claim{}, f.err
		}
		if left := time.Until(f.recoverUntil); left > 0 {
			f.mu.Unlock()
			return Claim{}, &RecoveringError{Left: left}
		}
		e := f.entries[key]
		if e == nil || e.released {
			e = &fakeEntry{done: make(chan struct{})}
			f.entries[key] = e
			f.mu.Unlock()
			return Claim{Lease: &fakeLease{f: f, e: e}}, nil
		}
		f.mu.Unlock()
		sharing := Replayed
		select {
		case <-e.done:
		default:
			sharing = Joined
			select {
			case <-e.done:
			case <-ctx.Done():
				return Claim{}, ctx.Err()
			}
		}
		if e.lost {
			return Claim{}, ErrAbandoned
		}
		if e.answer != nil {
			return Claim{Answer: e.answer, Sharing: sharing}, nil
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
	l.f.released++
	l.f.mu.Unlock()
	close(l.e.done)
	return nil
}

// replicas is n pipelines, each with its own table, sharing one store and
// one upstream.
func replicas(t *testing.T, n int, up pipeline.Upstreams, shared Shared) []*replica {
	ps := make([]*replica, n)
	for i := range ps {
		ps[i] = &replica{Builder: pipelinetest.NewBuilder(t, up),
			dedup: NewGuard(Options{MaxEntries: 100, Window: time.Minute, KeyWindow: 24 * time.Hour, Shared: shared})}
		ps[i].Guards = []pipeline.Link{ps[i].dedup.Link()}
	}
	return ps
}

// An identical call on another replica joins the one in flight, and a
// later one is answered from the recorded result; both see the first
// call's exact answer and only one execution happens.
func TestSharedDedupAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`{"content":[{"type":"text","text":"{\"refund\":7}"}]}`), nil
		}}
		shared := newFakeShared()
		ps := replicas(t, 3, up, shared)
		var wg sync.WaitGroup
		envs := make([]envelope.Envelope, 2)
		for i := range 2 {
			wg.Go(func() { envs[i] = pipelinetest.Envelope(t, ps[i].Handle(context.Background(), getOrder)) })
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if up.Calls.Load() != 1 || !envs[0].OK || !envs[1].OK || string(envs[0].Data) != string(envs[1].Data) || envs[0].Replayed || envs[1].Replayed {
			t.Fatalf("two replicas, one call in flight: %d executions, %+v", up.Calls.Load(), envs)
		}
		later := pipelinetest.Envelope(t, ps[2].Handle(context.Background(), getOrder))
		if up.Calls.Load() != 1 || !later.OK || !later.Replayed || string(later.Data) != string(envs[0].Data) {
			t.Fatalf("third replica after the call: %d executions, %+v", up.Calls.Load(), later)
		}
		// The idempotency key check holds across replicas.
		keyed := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`), IdempotencyKey: "k"}
		ps[0].Handle(context.Background(), keyed)
		keyed.Args = []byte(`{"order_id":2}`)
		if env := pipelinetest.Envelope(t, ps[1].Handle(context.Background(), keyed)); pipelinetest.Code(env) != "invalid_arguments" || up.Calls.Load() != 2 {
			t.Fatalf("idempotency key reused with other arguments on another replica: %s, %d executions", pipelinetest.Code(env), up.Calls.Load())
		}
	})
}

// A tool error is an answer too: it is replayed from another replica as
// the same envelope error.
func TestSharedDedupReplaysFailures(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"no such order"}],"isError":true}`), nil
	}}
	ps := replicas(t, 2, up, newFakeShared())
	first := pipelinetest.Envelope(t, ps[0].Handle(context.Background(), getOrder))
	again := pipelinetest.Envelope(t, ps[1].Handle(context.Background(), getOrder))
	if up.Calls.Load() != 1 || pipelinetest.Code(first) != "tool_failed" || pipelinetest.Code(again) != "tool_failed" || !again.Replayed || *again.Message != *first.Message {
		t.Fatalf("failure replayed across replicas: %d executions, %+v then %+v", up.Calls.Load(), first, again)
	}
}

// With a shared store, an answer too large for this replica's table is
// still replayed whole, from the store, on this replica and on another:
// the local table keeps no stand-in that would refuse it.
func TestSharedDedupReplaysAnswersTooLargeToKeepLocally(t *testing.T) {
	big := strings.Repeat("z", 300<<10)
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}})
	}}
	shared := newFakeShared()
	ps := make([]*replica, 2)
	for i := range ps {
		ps[i] = &replica{Builder: pipelinetest.NewBuilder(t, up), dedup: NewGuard(Options{Window: time.Minute, MaxBytes: 1 << 20, Shared: shared})}
		ps[i].Guards = []pipeline.Link{ps[i].dedup.Link()}
	}
	ps[0].Handle(context.Background(), getOrder)
	for i, p := range ps {
		res := p.Handle(context.Background(), getOrder)
		if env := pipelinetest.Envelope(t, res); !env.Replayed || len(res.Content[0].(mcp.TextContent).Text) != len(big) || up.Calls.Load() != 1 {
			t.Fatalf("replica %d: %s replayed=%v after %d executions, want the whole answer replayed after 1", i, pipelinetest.Code(env), env.Replayed, up.Calls.Load())
		}
	}
}

// With a shared store that cannot give the answer this replica did not
// keep (down while dedup_on_failure is open, or it lost the answer), the
// repeat is refused with duplicate_call, never run again; a lease the
// store grants for it is released.
func TestSharedDedupNeverRerunsAnAnswerNotKept(t *testing.T) {
	big := strings.Repeat("z", 300<<10)
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}})
	}}
	shared := newFakeShared()
	p := &replica{Builder: pipelinetest.NewBuilder(t, up), dedup: NewGuard(Options{Window: time.Minute, MaxBytes: 1 << 20,
		Shared: shared, SharedFailOpen: true})}
	p.Guards = []pipeline.Link{p.dedup.Link()}
	p.Handle(context.Background(), getOrder)
	shared.mu.Lock()
	shared.err = errors.New("connection refused")
	shared.mu.Unlock()
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "duplicate_call" || up.Calls.Load() != 1 {
		t.Fatalf("store down, fail open: %s after %d executions, want duplicate_call after 1", pipelinetest.Code(env), up.Calls.Load())
	}
	shared.mu.Lock()
	shared.err, shared.entries = nil, map[Key]*fakeEntry{} // back, without the answer
	shared.mu.Unlock()
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "duplicate_call" || up.Calls.Load() != 1 {
		t.Fatalf("store lost the answer: %s after %d executions, want duplicate_call after 1", pipelinetest.Code(env), up.Calls.Load())
	}
	if shared.released != 1 {
		t.Fatalf("%d leases released, want the one granted for the refused repeat", shared.released)
	}
}

// A call that never reached the upstream releases its claim: the repeat
// on another replica runs.
func TestSharedDedupReleasesUnsent(t *testing.T) {
	up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
		if n == 1 {
			return nil, notSent
		}
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	ps := replicas(t, 2, up, shared)
	ps[0].Handle(context.Background(), getOrder)
	if env := pipelinetest.Envelope(t, ps[1].Handle(context.Background(), getOrder)); !env.OK || env.Replayed || up.Calls.Load() != 2 || shared.released != 1 {
		t.Fatalf("repeat of a never-sent call on another replica: %+v, %d executions, %d released", env, up.Calls.Load(), shared.released)
	}
}

// The store failing: closed (the default) refuses the call, retryable,
// before it runs, saying why without internals; open runs it.
func TestSharedDedupStoreDown(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	shared.err = errors.New("the shared state store is unavailable: dial tcp 10.0.0.7:6379: connection refused")
	p := replicas(t, 1, up, shared)[0]
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
	if pipelinetest.Code(env) != "rate_limited" || !env.Retryable || up.Calls.Load() != 0 ||
		!strings.Contains(*env.Message, "shared state store is unavailable") || strings.Contains(*env.Message, "10.0.0.7") {
		t.Fatalf("store down, closed: %+v, %d executions", env, up.Calls.Load())
	}
	p.dedup.SharedFailOpen = true
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || up.Calls.Load() != 1 {
		t.Fatalf("store down, open: %+v, %d executions", env, up.Calls.Load())
	}
}

// A call that waited for an identical call running on another replica,
// and lost sight of it when the store failed, is refused, retryable, and
// never run, even under dedup_on_failure open: running it is the very
// duplicate the link stops.
func TestSharedDedupInterruptedWaitNeverRuns(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	shared.err = fmt.Errorf("%w: %w", ErrWaitInterrupted, errors.New("the shared state store is unavailable: dial tcp 10.0.0.7:6379: connection refused"))
	p := replicas(t, 1, up, shared)[0]
	for _, open := range []bool{false, true} {
		p.dedup.SharedFailOpen = open
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "rate_limited" || !env.Retryable || up.Calls.Load() != 0 ||
			!strings.Contains(*env.Message, "was not run") || strings.Contains(*env.Message, "10.0.0.7") {
			t.Fatalf("interrupted wait, fail open %v: %+v, %d executions", open, env, up.Calls.Load())
		}
	}
}

// A waiter that lost sight of the identical call for longer than its
// lease (the store unreachable all that while) is told the outcome is
// unknown, not retryable, and the call is not run, fail open or not: the
// marker it waited for, unrenewed, would be gone.
func TestSharedDedupWaitPastTheLeaseIsAbandoned(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	shared.err = fmt.Errorf("%w: %w: the store was unreachable for a lease (10s): %w", ErrWaitInterrupted, ErrAbandoned,
		errors.New("the shared state store is unavailable: dial tcp 10.0.0.7:6379: connection refused"))
	p := replicas(t, 1, up, shared)[0]
	for _, open := range []bool{false, true} {
		p.dedup.SharedFailOpen = open
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "upstream_error" || env.Retryable || up.Calls.Load() != 0 ||
			!strings.Contains(*env.Message, "outcome is unknown") || !strings.Contains(*env.Message, "could not be reached") ||
			strings.Contains(*env.Message, "10.0.0.7") {
			t.Fatalf("wait past the lease, fail open %v: %+v, %d executions", open, env, up.Calls.Load())
		}
	}
}

// An identical call whose replica died mid-call: outcome unknown, and this
// one is not run (not retryable for a tool that is not retry-safe).
func TestSharedDedupAbandoned(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	dead := &fakeEntry{done: make(chan struct{}), lost: true}
	close(dead.done)
	p := replicas(t, 1, up, shared)[0]
	_, key, _, err := p.dedup.keys(context.Background(), &pipeline.Exchange{Call: getOrder, Tool: &upstreams.Tool{ID: "orders/get"}})
	if err != nil {
		t.Fatal(err)
	}
	shared.entries[key] = dead
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
	if pipelinetest.Code(env) != "upstream_error" || env.Retryable || up.Calls.Load() != 0 || !strings.Contains(*env.Message, "outcome is unknown") {
		t.Fatalf("abandoned identical call: %+v, %d executions", env, up.Calls.Load())
	}
}

// A store recovering from a loss of its data refuses claims for a while:
// the call waits it out and then runs (closed, the default), unless the
// caller's deadline ends first: then it is refused, retryable, saying the
// store is recovering, never run. Open runs it at once.
func TestSharedDedupRecovering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		shared := newFakeShared()
		p := replicas(t, 1, up, shared)[0]
		shared.recoverUntil = time.Now().Add(10 * time.Second)

		short, cancel := context.WithTimeout(context.Background(), time.Second)
		env := pipelinetest.Envelope(t, p.Handle(short, getOrder))
		cancel()
		if pipelinetest.Code(env) != "rate_limited" || !env.Retryable || up.Calls.Load() != 0 || !strings.Contains(*env.Message, "recovering") {
			t.Fatalf("recovering store, caller's deadline before its end: %+v, %d executions", env, up.Calls.Load())
		}
		start := time.Now()
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK || up.Calls.Load() != 1 || time.Since(start) < 10*time.Second {
			t.Fatalf("recovering store, no deadline: %+v, %d executions after %s", env, up.Calls.Load(), time.Since(start))
		}

		shared.recoverUntil = time.Now().Add(10 * time.Second)
		p.dedup.SharedFailOpen = true
		start = time.Now()
		other := pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":2}`)}
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), other)); !env.OK || up.Calls.Load() != 2 || time.Since(start) != 0 {
			t.Fatalf("recovering store, open: %+v, %d executions after %s", env, up.Calls.Load(), time.Since(start))
		}
	})
}

// entryOf is the fake store's entry for getOrder.
func entryOf(t *testing.T, p *replica, shared *fakeShared) *fakeEntry {
	t.Helper()
	_, key, _, err := p.dedup.keys(context.Background(), &pipeline.Exchange{Call: getOrder, Tool: &upstreams.Tool{ID: "orders/get"}})
	if err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return shared.entries[key]
}

// An answer that cannot be encoded for the shared store, of a call that
// reached the upstream, is recorded as "outcome unknown": the lease is not
// released, so no replica runs the call again.
func TestSharedDedupUnencodableAnswer(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	ps := replicas(t, 2, up, shared)
	ps[0].dedup.encode = func(a recorded) ([]byte, error) {
		if a.result != nil {
			return nil, errors.New("cannot encode")
		}
		return encodeRecorded(a)
	}
	if env := pipelinetest.Envelope(t, ps[0].Handle(context.Background(), getOrder)); !env.OK {
		t.Fatalf("the call itself: %+v", env)
	}
	env := pipelinetest.Envelope(t, ps[1].Handle(context.Background(), getOrder))
	if up.Calls.Load() != 1 || shared.released != 0 || pipelinetest.Code(env) != "upstream_error" || !strings.Contains(*env.Message, "outcome is unknown") {
		t.Fatalf("repeat on another replica: %+v, %d executions, %d released", env, up.Calls.Load(), shared.released)
	}
}

// A panic after the call ran, outside any stage, still ends the lease: the
// marker says "outcome unknown" rather than "running" forever, and the
// caller gets internal_error.
func TestSharedDedupPanicSettles(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	shared := newFakeShared()
	ps := replicas(t, 2, up, shared)
	ps[0].dedup.encode = func(a recorded) ([]byte, error) {
		if a.result != nil {
			panic("encoding blew up")
		}
		return encodeRecorded(a)
	}
	if env := pipelinetest.Envelope(t, ps[0].Handle(context.Background(), getOrder)); pipelinetest.Code(env) != "internal_error" {
		t.Fatalf("the call that panicked: %+v", env)
	}
	e := entryOf(t, ps[0], shared)
	select {
	case <-e.done:
	default:
		t.Fatal("the lease was left running after a panic")
	}
	env := pipelinetest.Envelope(t, ps[1].Handle(context.Background(), getOrder))
	if up.Calls.Load() != 1 || shared.released != 0 || pipelinetest.Code(env) != "upstream_error" || !strings.Contains(*env.Message, "outcome is unknown") {
		t.Fatalf("repeat on another replica: %+v, %d executions, %d released", env, up.Calls.Load(), shared.released)
	}
}

// A call during which the upstream asked the caller's client something
// (sampling, elicitation, roots) is that caller's alone: an identical call
// in flight does not take its answer, nor wait for it (it runs on its own
// as soon as the first call's client is asked: the first may wait for its
// client's input until its deadline), a repeat inside the window runs again
// rather than being replayed, and another replica's identical call is not
// answered from it.
// Before, a second run of the conformance suite got the first run's
// elicited answers, "replayed": true.
func TestInteractiveCallIsNeverShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &countingUpstream{Fn: func(ctx context.Context, n int32) (json.RawMessage, error) {
			pipeline.NoteInteraction(ctx) // what the relay does when the upstream asks the client
			if n == 1 {
				<-release
			}
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		shared := newFakeShared()
		ps := replicas(t, 2, up, shared)
		call := func(p *replica) envelope.Envelope {
			return pipelinetest.Envelope(t, p.Handle(pipeline.WithInteraction(context.Background()), getOrder))
		}
		var wg sync.WaitGroup
		envs := make([]envelope.Envelope, 2)
		for i := range 2 {
			wg.Go(func() { envs[i] = call(ps[0]) })
		}
		synctest.Wait()
		if n := up.Calls.Load(); n != 2 {
			t.Fatalf("%d executions while the first call waits for its client, want 2: the second must not wait for it", n)
		}
		close(release)
		wg.Wait()
		if n := up.Calls.Load(); n != 2 || !envs[0].OK || !envs[1].OK || envs[0].Replayed || envs[1].Replayed {
			t.Fatalf("two identical interactive calls: %d executions, %+v (want each its own)", n, envs)
		}
		if env := call(ps[0]); up.Calls.Load() != 3 || env.Replayed {
			t.Fatalf("a repeat inside the window: %d executions, replayed=%v", up.Calls.Load(), env.Replayed)
		}
		if env := call(ps[1]); up.Calls.Load() != 4 || env.Replayed {
			t.Fatalf("another replica's repeat: %d executions, replayed=%v", up.Calls.Load(), env.Replayed)
		}
		// A call that asked nothing is shared as before.
		plain := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := dedupPipeline(t, plain)
		call(p)
		if env := call(p); plain.Calls.Load() != 1 || !env.Replayed {
			t.Fatalf("a plain repeat: %d executions, replayed=%v", plain.Calls.Load(), env.Replayed)
		}
	})
}

// What sharing protects stays protected for an interactive call: an
// unknown outcome is replayed (the tool may have run; the failure carries
// nothing the client said), and so is any answer of a call made under an
// idempotency key (the client named the operation: its retry is the same
// operation, and must not run it twice).
func TestInteractiveCallKeepsAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := &countingUpstream{Fn: func(ctx context.Context, _ int32) (json.RawMessage, error) {
			pipeline.NoteInteraction(ctx)
			return nil, pipelinetest.Broken
		}}
		p := dedupPipeline(t, broken)
		call := func(c pipeline.Call) envelope.Envelope {
			return pipelinetest.Envelope(t, p.Handle(pipeline.WithInteraction(context.Background()), c))
		}
		call(getOrder)
		if env := call(getOrder); broken.Calls.Load() != 1 || !env.Replayed || pipelinetest.Code(env) != "upstream_error" {
			t.Fatalf("an interactive call's unknown outcome, repeated: %d executions, %s replayed=%v", broken.Calls.Load(), pipelinetest.Code(env), env.Replayed)
		}
		ok := &countingUpstream{Fn: func(ctx context.Context, _ int32) (json.RawMessage, error) {
			pipeline.NoteInteraction(ctx)
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p = dedupPipeline(t, ok)
		keyed := getOrder
		keyed.IdempotencyKey = "refund-1"
		call(keyed)
		if env := call(keyed); ok.Calls.Load() != 1 || !env.Replayed {
			t.Fatalf("an interactive call's retry under its idempotency key: %d executions, replayed=%v", ok.Calls.Load(), env.Replayed)
		}
	})
}

// declaringRelay is a client's relay that says what the client declared.
type declaringRelay struct{ digest string }

func (declaringRelay) Session() string { return "s" }
func (declaringRelay) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("not asked")
}
func (declaringRelay) Log(json.RawMessage) {}
func (declaringRelay) Declared() (mcp.ClientCapabilities, bool) {
	return mcp.ClientCapabilities{}, true
}
func (r declaringRelay) DeclaredDigest() (string, bool) { return r.digest, true }

// Two clients of one principal that declared different capabilities do
// not share an answer: a 2026-07-28 upstream is told what each declared
// and may plan its answer by it (a fallback for a client that cannot be
// asked), even when it asks nothing. Clients that declared alike share as
// before, and a retry under an idempotency key is the same operation
// whatever its client declares.
func TestCallsOfClientsThatDeclaredDifferentlyAreNotShared(t *testing.T) {
	up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	p := dedupPipeline(t, up)
	elicits := upstreams.DigestCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})
	call := func(digest string, c pipeline.Call) envelope.Envelope {
		ctx := upstreams.WithRelay(context.Background(), declaringRelay{digest})
		return pipelinetest.Envelope(t, p.Handle(ctx, c))
	}
	if env := call(elicits, getOrder); !env.OK || env.Replayed || up.Calls.Load() != 1 {
		t.Fatalf("first call: %+v, %d executions", env, up.Calls.Load())
	}
	if env := call(elicits, getOrder); !env.Replayed || up.Calls.Load() != 1 {
		t.Fatalf("a client that declared alike: %+v, %d executions, want a replay", env, up.Calls.Load())
	}
	if env := call("", getOrder); env.Replayed || up.Calls.Load() != 2 {
		t.Fatalf("a client that declared no elicitation got the answer planned for one that did: %+v", env)
	}
	keyed := getOrder
	keyed.IdempotencyKey = "op-1"
	call(elicits, keyed)
	if env := call("", keyed); !env.Replayed || up.Calls.Load() != 3 {
		t.Fatalf("a retry under an idempotency key from a client that declared otherwise: %+v, %d executions", env, up.Calls.Load())
	}
}

// recordedBytes counts what holding an answer costs, not only its texts:
// 40,000 empty text blocks, or a resource link of long strings, are not a
// few hundred bytes (found in review: they let the byte bound be bypassed).
func TestRecordedBytesCountsBlocksAndLinks(t *testing.T) {
	content := make([]mcp.Content, 0, 40000)
	for range 40000 {
		content = append(content, mcp.TextContent{Type: "text", Text: ""})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := recorded{result: freshResult(&mcp.CallToolResult{Content: content, StructuredContent: json.RawMessage(`{"ok":true}`)})}
	runtime.ReadMemStats(&after)
	held := int64(after.TotalAlloc - before.TotalAlloc)
	if got := recordedBytes(r); got < held/2 {
		t.Errorf("40,000 empty blocks: counted %d bytes, holding them allocated %d", got, held)
	}
	runtime.KeepAlive(r)
	link := mcp.ResourceLink{Type: "resource_link", URI: "file:///" + strings.Repeat("u", 512<<10), Name: "n",
		Description: strings.Repeat("d", 512<<10)}
	if got := recordedBytes(recorded{result: &mcp.CallToolResult{Content: []mcp.Content{link}}}); got < 1<<20 {
		t.Errorf("a resource link of 1 MiB of strings: counted %d bytes", got)
	}
}
