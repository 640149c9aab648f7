package breaker

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestReconnectedHalfOpens: an upstream whose supervisor got it back (issue 16, item 3) is probed by the
// next call instead of being refused until OpenFor ends. A successful probe closes the breaker; an
// attempt admitted before the reconnect reports too late to change anything.
func TestReconnectedHalfOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, logs := newSet(Settings{Failures: 3, OpenFor: 30 * time.Second})
		late, err := s.Allow("up")
		if err != nil {
			t.Fatal(err)
		}
		trip(t, s, 3)
		s.Reconnected("up")
		if got := s.State("up"); got != "half-open" {
			t.Fatalf("after a reconnect: state %s, want half-open", got)
		}
		if got := s.State("other"); got != "closed" {
			t.Fatalf("another server's breaker: %s", got)
		}
		late(Broken) // admitted while closed, before the reconnect: ignored
		probe, err := s.Allow("up")
		if err != nil {
			t.Fatalf("the probe after a reconnect was refused: %v", err)
		}
		if oe := refused(t, s); oe.RetryIn != 0 {
			t.Fatalf("a second call while the probe is out: RetryIn %s", oe.RetryIn)
		}
		probe(Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("after a successful probe: state %s, want closed", got)
		}
		for range 2 { // a fresh failure run: two failures do not open it
			attempt(t, s, Broken)
		}
		attempt(t, s, Succeeded)
		want := []string{
			`level=WARN msg="upstream circuit breaker open" server=up from=closed to=open open_for=30s`,
			`level=INFO msg="upstream reconnected; its circuit breaker admits a probe now" server=up`,
			`level=INFO msg="upstream circuit breaker half-open" server=up from=open to=half-open`,
			`level=INFO msg="upstream circuit breaker closed" server=up from=half-open to=closed`,
		}
		if got := strings.Split(strings.TrimSpace(logs.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("logs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestReconnectedProbeFails: a probe that fails after a reconnect opens the breaker for a full OpenFor,
// reported to OnOpen as this replica's opening; an excluded probe gives its slot back first.
func TestReconnectedProbeFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 1, OpenFor: 10 * time.Second})
		var opened []time.Time
		s.OnOpen(func(server string, until time.Time) {
			if server == "up" {
				opened = append(opened, until)
			}
		})
		trip(t, s, 1)
		time.Sleep(4 * time.Second)
		s.Reconnected("up")
		attempt(t, s, Cancelled) // no evidence: the slot goes back
		if got := s.State("up"); got != "half-open" {
			t.Fatalf("after an excluded probe: %s", got)
		}
		attempt(t, s, Broken)
		if got := s.State("up"); got != "open" {
			t.Fatalf("after a failed probe: %s", got)
		}
		if oe := refused(t, s); oe.RetryIn != 10*time.Second {
			t.Fatalf("RetryIn %s, want a fresh 10s", oe.RetryIn)
		}
		// (told twice: the probe's failure opens the half-open state, and the fresh local breaker that
		// counted it with Failures 1, as after a shared opening)
		if len(opened) < 2 || !opened[len(opened)-1].Equal(time.Now().Add(10*time.Second)) {
			t.Fatalf("OnOpen told %v", opened)
		}
		time.Sleep(10*time.Second + time.Nanosecond)
		attempt(t, s, Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("after OpenFor and a good probe: %s", got)
		}
	})
}

// TestReconnectedLeavesOtherStates: a closed breaker stays closed (with its failure run), a half-open
// one keeps its probes, and a server without a breaker is ignored.
func TestReconnectedLeavesOtherStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, logs := newSet(Settings{Failures: 2, OpenFor: time.Second})
		attempt(t, s, Broken)
		s.Reconnected("up")
		s.Reconnected("nobody")
		if got := s.State("up"); got != "closed" || logs.String() != "" {
			t.Fatalf("closed breaker after a reconnect: %s, logs %q", got, logs)
		}
		attempt(t, s, Broken) // the run of failures was kept: this opens it
		if got := s.State("up"); got != "open" {
			t.Fatalf("state %s, want open", got)
		}
		time.Sleep(2 * time.Second)
		probe, err := s.Allow("up")
		if err != nil {
			t.Fatal(err)
		}
		s.Reconnected("up")
		refused(t, s) // the probe in flight is still the only one
		probe(Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
	})
}

// TestReconnectedEndsSharedOpen: an opening another replica shared (ForceOpen) also turns half-open when
// this replica's upstream is back.
func TestReconnectedEndsSharedOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{})
		s.ForceOpen("up", time.Now().Add(time.Minute))
		refused(t, s)
		s.Reconnected("up")
		if got := s.State("up"); got != "half-open" {
			t.Fatalf("state %s, want half-open", got)
		}
		attempt(t, s, Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
	})
}

// TestReconnectedConcurrent: reconnects racing calls leave a consistent breaker (for -race).
func TestReconnectedConcurrent(t *testing.T) {
	s, _ := newSet(Settings{Failures: 2, OpenFor: time.Hour})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				if done, err := s.Allow("up"); err == nil {
					done([]Outcome{Broken, Succeeded, NeverSent, Cancelled}[(i+w)%4])
				}
				_ = s.State("up")
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			s.Reconnected("up")
		}
	})
	wg.Wait()
	s.Reconnected("up")
	if got := s.State("up"); got == "open" {
		t.Fatalf("open after a reconnect")
	}
	for range 3 {
		if done, err := s.Allow("up"); err == nil {
			done(Succeeded)
		}
	}
	if got := s.State("up"); got != "closed" {
		t.Fatalf("state %s after successes, want closed", got)
	}
}
