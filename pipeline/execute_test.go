package pipeline_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

type errString string

func (e errString) Error() string { return string(e) }

var (
	broken, notSent, getOrder = pipelinetest.Broken, pipelinetest.NotSent, pipelinetest.GetOrder
	resilient                 = pipelinetest.Resilient
	// dialRefused is a request that never left on a connection thought to
	// be up, unlike notSent (the server is known to be down).
	dialRefused = &upstreams.CallError{Where: upstreams.NotSent, Err: syscall.ECONNREFUSED}
)

type countingUpstream = pipelinetest.Counting

func TestRetriesOnlyWhereSafe(t *testing.T) {
	cases := []struct {
		name          string
		safe          bool
		fail          error // every attempt fails with this, except where okOn says
		okOn          int32 // attempt that succeeds (0: none)
		wantCalls     int32
		wantCode      string
		wantRetryable bool
	}{
		{"timed out, not retry-safe: called exactly once", false, context.DeadlineExceeded, 0, 1, "tool_timeout", false},
		{"broken, not retry-safe: once", false, broken, 0, 1, "upstream_error", false},
		{"broken, retry-safe: retried and succeeds", true, broken, 2, 2, "", false},
		{"broken, retry-safe: gives up after max attempts", true, broken, 0, 3, "upstream_error", true},
		{"never sent: always retried", false, dialRefused, 3, 3, "", false},
		{"known down: not retried, the supervisor's backoff governs", true, notSent, 0, 1, "upstream_unavailable", true},
		{"tool error: never retried", true, &upstreams.CallError{Where: upstreams.Answered, RPC: nil, Err: errString("x")}, 0, 1, "tool_failed", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &countingUpstream{Fn: func(ctx context.Context, n int32) (json.RawMessage, error) {
					if n == c.okOn {
						return json.RawMessage(pipelinetest.OKText), nil
					}
					if c.fail == context.DeadlineExceeded {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					return nil, c.fail
				}}
				env := pipelinetest.Envelope(t, resilient(t, up, c.safe).Handle(context.Background(), getOrder))
				if pipelinetest.Code(env) != c.wantCode || up.Calls.Load() != c.wantCalls {
					t.Fatalf("code %q after %d calls; want %q after %d (%v)", pipelinetest.Code(env), up.Calls.Load(), c.wantCode, c.wantCalls, env.Message)
				}
				if c.wantCode != "" && env.Retryable != c.wantRetryable {
					t.Errorf("retryable %v, want %v", env.Retryable, c.wantRetryable)
				}
			})
		})
	}
}

// Retries stay inside the call's deadline: a backoff that would end after
// it is not started.
func TestRetriesStayInsideDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) { return nil, broken }}
		p := resilient(t, up, true)
		p.Resilience.Retry["orders"] = breaker.RetrySettings{MaxAttempts: 10, BaseDelay: 3 * time.Second, MaxDelay: 10 * time.Second}
		tool, _ := p.Catalog.Resolve("orders__get")
		tool.Timeout = 8 * time.Second
		start := time.Now()
		p.Handle(context.Background(), getOrder)
		if elapsed := time.Since(start); elapsed > 8*time.Second {
			t.Fatalf("took %s, past the 8s deadline", elapsed)
		}
		if n := up.Calls.Load(); n < 2 || n > 3 {
			t.Fatalf("%d attempts; with 3s then 6s backoffs inside 8s expect 2", n)
		}
	})
}

// An upstream that fails every call is not multiplied: attempts stay
// within the retry budget.
func TestRetryBudgetBoundsAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) { return nil, broken }}
		p := resilient(t, up, true)
		p.Resilience.Breakers = nil // isolate the budget from the breaker
		const ratio, perSecond = 0.2, 0.5
		p.Resilience.Budgets["orders"] = breaker.NewBudget(ratio, perSecond, time.Now)
		const calls = 200
		start := time.Now()
		for range calls {
			p.Handle(context.Background(), getOrder)
		}
		bound := calls*(1+ratio) + perSecond*(time.Since(start).Seconds()+1)
		if n := float64(up.Calls.Load()); n > bound {
			t.Fatalf("%.0f upstream attempts for %d calls, bound %.0f: the budget did not hold", n, calls, bound)
		}
		if n := up.Calls.Load(); n <= calls {
			t.Fatalf("%d attempts: no retry at all, the budget is too stingy", n)
		}
	})
}

// An open breaker answers at once, says when the next probe is, and the
// upstream sees no call.
func TestOpenBreakerShieldsUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) { return nil, dialRefused }}
		p := resilient(t, up, false)
		p.Resilience.Retry = nil
		for range 5 {
			p.Handle(context.Background(), getOrder)
		}
		before := up.Calls.Load()
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "upstream_unavailable" || !env.Retryable || !strings.Contains(*env.Message, "next attempt possible in 30s") {
			t.Fatalf("open breaker: %s %v %v", pipelinetest.Code(env), env.Retryable, *env.Message)
		}
		if up.Calls.Load() != before {
			t.Fatal("the upstream was called through an open breaker")
		}
	})
}

// Calls refused because the upstream is known to be down are no breaker
// failures, however many (issue 16, item 3).
func TestKnownDownDoesNotOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) { return nil, notSent }}
		p := resilient(t, up, true)
		for range 20 {
			env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
			if pipelinetest.Code(env) != "upstream_unavailable" || !env.Retryable || strings.Contains(*env.Message, "circuit") {
				t.Fatalf("while down: %s %v %s", pipelinetest.Code(env), env.Retryable, *env.Message)
			}
		}
		if st := p.Resilience.Breakers.State("orders"); st != "closed" {
			t.Fatalf("breaker %s after refusals while known down", st)
		}
	})
}

// Excess calls fail fast instead of queueing.
func TestMaxInFlightFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &countingUpstream{Fn: func(context.Context, int32) (json.RawMessage, error) {
			<-release
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := resilient(t, up, false)
		p.Resilience.InFlight = map[string]*pipeline.Limiter{"orders": pipeline.NewLimiter(1)}
		go p.Handle(context.Background(), getOrder)
		synctest.Wait() // the first call now holds the only slot
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "upstream_unavailable" || !strings.Contains(*env.Message, "busy") {
			t.Fatalf("second call: %s %v", pipelinetest.Code(env), *env.Message)
		}
		close(release)
		synctest.Wait()
		if env := pipelinetest.Envelope(t, p.Handle(context.Background(), getOrder)); !env.OK {
			t.Fatalf("slot not released: %v", *env.Message)
		}
	})
}

// rateLimited is an upstream refusal that says how long to wait.
type rateLimited struct{ after time.Duration }

func (r rateLimited) Error() string             { return "429 too many requests" }
func (r rateLimited) RetryAfter() time.Duration { return r.after }

func TestUpstreamRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &countingUpstream{Fn: func(_ context.Context, n int32) (json.RawMessage, error) {
			if n == 1 {
				return nil, rateLimited{after: 2 * time.Second}
			}
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		start := time.Now()
		env := pipelinetest.Envelope(t, resilient(t, up, true).Handle(context.Background(), getOrder))
		if !env.OK || time.Since(start) < 2*time.Second {
			t.Fatalf("retry-safe call after 429: ok=%v after %s", env.OK, time.Since(start))
		}
		up.Calls.Store(0)
		env = pipelinetest.Envelope(t, resilient(t, up, false).Handle(context.Background(), getOrder))
		if pipelinetest.Code(env) != "rate_limited" || !env.Retryable {
			t.Fatalf("not retry-safe after 429: %s", pipelinetest.Code(env))
		}
	})
}
