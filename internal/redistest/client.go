package redistest

import (
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/state"
)

// The helpers below are shared by the tests of the state client and of
// every feature's Redis store (ratelimit/redisstore, dedup/redisstore, ...).

// Deadline bounds every wait for something the store or a goroutine must
// do; nothing waits by sleeping.
const Deadline = 10 * time.Second

// Events records a client's health changes and errors: pass OnStatus and
// OnError in state.Options.
type Events struct {
	status chan bool
	mu     sync.Mutex
	errors map[string]int
}

// NewEvents is an empty record.
func NewEvents() *Events {
	return &Events{status: make(chan bool, 64), errors: map[string]int{}}
}

// OnStatus is for state.Options.OnStatus.
func (e *Events) OnStatus(up bool) { e.status <- up }

// OnError is for state.Options.OnError.
func (e *Events) OnError(feature string) {
	e.mu.Lock()
	e.errors[feature]++
	e.mu.Unlock()
}

// ErrorsOf is how many failures were counted under feature.
func (e *Events) ErrorsOf(feature string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errors[feature]
}

// WaitStatus waits until the client reports up (or down).
func (e *Events) WaitStatus(t testing.TB, up bool) {
	t.Helper()
	timeout := time.After(Deadline)
	for {
		select {
		case got := <-e.status:
			if got == up {
				return
			}
		case <-timeout:
			t.Fatalf("the client never reported up=%v", up)
		}
	}
}

// Open connects a state client to srv with a fast health check, its keys
// under prefix, closed at the end of the test.
func Open(t testing.TB, srv *Server, prefix string) (*state.Client, *Events) {
	t.Helper()
	ev := NewEvents()
	c, err := state.Open(state.Options{
		URL: srv.URL(), KeyPrefix: prefix, DialTimeout: time.Second, OpTimeout: time.Second,
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnStatus:  ev.OnStatus,
		OnError:   ev.OnError,
		PingEvery: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, ev
}

// WaitFor polls cond until it holds, within the Deadline.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(Deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("condition not met in time")
		}
	}
}

// WaitRedis polls the server, on a connection of its own, until cond
// holds, within the Deadline.
func WaitRedis(t testing.TB, srv *Server, cond func(rdb *redis.Client) bool) {
	t.Helper()
	c, err := state.Open(state.Options{URL: srv.URL(), DialTimeout: time.Second, OpTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(Deadline)
	for !cond(c.Redis()) {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("condition on the Redis server not met in time")
		}
	}
}
