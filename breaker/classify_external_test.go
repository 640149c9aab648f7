package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/breaker"
	"github.com/toolgate/toolgate/upstreams"
)

func TestClassify(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithTimeout(context.Background(), -1)
	defer cancel2()
	live := context.Background()
	cases := []struct {
		name    string
		ctx     context.Context
		err     error
		want    breaker.Outcome
		counts  bool
		safe    bool // MayRetry for a retry-safe tool
		notSafe bool // MayRetry otherwise
	}{
		{"success", live, nil, breaker.Succeeded, false, false, false},
		{"tool error", live, &upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Message: "no"}}, breaker.ToolError, false, false, false},
		{"never sent", live, &upstreams.CallError{Where: upstreams.NotSent, Err: upstreams.ErrNotConnected}, breaker.NeverSent, true, true, true},
		{"wrapped never sent", live, fmt.Errorf("x: %w", &upstreams.CallError{Where: upstreams.NotSent}), breaker.NeverSent, true, true, true},
		{"broken", live, &upstreams.CallError{Where: upstreams.Sent, Err: errors.New("EOF")}, breaker.Broken, true, true, false},
		{"oversize", live, &upstreams.CallError{Where: upstreams.Answered, Oversize: true}, breaker.Oversize, false, false, false},
		{"deadline", expired, context.DeadlineExceeded, breaker.TimedOut, true, true, false},
		{"sent then deadline", expired, &upstreams.CallError{Where: upstreams.Sent, Err: errors.New("read")}, breaker.TimedOut, true, true, false},
		{"caller cancelled", cancelled, &upstreams.CallError{Where: upstreams.Sent, Err: context.Canceled}, breaker.Cancelled, false, false, false},
		{"unknown error", live, errors.New("?"), breaker.Broken, true, true, false},
		{"rate limited", live, rateLimited{time.Second}, breaker.RateLimited, false, true, false},
		{"rate limited, wrapped in a call error", live, &upstreams.CallError{Where: upstreams.Answered, Err: rateLimited{}}, breaker.RateLimited, false, true, false},
		{"rate limited as the deadline passed", expired, &upstreams.CallError{Where: upstreams.Sent, Err: rateLimited{}}, breaker.RateLimited, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := breaker.Classify(c.ctx, c.err)
			if got != c.want {
				t.Fatalf("breaker.Classify = %s, want %s", got, c.want)
			}
			if got.CountsAgainstUpstream() != c.counts || got.MayRetry(true) != c.safe || got.MayRetry(false) != c.notSafe {
				t.Errorf("%s: counts=%v mayRetry(safe)=%v mayRetry(unsafe)=%v", got, got.CountsAgainstUpstream(), got.MayRetry(true), got.MayRetry(false))
			}
		})
	}
}

// rateLimited is how an upstream error says it was refused for a rate limit.
type rateLimited struct{ after time.Duration }

func (e rateLimited) Error() string             { return "429 Too Many Requests" }
func (e rateLimited) RetryAfter() time.Duration { return e.after }

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		after   time.Duration
		limited bool
	}{
		{"nil", nil, 0, false},
		{"other error", errors.New("EOF"), 0, false},
		{"with a delay", rateLimited{2 * time.Second}, 2 * time.Second, true},
		{"without a delay", rateLimited{}, 0, true},
		{"negative delay", rateLimited{-time.Second}, 0, true},
		{"wrapped", fmt.Errorf("call: %w", &upstreams.CallError{Where: upstreams.Answered, Err: rateLimited{time.Minute}}), time.Minute, true},
	}
	for _, tt := range tests {
		after, limited := breaker.RetryAfter(tt.err)
		if after != tt.after || limited != tt.limited {
			t.Errorf("%s: breaker.RetryAfter = %v, %v; want %v, %v", tt.name, after, limited, tt.after, tt.limited)
		}
	}
}

// TestOutcomeNames: every outcome has a name, so logs never say "unknown" for a real one.
func TestOutcomeNames(t *testing.T) {
	for o := breaker.Succeeded; o <= breaker.RateLimited; o++ {
		if o.String() == "unknown" {
			t.Errorf("outcome %d has no name", int(o))
		}
	}
	if breaker.Outcome(99).String() != "unknown" || breaker.Outcome(99).CountsAgainstUpstream() || breaker.Outcome(99).MayRetry(true) {
		t.Error("an unknown outcome must be named unknown, not count, and not retry")
	}
}
