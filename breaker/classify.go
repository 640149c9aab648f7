package breaker

import (
	"context"
	"errors"
	"time"
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
	// RateLimited: the upstream refused the attempt because of a rate limit
	// (HTTP 429, or an error that says so; see RateLimitError). The upstream
	// is alive and asked to be left alone for a while, so this is no
	// evidence either way for the breaker.
	RateLimited
)

var names = [...]string{"succeeded", "tool_error", "never_sent", "timed_out", "broken", "oversize", "cancelled", "rate_limited"}

func (o Outcome) String() string {
	if int(o) < len(names) {
		return names[o]
	}
	return "unknown"
}

// verdict is what one outcome tells the breaker about the upstream.
type verdict int

const (
	excluded  verdict = iota // no evidence: counted neither way
	healthy                  // the upstream answered
	unhealthy                // a transport failure: counts towards opening
)

func (o Outcome) verdict() verdict {
	switch o {
	case Succeeded, ToolError, Oversize:
		return healthy
	case NeverSent, TimedOut, Broken:
		return unhealthy
	default: // Cancelled, RateLimited, and anything unknown
		return excluded
	}
}

// CountsAgainstUpstream reports whether the outcome is evidence that the
// upstream is unhealthy (docs/design.md, Failure semantics, first column). Of
// the others, Succeeded, ToolError and Oversize count for it (the upstream
// answered); Cancelled and RateLimited count neither way.
func (o Outcome) CountsAgainstUpstream() bool {
	return o.verdict() == unhealthy
}

// MayRetry reports whether the same attempt may be repeated (docs/design.md,
// Failure semantics): a call that never left may always be repeated; one
// whose outcome is unknown, or that the upstream refused for its rate limit
// (after the delay it asked for, see RetryAfter), only when the tool is
// retry-safe; anything the tool or the caller decided, never.
func (o Outcome) MayRetry(retrySafe bool) bool {
	switch o {
	case NeverSent:
		return true
	case TimedOut, Broken, RateLimited:
		return retrySafe
	default:
		return false
	}
}

// RateLimitError is implemented by an error that says the upstream refused
// the attempt because of a rate limit: an HTTP 429, or a JSON-RPC error that
// says so. RetryAfter is the wait the upstream asked for (Retry-After), 0
// when it named none. An error type in package upstreams can implement it
// without importing this package; Classify finds it anywhere in the chain.
type RateLimitError interface {
	error
	RetryAfter() time.Duration
}

// RetryAfter reports whether err says the upstream rate-limited the attempt,
// and the wait it asked for (0 when none).
func RetryAfter(err error) (time.Duration, bool) {
	var rl RateLimitError
	if errors.As(err, &rl) {
		return max(rl.RetryAfter(), 0), true
	}
	return 0, false
}

// Located is an attempt's error that says where the attempt failed.
// upstreams.CallError implements it without importing this package, so
// that breaker depends on no transport.
type Located interface {
	error
	NotSent() bool  // the request never left: nothing ran
	Answered() bool // the upstream answered, with an error: the tool ran
	TooLarge() bool // the answer was over the size cap
}

// Classify maps an attempt's error to an Outcome. ctx is the attempt's
// context: it tells a caller's cancellation from a passed deadline.
func Classify(ctx context.Context, err error) Outcome {
	if err == nil {
		return Succeeded
	}
	if _, limited := RetryAfter(err); limited {
		return RateLimited
	}
	var at Located
	if errors.As(err, &at) {
		switch {
		case at.TooLarge():
			return Oversize
		case at.Answered():
			return ToolError
		case at.NotSent():
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
