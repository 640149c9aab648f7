// Package ratelimit decides whether a call may take a token from each of
// the token buckets that apply to it: all of them, or none. It knows
// buckets, not callers: which buckets apply (principal, role, tool) is the
// gateway's business. The in-memory Memory is the embedded default;
// ratelimit/redisstore keeps the buckets in Redis, shared by several replicas,
// behind the same Limiter.
package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bucket is one token bucket: its identity, size and refill rate.
type Bucket struct {
	Key       string  // identifies the bucket ("p:alice", "t:orders/refund_order")
	Scope     string  // for messages: "principal alice", "tool orders/refund_order"
	PerSecond float64 // refill rate, tokens per second; > 0
	Burst     int     // capacity, and the tokens it starts with; >= 1
}

// Verdict is the answer for one call.
type Verdict struct {
	Allowed bool
	// RetryAfter is how long until every bucket has a token again (when
	// not Allowed); Denied is the bucket with the longest wait.
	RetryAfter time.Duration
	Denied     Bucket
}

// Limiter takes one token from every bucket, atomically: when one bucket
// is empty none is charged.
type Limiter interface {
	Take(ctx context.Context, buckets []Bucket) (Verdict, error)
}

// Memory keeps buckets in this process. Buckets are created on first use
// and forgotten when full (an idle bucket is the same as a new one), so
// callers that come and go do not grow it without bound.
type Memory struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// pruneAbove is the number of buckets past which full ones are dropped.
const pruneAbove = 10000

// NewMemory is an empty in-memory limiter; now is its clock (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, buckets: map[string]*rate.Limiter{}}
}

// Take implements Limiter.
func (m *Memory) Take(_ context.Context, buckets []Bucket) (Verdict, error) {
	if len(buckets) == 0 {
		return Verdict{Allowed: true}, nil
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	reservations := make([]*rate.Reservation, 0, len(buckets))
	var v Verdict
	for _, b := range buckets {
		r := m.bucket(b, now).ReserveN(now, 1)
		reservations = append(reservations, r)
		if wait := r.DelayFrom(now); wait > v.RetryAfter {
			v.RetryAfter, v.Denied = wait, b
		}
	}
	if v.RetryAfter == 0 {
		m.prune(now)
		return Verdict{Allowed: true}, nil
	}
	for _, r := range reservations {
		r.CancelAt(now) // the call does not run: it takes nothing
	}
	return v, nil
}

// bucket is b's limiter, created full, and resized when the config changed.
func (m *Memory) bucket(b Bucket, now time.Time) *rate.Limiter {
	l := m.buckets[b.Key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(b.PerSecond), b.Burst)
		m.buckets[b.Key] = l
		return l
	}
	if l.Limit() != rate.Limit(b.PerSecond) {
		l.SetLimitAt(now, rate.Limit(b.PerSecond))
	}
	if l.Burst() != b.Burst {
		l.SetBurstAt(now, b.Burst)
	}
	return l
}

// prune drops full buckets once there are many. m.mu is held.
func (m *Memory) prune(now time.Time) {
	if len(m.buckets) <= pruneAbove {
		return
	}
	for k, l := range m.buckets {
		if l.TokensAt(now) >= float64(l.Burst()) {
			delete(m.buckets, k)
		}
	}
}

// Len is the number of buckets held (for tests and metrics).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}
