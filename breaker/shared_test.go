package breaker

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sharedRefusal fails the test unless the breaker refuses the next attempt because of a shared
// opening, and returns the refusal.
func sharedRefusal(t *testing.T, s *Set) *OpenError {
	t.Helper()
	oe := refused(t, s)
	if !oe.Shared {
		t.Fatalf("refusal %v is not marked shared", oe)
	}
	return oe
}

// recorder keeps what OnStateChange and OnOpen report.
type recorder struct {
	mu     sync.Mutex
	states []string
	opens  []time.Time
}

func record(s *Set) *recorder {
	r := &recorder{}
	s.OnStateChange(func(server, state string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.states = append(r.states, server+":"+state)
	})
	s.OnOpen(func(server string, until time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if server != "up" {
			panic("OnOpen for " + server)
		}
		r.opens = append(r.opens, until)
	})
	return r
}

func (r *recorder) transitions() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.states, " ")
}

func (r *recorder) openings() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.opens...)
}

// A forced opening refuses calls until its end, counting down, says so in the refusal, and is logged
// and reported like any opening (but not to OnOpen: it is not this replica's news). After its end the
// breaker is half-open and one successful probe closes it.
func TestForceOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, logs := newSet(Settings{Failures: 3, OpenFor: time.Minute})
		rec := record(s)
		s.ForceOpen("up", time.Now().Add(10*time.Second))
		if got := s.State("up"); got != "open" {
			t.Fatalf("state %s, want open", got)
		}
		if oe := sharedRefusal(t, s); oe.RetryIn != 10*time.Second ||
			oe.Error() != `circuit breaker of "up" is open (opened by another replica); next probe in 10s` {
			t.Fatalf("refusal %+v: %v", oe, oe)
		}
		attemptOn(t, s, "other", Succeeded)
		time.Sleep(4 * time.Second)
		if oe := sharedRefusal(t, s); oe.RetryIn != 6*time.Second {
			t.Fatalf("RetryIn = %v, want 6s", oe.RetryIn)
		}
		time.Sleep(6 * time.Second)
		if oe := sharedRefusal(t, s); oe.RetryIn != 0 {
			t.Fatalf("at the very end: RetryIn = %v, want 0", oe.RetryIn)
		}
		time.Sleep(time.Nanosecond)
		done, err := s.Allow("up")
		if err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		if got := s.State("up"); got != "half-open" {
			t.Fatalf("state %s, want half-open", got)
		}
		if oe := sharedRefusal(t, s); oe.RetryIn != 0 {
			t.Fatalf("second call while the probe is out: RetryIn %v", oe.RetryIn)
		}
		done(Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
		for range 10 {
			attempt(t, s, Succeeded)
		}
		if got := rec.transitions(); got != "up:open up:half-open up:closed" {
			t.Errorf("transitions %q", got)
		}
		if len(rec.openings()) != 0 {
			t.Errorf("a forced opening was reported to OnOpen: %v", rec.openings())
		}
		want := []string{
			`level=WARN msg="upstream circuit breaker open" server=up from=closed to=open open_for=10s opened_by="another replica"`,
			`level=INFO msg="upstream circuit breaker half-open" server=up from=open to=half-open`,
			`level=INFO msg="upstream circuit breaker closed" server=up from=half-open to=closed`,
		}
		if got := strings.Split(strings.TrimSpace(logs.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("logs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// The local breaker opening is reported to OnOpen with its end, and so is each failed probe that opens
// it again.
func TestOnOpenReportsLocalOpenings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 2, OpenFor: 5 * time.Second})
		rec := record(s)
		start := time.Now()
		trip(t, s, 2)
		time.Sleep(6 * time.Second)
		attempt(t, s, TimedOut) // the probe
		opens := rec.openings()
		if len(opens) != 2 || !opens[0].Equal(start.Add(5*time.Second)) || !opens[1].Equal(start.Add(11*time.Second)) {
			t.Fatalf("OnOpen got %v, want the ends %v and %v", opens, start.Add(5*time.Second), start.Add(11*time.Second))
		}
	})
}

// A failed probe after a forced opening opens the breaker again for this replica's OpenFor, as its own
// opening: reported to OnOpen, so that it is shared in turn.
func TestForcedProbeFailureReopens(t *testing.T) {
	for _, o := range []Outcome{NeverSent, TimedOut, Broken} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, logs := newSet(Settings{Failures: 3, OpenFor: 7 * time.Second})
				rec := record(s)
				s.ForceOpen("up", time.Now().Add(time.Second))
				time.Sleep(2 * time.Second)
				probeAt := time.Now()
				attempt(t, s, o)
				if got := s.State("up"); got != "open" {
					t.Fatalf("state %s, want open", got)
				}
				if oe := refused(t, s); oe.RetryIn != 7*time.Second {
					t.Fatalf("RetryIn = %v, want a fresh 7s", oe.RetryIn)
				}
				if opens := rec.openings(); len(opens) != 1 || !opens[0].Equal(probeAt.Add(7*time.Second)) {
					t.Fatalf("OnOpen got %v", opens)
				}
				if got := rec.transitions(); got != "up:open up:half-open up:open" {
					t.Errorf("transitions %q", got)
				}
				if !strings.Contains(logs.String(), "from=half-open to=open open_for=7s\n") {
					t.Errorf("re-opening not logged:\n%s", logs)
				}
				time.Sleep(7*time.Second + time.Nanosecond)
				attempt(t, s, Succeeded)
				if got := s.State("up"); got != "closed" {
					t.Fatalf("state %s, want closed", got)
				}
			})
		})
	}
}

// A later end extends a forced opening; an earlier one, or one already past, changes nothing; an
// unknown server is ignored.
func TestForceOpenKeepsTheLaterEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{})
		rec := record(s)
		now := time.Now()
		s.ForceOpen("up", now.Add(-time.Second))
		s.ForceOpen("up", now)
		s.ForceOpen("nope", now.Add(time.Hour))
		var nilSet *Set
		nilSet.ForceOpen("up", now.Add(time.Hour))
		if got := s.State("up"); got != "closed" {
			t.Fatalf("an opening already over: state %s", got)
		}
		s.ForceOpen("up", now.Add(10*time.Second))
		s.ForceOpen("up", now.Add(5*time.Second))
		if oe := sharedRefusal(t, s); oe.RetryIn != 10*time.Second {
			t.Fatalf("RetryIn = %v, want 10s", oe.RetryIn)
		}
		s.ForceOpen("up", now.Add(20*time.Second))
		if oe := sharedRefusal(t, s); oe.RetryIn != 20*time.Second {
			t.Fatalf("RetryIn = %v, want 20s", oe.RetryIn)
		}
		if got := rec.transitions(); got != "up:open" {
			t.Errorf("transitions %q, want one opening", got)
		}
	})
}

// A forced opening during the half-open state that follows an earlier one refuses again, and the
// outcomes of the probes admitted before it are ignored.
func TestForceOpenDuringHalfOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{OpenFor: time.Minute, HalfOpenProbes: 2})
		s.ForceOpen("up", time.Now().Add(time.Second))
		time.Sleep(2 * time.Second)
		ok, err1 := s.Allow("up")
		bad, err2 := s.Allow("up")
		if err1 != nil || err2 != nil {
			t.Fatalf("probes refused: %v, %v", err1, err2)
		}
		s.ForceOpen("up", time.Now().Add(3*time.Second))
		ok(Succeeded)
		bad(Broken) // also reaches the local breaker: one failure of five
		if oe := sharedRefusal(t, s); oe.RetryIn != 3*time.Second {
			t.Fatalf("RetryIn = %v, want 3s", oe.RetryIn)
		}
		time.Sleep(3*time.Second + time.Nanosecond)
		attempt(t, s, Succeeded)
		attempt(t, s, Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
	})
}

// Half-open after a forced opening admits exactly HalfOpenProbes concurrent callers; an excluded
// outcome gives its slot back; the probes' successes close it.
func TestForcedHalfOpenAdmitsTheProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probes = 3
		s, _ := newSet(Settings{HalfOpenProbes: probes})
		s.ForceOpen("up", time.Now().Add(time.Second))
		time.Sleep(2 * time.Second)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			admitted []func(Outcome)
			refusals int
		)
		for range 20 {
			wg.Go(func() {
				done, err := s.Allow("up")
				mu.Lock()
				defer mu.Unlock()
				var oe *OpenError
				switch {
				case err == nil:
					admitted = append(admitted, done)
				case errors.As(err, &oe) && oe.Shared && oe.RetryIn == 0:
					refusals++
				default:
					t.Errorf("Allow: %v", err)
				}
			})
		}
		wg.Wait()
		if len(admitted) != probes || refusals != 20-probes {
			t.Fatalf("admitted %d, refused %d", len(admitted), refusals)
		}
		admitted[0](Cancelled) // gives its slot back
		again, err := s.Allow("up")
		if err != nil {
			t.Fatalf("the slot of a cancelled probe was not given back: %v", err)
		}
		sharedRefusal(t, s)
		for _, done := range append(admitted[1:], again) {
			if got := s.State("up"); got != "half-open" {
				t.Fatalf("state %s before every probe reported", got)
			}
			done(Succeeded)
		}
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
	})
}

// With both the local breaker and a forced opening in force, the breaker is open until both ends have
// passed, reports one opening, and a probe must pass both.
func TestForcedAndLocalTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 1, OpenFor: 5 * time.Second})
		rec := record(s)
		trip(t, s, 1)
		s.ForceOpen("up", time.Now().Add(10*time.Second))
		time.Sleep(7 * time.Second) // the local breaker is half-open now, the shared opening is not over
		if oe := sharedRefusal(t, s); oe.RetryIn != 3*time.Second {
			t.Fatalf("RetryIn = %v, want 3s", oe.RetryIn)
		}
		if got := s.State("up"); got != "open" {
			t.Fatalf("state %s, want open", got)
		}
		time.Sleep(3*time.Second + time.Nanosecond)
		done, err := s.Allow("up")
		if err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		// Both probe slots are taken now: the local breaker's refusal gives the shared slot back.
		if oe := refused(t, s); oe.RetryIn != 0 {
			t.Fatalf("RetryIn %v", oe.RetryIn)
		}
		done(Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
		if got := rec.transitions(); got != "up:open up:half-open up:closed" {
			t.Errorf("transitions %q", got)
		}
		if len(rec.openings()) != 1 {
			t.Errorf("OnOpen got %v, want the local opening only", rec.openings())
		}
	})
}

// A probe the local breaker refuses gives its shared slot back.
func TestLocalRefusalGivesTheSharedSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 1, OpenFor: time.Hour})
		trip(t, s, 1) // open for an hour locally
		s.ForceOpen("up", time.Now().Add(time.Second))
		time.Sleep(2 * time.Second)
		for range 3 {
			if oe := refused(t, s); oe.Shared || oe.RetryIn == 0 {
				t.Fatalf("want the local breaker's refusal, got %+v", oe)
			}
		}
		u := s.breakers["up"]
		u.mu.Lock()
		admitted := u.shared.admitted
		u.mu.Unlock()
		if admitted != 0 {
			t.Fatalf("%d shared probe slots kept by refused calls", admitted)
		}
	})
}
