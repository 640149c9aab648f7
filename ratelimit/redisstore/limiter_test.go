package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/ratelimit"
	"github.com/toolgate/toolgate/state"
)

var (
	alice  = ratelimit.Bucket{Key: "p\x00alice", Scope: "principal alice", PerSecond: 1, Burst: 3}
	refund = ratelimit.Bucket{Key: "t\x00orders/refund", Scope: "tool orders/refund", PerSecond: 0.5, Burst: 2}
)

// The Redis limiter answers exactly like the in-memory one on the same
// sequence and clock: bursts, all-or-none (a refusal by one bucket takes
// nothing from the others), refill, and the wait of the emptiest bucket.
// Time is passed to the script, so nothing waits for it.
func TestRateLimiterMatchesMemory(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "rl-test:")
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	shared, mem := New(c, WithClock(clock)), ratelimit.NewMemory(clock)
	steps := []struct {
		name    string
		advance time.Duration
		buckets []ratelimit.Bucket
		allowed bool
		denied  string
		wait    time.Duration
	}{
		{"first", 0, []ratelimit.Bucket{alice, refund}, true, "", 0},
		{"second", 0, []ratelimit.Bucket{alice, refund}, true, "", 0},
		{"tool empty", 0, []ratelimit.Bucket{alice, refund}, false, refund.Key, 2 * time.Second},
		{"alice's third token is untouched", 0, []ratelimit.Bucket{alice}, true, "", 0},
		{"alice empty", 0, []ratelimit.Bucket{alice}, false, alice.Key, time.Second},
		{"half refilled", 500 * time.Millisecond, []ratelimit.Bucket{alice}, false, alice.Key, 500 * time.Millisecond},
		{"refilled", 500 * time.Millisecond, []ratelimit.Bucket{alice}, true, "", 0},
		{"both refilled", time.Second, []ratelimit.Bucket{alice, refund}, true, "", 0},
		{"both empty, the tool waits longest", 0, []ratelimit.Bucket{alice, refund}, false, refund.Key, 2 * time.Second},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		for name, l := range map[string]ratelimit.Limiter{"redis": shared, "memory": mem} {
			v, err := l.Take(context.Background(), st.buckets)
			if err != nil {
				t.Fatalf("%s: %s: %v", st.name, name, err)
			}
			if v.Allowed != st.allowed || v.Denied.Key != st.denied || v.RetryAfter != st.wait {
				t.Errorf("%s: %s: allowed %v, denied %q, wait %s; want %v, %q, %s",
					st.name, name, v.Allowed, v.Denied.Key, v.RetryAfter, st.allowed, st.denied, st.wait)
			}
		}
	}
	// Idle buckets expire when they would be full again: alice (0 of 3 at
	// 1/s) in 3s, the tool (0 of 2 at 0.5/s) in 4s.
	for key, full := range map[string]time.Duration{"rl-test:rl:" + alice.Key: 3 * time.Second, "rl-test:rl:" + refund.Key: 4 * time.Second} {
		ttl, err := c.Redis().PTTL(context.Background(), key).Result()
		if err != nil || ttl <= full-time.Second || ttl > full {
			t.Errorf("%q: TTL %s (%v), want just under %s", key, ttl, err, full)
		}
	}
}

// Without a clock the script uses Redis's, which every replica shares.
func TestRateLimiterUsesRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "")
	l := New(c)
	hourly := ratelimit.Bucket{Key: "hourly", PerSecond: 1.0 / 3600, Burst: 2}
	for i := range 2 {
		if v, err := l.Take(context.Background(), []ratelimit.Bucket{hourly}); err != nil || !v.Allowed {
			t.Fatalf("take %d: %+v %v", i, v, err)
		}
	}
	v, err := l.Take(context.Background(), []ratelimit.Bucket{hourly})
	if err != nil || v.Allowed || v.RetryAfter > time.Hour || v.RetryAfter < 59*time.Minute {
		t.Fatalf("past the burst: %+v %v; want a wait just under an hour", v, err)
	}
}

// Replicas racing for one bucket through their own connections take
// exactly its burst between them.
func TestRateLimiterAcrossClients(t *testing.T) {
	srv := redistest.Start(t)
	const burst, replicas, tries = 25, 3, 20
	shared := ratelimit.Bucket{Key: "t\x00race", PerSecond: 1e-6, Burst: burst}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range replicas {
		c, _ := redistest.Open(t, srv, "race:")
		l := New(c)
		for range 4 {
			wg.Go(func() {
				for range tries {
					v, err := l.Take(context.Background(), []ratelimit.Bucket{shared})
					if err != nil {
						t.Error(err)
						return
					}
					if v.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := allowed.Load(); n != burst {
		t.Errorf("%d calls allowed across %d clients, want the burst %d", n, replicas, burst)
	}
}

// A bucket's key is gone once it would be full: nothing stays behind for
// callers that came once.
func TestIdleBucketExpires(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "exp:")
	fast := ratelimit.Bucket{Key: "fast", PerSecond: 100, Burst: 1} // full again after 10ms
	if v, err := New(c).Take(context.Background(), []ratelimit.Bucket{fast}); err != nil || !v.Allowed {
		t.Fatalf("take: %+v %v", v, err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(redistest.Deadline)
	for {
		n, err := c.Redis().Exists(context.Background(), "exp:rl:fast").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("the idle bucket's key never expired")
		}
	}
}

// With the store down, Take fails at once (the pipeline applies
// rate_limits_on_failure) and the failure is counted.
func TestRateLimiterWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "")
	ev.WaitStatus(t, true)
	srv.Kill()
	ev.WaitStatus(t, false)
	_, err := New(c).Take(context.Background(), []ratelimit.Bucket{alice})
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Take while down: %v", err)
	}
	if n := ev.ErrorsOf(state.FeatureRateLimits); n != 1 {
		t.Errorf("%d rate_limits errors, want 1", n)
	}
}
