package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/upstreams"
)

// dedupPipeline: "orders" tools are not retry-safe; answers replay for a
// minute, idempotency keys for a day.
func dedupPipeline(t *testing.T, up Upstreams) *Pipeline {
	p := newTestPipeline(t, &fakeUpstreams{})
	p.Upstreams = up
	p.Dedup = &Dedup{Table: dedup.NewTable[Recorded](100, time.Now), Window: time.Minute, KeyWindow: 24 * time.Hour}
	return p
}

func TestDuplicateSuppression(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &countingUpstream{fn: func(context.Context, int32) (json.RawMessage, error) {
			<-release
			return json.RawMessage(okText), nil
		}}
		p := dedupPipeline(t, up)
		call := func(c Call) (envOK bool, replayed bool) {
			env := envelopeOf(t, p.Handle(context.Background(), c))
			return env.OK, env.Replayed
		}
		// Two identical calls in flight: one execution, both answered.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if ok, _ := call(Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); !ok {
					t.Error("joined call failed")
				}
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("%d executions for two identical calls in flight", n)
		}
		// A repeat inside the window (key order and spacing differ) replays.
		if ok, replayed := call(Call{Subject: alice, Name: "orders__get", Args: []byte(`{ "order_id" : 1.0 }`)}); !ok || !replayed || up.calls.Load() != 1 {
			t.Fatalf("repeat inside the window: ok=%v replayed=%v executions=%d", ok, replayed, up.calls.Load())
		}
		// Different arguments, or another principal, execute.
		call(Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":2}`)})
		p.Policy = fakePolicy{allow: map[string]bool{"alice orders/get": true, "bob orders/get": true}}
		call(Call{Subject: bob, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
		if n := up.calls.Load(); n != 3 {
			t.Fatalf("%d executions; different arguments and principals must not share", n)
		}
		// Outside the window the call executes again.
		time.Sleep(time.Minute)
		if _, replayed := call(Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); replayed || up.calls.Load() != 4 {
			t.Fatalf("after the window: replayed=%v executions=%d", replayed, up.calls.Load())
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{fn: func(context.Context, int32) (json.RawMessage, error) { return json.RawMessage(okText), nil }}
		p := dedupPipeline(t, up)
		first := Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`), IdempotencyKey: "k-1"}
		p.Handle(context.Background(), first)
		time.Sleep(time.Hour) // past the argument window, inside the key's
		if env := envelopeOf(t, p.Handle(context.Background(), first)); !env.Replayed || up.calls.Load() != 1 {
			t.Fatalf("same key an hour later: replayed=%v executions=%d", env.Replayed, up.calls.Load())
		}
		reused := first
		reused.Args = []byte(`{"order_id":2}`)
		if env := envelopeOf(t, p.Handle(context.Background(), reused)); codeOf(env) != "invalid_arguments" || up.calls.Load() != 1 {
			t.Fatalf("key reused with other arguments: %s, executions %d", codeOf(env), up.calls.Load())
		}
	})
}

// A call that never reached the upstream is not recorded: its repeat runs.
// Retry-safe tools are not deduplicated.
func TestDedupSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{fn: func(_ context.Context, n int32) (json.RawMessage, error) {
			if n == 1 {
				return nil, notSent
			}
			return json.RawMessage(okText), nil
		}}
		p := dedupPipeline(t, up)
		c := Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
		p.Handle(context.Background(), c)
		if env := envelopeOf(t, p.Handle(context.Background(), c)); !env.OK || env.Replayed {
			t.Fatalf("repeat of a never-sent call: ok=%v replayed=%v", env.OK, env.Replayed)
		}
		p.Resilience.RetrySafe = func(*upstreams.Tool) bool { return true }
		p.Handle(context.Background(), c)
		if n := up.calls.Load(); n != 3 {
			t.Fatalf("retry-safe tool deduplicated: %d executions", n)
		}
	})
}
