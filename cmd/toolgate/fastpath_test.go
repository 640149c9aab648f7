package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// fastPathGateway runs a gateway like httpGatewayFull, with the tools/call
// fast path on or off, and returns its endpoint to count fast calls.
func fastPathGateway(t *testing.T, cfgPath string, fast bool, tweak ...func(*proxy.HTTPOptions)) (string, *proxy.HTTPEndpoint) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	gw, code := startGateway(context.Background(), cfgPath, log)
	if gw == nil {
		t.Fatalf("gateway did not start (exit %d)", code)
	}
	o := gw.HTTPOptions()
	o.NoFastPath = !fast
	for _, f := range tweak {
		f(&o)
	}
	endpoint := gw.Server().HTTPHandler(o)
	srv := httptest.NewServer(endpoint)
	t.Cleanup(func() {
		srv.Close()
		_ = endpoint.Shutdown(context.Background())
		gw.Close()
	})
	return srv.URL + "/mcp", endpoint
}

// rawSession speaks Streamable HTTP with hand-written bodies, so a test
// controls every byte and sees every byte of the answer.
type rawSession struct {
	t        *testing.T
	url, sid string
	client   *http.Client
	// noVersion: no MCP-Protocol-Version header on any request, as a
	// 2025-03-26 client sends none.
	noVersion bool
}

type rawAnswer struct {
	status int
	ctype  string
	body   string
}

// openRawSession initializes a 2025-11-25 session declaring caps and
// sends notifications/initialized.
func openRawSession(t *testing.T, url, caps string) *rawSession {
	t.Helper()
	return openRawSessionAt(t, url, caps, "2025-11-25")
}

// openRawSessionAt is openRawSession at another protocol version; at
// 2025-03-26 the session's requests carry no MCP-Protocol-Version header.
func openRawSessionAt(t *testing.T, url, caps, version string) *rawSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	s := &rawSession{t: t, url: url, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, noVersion: version == "2025-03-26"}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":` + caps +
		`,"clientInfo":{"name":"raw","version":"1"}}}`
	resp := s.send(init, nil)
	s.sid = resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s.sid == "" {
		t.Fatalf("initialize: no session (status %d)", resp.StatusCode)
	}
	if a := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); a.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %+v", a)
	}
	return s
}

// post sends body with the session's headers; hdr overrides them ("" deletes).
func (s *rawSession) post(body string, hdr map[string]string) rawAnswer {
	s.t.Helper()
	resp := s.send(body, hdr)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return rawAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: string(data)}
}

func (s *rawSession) send(body string, hdr map[string]string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	h := map[string]string{"Authorization": "Bearer " + aliceKey, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": s.sid, "MCP-Protocol-Version": "2025-11-25"}
	if s.noVersion {
		delete(h, "MCP-Protocol-Version")
	}
	for k, v := range hdr {
		h[k] = v
	}
	for k, v := range h {
		switch {
		case k == "Host":
			req.Host = v
		case v != "":
			req.Header.Set(k, v)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func toolsCall(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// The fast path answers exactly what mcp-go's handler answers: the same
// status, content type and bytes, for successes and for every kind of
// refusal.
func TestFastPathAnswersAsMCPGo(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	fastURL, fast := fastPathGateway(t, writeConfig(t, servers), true)
	slowURL, slow := fastPathGateway(t, writeConfig(t, servers), false)
	fs, ss := openRawSession(t, fastURL, `{}`), openRawSession(t, slowURL, `{}`)
	calls := []struct {
		name, id, params string
		hdr              map[string]string
	}{
		{"success", `2`, `{"name":"hostile__echo","arguments":{"b":1,"a":"x \u00e9"}}`, nil},
		{"no protocol version header (a 2025-03-26 client)", `14`, `{"name":"hostile__echo","arguments":{"v":1}}`, map[string]string{"MCP-Protocol-Version": ""}},
		{"HTML and line separators", `12`, `{"name":"hostile__echo","arguments":{"html":"<b>&amp;</b>","ls":"a\u2028b","ctl":"\u001b[31m"}}`, nil},
		{"spaced JSON", `13`, `{ "name" : "hostile__echo" , "arguments" : { "a" : [ 1 , 2.50 , 1e3 ] } }`, nil},
		{"string id, no arguments", `"s-1"`, `{"name":"hostile__echo"}`, nil},
		{"negative id, null arguments", `-4`, `{"name":"hostile__echo","arguments":null}`, nil},
		{"denied by policy", `3`, `{"name":"hostile__headers","arguments":{}}`, nil},
		{"unknown tool", `4`, `{"name":"nope__x","arguments":{}}`, nil},
		{"invalid arguments", `5`, `{"name":"hostile__sleep","arguments":{"ms":"soon"}}`, nil},
		{"tool error", `6`, `{"name":"hostile__fail","arguments":{"message":"no"}}`, nil},
		{"structured output", `7`, `{"name":"hostile__good_output","arguments":{}}`, nil},
		{"trace context in _meta", `8`, `{"name":"hostile__meta","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`, nil},
	}
	for _, c := range calls {
		got, want := fs.post(toolsCall(c.id, c.params), c.hdr), ss.post(toolsCall(c.id, c.params), c.hdr)
		if got != want {
			t.Errorf("%s: fast path answered\n%+v\nmcp-go answered\n%+v", c.name, got, want)
		}
		if !strings.Contains(got.body, `"structuredContent"`) {
			t.Errorf("%s: no envelope in %s", c.name, got.body)
		}
	}
	if n := fast.FastCalls(); n != uint64(len(calls)) {
		t.Errorf("fast path took %d of %d calls", n, len(calls))
	}
	if n := slow.FastCalls(); n != 0 {
		t.Errorf("with the fast path off, %d calls took it", n)
	}
}

// A client that negotiated 2025-03-26 sends no MCP-Protocol-Version header
// (the specification says to assume that version). Its calls take the fast
// path too, and get mcp-go's answers byte for byte: successes, refusals,
// tool errors, structured output.
func TestFastPathServesA20250326Client(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	fastURL, fast := fastPathGateway(t, writeConfig(t, servers), true)
	slowURL, _ := fastPathGateway(t, writeConfig(t, servers), false)
	fs, ss := openRawSessionAt(t, fastURL, `{}`, "2025-03-26"), openRawSessionAt(t, slowURL, `{}`, "2025-03-26")
	calls := []string{
		`{"name":"hostile__echo","arguments":{"b":1,"a":"x"}}`,
		`{"name":"hostile__headers","arguments":{}}`,
		`{"name":"hostile__fail","arguments":{"message":"no"}}`,
		`{"name":"hostile__good_output","arguments":{}}`,
	}
	before := fast.FastCalls()
	for i, params := range calls {
		body := toolsCall(strconv.Itoa(i+1), params)
		if got, want := fs.post(body, nil), ss.post(body, nil); got != want {
			t.Errorf("%s: fast path answered\n%+v\nmcp-go answered\n%+v", params, got, want)
		}
	}
	if n := fast.FastCalls() - before; n != uint64(len(calls)) {
		t.Errorf("the fast path took %d of %d calls", n, len(calls))
	}
}

// What the fast path does not take goes to mcp-go untouched: the answer
// is mcp-go's, byte for byte.
func TestFastPathLeavesTheRestToMCPGo(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	fastURL, fast := fastPathGateway(t, writeConfig(t, servers), true)
	slowURL, _ := fastPathGateway(t, writeConfig(t, servers), false)
	echo := `{"name":"hostile__echo","arguments":{"x":1}}`
	cases := []struct {
		name, caps, body string
		hdr              map[string]string
	}{
		{"a fractional progress token", `{}`, toolsCall(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"progressToken":1.5}}`), nil},
		{"fractional id", `{}`, toolsCall(`1.5`, echo), nil},
		{"escaped string id", `{}`, toolsCall(`"a\u0041"`, echo), nil},
		{"unknown protocol version", `{}`, toolsCall(`1`, echo), map[string]string{"MCP-Protocol-Version": "1999-01-01"}},
		{"not JSON content", `{}`, toolsCall(`1`, echo), map[string]string{"Content-Type": "text/plain"}},
		{"unknown session", `{}`, toolsCall(`1`, echo), map[string]string{"Mcp-Session-Id": "mcp-session-00000000-0000-0000-0000-000000000000"}},
		{"batch", `{}`, `[` + toolsCall(`1`, echo) + `]`, nil},
		{"malformed JSON", `{}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`, nil},
		{"another method", `{}`, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil},
		{"task", `{}`, toolsCall(`1`, `{"name":"hostile__echo","arguments":{},"task":{"ttl":1000}}`), nil},
		{"DNS rebinding (a loopback listener reached as another name)", `{}`, toolsCall(`1`, echo), map[string]string{"Host": "evil.example:80"}},
		{"a result beside the method (mcp-go takes it for a response)", `{}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + echo + `,"result":{}}`, nil},
		{"a string id encoding/json would escape", `{}`, toolsCall(`"<a&b>"`, echo), nil},
		{"a non-ASCII string id", `{}`, toolsCall(`"été"`, echo), nil},
		{"another principal on alice's session", `{}`, toolsCall(`1`, echo), map[string]string{"Authorization": "Bearer " + bobKey}},
	}
	for _, c := range cases {
		fs, ss := openRawSession(t, fastURL, c.caps), openRawSession(t, slowURL, c.caps)
		before := fast.FastCalls()
		got, want := fs.post(c.body, c.hdr), ss.post(c.body, c.hdr)
		if fast.FastCalls() != before {
			t.Errorf("%s: the fast path took it", c.name)
		}
		if got != want {
			t.Errorf("%s: answered\n%+v\nwhere mcp-go alone answers\n%+v", c.name, got, want)
		}
	}
}

// An upstream's log message during a fast call is written on the call's
// own response, which becomes an event stream, at once: the call is still
// running (the tool holds until cancelled) when the client reads it.
func TestFastPathRelaysLogsOnTheCall(t *testing.T) {
	url, fast := fastPathGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")), true)
	s := openRawSession(t, url, `{}`)
	resp := s.send(toolsCall(`1`, `{"name":"hostile__log","arguments":{"message":"disk almost full","hold":true}}`), nil)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := bufio.NewScanner(resp.Body)
	if ev := nextEvent(t, events); !strings.Contains(ev, `"method":"notifications/message"`) || !strings.Contains(ev, "disk almost full") {
		t.Fatalf("first event: %s", ev)
	}
	if fast.FastCalls() != 1 {
		t.Fatalf("the fast path did not take the call")
	}
	s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil)
	if ev := nextEvent(t, events); !strings.Contains(ev, `"id":1,"result"`) || !strings.Contains(ev, "was cancelled") {
		t.Fatalf("answer event: %s", ev)
	}
}

// nextEvent reads the data of the next SSE event.
func nextEvent(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	t.Fatalf("the event stream ended: %v", sc.Err())
	return ""
}

// A client's notifications/cancelled ends a fast call in flight, and the
// session goes on.
func TestFastPathCancel(t *testing.T) {
	url, fast := fastPathGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")), true)
	s := openRawSession(t, url, `{}`)
	done := make(chan rawAnswer, 1)
	go func() { done <- s.post(toolsCall(`9`, `{"name":"hostile__sleep","arguments":{"ms":600000}}`), nil) }()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var a rawAnswer
wait:
	for {
		select {
		case a = <-done:
			break wait
		case <-tick.C: // the cancel may arrive before the call is in flight: repeat it until the call ends
			s.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"user"}}`, nil)
		case <-deadline:
			t.Fatal("the cancelled call did not end")
		}
	}
	if fast.FastCalls() != 1 {
		t.Fatalf("the fast path took %d calls", fast.FastCalls())
	}
	if !strings.Contains(a.body, "was cancelled") {
		t.Fatalf("the call ended without being cancelled: %d %s", a.status, a.body)
	}
	if got := s.post(toolsCall(`10`, `{"name":"hostile__echo","arguments":{"after":"cancel"}}`), nil); !strings.Contains(got.body, `"ok":true`) {
		t.Fatalf("after the cancel: %+v", got)
	}
}

// A session used only by fast calls stays alive: mcp-go, which reaps
// sessions idle for their TTL, sees one of its requests at least every
// quarter of the TTL. Were it reaped, its entry would be gone and no call
// would take the fast path any more (mcp-go would still serve them).
func TestFastPathKeepsTheSessionAlive(t *testing.T) {
	const ttl = 2 * time.Second // mcp-go sweeps every second at this TTL
	url, fast := fastPathGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")), true,
		func(o *proxy.HTTPOptions) { o.SessionIdleTTL = ttl })
	s := openRawSession(t, url, `{}`)
	call := func(i int) {
		t.Helper()
		if a := s.post(toolsCall(strconv.Itoa(i), `{"name":"hostile__echo","arguments":{}}`), nil); !strings.Contains(a.body, `"ok":true`) {
			t.Fatalf("call %d: %+v", i, a)
		}
	}
	i := 0
	for start := time.Now(); time.Since(start) < 2*ttl+ttl/2; i++ { // past two sweeps after the TTL
		call(i)
	}
	before := fast.FastCalls()
	for range 8 {
		call(i)
		i++
	}
	if taken := fast.FastCalls() - before; taken < 6 {
		t.Fatalf("after %d calls over %v, only %d of the next 8 took the fast path: the session was reaped", i-8, 2*ttl+ttl/2, taken)
	}
}

// A session belongs to the principal that opened it: another principal
// naming it, to call, to listen for the session's requests (GET) or to end
// it (DELETE), is answered as for an unknown session, and the session goes
// on for its owner.
func TestSessionBoundToItsPrincipal(t *testing.T) {
	url, fast := fastPathGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")), true)
	alice := openRawSession(t, url, `{}`)
	bob := map[string]string{"Authorization": "Bearer " + bobKey}
	if a := alice.post(toolsCall(`1`, `{"name":"hostile__echo","arguments":{}}`), bob); a.status != http.StatusNotFound {
		t.Fatalf("bob calling on alice's session: %+v", a)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bobKey)
		req.Header.Set("Mcp-Session-Id", alice.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := alice.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("bob's %s on alice's session: %d", method, resp.StatusCode)
		}
	}
	before := fast.FastCalls()
	if a := alice.post(toolsCall(`2`, `{"name":"hostile__echo","arguments":{}}`), nil); !strings.Contains(a.body, `"ok":true`) || fast.FastCalls() != before+1 {
		t.Fatalf("alice after bob's attempts: %+v (fast calls %d -> %d)", a, before, fast.FastCalls())
	}
}
