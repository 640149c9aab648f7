package pipeline

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/toolgate/toolgate/breaker"
)

// Resilience is what execute applies per upstream (docs/design.md,
// "Failure semantics"). The zero
// value applies nothing: no breaker, one attempt, no in-flight limit.
type Resilience struct {
	Breakers *breaker.Set
	Budgets  map[string]*breaker.Budget       // retry budget per server; none: no retries
	Retry    map[string]breaker.RetrySettings // per server; none: one attempt
	InFlight map[string]*Limiter              // per server; none: unlimited
	// Rand feeds the backoff jitter; nil is math/rand/v2.
	Rand func() float64
}

// Limiter bounds the calls in flight to one upstream.
type Limiter struct{ slots chan struct{} }

// NewLimiter allows n concurrent calls (n >= 1).
func NewLimiter(n int) *Limiter { return &Limiter{slots: make(chan struct{}, max(n, 1))} }

// Limit is the number of concurrent calls allowed.
func (l *Limiter) Limit() int { return cap(l.slots) }

// InFlight is the number of calls holding a slot now.
func (l *Limiter) InFlight() int { return len(l.slots) }

// acquire takes an in-flight slot, failing fast rather than queueing when
// the server is at its limit.
func (r *Resilience) acquire(server string) (release func(), ok bool) {
	l := r.InFlight[server]
	if l == nil {
		return func() {}, true
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, true
	default:
		return nil, false
	}
}

// mayRepeat decides whether attempt n is followed by another, and waits
// out the backoff if so. Every condition must hold: attempts left, an
// outcome that may be repeated for this tool, room in the retry budget, and
// a backoff that ends before the deadline.
func (r *Resilience) mayRepeat(ctx context.Context, x *Exchange, n int, s breaker.RetrySettings, b *breaker.Budget, err error) bool {
	if n >= s.MaxAttempts || !x.Outcome.MayRetry(x.RetrySafe) || b == nil || !b.TryRetry() {
		return false
	}
	rnd := r.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	delay := s.Backoff(n+1, rnd)
	if after, ok := breaker.RetryAfter(err); ok {
		delay = max(delay, after)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= delay {
		return false
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
