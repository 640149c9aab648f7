package state_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/state"
)

// A URL go-redis cannot use is an error at Open that never quotes the
// password; so are missing timeouts.
func TestOpenRefuses(t *testing.T) {
	tests := []struct{ name, url, want string }{
		{"scheme", "http://u:hunter2@cache", "invalid URL scheme"},
		{"does not parse", "redis://:hunter2@[::1", "does not parse"},
		{"database", "redis://:hunter2@cache/x", "invalid database number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := state.Open(state.Options{URL: tt.url, DialTimeout: time.Second, OpTimeout: time.Second})
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("err %v, want %q without the password", err, tt.want)
			}
		})
	}
	if _, err := state.Open(state.Options{URL: "redis://cache"}); err == nil {
		t.Error("no timeouts: opened")
	}
}

// Health follows the server: up at Open, down soon after it dies (and then
// operations fail at once, counted by feature), and up again when it is
// back on the same port, without a new Client.
func TestHealthFollowsTheServer(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "t:")
	ev.WaitStatus(t, true)
	if err := c.Err(); err != nil {
		t.Fatalf("Err after Open: %v", err)
	}
	ping := func(ctx context.Context) error { return c.Redis().Ping(ctx).Err() }
	if err := c.Do(context.Background(), state.FeaturePolicy, ping); err != nil {
		t.Fatalf("Do while up: %v", err)
	}

	srv.Kill()
	ev.WaitStatus(t, false)
	if c.Err() == nil {
		t.Fatal("Err is nil with the server dead")
	}
	ran := false
	err := c.Do(context.Background(), state.FeatureRateLimits, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, state.ErrUnavailable) || ran {
		t.Fatalf("Do while down: err %v, ran %v; want ErrUnavailable without running", err, ran)
	}
	if n := ev.ErrorsOf(state.FeatureRateLimits); n != 1 {
		t.Errorf("%d rate_limits errors counted, want 1", n)
	}

	srv.Restart()
	ev.WaitStatus(t, true)
	if err := c.Do(context.Background(), state.FeaturePolicy, ping); err != nil {
		t.Fatalf("Do after the server came back: %v", err)
	}
}

// An operation that fails while the client thinks the store is up is
// counted, and the health check looks at once rather than at its next
// tick.
func TestFailedOperationLooksAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	ev := redistest.NewEvents()
	c, err := state.Open(state.Options{URL: srv.URL(), DialTimeout: time.Second, OpTimeout: time.Second,
		OnStatus: ev.OnStatus, OnError: ev.OnError,
		PingEvery: time.Hour, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev.WaitStatus(t, true)
	srv.Kill()
	err = c.Do(context.Background(), state.FeaturePolicy, func(ctx context.Context) error { return c.Redis().Ping(ctx).Err() })
	if err == nil {
		t.Fatal("PING to a dead server succeeded")
	}
	ev.WaitStatus(t, false) // within the deadline, though the next tick is an hour away
	if n := ev.ErrorsOf(state.FeaturePolicy); n != 1 {
		t.Errorf("%d policy errors counted, want 1", n)
	}
}

// A store that is down at Open does not stop Open: the gateway starts, not
// ready, and recovers when the store comes up.
func TestOpenWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	c, ev := redistest.Open(t, srv, "t:")
	ev.WaitStatus(t, false)
	if c.Err() == nil {
		t.Fatal("Err is nil with no server")
	}
	srv.Restart()
	ev.WaitStatus(t, true)
}

// A caller that left (its context ended) is not a store failure: nothing
// is counted.
func TestCallerLeavingIsNotAStoreError(t *testing.T) {
	srv := redistest.Start(t)
	c, ev := redistest.Open(t, srv, "t:")
	ev.WaitStatus(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Do(ctx, state.FeatureRateLimits, func(ctx context.Context) error { return c.Redis().Ping(ctx).Err() }); err == nil {
		t.Fatal("PING with an ended context succeeded")
	}
	if n := ev.ErrorsOf(state.FeatureRateLimits); n != 0 {
		t.Errorf("%d errors counted for a caller that left, want 0", n)
	}
}
