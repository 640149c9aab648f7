package upstreams

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/testupstream"
)

// modernOnlyEnv makes the test binary a stdio upstream that speaks only
// 2026-07-28: the test upstream behind a filter that refuses initialize
// with -32601, as a server that no longer has the handshake does.
const modernOnlyEnv = "TOOLGATE_UPSTREAMS_MODERN_ONLY"

func init() {
	if os.Getenv(modernOnlyEnv) == "1" {
		os.Exit(serveModernOnlyStdio(os.Args[1:]))
	}
}

// serveModernOnlyStdio passes every line of stdin to the test upstream
// except initialize, which it answers itself with a refusal.
func serveModernOnlyStdio(args []string) int {
	var mu sync.Mutex
	out := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return os.Stdout.Write(p)
	})
	in, toServer := io.Pipe()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Bytes()
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method == "initialize" {
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"\"initialize\" was removed in protocol version 2026-07-28"}}`+"\n", m.ID)
				continue
			}
			if _, err := toServer.Write(append(bytes.Clone(line), '\n')); err != nil {
				break
			}
		}
		toServer.Close()
	}()
	return testupstream.MainIO(args, in, out, os.Stderr)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// modernFront is a Streamable HTTP upstream that speaks only 2026-07-28:
// the test upstream in mcp-go's server (which serves both eras) behind a
// handler that answers what refuse says for the requests it picks, counts
// every JSON-RPC method it sees, and keeps the headers and body of each
// request for the test to read.
type modernFront struct {
	// refuse answers a request itself when it returns a status: the
	// request's method, how many of that method came before it, and its id.
	refuse func(method string, before int, id json.RawMessage) (status int, body string)

	mu   sync.Mutex
	seen map[string]int
	kept map[string][]keptRequest
	// lists gets one value per tools/list the upstream answered.
	lists chan struct{}
	url   string
}

type keptRequest struct {
	header http.Header
	body   []byte
}

func newModernFront(t *testing.T, refuse func(method string, before int, id json.RawMessage) (int, string)) *modernFront {
	t.Helper()
	f := &modernFront{refuse: refuse, seen: map[string]int{}, kept: map[string][]keptRequest{}, lists: make(chan struct{}, 1024)}
	mcpSrv := server.NewStreamableHTTPServer(testupstream.NewServer(testupstream.Options{Name: "m"}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			mcpSrv.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		f.mu.Lock()
		before := f.seen[m.Method]
		f.seen[m.Method]++
		f.kept[m.Method] = append(f.kept[m.Method], keptRequest{header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		if status, answer := f.refuse(m.Method, before, m.ID); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, answer)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpSrv.ServeHTTP(w, r)
		if m.Method == string(mcp.MethodToolsList) {
			f.lists <- struct{}{}
		}
	}))
	t.Cleanup(func() {
		_ = mcpSrv.Shutdown(context.Background())
		srv.Close()
	})
	f.url = srv.URL + "/mcp"
	return f
}

func (f *modernFront) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[method]
}

func (f *modernFront) requests(method string) []keptRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]keptRequest(nil), f.kept[method]...)
}

// nextList waits for the upstream to answer one more tools/list, failing
// at once if h's server goes down or a reconnect begins meanwhile.
func (f *modernFront) nextList(t *testing.T, h *harness, what string) {
	t.Helper()
	timeout := time.After(generous)
	for {
		select {
		case <-f.lists:
			return
		case e := <-h.status:
			if !e.up {
				t.Fatalf("waiting for %s: the upstream went down: %s; log:\n%s", what, e.why, h.logs)
			}
		case <-h.gate.waits:
			t.Fatalf("waiting for %s: a reconnect began; log:\n%s", what, h.logs)
		case <-timeout:
			t.Fatalf("no %s; log:\n%s", what, h.logs)
		}
	}
}

func rpcErrorBody(id json.RawMessage, code int, message, data string) string {
	if data == "" {
		data = "null"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q,"data":%s}}`, id, code, message, data)
}

// noEvents fails if the upstream went down or a reconnect waited.
func (h *harness) noEvents(t *testing.T) {
	t.Helper()
	for {
		select {
		case e := <-h.status:
			if !e.up {
				t.Errorf("the upstream went down: %s", e.why)
			}
			continue
		case d := <-h.gate.waits:
			t.Errorf("a reconnect waited %s", d)
			continue
		default:
		}
		return
	}
}

func setListPoll(t *testing.T, d time.Duration) {
	t.Helper()
	old := listPoll
	listPoll = d
	t.Cleanup(func() { listPoll = old })
}

// A 2026-07-28 upstream that does not serve subscriptions/listen (HTTP 404,
// or JSON-RPC -32601 however it travels) keeps its connection: calls
// succeed, nothing reconnects, the listen request is not sent again, the
// lack is logged once with what it means, and the tools are re-read on a
// timer instead (issue 17, item 6). On 9705eee the 404 took the connection
// down as a "session terminated" and every reconnect met it again.
func TestModernUpstreamWithoutListenStaysUp(t *testing.T) {
	for name, refusal := range map[string]int{"HTTP 404": http.StatusNotFound, "-32601 in HTTP 200": http.StatusOK, "-32601 in HTTP 400": http.StatusBadRequest} {
		t.Run(name, func(t *testing.T) {
			setListPoll(t, 10*time.Millisecond)
			f := newModernFront(t, func(method string, _ int, id json.RawMessage) (int, string) {
				if method == string(mcp.MethodSubscriptionsListen) {
					return refusal, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "Method not found", "")
				}
				return 0, ""
			})
			h := start(t, servers(&Server{Name: "m", ToolPrefix: "m__", Transport: TransportHTTP, Egress: loopbackOK, URL: f.url, Protocol: mcp.ProtocolVersion20260728}))
			// The connect's listing, then the re-list the refusal asks
			// for, then two on the timer. Before the fix the refusal
			// took the connection down instead.
			for i := range 4 {
				f.nextList(t, h, fmt.Sprintf("tools/list number %d", i+1))
			}
			for i := range 5 {
				if got := mustCall(t, h.set, "m", "echo", fmt.Sprintf(`{"n":%d}`, i)); got != fmt.Sprintf(`{"n":%d}`, i) {
					t.Fatalf("call %d answered %s", i, got)
				}
			}
			h.noEvents(t)
			if n := f.count(string(mcp.MethodServerDiscover)); n != 1 {
				t.Errorf("server/discover sent %d times, want 1 (no reconnect)", n)
			}
			if n := f.count(string(mcp.MethodInitialize)); n != 0 {
				t.Errorf("initialize sent %d times", n)
			}
			if n := f.count(string(mcp.MethodSubscriptionsListen)); n != 1 {
				t.Errorf("subscriptions/listen sent %d times, want 1", n)
			}
			conn := h.set.sups["m"].conn.Load()
			if conn == nil || !conn.ListenRefused() {
				t.Fatal("the connection does not know the upstream lacks subscriptions/listen")
			}
			if _, err := conn.Forward(context.Background(), string(mcp.MethodResourcesSubscribe), map[string]string{"uri": "test://x"}); err == nil {
				t.Error("resources/subscribe accepted though no update could be passed on")
			}
			if n := f.count(string(mcp.MethodSubscriptionsListen)); n != 1 {
				t.Errorf("subscriptions/listen sent again after resources/subscribe (%d)", n)
			}
			recs := h.logs.Records("upstream does not support subscriptions/listen (2026-07-28), so its list_changed and resource update " +
				"notifications are not received: toolgate re-reads its tools, resources and prompts every " + listPoll.String() +
				" and on each reconnect, and refuses resources/subscribe for its resources")
			if len(recs) != 1 {
				t.Errorf("the missing subscriptions/listen logged %d times, want once; log:\n%s", len(recs), h.logs)
			}
			if len(h.logs.Records("subscriptions/listen ended; list changes and resource updates are not received until the next reconnect")) != 0 {
				t.Error("the refusal was logged as a listen that ended")
			}
		})
	}
}

// A 2026-07-28 upstream that refuses a request's protocol version (-32022)
// and names the version it wants in the error's data gets the request
// again, once, with that version in _meta and in Mcp-Protocol-Version; no
// initialize or server/discover is sent for it (issue 17, item 6). One that
// names only versions toolgate does not speak in that era gets no retry.
func TestModernUpstreamAsksForItsProtocolVersion(t *testing.T) {
	var supported atomic.Pointer[string]
	modern := `["2026-07-28"]`
	supported.Store(&modern)
	f := newModernFront(t, func(method string, before int, id json.RawMessage) (int, string) {
		if method == string(mcp.MethodToolsCall) && before%2 == 0 {
			data := fmt.Sprintf(`{"supported":%s,"requested":""}`, *supported.Load())
			return http.StatusBadRequest, rpcErrorBody(id, mcp.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version: missing MCP-Protocol-Version header", data)
		}
		return 0, ""
	})
	h := start(t, servers(&Server{Name: "m", ToolPrefix: "m__", Transport: TransportHTTP, Egress: loopbackOK, URL: f.url, Protocol: mcp.ProtocolVersion20260728}))
	if got := mustCall(t, h.set, "m", "echo", `{"x":1}`); got != `{"x":1}` {
		t.Fatal(got)
	}
	calls := f.requests(string(mcp.MethodToolsCall))
	if len(calls) != 2 {
		t.Fatalf("tools/call sent %d times, want 2 (the refused one and its retry)", len(calls))
	}
	retry := calls[1]
	if v := retry.header.Get(transport.HeaderKeyProtocolVersion); v != mcp.ProtocolVersion20260728 {
		t.Errorf("the retry's Mcp-Protocol-Version is %q", v)
	}
	var p struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(retry.body, &p); err != nil {
		t.Fatal(err)
	}
	if v := string(p.Params.Meta[mcp.MetaKeyProtocolVersion]); v != `"2026-07-28"` {
		t.Errorf("the retry's _meta protocol version is %s", v)
	}
	if n, m := f.count(string(mcp.MethodInitialize)), f.count(string(mcp.MethodServerDiscover)); n != 0 || m != 1 {
		t.Errorf("initialize sent %d times and server/discover %d times, want 0 and 1", n, m)
	}
	if len(h.logs.Records("upstream refused the request's protocol version (-32022); sending it again with the version it asked for in _meta and Mcp-Protocol-Version")) != 1 {
		t.Errorf("the retry is not logged once; log:\n%s", h.logs)
	}

	legacy := `["2025-11-25"]`
	supported.Store(&legacy)
	_, err := call(t, h.set, "m", "echo", `{}`)
	ce := wantWhere(t, err, Answered)
	if ce.RPC == nil || ce.RPC.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		t.Errorf("error %v, want the upstream's -32022", err)
	}
	if n := f.count(string(mcp.MethodToolsCall)); n != 3 {
		t.Errorf("tools/call sent %d times in all, want 3: a version toolgate does not speak is not retried", n)
	}
	h.noEvents(t)
}

// A 2026-07-28-only upstream whose config names no protocol, and which
// refuses initialize with an HTTP 4xx, is reached with server/discover;
// the log says which era was chosen and why, and a reconnect starts with
// server/discover (issue 17, item 7). On 9705eee it never connected.
func TestModernOnlyUpstreamFoundWithoutProtocolSetting(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			f := newModernFront(t, func(method string, _ int, id json.RawMessage) (int, string) {
				if method == string(mcp.MethodInitialize) {
					return status, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "initialize was removed in 2026-07-28", "")
				}
				return 0, ""
			})
			h := start(t, servers(&Server{Name: "m", ToolPrefix: "m__", Transport: TransportHTTP, Egress: loopbackOK, URL: f.url}))
			if got := mustCall(t, h.set, "m", "echo", `{"x":1}`); got != `{"x":1}` {
				t.Fatal(got)
			}
			conn := h.set.sups["m"].conn.Load()
			if conn == nil || conn.Protocol() != mcp.ProtocolVersion20260728 {
				t.Fatalf("connection speaks %q", conn.Protocol())
			}
			chose := h.logs.Records("upstream refused initialize (protocol 2025-11-25) and answered server/discover: speaking 2026-07-28 to it")
			if len(chose) != 1 || chose[0]["protocol"] != mcp.ProtocolVersion20260728 || chose[0]["initialize_refused"] == "" {
				t.Errorf("the era chosen is not logged with its reason: %v; log:\n%s", chose, h.logs)
			}
			if up := h.logs.Records("upstream connected"); len(up) != 1 || up[0]["protocol"] != mcp.ProtocolVersion20260728 {
				t.Errorf("upstream connected: %v", up)
			}
			if n, m := f.count(string(mcp.MethodInitialize)), f.count(string(mcp.MethodServerDiscover)); n != 1 || m != 1 {
				t.Errorf("initialize sent %d times and server/discover %d times, want 1 and 1", n, m)
			}

			conn.markDown(errors.New("test: the connection dropped"))
			h.waitStatus(t, "m", false)
			h.gate.next(t)
			h.gate.open(t)
			h.waitStatus(t, "m", true)
			if got := mustCall(t, h.set, "m", "echo", `{"x":2}`); got != `{"x":2}` {
				t.Fatal(got)
			}
			if n, m := f.count(string(mcp.MethodInitialize)), f.count(string(mcp.MethodServerDiscover)); n != 1 || m != 2 {
				t.Errorf("after a reconnect: initialize sent %d times and server/discover %d times, want 1 and 2", n, m)
			}
		})
	}
}

// The same over stdio: a child that answers initialize with -32601 is
// started again and reached with server/discover.
func TestModernOnlyStdioUpstreamFoundWithoutProtocolSetting(t *testing.T) {
	srv := stdioServer(t, "ms")
	srv.Env[modernOnlyEnv] = "1"
	h := start(t, servers(srv))
	if got := mustCall(t, h.set, "ms", "echo", `{"x":1}`); got != `{"x":1}` {
		t.Fatal(got)
	}
	if conn := h.set.sups["ms"].conn.Load(); conn == nil || conn.Protocol() != mcp.ProtocolVersion20260728 {
		t.Fatal("the connection does not speak 2026-07-28")
	}
	chose := h.logs.Records("upstream refused initialize (protocol 2025-11-25) and answered server/discover: speaking 2026-07-28 to it")
	if len(chose) != 1 || !strings.Contains(fmt.Sprint(chose[0]["initialize_refused"]), "-32601") && !strings.Contains(fmt.Sprint(chose[0]["initialize_refused"]), "method not found") {
		t.Errorf("the era chosen is not logged with its reason: %v; log:\n%s", chose, h.logs)
	}
}

// An upstream that was reached with server/discover and later speaks only
// the handshake era again (it refuses server/discover) is connected with
// initialize on the next reconnect, on a transport made for that era.
func TestUpstreamBackToTheHandshakeEra(t *testing.T) {
	var legacy atomic.Bool
	f := newModernFront(t, func(method string, _ int, id json.RawMessage) (int, string) {
		switch {
		case method == string(mcp.MethodInitialize) && !legacy.Load():
			return http.StatusBadRequest, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "initialize was removed in 2026-07-28", "")
		case method == string(mcp.MethodServerDiscover) && legacy.Load():
			return http.StatusOK, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "Method not found", "")
		}
		return 0, ""
	})
	h := start(t, servers(&Server{Name: "m", ToolPrefix: "m__", Transport: TransportHTTP, Egress: loopbackOK, URL: f.url}))
	conn := h.set.sups["m"].conn.Load()
	if conn == nil || conn.Protocol() != mcp.ProtocolVersion20260728 {
		t.Fatal("not connected in 2026-07-28")
	}
	legacy.Store(true)
	conn.markDown(errors.New("test: the connection dropped"))
	h.waitStatus(t, "m", false)
	h.gate.next(t)
	h.gate.open(t)
	h.waitStatus(t, "m", true)
	conn = h.set.sups["m"].conn.Load()
	if conn == nil || conn.Protocol() != mcp.ProtocolVersion20251125 || conn.modern {
		t.Fatalf("reconnected speaking %q", conn.Protocol())
	}
	if got := mustCall(t, h.set, "m", "echo", `{"x":2}`); got != `{"x":2}` {
		t.Fatal(got)
	}
	if len(h.logs.Records("upstream no longer answers server/discover (protocol 2026-07-28); connecting with initialize")) != 1 {
		t.Errorf("the change of era is not logged; log:\n%s", h.logs)
	}
}

// Both at once, as the suite's 2026 reference server behaves: no
// protocol: in the config, initialize refused with HTTP 400, and
// subscriptions/listen answered 404. toolgate connects with
// server/discover once and stays connected.
func TestModernOnlyUpstreamWithoutListen(t *testing.T) {
	setListPoll(t, 10*time.Millisecond)
	f := newModernFront(t, func(method string, _ int, id json.RawMessage) (int, string) {
		switch method {
		case string(mcp.MethodInitialize):
			return http.StatusBadRequest, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "initialize was removed in 2026-07-28", "")
		case string(mcp.MethodSubscriptionsListen):
			return http.StatusNotFound, rpcErrorBody(id, mcp.METHOD_NOT_FOUND, "Method not found", "")
		}
		return 0, ""
	})
	h := start(t, servers(&Server{Name: "m", ToolPrefix: "m__", Transport: TransportHTTP, Egress: loopbackOK, URL: f.url}))
	for i := range 3 {
		f.nextList(t, h, fmt.Sprintf("tools/list number %d", i+1))
	}
	for i := range 3 {
		if got := mustCall(t, h.set, "m", "echo", fmt.Sprintf(`{"n":%d}`, i)); got != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("call %d answered %s", i, got)
		}
	}
	h.noEvents(t)
	if n, m, l := f.count(string(mcp.MethodInitialize)), f.count(string(mcp.MethodServerDiscover)), f.count(string(mcp.MethodSubscriptionsListen)); n != 1 || m != 1 || l != 1 {
		t.Errorf("initialize sent %d times, server/discover %d, subscriptions/listen %d; want 1 each", n, m, l)
	}
}
