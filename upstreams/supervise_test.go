package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/testupstream"
)

func TestBackoffDelays(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Minute}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		if got := b.delay(i); got != w*time.Second {
			t.Errorf("delay(%d) = %s, want %s", i, got, w*time.Second)
		}
	}
	if got := b.delay(1000); got != time.Minute {
		t.Errorf("delay(1000) = %s", got)
	}
	if got := (Backoff{}).withDefaults(); got != DefaultBackoff {
		t.Errorf("zero Backoff becomes %+v", got)
	}
}

// A stdio upstream that crashes is restarted after the backoff; meanwhile
// its tools stay in the catalog and answer NotSent at once, the other
// upstream is untouched, and its exit status and stderr tail are logged.
func TestCrashedStdioUpstreamIsRestarted(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s", "-stderr-line", "hello from s"), stdioServer(t, "other")))
	if got := mustCall(t, h.set, "s", "echo", `{"a":1}`); got != `{"a":1}` {
		t.Fatalf("echo: %s", got)
	}
	oldPID := h.pid(t, "s")

	_, err := call(t, h.set, "s", "crash", `{}`)
	wantWhere(t, err, Sent) // it died mid-call: outcome unknown
	down := h.waitStatus(t, "s", false)
	if !strings.Contains(down.why, "exit") && !strings.Contains(down.why, "output ended") {
		t.Errorf("down because %q", down.why)
	}
	if d := h.gate.next(t); d != DefaultBackoff.Initial {
		t.Errorf("first restart after %s, want %s", d, DefaultBackoff.Initial)
	}

	began := time.Now()
	_, err = call(t, h.set, "s", "echo", `{}`)
	ce := wantWhere(t, err, NotSent)
	if took := time.Since(began); took > time.Second {
		t.Errorf("a call to a down upstream took %s", took)
	}
	if !errors.Is(ce, ErrNotConnected) || !strings.Contains(ce.Error(), "next attempt in") {
		t.Errorf("error %q does not say it is down and when it comes back", ce)
	}
	if tool, ok := h.set.Catalog().Resolve("s__echo"); !ok || tool.Unreachable || tool.Input == nil {
		t.Errorf("a down server's known tool left the catalog: %+v", tool)
	}
	if up, why := h.set.Status("s"); up || why == "" {
		t.Errorf("Status = %v, %q", up, why)
	}
	if got := mustCall(t, h.set, "other", "echo", `{"b":2}`); got != `{"b":2}` {
		t.Errorf("the other upstream suffered: %s", got)
	}

	exits := h.logs.Records("upstream exited")
	if len(exits) != 1 {
		t.Fatalf("%d exit records; log:\n%s", len(exits), h.logs)
	}
	if exits[0]["exit"] != "exit status 3" || exits[0]["server"] != "s" ||
		!strings.Contains(exits[0]["stderr_tail"].(string), "hello from s") {
		t.Errorf("exit record %v", exits[0])
	}
	if !processGone(oldPID) {
		t.Errorf("the crashed process %d was not reaped", oldPID)
	}

	h.gate.open(t)
	h.waitStatus(t, "s", true)
	if got := mustCall(t, h.set, "s", "echo", `{"again":true}`); got != `{"again":true}` {
		t.Fatalf("after the restart: %s", got)
	}
	if h.pid(t, "s") == oldPID {
		t.Error("same process after a restart")
	}
}

// Consecutive failures double the wait up to Max; an upstream that stayed
// up for ResetAfter starts over at Initial.
func TestRestartBackoffGrowsAndResets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     Backoff
		waits []time.Duration
	}{
		{"grows to max", Backoff{Initial: time.Second, Max: 3 * time.Second, ResetAfter: time.Hour},
			[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{"resets after staying up", Backoff{Initial: time.Second, Max: time.Minute, ResetAfter: time.Nanosecond},
			[]time.Duration{time.Second, time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each run answers one call, then exits.
			h := start(t, servers(stdioServer(t, "s", "-crash-after", "1")), WithBackoff(tc.b))
			for i, want := range tc.waits {
				if i > 0 {
					// The down first: a startup "up" that reached the harness
					// late must not pass for the restart's.
					h.waitStatus(t, "s", false)
					h.gate.open(t)
					h.waitStatus(t, "s", true)
				}
				if got := mustCall(t, h.set, "s", "echo", `{}`); got != `{}` {
					t.Fatalf("run %d: %s", i, got)
				}
				if got := h.gate.next(t); got != want {
					t.Errorf("wait %d: %s, want %s", i, got, want)
				}
			}
			exits := h.logs.Records("upstream exited")
			if len(exits) != len(tc.waits) {
				t.Fatalf("%d exit records", len(exits))
			}
			if exits[0]["exit"] != "exit status 4" || !strings.Contains(exits[0]["stderr_tail"].(string), "answered 1 calls") {
				t.Errorf("exit record %v", exits[0])
			}
		})
	}
}

// An upstream that fails to start is retried; when it comes up its tools
// join the catalog and OnCatalogChange fires.
func TestUpstreamFailingAtBootComesUpLater(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "first-run")
	h := start(t, servers(stdioServer(t, "late", "-fail-once", marker), stdioServer(t, "other")))
	cat := h.set.Catalog()
	if _, isDown := cat.Down()["late"]; !isDown {
		t.Fatalf("late is not down at boot: %v", cat.Down())
	}
	if tool, ok := cat.Resolve("late__echo"); !ok || !tool.Unreachable {
		t.Fatalf("late__echo at boot: %+v", tool)
	}
	if d := h.gate.next(t); d != DefaultBackoff.Initial {
		t.Errorf("retry after %s", d)
	}
	fails := h.logs.Records("upstream unavailable")
	if len(fails) != 1 || !strings.Contains(fails[0]["err"].(string), "exit status 3") ||
		!strings.Contains(fails[0]["stderr_tail"].(string), "first run") {
		t.Errorf("failed start logged as %v", fails)
	}
	_, err := call(t, h.set, "late", "echo", `{}`)
	wantWhere(t, err, NotSent)

	h.gate.open(t)
	cat = h.waitCatalog(t, "with late's tools", func(c *Catalog) bool {
		tool, ok := c.Resolve("late__echo")
		return ok && !tool.Unreachable
	})
	if _, isDown := cat.Down()["late"]; isDown || h.set.Catalog() != cat {
		t.Errorf("late still down, or the catalog is not the current one")
	}
	if _, ok := cat.Resolve("other__echo"); !ok {
		t.Error("other's tools are gone")
	}
	if got := mustCall(t, h.set, "late", "echo", `{"late":1}`); got != `{"late":1}` {
		t.Fatalf("late echo: %s", got)
	}
}

func hasTool(name string) func(*Catalog) bool {
	return func(c *Catalog) bool {
		tool, ok := c.Resolve(name)
		return ok && !tool.Unreachable
	}
}

func not(f func(*Catalog) bool) func(*Catalog) bool { return func(c *Catalog) bool { return !f(c) } }

// notifications/tools/list_changed re-reads the list (off the read loop)
// and rebuilds the catalog, checking schemas again.
func TestListChangedRebuildsCatalog(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s")))
	if got := mustCall(t, h.set, "s", "flip_tools", `{}`); got != "added flipped" {
		t.Fatal(got)
	}
	h.waitCatalog(t, "adding s__flipped", hasTool("s__flipped"))
	if got := mustCall(t, h.set, "s", "flipped", `{}`); got != "flipped was called" {
		t.Fatal(got)
	}
	mustCall(t, h.set, "s", "flip_tools", `{}`)
	h.waitCatalog(t, "removing s__flipped", not(hasTool("s__flipped")))

	// A hostile schema arriving by a list change is quarantined.
	mustCall(t, h.set, "s", "flip_tools", `{"hostile":true}`)
	cat := h.waitCatalog(t, "quarantining flipped", func(c *Catalog) bool { return len(c.Quarantined()) > 0 })
	if q := cat.Quarantined()[0]; q.Upstream != "flipped" || !strings.Contains(q.Reason, "input schema") {
		t.Errorf("quarantined %+v", q)
	}
	if _, ok := cat.Resolve("s__flipped"); ok {
		t.Error("the hostile flipped is callable")
	}
	if _, ok := cat.Resolve("s__echo"); !ok {
		t.Error("the server's other tools are gone")
	}
	mustCall(t, h.set, "s", "flip_tools", `{}`)
	h.waitCatalog(t, "dropping the quarantined flipped", func(c *Catalog) bool { return len(c.Quarantined()) == 0 })
}

// A burst of list changes is read once it is quiet, not once per change.
func TestListChangedBurstIsDebounced(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s")), WithListDebounce(300*time.Millisecond))
	const flips = 5 // odd: flipped ends up present
	for range flips {
		mustCall(t, h.set, "s", "flip_tools", `{}`)
	}
	h.waitCatalog(t, "with s__flipped", hasTool("s__flipped"))
	if n := len(h.logs.Records("tool catalog rebuilt")); n >= flips {
		t.Errorf("%d rebuilds for a burst of %d changes", n, flips)
	}
}

// Close while upstreams are crash-looping, hanging in initialize and
// waiting to restart leaves no goroutine and no process (the harness checks
// both at cleanup) and does not take long.
func TestCloseMidRestart(t *testing.T) {
	hang := stdioServer(t, "hang", "-hang-init")
	hang.InitTimeout = 200 * time.Millisecond
	h := start(t, servers(
		stdioServer(t, "loop", "-exit-at-start", "3"),
		hang,
		stdioServer(t, "crashy", "-crash-after", "1"),
		stdioServer(t, "fine"),
	), withWait(wait), WithBackoff(Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, ResetAfter: time.Hour}))
	mustCall(t, h.set, "crashy", "echo", `{}`)
	h.waitStatus(t, "crashy", false)
	h.waitStatus(t, "loop", false)
	h.waitStatus(t, "hang", false)
	began := time.Now()
	h.set.Close()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("Close took %s", took)
	}
	if _, err := call(t, h.set, "fine", "echo", `{}`); err == nil {
		t.Error("a call after Close succeeded")
	}
}

// An HTTP upstream whose session ends (here: a stateful server forgets
// every session, as after a restart) is noticed when its event stream
// drops, and re-initialized after the backoff. (mcp-go's default session
// manager accepts any well-formed session id, so a restarted default mcp-go
// server never answers 404: see TestHTTPRestartOfLenientServer.)
func TestHTTPSessionEndIsReinitialized(t *testing.T) {
	newUpstream := func() *server.StreamableHTTPServer {
		return server.NewStreamableHTTPServer(testupstream.NewServer(testupstream.Options{Name: "h"}), server.WithStateful(true))
	}
	var current atomic.Pointer[server.StreamableHTTPServer]
	current.Store(newUpstream())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(func() {
		_ = current.Load().Shutdown(context.Background())
		srv.Close()
	})
	h := start(t, servers(&Server{Name: "h", ToolPrefix: "h__", Transport: TransportHTTP, Egress: loopbackOK, URL: srv.URL + "/mcp"}))
	if got := mustCall(t, h.set, "h", "echo", `{"x":1}`); got != `{"x":1}` {
		t.Fatal(got)
	}
	old := current.Swap(newUpstream())
	if err := old.Shutdown(context.Background()); err != nil { // ends the listening stream
		t.Fatal(err)
	}
	down := h.waitStatus(t, "h", false)
	if !strings.Contains(down.why, "session terminated") {
		t.Errorf("down because %q", down.why)
	}
	h.gate.next(t)
	_, err := call(t, h.set, "h", "echo", `{}`)
	wantWhere(t, err, NotSent)
	h.gate.open(t)
	h.waitStatus(t, "h", true)
	if got := mustCall(t, h.set, "h", "echo", `{"x":2}`); got != `{"x":2}` {
		t.Fatal(got)
	}
}

// A legacy SSE upstream whose stream drops is down at once; reconnecting
// to a server that is gone keeps failing, with growing waits.
func TestSSEStreamDropAndRepeatedFailuresBackOff(t *testing.T) {
	url, stop, err := testupstream.StartSSE(testupstream.Options{Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	h := start(t, servers(&Server{Name: "old", ToolPrefix: "old__", Transport: TransportSSE, Egress: loopbackOK, URL: url}))
	if got := mustCall(t, h.set, "old", "echo", `{}`); got != `{}` {
		t.Fatal(got)
	}
	stop()
	h.waitStatus(t, "old", false)
	if d := h.gate.next(t); d != time.Second {
		t.Errorf("first wait %s", d)
	}
	_, err = call(t, h.set, "old", "echo", `{}`)
	wantWhere(t, err, NotSent)
	h.gate.open(t)
	if d := h.gate.next(t); d != 2*time.Second {
		t.Errorf("second wait %s, want 2s", d)
	}
	h.gate.open(t)
	if d := h.gate.next(t); d != 4*time.Second {
		t.Errorf("third wait %s, want 4s", d)
	}
}

// A default mcp-go Streamable HTTP server does not check that it issued a
// session id, so after it restarts the old session simply goes on: nothing
// goes down, calls keep working (pinned so that a library change shows).
func TestHTTPRestartOfLenientServer(t *testing.T) {
	newUpstream := func() *server.StreamableHTTPServer {
		return server.NewStreamableHTTPServer(testupstream.NewServer(testupstream.Options{Name: "h"}))
	}
	var current atomic.Pointer[server.StreamableHTTPServer]
	current.Store(newUpstream())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(func() {
		_ = current.Load().Shutdown(context.Background())
		srv.Close()
	})
	h := start(t, servers(&Server{Name: "h", ToolPrefix: "h__", Transport: TransportHTTP, Egress: loopbackOK, URL: srv.URL + "/mcp"}))
	mustCall(t, h.set, "h", "echo", `{}`)
	old := current.Swap(newUpstream())
	if err := old.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, h.set, "h", "echo", `{"after":1}`); got != `{"after":1}` {
		t.Fatal(got)
	}
	if up, why := h.set.Status("h"); !up {
		t.Errorf("down: %s", why)
	}
}

// Calls racing restarts never hang: each one answers, or fails NotSent
// (the upstream was down) or Sent (it died mid-call), well within its
// deadline.
func TestCallsRacingRestartsNeverHang(t *testing.T) {
	h := start(t, servers(stdioServer(t, "s", "-crash-after", "7")), withWait(wait),
		WithBackoff(Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, ResetAfter: time.Hour}))
	var ok, notSent, sent atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 40 {
				_, err := h.set.CallTool(callCtx(t, 10*time.Second), "s", "echo", json.RawMessage(`{}`))
				var ce *CallError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &ce) && ce.Where == NotSent:
					notSent.Add(1)
				case errors.As(err, &ce) && ce.Where == Sent:
					sent.Add(1)
				default:
					t.Errorf("call: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("answered %d, not sent %d, lost mid-call %d", ok.Load(), notSent.Load(), sent.Load())
	h.waitStatus(t, "s", false)
	if ok.Load() == 0 || len(h.logs.Records("upstream exited")) == 0 {
		t.Errorf("no call answered, or no restart happened under load")
	}
}

// TestToolsListOverSizeCapNamesTheLimit: an upstream whose tools/list
// answer is over the transport cap (max_result_bytes plus framing) is down,
// and its status reason and log say which cap it passed and which keys
// raise it (issue 16, item 15).
func TestToolsListOverSizeCapNamesTheLimit(t *testing.T) {
	srv := stdioServer(t, "big", "-extra-tools", "1000")
	srv.MaxResultBytes = 1024
	h := start(t, servers(srv))
	why := h.set.Catalog().Down()["big"]
	for _, want := range []string{"tools/list", "66560 byte", "max_result_bytes 1024",
		"mcpServers.big.max_result_bytes", "limits.max_result_bytes"} {
		if !strings.Contains(why, want) {
			t.Errorf("down reason %q does not say %q", why, want)
		}
	}
	fails := h.logs.Records("upstream unavailable")
	if len(fails) == 0 || !strings.Contains(fails[0]["err"].(string), "limits.max_result_bytes") {
		t.Errorf("log: %v", fails)
	}
}
