package breaker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

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
		want    Outcome
		counts  bool
		safe    bool // MayRetry for a retry-safe tool
		notSafe bool // MayRetry otherwise
	}{
		{"success", live, nil, Succeeded, false, false, false},
		{"tool error", live, &upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Message: "no"}}, ToolError, false, false, false},
		{"never sent", live, &upstreams.CallError{Where: upstreams.NotSent, Err: upstreams.ErrNotConnected}, NeverSent, true, true, true},
		{"wrapped never sent", live, fmt.Errorf("x: %w", &upstreams.CallError{Where: upstreams.NotSent}), NeverSent, true, true, true},
		{"broken", live, &upstreams.CallError{Where: upstreams.Sent, Err: errors.New("EOF")}, Broken, true, true, false},
		{"oversize", live, &upstreams.CallError{Where: upstreams.Answered, Oversize: true}, Oversize, false, false, false},
		{"deadline", expired, context.DeadlineExceeded, TimedOut, true, true, false},
		{"sent then deadline", expired, &upstreams.CallError{Where: upstreams.Sent, Err: errors.New("read")}, TimedOut, true, true, false},
		{"caller cancelled", cancelled, &upstreams.CallError{Where: upstreams.Sent, Err: context.Canceled}, Cancelled, false, false, false},
		{"unknown error", live, errors.New("?"), Broken, true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(c.ctx, c.err)
			if got != c.want {
				t.Fatalf("Classify = %s, want %s", got, c.want)
			}
			if got.CountsAgainstUpstream() != c.counts || got.MayRetry(true) != c.safe || got.MayRetry(false) != c.notSafe {
				t.Errorf("%s: counts=%v mayRetry(safe)=%v mayRetry(unsafe)=%v", got, got.CountsAgainstUpstream(), got.MayRetry(true), got.MayRetry(false))
			}
		})
	}
}
