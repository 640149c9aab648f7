package upstreams

import (
	"github.com/toolgate/toolgate/internal/testkit"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/testupstream"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// The test binary doubles as the test upstream: started with this variable
// set, it runs testupstream.Main instead of the tests.
const testUpstreamEnv = "TOOLGATE_UPSTREAMS_TESTUPSTREAM"

// leakOptions: none. Each connection closes its own HTTP client's idle
// connections, so not even net/http's keep-alive loops may be left.
var leakOptions []goleak.Option

func TestMain(m *testing.M) {
	if os.Getenv(testUpstreamEnv) == "1" {
		os.Exit(testupstream.Main(os.Args[1:]))
	}
	goleak.VerifyTestMain(m, leakOptions...)
}

// loopbackOK is the egress setting of every HTTP test upstream: they
// listen on loopback, which the guard refuses unless a server allows it.
var loopbackOK = egress.Options{Allow: []egress.Class{egress.Loopback}}

// generous bounds every wait for something that should happen quickly.
const generous = 30 * time.Second

// stdioServer is a server entry that runs the test upstream over stdio.
func stdioServer(t *testing.T, name string, flags ...string) *Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Server{Name: name, Transport: TransportStdio, Command: exe, ToolPrefix: name + "__",
		Args: append([]string{"-name", name}, flags...),
		Env:  map[string]string{testUpstreamEnv: "1", "GORACE": "atexit_sleep_ms=0"}}
}

// syncBuffer is the shared concurrent log sink.
type syncBuffer = testkit.LogBuffer

// gate replaces the backoff sleep: each wait is reported on waits and lasts
// until the test sends on release (or the Set closes).
type gate struct {
	waits   chan time.Duration
	release chan struct{}
}

func newGate() *gate { return &gate{waits: make(chan time.Duration, 64), release: make(chan struct{})} }

func (g *gate) wait(ctx context.Context, d time.Duration) bool {
	select {
	case g.waits <- d:
	case <-ctx.Done():
		return false
	}
	select {
	case <-g.release:
		return true
	case <-ctx.Done():
		return false
	}
}

// next waits for the supervisor to start a backoff wait and returns its
// length.
func (g *gate) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-g.waits:
		return d
	case <-time.After(generous):
		t.Fatal("no backoff wait began")
		return 0
	}
}

func (g *gate) open(t *testing.T) {
	t.Helper()
	select {
	case g.release <- struct{}{}:
	case <-time.After(generous):
		t.Fatal("no backoff wait to release")
	}
}

func withWait(fn func(context.Context, time.Duration) bool) Option {
	return func(o *options) { o.wait = fn }
}

type statusEvent struct {
	server string
	up     bool
	why    string
}

// harness is a started Set with its log and what its callbacks saw.
type harness struct {
	set      *Set
	logs     *syncBuffer
	gate     *gate
	status   chan statusEvent
	catalogs chan *Catalog
}

// start starts a Set on cfg with the gate as its backoff and a short list
// debounce; Close runs at cleanup, then the leak checks.
func start(t *testing.T, cfg []Server, opts ...Option) *harness {
	t.Helper()
	before := goleak.IgnoreCurrent()
	h := &harness{logs: &syncBuffer{}, gate: newGate(),
		status: make(chan statusEvent, 1024), catalogs: make(chan *Catalog, 1024)}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]Option{withWait(h.gate.wait), WithListDebounce(20 * time.Millisecond)}, opts...)
	set, err := Start(context.Background(), cfg, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.set = set
	set.OnStatusChange(func(server string, up bool, why string) {
		select {
		case h.status <- statusEvent{server, up, why}:
		default:
			panic("status events not consumed")
		}
	})
	set.OnCatalogChange(func(c *Catalog) {
		select {
		case h.catalogs <- c:
		default:
			panic("catalog changes not consumed")
		}
	})
	t.Cleanup(func() {
		set.Close()
		noChildren(t)
		goleak.VerifyNone(t, append(leakOptions, before)...)
	})
	return h
}

// waitStatus waits for server to come up (up) or go down (!up).
func (h *harness) waitStatus(t *testing.T, server string, up bool) statusEvent {
	t.Helper()
	timeout := time.After(generous)
	for {
		select {
		case e := <-h.status:
			if e.server == server && e.up == up {
				return e
			}
		case <-timeout:
			t.Fatalf("%s did not go up=%v; log:\n%s", server, up, h.logs)
		}
	}
}

// waitCatalog waits for a catalog change that satisfies ok.
func (h *harness) waitCatalog(t *testing.T, what string, ok func(*Catalog) bool) *Catalog {
	t.Helper()
	timeout := time.After(generous)
	for {
		select {
		case c := <-h.catalogs:
			if ok(c) {
				return c
			}
		case <-timeout:
			t.Fatalf("no catalog change %s; log:\n%s", what, h.logs)
		}
	}
}

func (h *harness) pid(t *testing.T, server string) int {
	t.Helper()
	conn := h.set.sups[server].conn.Load()
	if conn == nil || conn.proc == nil {
		t.Fatalf("%s has no live process", server)
	}
	return conn.proc.cmd.Process.Pid
}

func callCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// call calls a tool and returns the text of its first content block.
func call(t *testing.T, s *Set, server, tool, args string) (string, error) {
	t.Helper()
	raw, err := s.CallTool(callCtx(t, generous), server, tool, json.RawMessage(args))
	if err != nil {
		return "", err
	}
	return firstText(t, raw), nil
}

func mustCall(t *testing.T, s *Set, server, tool, args string) string {
	t.Helper()
	text, err := call(t, s, server, tool, args)
	if err != nil {
		t.Fatalf("%s/%s: %v", server, tool, err)
	}
	return text
}

func firstText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %.200s: %v", raw, err)
	}
	return res.Content[0].Text
}

func wantWhere(t *testing.T, err error, where Where) *CallError {
	t.Helper()
	var ce *CallError
	if !errors.As(err, &ce) || ce.Where != where {
		t.Fatalf("error %v, want a CallError %s", err, where)
	}
	return ce
}

// childPIDs lists the direct children of this process.
func childPIDs(t *testing.T) []int {
	t.Helper()
	pids, err := testkit.ChildPIDs(os.Getpid())
	if err != nil {
		t.Skip(err)
	}
	return pids
}

// noChildren fails the test if this process has a child left (running or
// not reaped).
func noChildren(t *testing.T) {
	t.Helper()
	if pids := childPIDs(t); len(pids) > 0 {
		t.Errorf("child processes left: %v", pids)
	}
}

func processGone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return errors.Is(err, os.ErrNotExist)
}
