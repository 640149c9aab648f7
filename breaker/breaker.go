package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/toolgate/toolgate/config"
)

// Settings configure one upstream's breaker. A zero field means the default of the matching config key
// (config.DefaultBreakerFailures, ...), so the zero Settings is valid.
type Settings struct {
	Failures       uint32        // consecutive counted failures that open the breaker; default 5
	OpenFor        time.Duration // how long it stays open before admitting probes; default 30s
	HalfOpenProbes uint32        // calls admitted while half-open; default 1 (gobreaker MaxRequests)
}

// WithDefaults returns s with every zero (or negative) field replaced by its default.
func (s Settings) WithDefaults() Settings {
	s.Failures = cmp.Or(s.Failures, config.DefaultBreakerFailures)
	if s.OpenFor <= 0 {
		s.OpenFor = config.DefaultBreakerOpenFor
	}
	s.HalfOpenProbes = cmp.Or(s.HalfOpenProbes, config.DefaultBreakerHalfOpenProbes)
	return s
}

// Set holds one circuit breaker per upstream server, created up front. It is safe for concurrent use.
//
// Each breaker is a gobreaker two-step breaker that counts DESIGN §5 outcomes: NeverSent, TimedOut and
// Broken are failures; Succeeded, ToolError and Oversize are successes (the upstream answered); Cancelled
// and RateLimited are excluded, counted neither way. Failures must be consecutive to open the breaker: a
// success resets the count, an excluded outcome leaves it as it is.
//
// Closed, every call passes. After Failures consecutive failures the breaker opens and refuses every call
// for OpenFor; then it turns half-open and admits HalfOpenProbes calls. Those probes are all the half-open
// breaker admits until they report: the slots are not freed by a success, only an excluded outcome gives
// one back. HalfOpenProbes successes close the breaker; one failure re-opens it for another OpenFor.
// Outcomes reported after the breaker changed state (a slow call that was admitted while closed, say) are
// ignored. A probe whose done is never called keeps the breaker half-open and refusing for good, so
// callers must call done on every path, panics included.
type Set struct {
	log      *slog.Logger
	breakers map[string]*upstream // fixed after NewSet
	onChange atomic.Pointer[func(server, state string)]
}

// OnStateChange registers fn (replacing any earlier one) to be told every state change: server and the
// new state, "closed", "half-open" or "open". It runs on the goroutine of the call that caused the
// change and must be quick (metrics).
func (s *Set) OnStateChange(fn func(server, state string)) { s.onChange.Store(&fn) }

// upstream is the breaker of one server and what gobreaker does not tell: when it last opened.
type upstream struct {
	name    string
	openFor time.Duration
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu       sync.Mutex
	openedAt time.Time
}

// NewSet creates a breaker for each server, with its settings (zero fields mean the defaults). State
// changes are logged to log: opening at Warn, half-open and closing at Info, each with server, from and
// to. A nil log means slog.Default().
func NewSet(servers map[string]Settings, log *slog.Logger) *Set {
	s := &Set{log: cmp.Or(log, slog.Default()), breakers: make(map[string]*upstream, len(servers))}
	for name, st := range servers {
		st = st.WithDefaults()
		u := &upstream{name: name, openFor: st.OpenFor}
		u.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        name,
			MaxRequests: st.HalfOpenProbes,
			// Interval 0: counts are never cleared while closed, so only a success resets the failure run.
			Timeout:      st.OpenFor,
			ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= st.Failures },
			IsSuccessful: func(err error) bool { return verdictOf(err) == healthy },
			IsExcluded:   func(err error) bool { return verdictOf(err) == excluded },
			// Called with gobreaker's lock held: it must not call back into u.cb.
			OnStateChange: func(_ string, from, to gobreaker.State) { s.changed(u, from, to) },
		})
		s.breakers[name] = u
	}
	return s
}

// OpenError is Allow's refusal: the breaker of Server is open, or half-open with its probes taken. The
// upstream saw no call.
type OpenError struct {
	Server string
	// RetryIn is the time until the breaker admits its next probe; 0 when it is half-open with all its
	// probes in flight (it is known only when they report).
	RetryIn time.Duration
}

// Error says when to come back, rounded up to whole seconds (milliseconds below one second).
func (e *OpenError) Error() string {
	if e.RetryIn <= 0 {
		return fmt.Sprintf("circuit breaker of %q is half-open and its probe calls are in flight; retry shortly", e.Server)
	}
	return fmt.Sprintf("circuit breaker of %q is open; next probe in %s", e.Server, roundUp(e.RetryIn))
}

func roundUp(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1).Truncate(unit)
}

// Allow asks to send one attempt to server. When it returns no error, the caller MUST call done exactly
// once with the attempt's Outcome; calls after the first are ignored. When the breaker is open (or
// half-open with its probes taken), err is *OpenError and the upstream must see no call. done is never
// nil: on an error it does nothing.
//
// A server the Set has no breaker for (a name not given to NewSet) is always allowed, and its done does
// nothing: the Set guards the upstreams it was built for and has no opinion on others.
func (s *Set) Allow(server string) (done func(Outcome), err error) {
	u := s.breaker(server)
	if u == nil {
		return func(Outcome) {}, nil
	}
	report, err := u.cb.Allow()
	if err != nil {
		return func(Outcome) {}, &OpenError{Server: server, RetryIn: u.retryIn(err)}
	}
	var reported atomic.Bool
	return func(o Outcome) {
		if reported.CompareAndSwap(false, true) {
			report(outcomeError(o))
		}
	}, nil
}

// State is the breaker's state for logs and metrics: "closed", "open" or "half-open". An open breaker
// whose OpenFor has passed reads "half-open" (and the change is logged then). A server without a breaker
// reads "closed", as Allow lets everything through for it.
func (s *Set) State(server string) string {
	u := s.breaker(server)
	if u == nil {
		return gobreaker.StateClosed.String()
	}
	return u.cb.State().String()
}

func (s *Set) breaker(server string) *upstream {
	if s == nil {
		return nil
	}
	return s.breakers[server]
}

// changed records when the breaker opened and logs the change. gobreaker calls it with its lock held.
func (s *Set) changed(u *upstream, from, to gobreaker.State) {
	attrs := []any{"server", u.name, "from", from.String(), "to", to.String()}
	level := slog.LevelInfo
	if to == gobreaker.StateOpen {
		u.mu.Lock()
		u.openedAt = time.Now()
		u.mu.Unlock()
		level = slog.LevelWarn
		attrs = append(attrs, "open_for", u.openFor)
	}
	s.log.Log(context.Background(), level, "upstream circuit breaker "+to.String(), attrs...)
	if fn := s.onChange.Load(); fn != nil {
		(*fn)(u.name, to.String())
	}
}

// retryIn is the time until the next probe, for a refusal err from gobreaker. gobreaker turns half-open
// only strictly after openedAt+openFor, so at that very instant this says 0 while still refusing.
func (u *upstream) retryIn(err error) time.Duration {
	if !errors.Is(err, gobreaker.ErrOpenState) {
		return 0 // ErrTooManyRequests: half-open, probes taken
	}
	u.mu.Lock()
	opened := u.openedAt
	u.mu.Unlock()
	return max(time.Until(opened.Add(u.openFor)), 0)
}

// outcomeError carries an Outcome through gobreaker's done(error) to IsSuccessful and IsExcluded.
type outcomeError Outcome

func (e outcomeError) Error() string { return Outcome(e).String() }

// verdictOf reads back what outcomeError carries. Other errors cannot reach gobreaker (Set never uses
// Execute), but are failures if they do, as gobreaker would count them.
func verdictOf(err error) verdict {
	if o, ok := err.(outcomeError); ok {
		return Outcome(o).verdict()
	}
	if err == nil {
		return healthy
	}
	return unhealthy
}
