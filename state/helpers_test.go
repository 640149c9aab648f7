package state

import (
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait for something the store or a goroutine must
// do; nothing waits by sleeping.
const deadline = 10 * time.Second

// events records a client's health changes and errors for tests.
type events struct {
	status chan bool
	mu     sync.Mutex
	errors map[string]int
}

func (e *events) errorsOf(feature string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.errors[feature]
}

// waitStatus waits until the client reports up (or down).
func (e *events) waitStatus(t *testing.T, up bool) {
	t.Helper()
	timeout := time.After(deadline)
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

// open connects a client to srv with a fast health check, closed at the
// end of the test.
func open(t *testing.T, srv *redistest.Server, prefix string) (*Client, *events) {
	t.Helper()
	ev := &events{status: make(chan bool, 64), errors: map[string]int{}}
	c, err := Open(Options{
		URL: srv.URL(), KeyPrefix: prefix, DialTimeout: time.Second, OpTimeout: time.Second,
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnStatus:  func(up bool) { ev.status <- up },
		OnError:   func(f string) { ev.mu.Lock(); ev.errors[f]++; ev.mu.Unlock() },
		PingEvery: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, ev
}
