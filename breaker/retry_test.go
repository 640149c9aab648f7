package breaker

import (
	"math"
	"testing"
	"time"
)

func fixed(f float64) func() float64 { return func() float64 { return f } }

// TestBackoff: before jitter the delay doubles from BaseDelay per attempt and stops at MaxDelay; full
// jitter scales it by rnd.
func TestBackoff(t *testing.T) {
	r := RetrySettings{MaxAttempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	tests := []struct {
		name string
		r    RetrySettings
		n    int
		rnd  float64
		want time.Duration
	}{
		{"first attempt has no delay", r, 1, 1, 0},
		{"n below 1", r, -3, 1, 0},
		{"second attempt: base", r, 2, 1, 100 * time.Millisecond},
		{"third: doubled", r, 3, 1, 200 * time.Millisecond},
		{"fourth", r, 4, 1, 400 * time.Millisecond},
		{"fifth", r, 5, 1, 800 * time.Millisecond},
		{"sixth: capped", r, 6, 1, time.Second},
		{"far out: still capped", r, 1000, 1, time.Second},
		{"n at MaxInt", r, math.MaxInt, 1, time.Second},
		{"jitter zero", r, 4, 0, 0},
		{"jitter half", r, 4, 0.5, 200 * time.Millisecond},
		{"jitter above 1 is clamped", r, 3, 7, 200 * time.Millisecond},
		{"negative jitter is clamped", r, 3, -1, 0},
		{"NaN jitter", r, 3, math.NaN(), 0},
		{"zero settings: default base", RetrySettings{}, 2, 1, 100 * time.Millisecond},
		{"zero settings: default cap", RetrySettings{}, 20, 1, 2 * time.Second},
		{"base above max: max wins", RetrySettings{BaseDelay: 5 * time.Second, MaxDelay: time.Second}, 2, 1, time.Second},
		{"huge cap does not overflow", RetrySettings{BaseDelay: time.Second, MaxDelay: math.MaxInt64}, 200, 1, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.r.Backoff(tt.n, fixed(tt.rnd)); got != tt.want {
			t.Errorf("%s: Backoff(%d) = %v, want %v", tt.name, tt.n, got, tt.want)
		}
	}
}

// TestBackoffJitterBounds: with the real random source every delay lies in [0, cap of that attempt], and
// the delays are spread, not all equal.
func TestBackoffJitterBounds(t *testing.T) {
	r := RetrySettings{BaseDelay: 10 * time.Millisecond, MaxDelay: 80 * time.Millisecond}
	for n := 2; n <= 8; n++ {
		ceiling := min(10*time.Millisecond<<(n-2), 80*time.Millisecond)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := r.Backoff(n, nil)
			if d < 0 || d > ceiling {
				t.Fatalf("Backoff(%d) = %v, outside [0, %v]", n, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Backoff(%d): only %d distinct delays in 200 draws", n, len(seen))
		}
	}
}

func TestRetrySettingsWithDefaults(t *testing.T) {
	got := RetrySettings{MaxAttempts: -1, MaxDelay: time.Minute}.WithDefaults()
	want := RetrySettings{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Minute}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// fakeClock is an injected clock for Budget.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestBudgetBoundsAFailingUpstream: against an upstream that fails every attempt, callers that would each
// try MaxAttempts times send at most (1+ratio) times the calls, plus the floor over the elapsed time (and
// the one second of floor the budget starts with); and the budget does allow about that many.
func TestBudgetBoundsAFailingUpstream(t *testing.T) {
	tests := []struct {
		name         string
		ratio, floor float64
		gap          time.Duration // between calls
		maxAttempts  int
	}{
		{"defaults, busy", 0.2, 1, 10 * time.Millisecond, 3},
		{"defaults, slow traffic", 0.2, 1, 500 * time.Millisecond, 3},
		{"ratio only", 0.1, 0, time.Millisecond, 10},
		{"floor only", 0, 5, 20 * time.Millisecond, 3},
		{"nothing", 0, 0, time.Second, 3},
		{"all retries allowed", 1, 0, time.Millisecond, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			b := NewBudget(tt.ratio, tt.floor, clock.now)
			const calls = 1000
			attempts := 0
			start := clock.t
			for range calls {
				b.Attempt()
				attempts++
				for n := 2; n <= tt.maxAttempts && b.TryRetry(); n++ {
					attempts++ // fails again
				}
				clock.advance(tt.gap)
			}
			elapsed := clock.t.Sub(start).Seconds()
			bound := calls*(1+tt.ratio) + tt.floor*(elapsed+1)
			if float64(attempts) > bound {
				t.Fatalf("%d attempts, over the bound %.1f", attempts, bound)
			}
			// Not needlessly stingy either: nearly every earned token is spent (the last call may leave
			// less than one token, and the cap on retries per call may leave some unspent).
			floorRetries := math.Min(tt.floor*elapsed, calls*float64(tt.maxAttempts-1))
			if want := calls + math.Floor(calls*tt.ratio+floorRetries) - 2; tt.maxAttempts > 2 && float64(attempts) < want {
				t.Fatalf("%d attempts, want at least %.0f", attempts, want)
			}
		})
	}
}

// TestBudgetRefillsWithTheClock: without first attempts, tokens come only from the floor, at its rate,
// and no more than ten seconds of it are banked.
func TestBudgetRefillsWithTheClock(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	b := NewBudget(0, 2, clock.now) // two retries per second, nothing from attempts
	spend := func() int {
		n := 0
		for b.TryRetry() {
			n++
		}
		return n
	}
	if got := spend(); got != 2 {
		t.Fatalf("at start: %d retries, want 2 (one second of the floor)", got)
	}
	clock.advance(250 * time.Millisecond)
	if got := spend(); got != 0 {
		t.Fatalf("after 250ms: %d retries, want 0 (half a token)", got)
	}
	clock.advance(250 * time.Millisecond)
	if got := spend(); got != 1 {
		t.Fatalf("after 500ms: %d retries, want 1", got)
	}
	clock.advance(3 * time.Second)
	if got := spend(); got != 6 {
		t.Fatalf("after 3s more: %d retries, want 6", got)
	}
	clock.advance(time.Hour)
	if got := spend(); got != 20 {
		t.Fatalf("after an idle hour: %d retries, want 20 (ten seconds of the floor)", got)
	}
	clock.advance(-time.Minute) // a clock that steps back adds nothing
	if got := spend(); got != 0 {
		t.Fatalf("after the clock went back: %d retries", got)
	}
	clock.advance(time.Minute + time.Second)
	if got := spend(); got != 2 {
		t.Fatalf("one second after the clock caught up: %d retries, want 2", got)
	}
}

// TestBudgetEarnsFromAttempts: every first attempt earns ratio of a retry, up to the bucket's capacity.
func TestBudgetEarnsFromAttempts(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	b := NewBudget(0.25, 0, clock.now)
	if b.TryRetry() {
		t.Fatal("retry allowed before any attempt, with no floor")
	}
	for i := 1; i <= 8; i++ {
		b.Attempt()
		if got, want := b.TryRetry(), i%4 == 0; got != want {
			t.Fatalf("after attempt %d: TryRetry = %v, want %v", i, got, want)
		}
	}
	for range 10000 {
		b.Attempt()
	}
	n := 0
	for b.TryRetry() {
		n++
	}
	if n != 25 { // capacity: what 100 first attempts earn
		t.Fatalf("banked %d retries, want 25", n)
	}
}

func TestBudgetClampsSettings(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	for _, b := range []*Budget{NewBudget(-1, -1, clock.now), NewBudget(math.NaN(), math.NaN(), clock.now)} {
		b.Attempt()
		clock.advance(time.Hour)
		if b.TryRetry() {
			t.Fatal("a budget of nothing allowed a retry")
		}
	}
	b := NewBudget(5, 0, nil) // ratio clamped to 1; nil clock is time.Now
	b.Attempt()
	if !b.TryRetry() || b.TryRetry() {
		t.Fatal("ratio above 1 should act as 1")
	}
}
