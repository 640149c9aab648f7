package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/ratelimit"
	"github.com/toolgate/toolgate/upstreams"
)

// brokenLimiter fails like a shared store that cannot be reached.
type brokenLimiter struct{}

func (brokenLimiter) Take(context.Context, []ratelimit.Bucket) (ratelimit.Verdict, error) {
	return ratelimit.Verdict{}, errors.New("the shared state store is unavailable")
}

// When the limiter cannot decide, the call runs unlimited (open, the
// default) or is refused as rate limited, retryable, before reaching the
// upstream (closed).
func TestRateLimiterFailure(t *testing.T) {
	tests := []struct {
		name       string
		failClosed bool
		wantCode   string
		wantSent   bool
	}{
		{"open", false, "", true},
		{"closed", true, "rate_limited", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &fakeUpstreams{fn: answer(okText)}
			p := newTestPipeline(t, up)
			p.RateLimits = &RateLimits{Limiter: brokenLimiter{}, FailClosed: tt.failClosed,
				Buckets: func(authz.Subject, []string, *upstreams.Tool) []ratelimit.Bucket {
					return []ratelimit.Bucket{{Key: "p\x00alice", Scope: "principal alice", PerSecond: 1, Burst: 1}}
				}}
			env := envelopeOf(t, p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
			if got := codeOf(env); got != tt.wantCode {
				t.Fatalf("error_code %q, want %q", got, tt.wantCode)
			}
			if (up.calls > 0) != tt.wantSent {
				t.Errorf("upstream called %d times, want sent=%v", up.calls, tt.wantSent)
			}
			if tt.failClosed && (!env.Retryable || env.Message == nil || !strings.Contains(*env.Message, "cannot be checked right now; retry in 1s") ||
				strings.Contains(*env.Message, "store")) {
				t.Errorf("refusal: retryable %v, message %v; want retryable, the wait, no internals", env.Retryable, env.Message)
			}
		})
	}
}
