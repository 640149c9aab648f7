package authz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// patience bounds every wait on an asynchronous event; it is a failure deadline, never a sleep.
const patience = 10 * time.Second

// watching starts s.Watch and returns once the directories are watched, with a stop function
// that cancels it and checks that it returned nil.
func watching(t *testing.T, s *Store) (stop func()) {
	t.Helper()
	ready := make(chan struct{})
	s.onWatching = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Watch returned at once: %v", err)
	case <-time.After(patience):
		cancel()
		t.Fatal("Watch did not start")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v", err)
			}
		case <-time.After(patience):
			t.Error("Watch did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitSwap(t *testing.T, swaps <-chan *Policy, what string) *Policy {
	t.Helper()
	select {
	case p := <-swaps:
		return p
	case <-time.After(patience):
		t.Fatalf("no reload after %s", what)
		return nil
	}
}

// TestWatchEditorReplace: an editor-style save (temp file renamed over policy.csv) is picked up,
// for the model in another directory too; a bad save is refused and the good one stays.
func TestWatchEditorReplace(t *testing.T) {
	modelDir, policyDir := t.TempDir(), t.TempDir()
	f := files{model: filepath.Join(modelDir, "model.conf"), policy: filepath.Join(policyDir, "policy.csv")}
	for path, text := range map[string]string{f.model: readRoot(t, rootModel), f.policy: readRoot(t, rootPolicy)} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	log, sink := newLog()
	sink.ch = make(chan map[string]any, 100)
	s, err := NewStore(f.model, f.policy, Options{Servers: []string{"orders"}}, log)
	if err != nil {
		t.Fatal(err)
	}
	s.debounce = 20 * time.Millisecond
	swaps := make(chan *Policy, 10)
	s.Subscribe(func(old, new *Policy) { swaps <- new })
	stop := watching(t, s)

	// Revoke alice by an editor-style replace.
	replaceFile(t, f.policy, withoutLine(t, readRoot(t, rootPolicy), "g, alice, support_agent"))
	p := waitSwap(t, swaps, "replacing policy.csv")
	if p.Decide(req("alice", getOrder, `{}`)).Allowed || s.Current() != p {
		t.Fatal("alice still allowed after the reload")
	}

	// The model, in its own directory.
	replaceFile(t, f.model, readRoot(t, rootModel)+"\n# edited\n")
	if p2 := waitSwap(t, swaps, "replacing model.conf"); p2.Version() == p.Version() {
		t.Fatal("same version after a model change")
	}

	// A bad save: logged at Error and counted, the policy in force stays.
	before := s.Current()
	replaceFile(t, f.policy, "p, viewer, orders/get_order, call, Allow\n")
	deadline := time.After(patience)
	for refused := false; !refused; {
		select {
		case rec := <-sink.ch:
			refused = rec["level"] == "ERROR" && strings.Contains(rec["msg"].(string), "policy reload refused")
		case <-deadline:
			t.Fatal("no refused reload logged after a bad save")
		}
	}
	if s.Current() != before || s.Stats().Failures != 1 {
		t.Fatalf("bad save: %+v", s.Stats())
	}

	// A write in place (not a rename) is picked up too.
	if err := os.WriteFile(f.policy, []byte(readRoot(t, rootPolicy)), 0o600); err != nil {
		t.Fatal(err)
	}
	if p := waitSwap(t, swaps, "writing policy.csv in place"); !p.Decide(req("alice", getOrder, `{}`)).Allowed {
		t.Fatal("alice not restored")
	}
	stop()
}

// TestWatchExplicitReload: what SIGHUP calls, while the watch runs.
func TestWatchExplicitReload(t *testing.T) {
	f := rootFiles(t)
	s, _ := newTestStore(t, f)
	swaps := make(chan *Policy, 10)
	s.Subscribe(func(old, new *Policy) { swaps <- new })
	s.debounce = time.Hour // the watch will not beat the explicit reload
	watching(t, s)
	replaceFile(t, f.policy, strings.Replace(readRoot(t, rootPolicy), "g, bob, viewer", "g, bob, supervisor", 1))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if p := waitSwap(t, swaps, "Reload"); !p.Decide(req("bob", refundOrder, `{"amount": 1000}`)).Allowed {
		t.Fatal("bob is not a supervisor")
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	f := rootFiles(t)
	s, _ := newTestStore(t, f)
	s.policyPath = filepath.Join(t.TempDir(), "gone", "policy.csv")
	if err := s.Watch(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot watch directory") {
		t.Fatalf("Watch = %v", err)
	}
}

// fakeClock hands out timer channels that the test fires.
type fakeClock struct{ timers chan chan time.Time }

func (c *fakeClock) after(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.timers <- ch
	return ch
}

func (c *fakeClock) next(t *testing.T) chan time.Time {
	t.Helper()
	select {
	case ch := <-c.timers:
		return ch
	case <-time.After(patience):
		t.Fatal("no timer started")
		return nil
	}
}

// TestWatchDebounce drives the watch loop with plain channels and a fake clock: a burst of events
// gives one reload, only when the quiet period after the LAST event ends; events for other files
// and chmod are ignored; watcher errors are logged and the loop goes on.
func TestWatchDebounce(t *testing.T) {
	f := rootFiles(t)
	s, sink := newTestStore(t, f)
	clock := &fakeClock{timers: make(chan chan time.Time, 100)}
	s.after = clock.after
	swaps := make(chan *Policy, 10)
	s.Subscribe(func(old, new *Policy) { swaps <- new })

	events := make(chan fsnotify.Event)
	errs := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	relevant := func(ev fsnotify.Event) bool { return ev.Name == f.policy && ev.Op != fsnotify.Chmod }
	go func() { done <- s.watchLoop(ctx, events, errs, relevant) }()

	replaceFile(t, f.policy, strings.Replace(readRoot(t, rootPolicy), "g, bob, viewer", "g, bob, supervisor", 1))
	var timers []chan time.Time
	for _, ev := range []fsnotify.Event{
		{Name: f.policy, Op: fsnotify.Rename},
		{Name: f.policy, Op: fsnotify.Create},
		{Name: filepath.Join(f.dir, "other.txt"), Op: fsnotify.Write}, // ignored: no timer
		{Name: f.policy, Op: fsnotify.Chmod},                          // ignored: no timer
		{Name: f.policy, Op: fsnotify.Write},
	} {
		events <- ev
		if relevant(ev) {
			timers = append(timers, clock.next(t))
		}
	}
	errs <- errors.New("inotify queue overflow")
	if len(timers) != 3 || len(clock.timers) != 0 {
		t.Fatalf("%d timers for 3 relevant events (%d extra)", len(timers), len(clock.timers))
	}
	if st := s.Stats(); st.Successes != 0 || st.Unchanged != 0 {
		t.Fatalf("reloaded before the quiet period ended: %+v", st)
	}
	// A superseded timer does nothing.
	timers[0] <- time.Now()
	events <- fsnotify.Event{Name: f.policy, Op: fsnotify.Write} // proves the loop went on
	last := clock.next(t)
	if st := s.Stats(); st.Successes != 0 {
		t.Fatalf("a superseded timer reloaded: %+v", st)
	}
	last <- time.Now()
	if p := waitSwap(t, swaps, "the quiet period"); !p.Decide(req("bob", refundOrder, `{"amount": 1}`)).Allowed {
		t.Fatal("new policy not in force")
	}
	if st := s.Stats(); st.Successes != 1 {
		t.Fatalf("stats %+v", st)
	}
	if len(sink.find("WARN", "watcher error")) != 1 {
		t.Fatal("watcher error not logged")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watchLoop = %v after cancel", err)
	}

	// A closed event channel ends the loop with an error.
	closed := make(chan fsnotify.Event)
	close(closed)
	if err := s.watchLoop(context.Background(), closed, errs, relevant); !errors.Is(err, errWatcherClosed) {
		t.Fatalf("watchLoop on a closed watcher = %v", err)
	}
}
