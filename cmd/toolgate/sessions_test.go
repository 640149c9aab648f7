package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/proxy"
)

// A session ended with DELETE is answered 404, as the MCP specification
// says, to a POST (through the fast path and through mcp-go's handler) and
// to a GET (the listening stream), while another session keeps working and
// a new initialize still opens one.
func TestTerminatedSessionIsRefused(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast path", false: "mcp-go handler"}[fast], func(t *testing.T) {
			url, _ := fastPathGateway(t, writeConfig(t, servers), fast)
			ended, other := openRawSession(t, url, `{}`), openRawSession(t, url, `{}`)
			call := toolsCall("2", `{"name":"hostile__echo","arguments":{"a":1}}`)
			if a := ended.post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
				t.Fatalf("call before DELETE: %+v", a)
			}
			if status := ended.request(http.MethodDelete); status != http.StatusOK {
				t.Fatalf("DELETE: %d", status)
			}
			if a := ended.post(call, nil); a.status != http.StatusNotFound {
				t.Fatalf("POST after DELETE: %d %s, want 404", a.status, a.body)
			}
			if a := ended.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, nil); a.status != http.StatusNotFound {
				t.Fatalf("tools/list after DELETE: %d %s, want 404", a.status, a.body)
			}
			if status := ended.request(http.MethodGet); status != http.StatusNotFound {
				t.Fatalf("GET after DELETE: %d, want 404", status)
			}
			if status := ended.request(http.MethodDelete); status != http.StatusOK {
				t.Fatalf("a second DELETE: %d, want 200 (ending is idempotent)", status)
			}
			if a := other.post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
				t.Fatalf("another session after the DELETE: %+v", a)
			}
			// A client told 404 starts again with initialize; one that still
			// sends the old header gets a new session all the same.
			resp := ended.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
				`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			again := &rawSession{t: t, url: url, sid: resp.Header.Get("Mcp-Session-Id"), client: ended.client}
			if resp.StatusCode != http.StatusOK || again.sid == "" || again.sid == ended.sid {
				t.Fatalf("initialize with the ended session's header: %d, session %q", resp.StatusCode, again.sid)
			}
			if a := again.post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
				t.Fatalf("the new session: %+v", a)
			}
		})
	}
}

// request sends a bodiless GET or DELETE with the session's headers and
// returns the status, without waiting for a stream's end.
func (s *rawSession) request(method string) int {
	s.t.Helper()
	return s.requestAs(method, aliceKey)
}

// requestAs is request with another principal's key.
func (s *rawSession) requestAs(method, key string) int {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if method != http.MethodGet {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

// on is the same session, its requests sent to another replica.
func (s *rawSession) on(url string) *rawSession {
	return &rawSession{t: s.t, url: url, sid: s.sid, client: s.client}
}

// sessionReplica is one gateway sharing srv, its endpoint built with the
// gateway's shared session store (Gateway.SharedSessions).
func sessionReplica(t *testing.T, srv *redistest.Server, servers string) (string, *proxy.HTTPEndpoint, *gateway.Gateway) {
	t.Helper()
	cfg := writeConfig(t, servers)
	write(t, cfg, mustRead(t, cfg)+replicaYAML(srv))
	gw, code := startGateway(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if gw == nil {
		t.Fatalf("gateway did not start (exit %d)", code)
	}
	o := gw.HTTPOptions()
	if o.SharedSessions == nil {
		o.SharedSessions = gw.SharedSessions()
	}
	endpoint := gw.Server().HTTPHandler(o)
	web := httptest.NewServer(endpoint)
	t.Cleanup(func() {
		web.Close()
		_ = endpoint.Shutdown(context.Background())
		gw.Close()
	})
	return web.URL + "/mcp", endpoint, gw
}

// A session ended on one replica is refused by every replica: by one that
// was serving it (it hears the end), and by one started after the DELETE
// (it finds the end in Redis). Other sessions work on all of them. With
// Redis down, a replica lets a session it cannot look up through, and
// counts the failure.
func TestTerminatedSessionIsRefusedByEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	seedDedupEpoch(t, srv)
	servers := stdioUpstream(t, "hostile", "")
	urlA, _, _ := sessionReplica(t, srv, servers)
	urlB, endpointB, gwB := sessionReplica(t, srv, servers)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		subs, err := rdb.PubSubNumSub(context.Background(), "replicas:session:terminated").Result()
		return err == nil && subs["replicas:session:terminated"] >= 2
	})
	call := toolsCall("2", `{"name":"hostile__echo","arguments":{"a":1}}`)
	ended, other := openRawSession(t, urlA, `{}`), openRawSession(t, urlA, `{}`)
	if a := ended.on(urlB).post(call, nil); a.status != http.StatusOK {
		t.Fatalf("replica B, before the DELETE: %+v", a)
	}
	if status := ended.request(http.MethodDelete); status != http.StatusOK {
		t.Fatalf("DELETE on replica A: %d", status)
	}
	redistest.WaitFor(t, func() bool { return endpointB.Sessions().Terminated(ended.sid) })
	if a := ended.on(urlB).post(call, nil); a.status != http.StatusNotFound {
		t.Fatalf("replica B after the DELETE on A: %d %s, want 404", a.status, a.body)
	}
	if status := ended.on(urlB).request(http.MethodGet); status != http.StatusNotFound {
		t.Fatalf("GET on replica B after the DELETE on A: %d, want 404", status)
	}

	urlC, _, _ := sessionReplica(t, srv, servers)
	if a := ended.on(urlC).post(call, nil); a.status != http.StatusNotFound {
		t.Fatalf("replica C, started after the DELETE: %d %s, want 404", a.status, a.body)
	}
	for _, url := range []string{urlA, urlB, urlC} {
		if a := other.on(url).post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
			t.Fatalf("another session on %s: %+v", url, a)
		}
	}

	admin := httptest.NewServer(gwB.AdminHandler())
	t.Cleanup(admin.Close)
	if _, m := scrape(t, admin, "/metrics", adminKey); !strings.Contains(m, `toolgate_state_errors_total{feature="sessions"} 0`+"\n") {
		t.Fatal(`/metrics lacks toolgate_state_errors_total{feature="sessions"} 0`)
	}
	srv.Kill()
	redistest.WaitFor(t, func() bool {
		_, m := scrape(t, admin, "/metrics", adminKey)
		return strings.Contains(m, "toolgate_state_up 0\n")
	})
	unseen := openRawSession(t, urlA, `{}`)
	if a := unseen.on(urlB).post(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, nil); a.status != http.StatusOK {
		t.Fatalf("replica B, Redis down, a session it never saw: %d %s, want 200", a.status, a.body)
	}
	if _, m := scrape(t, admin, "/metrics", adminKey); strings.Contains(m, `toolgate_state_errors_total{feature="sessions"} 0`+"\n") ||
		!strings.Contains(m, `toolgate_state_errors_total{feature="sessions"}`) {
		t.Fatal("the lookup that failed while Redis was down is not counted under feature=sessions")
	}
}

// Only a session's owner ends it for every replica. Bob's DELETE of
// alice's session on a replica that did not open it is answered 404 and
// ends nothing: alice goes on on both replicas. A DELETE of an id no
// replica minted writes nothing to Redis and announces nothing. Alice's own
// DELETE on the other replica ends her session everywhere.
func TestOtherPrincipalCannotEndSessionViaOtherReplica(t *testing.T) {
	srv := redistest.Start(t)
	seedDedupEpoch(t, srv)
	servers := stdioUpstream(t, "hostile", "")
	urlA, endpointA, _ := sessionReplica(t, srv, servers)
	urlB, endpointB, _ := sessionReplica(t, srv, servers)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		subs, err := rdb.PubSubNumSub(context.Background(), "replicas:session:terminated").Result()
		return err == nil && subs["replicas:session:terminated"] >= 2
	})
	owned := func(sid string) {
		t.Helper()
		redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
			owner, err := rdb.Get(context.Background(), "replicas:session:owner:"+sid).Result()
			return err == nil && owner == "alice"
		})
	}
	exists := func(key string) bool {
		t.Helper()
		var n int64
		redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
			var err error
			n, err = rdb.Exists(context.Background(), key).Result()
			return err == nil
		})
		return n > 0
	}
	call := toolsCall("2", `{"name":"hostile__echo","arguments":{"a":1}}`)
	works := func(s *rawSession, where string) {
		t.Helper()
		if a := s.post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
			t.Fatalf("alice's session on %s: %d %s", where, a.status, a.body)
		}
	}

	alice := openRawSession(t, urlA, `{}`)
	owned(alice.sid)
	works(alice.on(urlB), "replica B")
	if status := alice.on(urlB).requestAs(http.MethodDelete, bobKey); status != http.StatusNotFound {
		t.Fatalf("bob's DELETE of alice's session on replica B: %d, want 404", status)
	}

	random := (&rawSession{t: t, url: urlB, sid: "mcp-session-8f5e2a4c-1b7d-4c3e-9a6f-2d0b7e9c4a51", client: alice.client})
	if status := random.requestAs(http.MethodDelete, bobKey); status != http.StatusOK {
		t.Fatalf("DELETE of an id no replica minted: %d, want 200 (mcp-go drops what it holds for it)", status)
	}

	// Alice's own DELETE, on the replica that did not open her session,
	// ends it for both. Its announcement goes out after anything bob's
	// DELETEs could have sent, so once it is heard, theirs would have been.
	ended := openRawSession(t, urlA, `{}`)
	owned(ended.sid)
	if status := ended.on(urlB).request(http.MethodDelete); status != http.StatusOK {
		t.Fatalf("alice's DELETE of her session on replica B: %d", status)
	}
	redistest.WaitFor(t, func() bool { return endpointA.Sessions().Terminated(ended.sid) })
	for _, url := range []string{urlA, urlB} {
		if a := ended.on(url).post(call, nil); a.status != http.StatusNotFound {
			t.Fatalf("alice's ended session on %s: %d %s, want 404", url, a.status, a.body)
		}
	}

	for _, e := range []*proxy.HTTPEndpoint{endpointA, endpointB} {
		if e.Sessions().Terminated(alice.sid) || e.Sessions().Terminated(random.sid) {
			t.Fatal("bob's DELETEs ended a session on a replica")
		}
	}
	works(alice, "replica A")
	works(alice.on(urlB), "replica B")
	for _, key := range []string{"replicas:session:terminated:" + alice.sid, "replicas:session:terminated:" + random.sid,
		"replicas:session:owner:" + random.sid} {
		if exists(key) {
			t.Fatalf("bob's DELETEs wrote %s", key)
		}
	}
	if !exists("replicas:session:terminated:" + ended.sid) {
		t.Fatal("alice's DELETE was not recorded")
	}
}

// Bob's GET or POST naming alice's session, on a replica that did not open
// it and has not seen it, is answered 404 (the owner comes with the one
// lookup that replica makes of a new id), and alice's session goes on
// there. Before, the GET was served: mcp-go registered alice's session on
// that replica for bob, who got its listening stream, and alice's own
// requests there were refused as another principal's.
func TestOtherPrincipalCannotTakeSessionViaOtherReplica(t *testing.T) {
	srv := redistest.Start(t)
	seedDedupEpoch(t, srv)
	servers := stdioUpstream(t, "hostile", "")
	urlA, _, _ := sessionReplica(t, srv, servers)
	urlB, _, _ := sessionReplica(t, srv, servers)
	alice := openRawSession(t, urlA, `{}`)
	redistest.WaitRedis(t, srv, func(rdb *redis.Client) bool {
		owner, err := rdb.Get(context.Background(), "replicas:session:owner:"+alice.sid).Result()
		return err == nil && owner == "alice"
	})
	if status := alice.on(urlB).requestAs(http.MethodGet, bobKey); status != http.StatusNotFound {
		t.Fatalf("bob's GET of alice's session on replica B: %d, want 404", status)
	}
	call := toolsCall("2", `{"name":"hostile__echo","arguments":{"a":1}}`)
	if a := alice.on(urlB).post(call, map[string]string{"Authorization": "Bearer " + bobKey}); a.status != http.StatusNotFound {
		t.Fatalf("bob's POST on alice's session on replica B: %d %s, want 404", a.status, a.body)
	}
	if a := alice.on(urlB).post(call, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"ok":true`) {
		t.Fatalf("alice's session on replica B after bob's tries: %d %s", a.status, a.body)
	}
	if status := alice.on(urlB).request(http.MethodGet); status != http.StatusOK {
		t.Fatalf("alice's GET on replica B: %d", status)
	}
}
