package breaker

import (
	"github.com/toolgate/toolgate/internal/testkit"

	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Every test runs in a synctest bubble: gobreaker's time.Now is the bubble's fake clock, and time.Sleep
// moves it forward at once.

// logBuffer is the shared concurrent log sink.
type logBuffer = testkit.LogBuffer

func newSet(st Settings) (*Set, *logBuffer) {
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // fake-clock times only add noise
			}
			return a
		},
	}))
	return NewSet(map[string]Settings{"up": st, "other": st}, log), logs
}

// attempt runs one attempt that ends with o, failing the test if the breaker refuses it.
func attempt(t *testing.T, s *Set, o Outcome) {
	t.Helper()
	done, err := s.Allow("up")
	if err != nil {
		t.Fatalf("attempt refused: %v", err)
	}
	done(o)
}

// refused fails the test unless the breaker refuses the next attempt, and returns the refusal.
func refused(t *testing.T, s *Set) *OpenError {
	t.Helper()
	_, err := s.Allow("up")
	var oe *OpenError
	if !errors.As(err, &oe) {
		t.Fatalf("Allow = %v, want *OpenError (state %s)", err, s.State("up"))
	}
	if oe.Server != "up" {
		t.Fatalf("OpenError.Server = %q", oe.Server)
	}
	return oe
}

// trip opens the breaker with n consecutive transport failures.
func trip(t *testing.T, s *Set, n uint32) {
	t.Helper()
	for range n {
		attempt(t, s, Broken)
	}
	if got := s.State("up"); got != "open" {
		t.Fatalf("after %d failures: state %s, want open", n, got)
	}
}

func TestTripsAfterTransportFailures(t *testing.T) {
	runs := map[string][]Outcome{
		"never sent": {NeverSent, NeverSent, NeverSent},
		"timed out":  {TimedOut, TimedOut, TimedOut},
		"broken":     {Broken, Broken, Broken},
		"mixed":      {NeverSent, TimedOut, Broken},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSet(Settings{Failures: 3, OpenFor: 10 * time.Second})
				for i, o := range run {
					if got := s.State("up"); got != "closed" {
						t.Fatalf("after %d failures: state %s, want closed", i, got)
					}
					attempt(t, s, o)
				}
				if got := s.State("up"); got != "open" {
					t.Fatalf("state %s, want open", got)
				}
				if oe := refused(t, s); oe.RetryIn != 10*time.Second {
					t.Errorf("RetryIn = %v, want 10s", oe.RetryIn)
				}
				if s.State("other") != "closed" {
					t.Error("another server's breaker opened too")
				}
				attemptOn(t, s, "other", Succeeded)
			})
		})
	}
}

func attemptOn(t *testing.T, s *Set, server string, o Outcome) {
	t.Helper()
	done, err := s.Allow(server)
	if err != nil {
		t.Fatalf("%s refused: %v", server, err)
	}
	done(o)
}

// TestDoesNotTrip: cancellations and rate limiting are no evidence; tool errors and oversize answers
// prove the upstream alive. None of them opens the breaker, however many there are.
func TestDoesNotTrip(t *testing.T) {
	for _, o := range []Outcome{Cancelled, RateLimited, ToolError, Oversize, Succeeded} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSet(Settings{Failures: 3})
				for range 100 {
					attempt(t, s, o)
				}
				if got := s.State("up"); got != "closed" {
					t.Fatalf("after 100 %s: state %s, want closed", o, got)
				}
			})
		})
	}
}

// TestConsecutive: a success (or tool error) between failures starts the count again; excluded outcomes
// neither reset it nor add to it.
func TestConsecutive(t *testing.T) {
	tests := []struct {
		name string
		run  []Outcome
		want string
	}{
		{"success resets", []Outcome{Broken, Broken, Succeeded, Broken, Broken}, "closed"},
		{"tool error resets", []Outcome{TimedOut, TimedOut, ToolError, TimedOut, TimedOut}, "closed"},
		{"oversize resets", []Outcome{NeverSent, NeverSent, Oversize, NeverSent, NeverSent}, "closed"},
		{"cancellation does not reset", []Outcome{Broken, Cancelled, Broken, Cancelled, Broken}, "open"},
		{"rate limit does not reset", []Outcome{Broken, RateLimited, Broken, RateLimited, RateLimited, Broken}, "open"},
		{"three after the success", []Outcome{Broken, Broken, Succeeded, Broken, Broken, Broken}, "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSet(Settings{Failures: 3})
				for _, o := range tt.run {
					attempt(t, s, o)
				}
				if got := s.State("up"); got != tt.want {
					t.Fatalf("state %s, want %s", got, tt.want)
				}
			})
		})
	}
}

// TestHalfOpenAdmitsExactlyTheProbes: once OpenFor has passed, exactly HalfOpenProbes attempts are let
// through, together; every other one is refused with RetryIn 0 until they report.
func TestHalfOpenAdmitsExactlyTheProbes(t *testing.T) {
	for _, probes := range []uint32{1, 2, 5} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSet(Settings{Failures: 2, OpenFor: 5 * time.Second, HalfOpenProbes: probes})
				trip(t, s, 2)
				time.Sleep(5*time.Second + time.Millisecond)

				const callers = 20
				var (
					wg       sync.WaitGroup
					mu       sync.Mutex
					admitted []func(Outcome)
					refusals []*OpenError
				)
				start := make(chan struct{})
				for range callers {
					wg.Go(func() {
						<-start
						done, err := s.Allow("up")
						mu.Lock()
						defer mu.Unlock()
						var oe *OpenError
						switch {
						case err == nil:
							admitted = append(admitted, done)
						case errors.As(err, &oe):
							refusals = append(refusals, oe)
						default:
							t.Errorf("Allow: %v", err)
						}
					})
				}
				close(start)
				wg.Wait()
				if len(admitted) != int(probes) || len(refusals) != callers-int(probes) {
					t.Fatalf("admitted %d, refused %d; want %d and %d", len(admitted), len(refusals), probes, callers-int(probes))
				}
				for _, oe := range refusals {
					if oe.RetryIn != 0 {
						t.Fatalf("half-open refusal RetryIn = %v, want 0", oe.RetryIn)
					}
				}
				if got := s.State("up"); got != "half-open" {
					t.Fatalf("state %s, want half-open", got)
				}
				for _, done := range admitted {
					done(Succeeded)
				}
				if got := s.State("up"); got != "closed" {
					t.Fatalf("after %d successful probes: state %s, want closed", probes, got)
				}
			})
		})
	}
}

// TestClosesOnSuccessfulProbe: the breaker closes once every probe has succeeded (a tool error counts:
// the upstream answered); until then it admits nothing more.
func TestClosesOnSuccessfulProbe(t *testing.T) {
	for _, o := range []Outcome{Succeeded, ToolError, Oversize} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, logs := newSet(Settings{Failures: 1, OpenFor: time.Second, HalfOpenProbes: 2})
				trip(t, s, 1)
				time.Sleep(time.Second + time.Nanosecond)
				first, err1 := s.Allow("up")
				second, err2 := s.Allow("up")
				if err1 != nil || err2 != nil {
					t.Fatalf("probes refused: %v, %v", err1, err2)
				}
				first(o)
				if got := s.State("up"); got != "half-open" {
					t.Fatalf("after one of two probes: state %s, want half-open", got)
				}
				refused(t, s) // a completed probe does not free its slot
				second(o)
				if got := s.State("up"); got != "closed" {
					t.Fatalf("state %s, want closed", got)
				}
				for range 10 {
					attempt(t, s, Succeeded)
				}
				want := []string{
					`level=WARN msg="upstream circuit breaker open" server=up from=closed to=open open_for=1s`,
					`level=INFO msg="upstream circuit breaker half-open" server=up from=open to=half-open`,
					`level=INFO msg="upstream circuit breaker closed" server=up from=half-open to=closed`,
				}
				if got := strings.Split(strings.TrimSpace(logs.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("logs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		})
	}
}

// TestReopensOnFailedProbe: one failed probe opens the breaker again for a full OpenFor, and the other
// probes' late outcomes change nothing.
func TestReopensOnFailedProbe(t *testing.T) {
	for _, o := range []Outcome{NeverSent, TimedOut, Broken} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, logs := newSet(Settings{Failures: 1, OpenFor: 4 * time.Second, HalfOpenProbes: 2})
				trip(t, s, 1)
				time.Sleep(5 * time.Second)
				ok, err1 := s.Allow("up")
				bad, err2 := s.Allow("up")
				if err1 != nil || err2 != nil {
					t.Fatalf("probes refused: %v, %v", err1, err2)
				}
				bad(o)
				if got := s.State("up"); got != "open" {
					t.Fatalf("state %s, want open", got)
				}
				if oe := refused(t, s); oe.RetryIn != 4*time.Second {
					t.Fatalf("RetryIn = %v, want a fresh 4s", oe.RetryIn)
				}
				ok(Succeeded) // from the half-open generation: ignored
				if got := s.State("up"); got != "open" {
					t.Fatalf("a stale success changed the state to %s", got)
				}
				if !strings.Contains(logs.String(), "from=half-open to=open") {
					t.Errorf("re-opening not logged:\n%s", logs)
				}
			})
		})
	}
}

// TestExcludedProbeFreesItsSlot: a probe that was cancelled or rate-limited says nothing about the
// upstream, so the breaker stays half-open and lets another probe through.
func TestExcludedProbeFreesItsSlot(t *testing.T) {
	for _, o := range []Outcome{Cancelled, RateLimited} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, _ := newSet(Settings{Failures: 1, OpenFor: time.Second})
				trip(t, s, 1)
				time.Sleep(2 * time.Second)
				attempt(t, s, o)
				if got := s.State("up"); got != "half-open" {
					t.Fatalf("state %s, want half-open", got)
				}
				attempt(t, s, Succeeded)
				if got := s.State("up"); got != "closed" {
					t.Fatalf("state %s, want closed", got)
				}
			})
		})
	}
}

// TestRetryInCountsDown: RetryIn is the time left until the breaker admits a probe, on the same clock as
// gobreaker. gobreaker admits probes only strictly after OpenFor, so at exactly OpenFor it still refuses
// and RetryIn is 0.
func TestRetryInCountsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 1, OpenFor: 30 * time.Second})
		trip(t, s, 1)
		steps := []struct {
			sleep time.Duration
			want  time.Duration
		}{
			{0, 30 * time.Second},
			{10 * time.Second, 20 * time.Second},
			{19*time.Second + 999*time.Millisecond, time.Millisecond},
			{time.Millisecond, 0},
		}
		for _, st := range steps {
			time.Sleep(st.sleep)
			if oe := refused(t, s); oe.RetryIn != st.want {
				t.Fatalf("after %v more: RetryIn = %v, want %v", st.sleep, oe.RetryIn, st.want)
			}
		}
		time.Sleep(time.Nanosecond)
		attempt(t, s, Succeeded)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("state %s, want closed", got)
		}
	})
}

func TestZeroSettingsAreTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{})
		for range 4 {
			attempt(t, s, TimedOut)
		}
		if s.State("up") != "closed" {
			t.Fatal("opened before 5 failures")
		}
		attempt(t, s, TimedOut)
		if oe := refused(t, s); oe.RetryIn != 30*time.Second {
			t.Fatalf("RetryIn = %v, want 30s", oe.RetryIn)
		}
		time.Sleep(31 * time.Second)
		done, err := s.Allow("up")
		if err != nil {
			t.Fatal(err)
		}
		refused(t, s) // one probe by default
		done(Succeeded)
		if s.State("up") != "closed" {
			t.Fatal("not closed")
		}
	})
}

// TestDoneTwiceCountsOnce: a second report of the same attempt is ignored.
func TestDoneTwiceCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 2})
		done, err := s.Allow("up")
		if err != nil {
			t.Fatal(err)
		}
		done(Broken)
		done(Broken)
		if got := s.State("up"); got != "closed" {
			t.Fatalf("one attempt reported twice opened the breaker: %s", got)
		}
	})
}

// TestUnknownServer: a server the Set was not built for is always allowed and never tracked.
func TestUnknownServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, logs := newSet(Settings{Failures: 1})
		var nilSet *Set
		for _, set := range []*Set{s, nilSet, {}} {
			for range 10 {
				done, err := set.Allow("nope")
				if err != nil || done == nil {
					t.Fatalf("Allow(unknown): done nil %v, err %v", done == nil, err)
				}
				done(Broken)
			}
			if got := set.State("nope"); got != "closed" {
				t.Fatalf("State(unknown) = %s", got)
			}
		}
		if s.State("up") != "closed" || logs.String() != "" {
			t.Fatalf("unknown server's failures reached a breaker: %s %s", s.State("up"), logs)
		}
	})
}

func TestOpenErrorMessage(t *testing.T) {
	tests := []struct {
		retryIn time.Duration
		want    string
	}{
		{30 * time.Second, `circuit breaker of "up" is open; next probe in 30s`},
		{1500 * time.Millisecond, `circuit breaker of "up" is open; next probe in 2s`},
		{90 * time.Second, `circuit breaker of "up" is open; next probe in 1m30s`},
		{1, `circuit breaker of "up" is open; next probe in 1ms`},
		{250 * time.Millisecond, `circuit breaker of "up" is open; next probe in 250ms`},
		{0, `circuit breaker of "up" is half-open and its probe calls are in flight; retry shortly`},
	}
	for _, tt := range tests {
		if got := (&OpenError{Server: "up", RetryIn: tt.retryIn}).Error(); got != tt.want {
			t.Errorf("RetryIn %v: got %q, want %q", tt.retryIn, got, tt.want)
		}
	}
}

// TestStateChangeCallback: the callback hears every transition, in order, with gobreaker's state names.
func TestStateChangeCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := newSet(Settings{Failures: 1, OpenFor: time.Second, HalfOpenProbes: 1})
		var seen []string
		s.OnStateChange(func(server, state string) { seen = append(seen, server+":"+state) })
		trip(t, s, 1)
		time.Sleep(time.Second + time.Nanosecond)
		attempt(t, s, Succeeded)
		if got := strings.Join(seen, " "); got != "up:open up:half-open up:closed" {
			t.Errorf("transitions %q", got)
		}
	})
}
