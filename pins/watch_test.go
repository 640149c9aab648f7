package pins

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchLoop debounces: a burst of relevant events gives one reload, after
// the quiet period; irrelevant events give none.
func TestWatchLoopDebounces(t *testing.T) {
	path := lockPath(t)
	s := open(t, path, TOFU)
	events, errs := make(chan fsnotify.Event), make(chan error)
	timers := make(chan chan time.Time, 10)
	after := func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		timers <- c
		return c
	}
	reloads := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- s.watchLoop(ctx, events, errs, func(ev fsnotify.Event) bool { return ev.Name == path }, after, func(err error) { reloads <- err })
	}()
	events <- fsnotify.Event{Name: path + ".lock", Op: fsnotify.Write}
	events <- fsnotify.Event{Name: path, Op: fsnotify.Create}
	events <- fsnotify.Event{Name: path, Op: fsnotify.Rename}
	<-timers
	last := <-timers // the second event restarted the quiet period
	if len(timers) != 0 {
		t.Fatal("an irrelevant event started a timer")
	}
	// Another process approves; the quiet period ends; the store has it.
	if err := open(t, path, TOFU).Approve("orders/get_order", base()); err != nil {
		t.Fatal(err)
	}
	last <- time.Now()
	if err := <-reloads; err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Pin("orders/get_order"); !ok {
		t.Fatal("reload did not pick up the approval")
	}
	errs <- errors.New("overflow")
	if err := <-reloads; err == nil {
		t.Fatal("watcher error not reported")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The real watcher sees a write by another process (by rename, as every
// write is) and reloads.
func TestWatchPicksUpApproval(t *testing.T) {
	path := lockPath(t)
	s := open(t, path, Strict)
	reloads := make(chan error, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Watch(ctx, func(err error) { reloads <- err }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cli := open(t, path, Strict)
	deadline := time.After(10 * time.Second)
	// The watch may not be registered yet when the first write happens:
	// write until a reload shows the pin.
	for i := 0; ; i++ {
		if err := cli.Approve("orders/get_order", base()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-reloads:
			if err != nil {
				t.Fatal(err)
			}
			if v := check(t, s, "orders/get_order", base()); v == Pinned {
				return
			}
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			t.Fatal("no reload after an approval")
		}
	}
}
