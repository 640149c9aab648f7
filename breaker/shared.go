package breaker

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// Sharing open states between replicas
//
// Several gateway replicas in front of one upstream each hold a Set. Each replica's breaker counts only
// the outcomes of its own calls; what replicas share is the decision: when a replica's breaker opens,
// OnOpen tells the sharing layer (breaker/redisstore publishes it over Redis), and every other replica hears
// it and calls ForceOpen with the same end. So a breaker opened by failures seen on one replica stops
// calls on all of them, while no call waits on anything shared: Allow reads one atomic when nothing is
// shared, and a shared open refuses without taking a lock.
//
// Why not a shared breaker? gobreaker's DistributedCircuitBreaker keeps its counts in the store under a
// lock held for the whole call, which serialises every call to the upstream across all replicas, and
// puts the store on every call's path. Sharing only the openings costs one message per opening.
//
// Why not shared failure counts? Counting every replica's failures together would open the breaker
// after `failures` failures in all instead of `failures` on one replica, but it needs a store write for
// every failure and a reset for every success (the count is of consecutive failures), on the call's
// path, and "consecutive" has no clear meaning across replicas that see calls interleaved. When an
// upstream is down every replica sees an unbroken run of failures anyway, so the first replica to reach
// `failures` opens the breaker for all: at most replicas x (failures-1) + 1 calls fail before every
// replica refuses, instead of `failures`. Lower `failures` if that is too many.
//
// After a shared open ends, the breaker is half-open on every replica, and each replica probes on its
// own: it admits HalfOpenProbes calls; as many successes close it, a failure opens it again for OpenFor
// and is shared like any opening. A replica whose probe succeeded does not tell the others: each needs
// one successful probe of its own, which is what probes are for, and a "closed" message could overtake
// a newer opening. The shared record expires by itself when the opening ends.
//
// The overall state of a breaker (State, OnStateChange, the logs) is the worse of the local breaker's
// and the shared one's: open if either is, else half-open if either is, else closed. A call is admitted
// only if both admit it, and its outcome is reported to both.

// shared is the open state another replica reported, and the half-open state that follows it.
type shared struct {
	state    gobreaker.State // closed: nothing shared in force
	until    int64           // while open: its end, as an offset from Set.epoch
	gen      uint64          // changes at every change of state: late probe outcomes are ignored
	admitted uint32          // probes admitted in this half-open state and not given back
	passed   uint32          // probes that succeeded in this half-open state
}

// ForceOpen opens server's breaker until until, because another replica's breaker of server opened.
// Until then Allow refuses with an *OpenError whose Shared is set and whose RetryIn counts down to until;
// afterwards the breaker is half-open (see the comment at the top of this file). A later end extends an
// opening in force; an earlier one changes nothing. An opening forced here is not reported to OnOpen. A
// server without a breaker, or an end already past, is ignored.
func (s *Set) ForceOpen(server string, until time.Time) {
	u := s.breaker(server)
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	end, now := until.Sub(s.epoch).Nanoseconds(), s.now()
	sh := &u.shared
	if end <= now || (sh.state == gobreaker.StateOpen && end <= sh.until) {
		return
	}
	*sh = shared{state: gobreaker.StateOpen, until: end, gen: sh.gen + 1}
	u.peerUntil.Store(end)
	s.report(u, time.Duration(end-now), true)
}

// OnOpen registers fn (replacing any earlier one) to be told when this replica's own outcomes open a
// breaker: its local breaker opened, or a probe of a shared half-open state failed. until is when the
// opening ends. Openings forced by ForceOpen are not reported. fn runs on the goroutine of the call
// that caused the opening, with the breaker's locks held: it must return at once (hand the news to
// another goroutine) and must not call the Set.
func (s *Set) OnOpen(fn func(server string, until time.Time)) { s.onOpen.Store(&fn) }

// opened tells OnOpen. u.mu is held.
func (s *Set) opened(u *upstream, until time.Time) {
	if fn := s.onOpen.Load(); fn != nil {
		(*fn)(u.name, until)
	}
}

// now is the time on the Set's monotonic clock, as an offset from its epoch.
func (s *Set) now() int64 { return time.Since(s.epoch).Nanoseconds() }

// advanceShared turns a shared open whose end has passed into half-open, reporting the change. It is
// strictly after the end, as gobreaker's own. u.mu is held.
func (s *Set) advanceShared(u *upstream) {
	sh := &u.shared
	if sh.state != gobreaker.StateOpen || s.now() <= sh.until {
		return
	}
	*sh = shared{state: gobreaker.StateHalfOpen, until: sh.until, gen: sh.gen + 1}
	s.report(u, 0, false)
}

// allowShared decides a call while a shared state is in force and the fast path could not: the open
// state refuses, the half-open one admits up to the probe count. probe is nil when nothing shared is in
// force any longer; otherwise it must be called with the probe's outcome.
func (s *Set) allowShared(u *upstream) (probe func(Outcome), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s.advanceShared(u)
	sh := &u.shared
	switch sh.state {
	case gobreaker.StateClosed:
		return nil, nil
	case gobreaker.StateOpen:
		return nil, &OpenError{Server: u.name, RetryIn: time.Duration(max(sh.until-s.now(), 0)), Shared: true}
	}
	if sh.admitted >= u.probes {
		return nil, &OpenError{Server: u.name, Shared: true}
	}
	sh.admitted++
	gen := sh.gen
	return func(o Outcome) { s.probed(u, gen, o) }, nil
}

// probed takes a shared half-open probe's outcome: enough successes close the shared state, a failure
// opens it again for OpenFor, now as this replica's own opening (so it is shared), and an excluded
// outcome gives the slot back.
func (s *Set) probed(u *upstream, gen uint64, o Outcome) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sh := &u.shared
	if sh.gen != gen || sh.state != gobreaker.StateHalfOpen {
		return // the state changed since the probe was admitted
	}
	switch o.verdict() {
	case excluded:
		sh.admitted--
	case healthy:
		if sh.passed++; sh.passed >= u.probes {
			*sh = shared{gen: sh.gen + 1}
			u.peerUntil.Store(0)
			s.report(u, 0, false)
		}
	case unhealthy:
		now := time.Now()
		end := now.Add(u.openFor)
		*sh = shared{state: gobreaker.StateOpen, until: end.Sub(s.epoch).Nanoseconds(), gen: sh.gen + 1}
		u.peerUntil.Store(sh.until)
		s.report(u, u.openFor, false)
		s.opened(u, end)
	}
}
