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
)

// Settings configure one upstream's breaker. A zero field means its default (DefaultFailures, ...), so
// the zero Settings is valid.
type Settings struct {
	Failures       uint32        // consecutive counted failures that open the breaker; default 5
	OpenFor        time.Duration // how long it stays open before admitting probes; default 30s
	HalfOpenProbes uint32        // calls admitted while half-open; default 1 (gobreaker MaxRequests)
}

// WithDefaults returns s with every zero (or negative) field replaced by its default.
func (s Settings) WithDefaults() Settings {
	s.Failures = cmp.Or(s.Failures, DefaultFailures)
	if s.OpenFor <= 0 {
		s.OpenFor = DefaultOpenFor
	}
	s.HalfOpenProbes = cmp.Or(s.HalfOpenProbes, DefaultHalfOpenProbes)
	return s
}

// Set holds one circuit breaker per upstream server, created up front. It is safe for concurrent use.
//
// Each breaker is a gobreaker two-step breaker that counts outcomes as docs/design.md, Failure semantics,
// says: NeverSent, TimedOut and Broken are failures; Succeeded, ToolError and Oversize are successes (the
// upstream answered); Cancelled and RateLimited are excluded, counted neither way. Failures must be
// consecutive to open the breaker: a success resets the count, an excluded outcome leaves it as it is.
//
// Closed, every call passes. After Failures consecutive failures the breaker opens and refuses every call
// for OpenFor; then it turns half-open and admits HalfOpenProbes calls. Those probes are all the half-open
// breaker admits until they report: the slots are not freed by a success, only an excluded outcome gives
// one back. HalfOpenProbes successes close the breaker; one failure re-opens it for another OpenFor.
// Outcomes reported after the breaker changed state (a slow call that was admitted while closed, say) are
// ignored. A probe whose done is never called keeps the breaker half-open and refusing for good, so
// callers must call done on every path, panics included.
//
// Replicas share open states through ForceOpen and OnOpen (see shared.go): a breaker can also be open
// because another replica's breaker of the same upstream opened.
type Set struct {
	log      *slog.Logger
	breakers map[string]*upstream // fixed after NewSet
	onChange atomic.Pointer[func(server, state string)]
	onOpen   atomic.Pointer[func(server string, until time.Time)]
	epoch    time.Time // shared deadlines are kept as monotonic offsets from it
}

// OnStateChange registers fn (replacing any earlier one) to be told every state change: server and the
// new state, "closed", "half-open" or "open". It runs on the goroutine of the call that caused the
// change (or of ForceOpen) and must be quick (metrics).
func (s *Set) OnStateChange(fn func(server, state string)) { s.onChange.Store(&fn) }

// upstream is the breaker of one server and what gobreaker does not tell: when it last opened, the
// open state shared by other replicas, and the state last reported.
type upstream struct {
	name     string
	openFor  time.Duration
	probes   uint32
	settings Settings // with defaults, to build a fresh local breaker (Reconnected)
	// cb is the local gobreaker. Reconnected replaces it with a fresh one; outcomes reported to the one
	// it replaced are ignored.
	cb atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]

	// peerUntil is nonzero while a shared open (or the half-open that follows it) is in force: the
	// end of the open, as an offset from Set.epoch. Allow reads only this while nothing is shared.
	peerUntil atomic.Int64

	// lastFault is the id of the last connection fault counted against the upstream (OncePerFault).
	lastFault atomic.Uint64

	mu       sync.Mutex // after gobreaker's own lock, never before it
	openedAt time.Time
	local    gobreaker.State // the local gobreaker's state, as its OnStateChange last said
	shared   shared
	reported gobreaker.State // the state last logged and reported: the worse of local and shared
}

// NewSet creates a breaker for each server, with its settings (zero fields mean the defaults). State
// changes are logged to log: opening at Warn, half-open and closing at Info, each with server, from and
// to. A nil log means slog.Default().
func NewSet(servers map[string]Settings, log *slog.Logger) *Set {
	s := &Set{log: cmp.Or(log, slog.Default()), breakers: make(map[string]*upstream, len(servers)), epoch: time.Now()}
	for name, st := range servers {
		st = st.WithDefaults()
		u := &upstream{name: name, openFor: st.OpenFor, probes: st.HalfOpenProbes, settings: st}
		u.cb.Store(s.newLocal(u))
		s.breakers[name] = u
	}
	return s
}

// newLocal builds a closed local gobreaker for u. Its state changes are recorded only while it is u's
// current one.
func (s *Set) newLocal(u *upstream) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	st := u.settings
	var cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        u.name,
		MaxRequests: st.HalfOpenProbes,
		// Interval 0: counts are never cleared while closed, so only a success resets the failure run.
		Timeout:      st.OpenFor,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= st.Failures },
		IsSuccessful: func(err error) bool { return verdictOf(err) == healthy },
		IsExcluded:   func(err error) bool { return verdictOf(err) == excluded },
		// Called with gobreaker's lock held: it must not call back into cb. A breaker Reconnected
		// replaced may still see late outcomes (and turn half-open when asked): it is no longer u's.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if u.cb.Load() == cb {
				s.changed(u, from, to)
			}
		},
	})
	return cb
}

// Reconnected tells the Set that server's connection came back up: its supervisor restarted or
// reconnected it, and the upstream answered initialize and tools/list. An open breaker (local, or
// shared by another replica) turns half-open at once instead of waiting out OpenFor, so the next call
// probes the upstream that is back: HalfOpenProbes successes close it, a failure opens it again for
// OpenFor (and is shared as this replica's opening). A breaker that is closed or half-open already is
// left as it is. A server without a breaker is ignored.
//
// gobreaker cannot be moved to half-open from outside, so the local breaker is replaced by a fresh
// closed one, and the half-open state is the one the Set keeps for shared openings (see shared.go):
// a call is admitted only as its probe. Outcomes of calls admitted before are ignored.
func (s *Set) Reconnected(server string) {
	u := s.breaker(server)
	if u == nil {
		return
	}
	u.cb.Load().State() // an open whose OpenFor has passed turns half-open first (and u.local follows)
	u.mu.Lock()
	defer u.mu.Unlock()
	s.advanceShared(u)
	if u.local != gobreaker.StateOpen && u.shared.state != gobreaker.StateOpen {
		return
	}
	if u.local == gobreaker.StateOpen {
		u.cb.Store(s.newLocal(u))
		u.local = gobreaker.StateClosed
	}
	// A shared half-open state whose open ended "before the epoch": Allow takes its slow path, where
	// allowShared admits the probes.
	u.shared = shared{state: gobreaker.StateHalfOpen, until: -1, gen: u.shared.gen + 1}
	u.peerUntil.Store(-1)
	s.log.Info("upstream reconnected; its circuit breaker admits a probe now", "server", server)
	s.report(u, 0, false)
}

// OpenError is Allow's refusal: the breaker of Server is open, or half-open with its probes taken. The
// upstream saw no call.
type OpenError struct {
	Server string
	// RetryIn is the time until the breaker admits its next probe; 0 when it is half-open with all its
	// probes in flight (it is known only when they report).
	RetryIn time.Duration
	// Shared is set when the open state came from another replica (ForceOpen).
	Shared bool
}

// Error says when to come back, rounded up to whole seconds (milliseconds below one second).
func (e *OpenError) Error() string {
	if e.RetryIn <= 0 {
		return fmt.Sprintf("circuit breaker of %q is half-open and its probe calls are in flight; retry shortly", e.Server)
	}
	by := ""
	if e.Shared {
		by = " (opened by another replica)"
	}
	return fmt.Sprintf("circuit breaker of %q is open%s; next probe in %s", e.Server, by, roundUp(e.RetryIn))
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
	var probe func(Outcome) // a probe of the shared half-open state, nil when none is in force
	if until := u.peerUntil.Load(); until != 0 {
		if now := s.now(); now <= until { // open: refused without a lock
			return func(Outcome) {}, &OpenError{Server: server, RetryIn: time.Duration(until - now), Shared: true}
		}
		var err error
		if probe, err = s.allowShared(u); err != nil {
			return func(Outcome) {}, err
		}
	}
	report, err := u.cb.Load().Allow()
	if err != nil {
		if probe != nil {
			probe(Cancelled) // not sent: the probe slot goes back
		}
		return func(Outcome) {}, &OpenError{Server: server, RetryIn: u.retryIn(err)}
	}
	var reported atomic.Bool
	return func(o Outcome) {
		if reported.CompareAndSwap(false, true) {
			report(outcomeError(o))
			if probe != nil {
				probe(o)
			}
		}
	}, nil
}

// State is the breaker's state for logs and metrics: "closed", "open" or "half-open". An open breaker
// whose OpenFor has passed reads "half-open" (and the change is logged then). With a shared open state
// in force, it is the worse of the two: open if either is, else half-open if either is. A server without
// a breaker reads "closed", as Allow lets everything through for it.
func (s *Set) State(server string) string {
	u := s.breaker(server)
	if u == nil {
		return gobreaker.StateClosed.String()
	}
	local := u.cb.Load().State() // may report open -> half-open
	u.mu.Lock()
	defer u.mu.Unlock()
	s.advanceShared(u)
	return worse(local, u.shared.state).String()
}

func (s *Set) breaker(server string) *upstream {
	if s == nil {
		return nil
	}
	return s.breakers[server]
}

// changed records a change of the local gobreaker: when it opened, and the state it is in. It reports
// the change when it changes the breaker's overall state, and an opening to OnOpen. gobreaker calls it
// with its lock held.
func (s *Set) changed(u *upstream, _, to gobreaker.State) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.local = to
	if to == gobreaker.StateOpen {
		u.openedAt = time.Now()
	}
	s.report(u, u.openFor, false)
	if to == gobreaker.StateOpen {
		s.opened(u, u.openedAt.Add(u.openFor))
	}
}

// report logs and reports the breaker's overall state when it is not the one last reported. openFor
// is how long an opening lasts; shared says that another replica opened it. u.mu is held.
func (s *Set) report(u *upstream, openFor time.Duration, shared bool) {
	to := worse(u.local, u.shared.state)
	from := u.reported
	if to == from {
		return
	}
	u.reported = to
	attrs := []any{"server", u.name, "from", from.String(), "to", to.String()}
	level := slog.LevelInfo
	if to == gobreaker.StateOpen {
		level = slog.LevelWarn
		attrs = append(attrs, "open_for", openFor)
		if shared {
			attrs = append(attrs, "opened_by", "another replica")
		}
	}
	s.log.Log(context.Background(), level, "upstream circuit breaker "+to.String(), attrs...)
	if fn := s.onChange.Load(); fn != nil {
		(*fn)(u.name, to.String())
	}
}

// worse is the state that refuses more: open, then half-open, then closed.
func worse(a, b gobreaker.State) gobreaker.State {
	rank := func(st gobreaker.State) int {
		switch st {
		case gobreaker.StateOpen:
			return 2
		case gobreaker.StateHalfOpen:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
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
