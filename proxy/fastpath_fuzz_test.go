package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/upstreams"
)

// The differential test of the fast path: the same request, sent through
// the endpoint with the fast path and through the one without (mcp-go's
// handler alone), must get the same answer, byte for byte, and reach the
// chain as the same Call. Both endpoints serve one Server, whose chain is
// a fake that answers from the Call it gets (callEcho), and sends three
// progress notifications first when the tool is hostile__progress.

// fastVariant is how a request differs from the usual one besides its
// body: its headers, its session, its client's capabilities.
type fastVariant uint8

const (
	usualRequest fastVariant = iota
	noVersionHeader
	unknownVersion
	modernVersion
	olderVersion
	textContent
	jsonWithCharset
	unknownSession
	dnsRebound
	otherPrincipal
	samplingClient
	rootsClient
	modernClient // a 2026-07-28 request: its headers (modernHeaders) unless hdr sets them
	fastVariants
)

// fastSeeds are the request shapes of the fast path's tests
// (fastcall_test.go, fastdecode_test.go, cmd/toolgate/fastpath_test.go),
// and whether the fast path takes each.
var fastSeeds = []struct {
	body    string
	variant fastVariant
	taken   bool
}{
	// cmd/toolgate: TestFastPathAnswersAsMCPGo
	{toolsCallBody(`2`, `{"name":"hostile__echo","arguments":{"b":1,"a":"x \u00e9"}}`), usualRequest, true},
	{toolsCallBody(`12`, `{"name":"hostile__echo","arguments":{"html":"<b>&amp;</b>","ls":"a\u2028b","ctl":"\u001b[31m"}}`), usualRequest, true},
	{toolsCallBody(`13`, `{ "name" : "hostile__echo" , "arguments" : { "a" : [ 1 , 2.50 , 1e3 ] } }`), usualRequest, true},
	{toolsCallBody(`"s-1"`, `{"name":"hostile__echo"}`), usualRequest, true},
	{toolsCallBody(`-4`, `{"name":"hostile__echo","arguments":null}`), usualRequest, true},
	{toolsCallBody(`3`, `{"name":"hostile__headers","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`4`, `{"name":"nope__x","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`5`, `{"name":"hostile__sleep","arguments":{"ms":"soon"}}`), usualRequest, true},
	{toolsCallBody(`6`, `{"name":"hostile__fail","arguments":{"message":"no"}}`), usualRequest, true},
	{toolsCallBody(`7`, `{"name":"hostile__good_output","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`8`, `{"name":"hostile__meta","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`), usualRequest, true},
	// cmd/toolgate: TestFastPathLeavesTheRestToMCPGo
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"progressToken":"p1"}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), samplingClient, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), rootsClient, true},
	{toolsCallBody(`1.5`, `{"name":"hostile__echo","arguments":{"x":1}}`), usualRequest, false},
	{toolsCallBody(`"a\u0041"`, `{"name":"hostile__echo","arguments":{"x":1}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), noVersionHeader, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), unknownVersion, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), textContent, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), unknownSession, false},
	{`[` + toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`) + `]`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"task":{"ttl":1000}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), dnsRebound, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hostile__echo","arguments":{"x":1}},"result":{}}`, usualRequest, false},
	{toolsCallBody(`"<a&b>"`, `{"name":"hostile__echo","arguments":{"x":1}}`), usualRequest, false},
	{toolsCallBody(`"été"`, `{"name":"hostile__echo","arguments":{"x":1}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`), otherPrincipal, false},
	// proxy: TestPlainID's ids
	{toolsCallBody(`0`, `{"name":"hostile__echo"}`), usualRequest, true},
	{toolsCallBody(`123456789012345`, `{"name":"hostile__echo"}`), usualRequest, true},
	{toolsCallBody(`""`, `{"name":"hostile__echo"}`), usualRequest, true},
	{toolsCallBody(`"a-1 b"`, `{"name":"hostile__echo"}`), usualRequest, true},
	{toolsCallBody(`1234567890123456`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`1e3`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`01`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`-0`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`"a\"b"`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`null`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`{}`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`[1]`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`true`, `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody("\"\u2028\"", `{"name":"hostile__echo"}`), usualRequest, false},
	{toolsCallBody(`"tab`+"\t"+`"`, `{"name":"hostile__echo"}`), usualRequest, false},
	// proxy: fastdecode_test.go's bodies
	{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ping 1"}}}`, usualRequest, true},
	{` { "method" : "tools/call" , "params" : { "arguments" : [1, {"a": "}\"]"}], "name" : "x" } , "id" : "r-1" , "jsonrpc" : "2.0" } ` + "\n", usualRequest, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"x":"caf\u00e9 ☕"}}}`, usualRequest, true},
	{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}`, usualRequest, false},
	{`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"n"}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"n"}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":1}}} x`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","taſK":{}}}`, usualRequest, false},
	{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"n\",\"arguments\":\"\xff\u2028\"}}", usualRequest, true},
	{"\ufeff" + toolsCallBody(`1`, `{"name":"n"}`), usualRequest, false},
	// the allow-list's edges
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=1","io.toolgate/idempotency-key":"k-1"}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.toolgate/idempotency-key":""}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.toolgate/idempotency-key":7}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.toolgate/idempotency-key":"caf\u00e9"}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"x-vendor":"1"}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.toolgate/requested-name":"other"}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"_meta":null}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"extra":true}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{},"inputResponses":{}}`), usualRequest, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"n":1E400}}`), usualRequest, false}, // mcp-go cannot decode it into a float64
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"n":[1e308,-2.5E-400]}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"n":123456789012345678901234567890}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"toolgate:unresolved","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"nope__x","arguments":{},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"nope__x","arguments":{},"_meta":{"io.toolgate/idempotency-key":"k"}}`), otherPrincipal, false},
	{toolsCallBody(`1`, `{"name":"","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{}}`), modernVersion, false},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{}}`), olderVersion, true},
	{toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{}}`), jsonWithCharset, true},
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hostile__echo"},"extra":1}`, usualRequest, false},
	{`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"hostile__echo"}}`, usualRequest, false},
	{`{"id":1,"method":"tools/call","params":{"name":"hostile__echo"}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"hostile__echo"}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, usualRequest, false},
	// progress tokens: the chain's progress reaches the client before the answer
	{toolsCallBody(`1`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":"p-1 <&>"}}`), usualRequest, true},
	{toolsCallBody(`"c"`, `{"name":"hostile__progress","_meta":{"progressToken":42,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`), usualRequest, true},
	{toolsCallBody(`2`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":-123456789012345}}`), usualRequest, true},
	{toolsCallBody(`3`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":""}}`), usualRequest, true},
	{toolsCallBody(`4`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":1.5}}`), usualRequest, false},
	{toolsCallBody(`5`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":1e2}}`), usualRequest, false},
	{toolsCallBody(`6`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":null}}`), usualRequest, false},
	{toolsCallBody(`7`, `{"name":"hostile__progress","arguments":{},"_meta":{"progressToken":"\u00e9"}}`), usualRequest, false},
	{toolsCallBody(`8`, `{"name":"hostile__progress","arguments":{}}`), usualRequest, true},
	{toolsCallBody(`9`, `{"name":"nope__x","arguments":{},"_meta":{"progressToken":9}}`), usualRequest, true},
	// a client's responses: none answers a request of a fast call's, so all go to mcp-go
	{`{"jsonrpc":"2.0","id":"tg-1","result":{"model":"m","role":"assistant","content":{"type":"text","text":"x"}}}`, samplingClient, false},
	{`{"jsonrpc":"2.0","id":"tg-1","error":{"code":-1,"message":"no"}}`, samplingClient, false},
	{`{"jsonrpc":"2.0","id":"tg-1","result":{}}`, usualRequest, false},
	{`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`, rootsClient, false},
}

func toolsCallBody(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// callEcho is the chain of the differential test: it records every Call
// and answers from it, with the shapes the real chain gives (an envelope as
// raw structured content, a tool error) and a few the fast path leaves to
// encoding/json (a map, a result with _meta).
type callEcho struct {
	mu    sync.Mutex
	calls []Call
}

func (e *callEcho) Handle(_ context.Context, call Call) *mcp.CallToolResult {
	e.mu.Lock()
	e.calls = append(e.calls, call)
	e.mu.Unlock()
	if call.Name == "hostile__progress" && call.Progress != nil {
		total := 100.0
		call.Progress(upstreams.Progress{Progress: 0, Total: &total, Message: "starting <&>"})
		call.Progress(upstreams.Progress{Progress: 50, Total: &total})
		call.Progress(upstreams.Progress{Progress: 100, Message: "done"})
	}
	args := call.Args
	if len(args) == 0 {
		args = json.RawMessage(`null`)
	}
	name, _ := json.Marshal(call.Name)
	key, _ := json.Marshal(call.IdempotencyKey)
	trace, _ := json.Marshal(call.TraceMeta)
	env := fmt.Sprintf(`{"ok":true, "data": %s,"tool":%s,"key":%s,"trace":%s,"progress":%t}`, args, name, key, trace, call.Progress != nil)
	res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(args))}, StructuredContent: json.RawMessage(env)}
	switch call.Name {
	case "hostile__fail":
		res.IsError = true
	case "hostile__good_output":
		res.StructuredContent = map[string]any{"ok": true, "args": string(args)}
	case "hostile__meta":
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"x": 1}}
	}
	return res
}

// take returns the calls recorded since the last take.
func (e *callEcho) take() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	calls := e.calls
	e.calls = nil
	return calls
}

type allowAll struct{}

func (allowAll) Visible(authz.Subject, string) bool            { return true }
func (allowAll) VisibleAct(authz.Subject, string, string) bool { return true }
func (allowAll) Decide(authz.Request) authz.Decision           { return authz.Decision{Allowed: true} }
func (allowAll) RolesOf(authz.Subject) []string                { return nil }
func (allowAll) CheckScopes(authz.Request) authz.ScopeCheck    { return authz.ScopeCheck{} }

// bearerAuth: "Bearer <name>" is the principal name.
type bearerAuth struct{}

func (bearerAuth) Authenticate(r *http.Request) (authz.Subject, error) {
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || name == "" {
		return authz.Subject{}, errors.New("no credential")
	}
	return authz.Subject{Principal: name}, nil
}

// differential is a server with two endpoints, the fast path on and off.
type differential struct {
	echo       *callEcho
	fast, slow *HTTPEndpoint
}

func newDifferential(tb testing.TB) *differential {
	tb.Helper()
	servers := []upstreams.Server{{Name: "hostile", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "hostile__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
		MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan}}
	var listed []upstreams.Listed
	for _, name := range []string{"echo", "headers", "sleep", "fail", "good_output", "meta", "log", "progress"} {
		listed = append(listed, upstreams.Listed{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	cat, err := upstreams.Build(servers, map[string][]upstreams.Listed{"hostile": listed}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	d := &differential{echo: &callEcho{}}
	srv := NewServer(Options{Calls: d.echo, Catalog: func() *upstreams.Catalog { return cat }, Policy: func() Policy { return allowAll{} }},
		"test", log)
	o := HTTPOptions{Auth: bearerAuth{}, MaxBodyBytes: 1 << 20, Log: log}
	d.fast = srv.HTTPHandler(o)
	o.NoFastPath = true
	d.slow = srv.HTTPHandler(o)
	tb.Cleanup(func() {
		_ = d.fast.Shutdown(context.Background())
		_ = d.slow.Shutdown(context.Background())
	})
	return d
}

// differentialAnswer is what a client sees of an answer.
type differentialAnswer struct {
	status int
	header http.Header
	body   string
}

// send posts body on a new session of endpoint h opened as v says, and
// ends the session after.
func (d *differential) send(tb testing.TB, h http.Handler, body []byte, v fastVariant, hdr map[string]string) (differentialAnswer, []Call) {
	tb.Helper()
	caps := `{}`
	switch v {
	case samplingClient:
		caps = `{"sampling":{}}`
	case rootsClient:
		caps = `{"roots":{"listChanged":true}}`
	}
	init := serve(h, http.MethodPost, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+
		`,"clientInfo":{"name":"fuzz","version":"1"}}}`, nil)
	sid := init.Header().Get("Mcp-Session-Id")
	if sid == "" {
		tb.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	defer serve(h, http.MethodDelete, sid, "", nil)
	if a := serve(h, http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); a.Code != http.StatusAccepted {
		tb.Fatalf("notifications/initialized: %d %s", a.Code, a.Body)
	}
	awaitForwarders(tb)
	d.echo.take()
	hdr = maps.Clone(hdr)
	if hdr == nil {
		hdr = map[string]string{}
	}
	switch v {
	case noVersionHeader:
		hdr["MCP-Protocol-Version"] = ""
	case unknownVersion:
		hdr["MCP-Protocol-Version"] = "1999-01-01"
	case modernVersion:
		hdr["MCP-Protocol-Version"] = mcp.ProtocolVersion20260728
	case olderVersion:
		hdr["MCP-Protocol-Version"] = "2025-03-26"
	case textContent:
		hdr["Content-Type"] = "text/plain"
	case jsonWithCharset:
		hdr["Content-Type"] = "application/json; charset=utf-8"
	case unknownSession:
		hdr["Mcp-Session-Id"] = "mcp-session-00000000-0000-0000-0000-000000000000"
	case dnsRebound:
		hdr["Host"] = "evil.example:80"
	case otherPrincipal:
		hdr["Authorization"] = "Bearer bob"
	case modernClient:
		var named struct {
			Params struct{ Name string } `json:"params"`
		}
		_ = json.Unmarshal(body, &named)
		for k, v := range modernHeaders(named.Params.Name) {
			if _, set := hdr[k]; !set && k != "Mcp-Session-Id" { // a session id means nothing to a 2026-07-28 request: keep it
				hdr[k] = v
			}
		}
	}
	w := serve(h, http.MethodPost, sid, string(body), hdr)
	if id := w.Header().Get("Mcp-Session-Id"); id != "" { // an initialize in the body opened one more
		serve(h, http.MethodDelete, id, "", nil)
	}
	header := w.Header().Clone()
	header.Del("Mcp-Session-Id")
	answer := w.Body.String()
	if header.Get("Content-Type") == "text/event-stream" {
		answer = withoutEventIDs(answer)
	}
	calls := d.echo.take()
	for i := range calls {
		if calls[i].Session == sid {
			calls[i].Session = "<session>"
		}
	}
	return differentialAnswer{w.Code, header, answer}, calls
}

// awaitForwarders waits until no notification forwarder of mcp-go's
// handlePost runs. mcp-go v1.2.1 answers a POSTed notification without
// waiting for the forwarder it started for it, which goes on taking the
// session's notifications for a moment and, seeing its request done,
// records them on that request's stream, where no one reads them: the
// next call's notifications could go there, and mcp-go's answer would
// differ from run to run. (The fast path's notifications never pass
// through the session's channel.)
func awaitForwarders(tb testing.TB) {
	buf := make([]byte, 1<<20)
	for range 2000 {
		if !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*StreamableHTTPServer).handlePost.func")) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	tb.Fatal("mcp-go's notification forwarders did not end")
}

// withoutEventIDs drops an event stream's id lines: mcp-go, with an event
// store, numbers its events so that a stream can be resumed, the fast path
// does not (its streams hold one call's notifications and answer).
func withoutEventIDs(stream string) string {
	var b strings.Builder
	for line := range strings.Lines(stream) {
		if !strings.HasPrefix(line, "id: ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// withoutProgress drops an event stream's progress notifications.
func withoutProgress(stream string) string {
	events := strings.SplitAfter(stream, "\n\n")
	kept := events[:0]
	for _, e := range events {
		if !strings.Contains(e, `"method":"notifications/progress"`) {
			kept = append(kept, e)
		}
	}
	return strings.Join(kept, "")
}

// serve runs one request through h, as alice on a loopback listener
// unless hdr says otherwise ("" deletes a header).
func serve(h http.Handler, method, sid, body string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://127.0.0.1:8080/mcp", strings.NewReader(body))
	r.Host = "127.0.0.1:8080"
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	h2 := map[string]string{"Authorization": "Bearer alice", "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	for k, v := range hdr {
		h2[k] = v
	}
	for k, v := range h2 {
		switch {
		case k == "Host":
			r.Host = v
		case v != "":
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// check sends one request through both endpoints and compares what the
// client and the chain see; it reports whether the fast path took it. hdr
// sets headers first (the variant may override them).
func (d *differential) check(t *testing.T, body []byte, v fastVariant, hdr map[string]string) bool {
	t.Helper()
	before := d.fast.FastCalls()
	got, gotCalls := d.send(t, d.fast, body, v, hdr)
	taken := d.fast.FastCalls() != before
	want, wantCalls := d.send(t, d.slow, body, v, hdr)
	if v == modernClient {
		// mcp-go's handler drops a 2026-07-28 call's progress now and then
		// (trap 5; TestModernProgressTravelsOnTheCallStream holds the fast
		// path to all of it): the rest must be the same.
		got.body, want.body = withoutProgress(got.body), withoutProgress(want.body)
	}
	if got.status != want.status || !reflect.DeepEqual(got.header, want.header) || got.body != want.body {
		t.Fatalf("%q (variant %d, fast path took it: %v):\nfast path answered %d %v\n%q\nmcp-go answered %d %v\n%q",
			body, v, taken, got.status, got.header, got.body, want.status, want.header, want.body)
	}
	if !sameCalls(gotCalls, wantCalls) {
		t.Fatalf("%q (variant %d, fast path took it: %v): the chain got\n%+v\nfrom the fast path, and\n%+v\nfrom mcp-go",
			body, v, taken, gotCalls, wantCalls)
	}
	return taken
}

// sameCalls compares calls field by field; of Progress, only whether
// there is one.
func sameCalls(a, b []Call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if (x.Progress == nil) != (y.Progress == nil) {
			return false
		}
		x.Progress, y.Progress = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// Every request shape of the fast path's tests gets the same answer and
// the same Call on both paths, and the fast path takes exactly those its
// contract lists.
func TestFastPathMatchesMCPGo(t *testing.T) {
	d := newDifferential(t)
	for _, s := range fastSeeds {
		if taken := d.check(t, []byte(s.body), s.variant, nil); taken != s.taken {
			t.Errorf("%s (variant %d): the fast path took it: %v, want %v", s.body, s.variant, taken, s.taken)
		}
	}
}

// FuzzFastPathMatchesMCPGo sends generated requests through both paths:
// a body, a variant, and a Content-Type and MCP-Protocol-Version of the
// fuzzer's when not empty.
//
//	go test ./proxy -run XXX -fuzz FuzzFastPathMatchesMCPGo
func FuzzFastPathMatchesMCPGo(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s.body), uint8(s.variant), "", "")
	}
	for _, s := range modernSeeds {
		if s.hdr == nil {
			f.Add([]byte(s.body), uint8(modernClient), "", "")
		}
	}
	usual := toolsCallBody(`1`, `{"name":"hostile__echo","arguments":{"x":1}}`)
	for _, h := range [][2]string{{"application/json; charset=utf-8", ""}, {"Application/JSON", ""}, {"application/json;", ""},
		{"", "2025-06-18"}, {"", "2024-11-05"}, {"", "2025-11-25 "}, {"", "2026-07-28"}} {
		f.Add([]byte(usual), uint8(usualRequest), h[0], h[1])
	}
	d := newDifferential(f)
	f.Fuzz(func(t *testing.T, body []byte, v uint8, contentType, version string) {
		hdr := map[string]string{}
		if contentType != "" {
			hdr["Content-Type"] = contentType
		}
		if version != "" {
			hdr["MCP-Protocol-Version"] = version
		}
		d.check(t, body, fastVariant(v%uint8(fastVariants)), hdr)
	})
}
