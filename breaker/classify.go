package breaker

import (
	"context"
	"errors"

	"github.com/toolgate/toolgate/upstreams"
)

// Outcome is how one upstream attempt ended.
type Outcome int

const (
	// Succeeded: the tool answered with a result (which may still be
	// rejected later, for example as too large).
	Succeeded Outcome = iota
	// ToolError: the upstream answered with a JSON-RPC error. The upstream
	// is healthy; the tool refused.
	ToolError
	// NeverSent: the request did not leave the gateway (process not
	// running, dial refused, session gone).
	NeverSent
	// TimedOut: the call's deadline passed after the request was sent.
	TimedOut
	// Broken: the request was sent and then the transport broke or the
	// reply was garbage. Whether the tool ran is unknown.
	Broken
	// Oversize: the upstream answered with more bytes than allowed.
	Oversize
	// Cancelled: the caller gave up. Says nothing about the upstream.
	Cancelled
)

var names = [...]string{"succeeded", "tool_error", "never_sent", "timed_out", "broken", "oversize", "cancelled"}

func (o Outcome) String() string {
	if int(o) < len(names) {
		return names[o]
	}
	return "unknown"
}

// CountsAgainstUpstream reports whether the outcome is evidence that the
// upstream is unhealthy (DESIGN §5, first column).
func (o Outcome) CountsAgainstUpstream() bool {
	return o == NeverSent || o == TimedOut || o == Broken
}

// MayRetry reports whether the same attempt may be repeated (DESIGN §5): a
// call that never left may always be repeated; one whose outcome is unknown
// only when the tool is retry-safe; anything the tool or the caller decided,
// never.
func (o Outcome) MayRetry(retrySafe bool) bool {
	switch o {
	case NeverSent:
		return true
	case TimedOut, Broken:
		return retrySafe
	default:
		return false
	}
}

// Classify maps an attempt's error to an Outcome. ctx is the attempt's
// context: it tells a caller's cancellation from a passed deadline.
func Classify(ctx context.Context, err error) Outcome {
	if err == nil {
		return Succeeded
	}
	var ce *upstreams.CallError
	if errors.As(err, &ce) {
		switch {
		case ce.Oversize:
			return Oversize
		case ce.Where == upstreams.Answered:
			return ToolError
		case ce.Where == upstreams.NotSent:
			return NeverSent
		}
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return Cancelled
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return TimedOut
	}
	return Broken
}
