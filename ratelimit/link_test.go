package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

// brokenLimiter fails like a shared store that cannot be reached.
type brokenLimiter struct{}

func (brokenLimiter) Take(context.Context, []Bucket) (Verdict, error) {
	return Verdict{}, errors.New("the shared state store is unavailable")
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
			up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
			p := pipelinetest.NewBuilder(t, up)
			g := &Guard{Limiter: brokenLimiter{}, FailClosed: tt.failClosed,
				Limits: Limits{Principal: &Rate{PerSecond: 1, Burst: 1}}} // alice's own bucket: "p\x00alice"
			p.Guards = []pipeline.Link{g.Link()}
			env := pipelinetest.Envelope(t, p.Handle(context.Background(),
				pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
			if got := pipelinetest.Code(env); got != tt.wantCode {
				t.Fatalf("error_code %q, want %q", got, tt.wantCode)
			}
			if (up.Calls() > 0) != tt.wantSent {
				t.Errorf("upstream called %d times, want sent=%v", up.Calls(), tt.wantSent)
			}
			if tt.failClosed && (!env.Retryable || env.Message == nil || !strings.Contains(*env.Message, "cannot be checked right now; retry in 1s") ||
				strings.Contains(*env.Message, "store")) {
				t.Errorf("refusal: retryable %v, message %v; want retryable, the wait, no internals", env.Retryable, env.Message)
			}
		})
	}
}

// A role's limit is a bucket per principal holding it; roles without a
// limit add none; a server-wide limit applies to each of its tools.
func TestBucketsForRolesAndServers(t *testing.T) {
	l := Limits{
		Roles: map[string]Rate{"viewer": {PerSecond: 2, Burst: 2}},     // config {rate: 2}: per 1s, burst the rate
		Tools: map[string]Rate{"orders/*": {PerSecond: 10, Burst: 20}}, // config {rate: 10, burst: 20}
	}
	tool := &upstreams.Tool{ID: "orders/get", Server: "orders"}
	var keys []string
	for _, b := range l.bucketsFor("bob", []string{"support", "viewer"}, tool) {
		keys = append(keys, strings.ReplaceAll(b.Key, "\x00", "|")+fmt.Sprintf(" %g/%d", b.PerSecond, b.Burst))
	}
	if got := strings.Join(keys, ", "); got != "r|viewer|bob 2/2, t|orders/* 10/20" {
		t.Errorf("buckets %s", got)
	}
}
