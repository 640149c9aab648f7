package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/upstreams"
)

// keepAliveEndpoint is an endpoint with the fast path whose sessions mcp-go
// ends after ttl idle, and whose fast path reads a clock that runs skew
// ahead of the real one.
func keepAliveEndpoint(t *testing.T, ttl time.Duration) (*Server, *HTTPEndpoint, *atomic.Int64) {
	t.Helper()
	servers := []upstreams.Server{{Name: "hostile", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "hostile__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
		MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan}}
	cat, err := upstreams.Build(servers, map[string][]upstreams.Listed{"hostile": {{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := NewServer(Options{Calls: &callEcho{}, Catalog: func() *upstreams.Catalog { return cat }, Policy: func() Policy { return allowAll{} }}, "test", log)
	e := srv.HTTPHandler(HTTPOptions{Auth: bearerAuth{}, MaxBodyBytes: 1 << 20, SessionIdleTTL: ttl, Log: log})
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	skew := &atomic.Int64{}
	e.fast.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	return srv, e, skew
}

// A session served only by fast calls stays alive past mcp-go's idle TTL:
// the first fast call in each quarter of the TTL pings mcp-go on the
// session (in memory) and is itself taken, where a session nothing is
// sent on is ended.
func TestFastCallsKeepTheSessionAlive(t *testing.T) {
	const ttl = time.Second // mcp-go sweeps every second
	srv, e, skew := keepAliveEndpoint(t, ttl)
	hs := httptest.NewServer(e)
	defer hs.Close()
	a := &httpClient{t: t, url: hs.URL + "/mcp"}
	a.open(`{}`)
	idle := &httpClient{t: t, url: hs.URL + "/mcp"}
	idle.open(`{}`)
	call := func() {
		t.Helper()
		if got := a.events(a.post(toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{}}`))); len(got) != 1 || !strings.Contains(got[0], `"ok":true`) {
			t.Fatalf("call: %v", got)
		}
	}

	// The clock decides: no ping while the session is fresh, one when a
	// quarter of the TTL has passed, then none until the next quarter.
	call()
	if n := e.fast.pings.Load(); n != 0 {
		t.Fatalf("%d pings for a fresh session", n)
	}
	skew.Add(int64(ttl / 4))
	call()
	call()
	if n := e.fast.pings.Load(); n != 1 {
		t.Fatalf("%d pings after a quarter of the TTL, want 1", n)
	}

	// In real time: fast calls only, past two sweeps after the TTL.
	before, calls := e.FastCalls(), uint64(0)
	for start := time.Now(); time.Since(start) < 2*ttl+ttl/2; calls++ {
		call()
		time.Sleep(20 * time.Millisecond)
	}
	if taken := e.FastCalls() - before; taken != calls {
		t.Fatalf("the fast path took %d of %d calls", taken, calls)
	}
	if srv.session(a.sid) == nil {
		t.Fatal("mcp-go ended the session that had only fast calls")
	}
	if srv.session(idle.sid) != nil {
		t.Fatal("the idle session was not ended: the test shows nothing")
	}
	if n := e.fast.pings.Load(); n < 3 {
		t.Fatalf("%d pings over %v", n, 2*ttl+ttl/2)
	}
}

// A notification waiting on the session when a fast call pings (a
// list_changed, with no GET stream to take it) is what mcp-go would have
// written on the call's response: the ping's response carries it, and the
// call's stream gets it before its answer.
//
// The session is opened with initialize alone. mcp-go (v1.2.1) answers a
// POST without a response (notifications/initialized: 202) without
// waiting for that request's notification forwarder to exit; one still in
// its select when the list_changed is queued may take it, and records it
// on its own finished stream, where no one reads it. That lost the
// notification in about 1.5% of runs under -race (7-8 in 500). Every
// request that has an answer waits for its forwarder, so after initialize
// the queued notification waits for the ping.
func TestKeepAliveCarriesTheSessionsNotifications(t *testing.T) {
	srv, e, skew := keepAliveEndpoint(t, time.Hour)
	hs := httptest.NewServer(e)
	defer hs.Close()
	c := &httpClient{t: t, url: hs.URL + "/mcp"}
	c.initialize(`{}`)
	if err := srv.MCP().SendNotificationToSpecificClient(c.sid, "notifications/tools/list_changed", nil); err != nil {
		t.Fatal(err)
	}
	skew.Add(int64(time.Hour / 4))
	events := c.events(c.post(toolsCallBody(`3`, `{"name":"hostile__echo","arguments":{}}`)))
	if len(events) != 2 || !strings.Contains(events[0], `"method":"notifications/tools/list_changed"`) || !strings.Contains(events[1], `"id":3,"result"`) {
		t.Fatalf("the call's stream: %v", events)
	}
	if e.fast.pings.Load() != 1 || e.FastCalls() != 1 {
		t.Fatalf("%d pings, %d fast calls", e.fast.pings.Load(), e.FastCalls())
	}
}
