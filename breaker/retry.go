package breaker

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// RetrySettings say how often and how fast a retry-safe call is repeated. A zero field means its default
// (DefaultRetryMaxAttempts, ...), so the zero value is valid.
type RetrySettings struct {
	MaxAttempts int           // total attempts including the first; default 3
	BaseDelay   time.Duration // first backoff; default 100ms
	MaxDelay    time.Duration // backoff cap; default 2s
}

// WithDefaults returns r with every zero (or negative) field replaced by its default.
func (r RetrySettings) WithDefaults() RetrySettings {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultRetryMaxAttempts
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = DefaultRetryBaseDelay
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = DefaultRetryMaxDelay
	}
	return r
}

// Backoff is the delay before attempt n (n >= 2; 0 for n < 2): BaseDelay doubled for each attempt after
// the second, capped at MaxDelay, with full jitter, that is a uniformly random duration in [0, d]. rnd
// returns a number in [0, 1] (values outside are clamped); nil means math/rand/v2's Float64. Full jitter
// keeps callers that failed together from retrying together.
//
// The caller still has to keep the attempt inside the call's deadline, and wait at least the upstream's
// RetryAfter after a RateLimited outcome.
func (r RetrySettings) Backoff(n int, rnd func() float64) time.Duration {
	if n < 2 {
		return 0
	}
	r = r.WithDefaults()
	d := min(r.BaseDelay, r.MaxDelay)
	for i := 2; i < n && d < r.MaxDelay; i++ {
		if d > r.MaxDelay/2 {
			d = r.MaxDelay // and no overflow when MaxDelay is huge
			break
		}
		d *= 2
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	jittered := clamp(rnd(), 0, 1) * float64(d)
	if jittered >= float64(d) {
		return d // also keeps a d near MaxInt64 from overflowing through float64
	}
	return time.Duration(jittered)
}

// Budget bounds retries across all calls to one upstream, so that a failing upstream is not sent more
// than (1 + ratio) times its first attempts, plus the floor: the gRPC and Finagle retry budget, as a
// token bucket.
//
//   - Every first attempt earns ratio tokens (Attempt).
//   - Tokens also accrue at minPerSecond, so an upstream with little traffic can still retry.
//   - A retry spends one whole token (TryRetry); without one, the call gives up instead.
//   - The bucket starts with one second of the floor (minPerSecond tokens), so the first failure after
//     startup may be retried. It holds at most its capacity, max(1, minPerSecond·budgetFloorWindow +
//     ratio·budgetRatioAttempts): 3 tokens with the defaults (ratio 0.2, minPerSecond 1). A quiet spell
//     banks that small burst and no more.
//
// The bound: over any stretch of time of T seconds that includes n first attempts, the budget allows at
// most
//
//	retries ≤ ratio·n + minPerSecond·T + capacity
//
// (the capacity is the most the bucket can hold when the stretch starts). With the defaults, a failing
// upstream sees at most 1.2 attempts per call, plus one a second, plus 3. A Budget is safe for concurrent
// use; it starts no goroutine.
type Budget struct {
	ratio, perSecond, capacity float64
	now                        func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time // when tokens were last refilled
}

// The capacity is kept small on purpose: whatever the bucket can bank is a burst on top of the stated
// rate, spent by the first calls after a quiet spell. With 10 s of floor and 100 attempts' earnings it was
// 30 tokens, and 30 failing calls after two idle minutes could make up to 73 attempts (issue 16, item 4);
// with 3 tokens they make at most about 40.
//
//   - One second of the floor is what the bucket starts with, so a rarely used upstream, whose bucket is
//     full when its next call comes, always gets at least that: with the default floor, one retry.
//   - Ten first attempts' earnings (2 tokens at ratio 0.2) let calls that fail together spend what they
//     themselves earned, instead of their earnings overflowing a bucket that is already full; together
//     with the second of floor they give a rarely used upstream (3 tokens with the defaults) the full
//     two retries of a call with the default max_attempts of 3.
//   - At least one token, so that a budget with any rate at all can ever retry.
const (
	budgetFloorWindow   = time.Second // how long of minPerSecond the bucket can hold
	budgetRatioAttempts = 10          // first attempts whose earnings the bucket can hold
	// tokenSlack absorbs float rounding (5 × 0.2 is 1 in decimal, not always in binary).
	tokenSlack = 1e-9
)

// NewBudget returns a Budget where retries may be at most ratio (0..1, clamped) of the first attempts,
// plus minPerSecond (at least 0) per second. now is the clock; nil means time.Now.
func NewBudget(ratio, minPerSecond float64, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	ratio = clamp(ratio, 0, 1)
	minPerSecond = clamp(minPerSecond, 0, math.MaxFloat32)
	capacity := max(1, minPerSecond*budgetFloorWindow.Seconds()+ratio*budgetRatioAttempts)
	return &Budget{
		ratio: ratio, perSecond: minPerSecond, capacity: capacity, now: now,
		tokens: min(minPerSecond, capacity), last: now(),
	}
}

// clamp also maps NaN to lo.
func clamp(f, lo, hi float64) float64 {
	if math.IsNaN(f) {
		return lo
	}
	return min(max(f, lo), hi)
}

// Attempt records a first attempt to the upstream: it earns ratio tokens.
func (b *Budget) Attempt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.tokens = min(b.tokens+b.ratio, b.capacity)
}

// TryRetry spends one token for a retry. false means the budget is exhausted: do not retry.
func (b *Budget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens < 1-tokenSlack {
		return false
	}
	b.tokens = max(b.tokens-1, 0)
	return true
}

// refill adds the floor's tokens for the time since the last refill. A clock that went backwards adds
// nothing and does not move last back.
func (b *Budget) refill() {
	now := b.now()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.tokens+b.perSecond*elapsed.Seconds(), b.capacity)
		b.last = now
	}
}
