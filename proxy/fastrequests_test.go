package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/upstreams"
)

// askingChain stands in for an upstream that asks the client for sampling
// during its call: it relays the request through the call's relay, as an
// upstream connection does, and answers with what the client said.
type askingChain struct{}

func (askingChain) Handle(ctx context.Context, call Call) *mcp.CallToolResult {
	r := relayIn(ctx)
	if r == nil {
		return mcp.NewToolResultError("no relay")
	}
	res, err := r.Request(context.Background(), string(mcp.MethodSamplingCreateMessage),
		json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hello?"}}],"maxTokens":5}`))
	if err != nil {
		return mcp.NewToolResultError("asked: " + err.Error())
	}
	return mcp.NewToolResultText("client said " + string(res))
}

// relayIn is the relay upstreams.WithRelay put in ctx, found by walking
// the context chain (its key is private to upstreams; an upstream
// connection finds it there).
func relayIn(ctx context.Context) upstreams.Relay {
	for c := any(ctx); c != nil; {
		v := reflect.ValueOf(c)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil
		}
		s := v.Elem()
		if f := s.FieldByName("val"); f.IsValid() && f.CanAddr() {
			if r, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(upstreams.Relay); ok {
				return r
			}
		}
		parent := s.FieldByName("Context")
		if !parent.IsValid() || !parent.CanInterface() {
			return nil
		}
		c = parent.Interface()
	}
	return nil
}

// newAskingEndpoint is an HTTP endpoint (fast path on) whose one tool,
// hostile__ask, asks the client for sampling.
func newAskingEndpoint(t *testing.T) *HTTPEndpoint {
	t.Helper()
	servers := []upstreams.Server{{Name: "hostile", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "hostile__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
		MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan}}
	cat, err := upstreams.Build(servers, map[string][]upstreams.Listed{"hostile": {{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := NewServer(Options{Calls: askingChain{}, Catalog: func() *upstreams.Catalog { return cat }, Policy: func() Policy { return allowAll{} }}, "test", log)
	e := srv.HTTPHandler(HTTPOptions{Auth: bearerAuth{}, MaxBodyBytes: 1 << 20, Log: log})
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

// askingCall is a call in flight whose response is read event by event.
type askingCall struct {
	resp   *http.Response
	events *bufio.Scanner
	cancel context.CancelFunc
}

func (c *httpClient) startCall(body string) *askingCall {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.doContext(ctx, http.MethodPost, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		c.t.Fatalf("call: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return &askingCall{resp: resp, events: bufio.NewScanner(resp.Body), cancel: cancel}
}

// next is the next event's data.
func (a *askingCall) next(t *testing.T) string {
	t.Helper()
	for a.events.Scan() {
		if data, ok := strings.CutPrefix(a.events.Text(), "data: "); ok {
			return data
		}
	}
	t.Fatalf("the call's stream ended: %v", a.events.Err())
	return ""
}

func (a *askingCall) close() {
	a.cancel()
	_, _ = io.Copy(io.Discard, a.resp.Body)
	a.resp.Body.Close()
}

// askedID is the id of the sampling request event.
func askedID(t *testing.T, event string) string {
	t.Helper()
	var req struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(event), &req); err != nil || req.Method != "sampling/createMessage" || len(req.Params.Messages) != 1 {
		t.Fatalf("first event %s, want the sampling request (%v)", event, err)
	}
	id, ok := req.ID.(string)
	if !ok || !strings.HasPrefix(id, askPrefix) {
		t.Fatalf("request id %v, want a string of toolgate's", req.ID)
	}
	return id
}

const sampledAnswer = `"result":{"model":"m","role":"assistant","content":{"type":"text","text":"sampled 42"}}}`

// A fast call whose upstream asks the client for sampling writes the
// request on the call's own response; the client's answer, POSTed on the
// session, is delivered to it (202, as mcp-go acknowledges a response) and
// the upstream gets it; the call then answers on the same stream. The same
// for a client that sends no MCP-Protocol-Version header.
func TestFastCallAsksOnItsOwnStream(t *testing.T) {
	for _, noVersion := range []bool{false, true} {
		t.Run(fmt.Sprintf("noVersion=%v", noVersion), func(t *testing.T) { fastCallAsks(t, noVersion) })
	}
}

func fastCallAsks(t *testing.T, noVersion bool) {
	e := newAskingEndpoint(t)
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := &httpClient{t: t, url: srv.URL + "/mcp", noVersion: noVersion}
	c.open(`{"sampling":{}}`)
	call := c.startCall(toolsCallBody(`5`, `{"name":"hostile__ask","arguments":{}}`))
	defer call.close()
	id := askedID(t, call.next(t))
	if e.FastCalls() != 1 {
		t.Fatal("the fast path did not take the call")
	}
	if resp := c.post(`{"jsonrpc":"2.0","id":"` + id + `",` + sampledAnswer); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer was refused: %s", resp.Status)
	}
	answer := call.next(t)
	if !strings.Contains(answer, `"id":5,"result"`) || !strings.Contains(answer, `sampled 42`) {
		t.Fatalf("the call's answer %s lacks what the client said", answer)
	}
	if n := e.fast.asks.pending(); n != 0 {
		t.Fatalf("%d requests still wait", n)
	}
}

// A response no fast call waits for goes to mcp-go as it is: for an id
// of toolgate's form that no call of this session asked (another
// session's request among them), mcp-go answers as it does for any
// response it has no request for; the request stays pending for its own
// session, and another principal cannot even name that session.
func TestFastCallAnswersOnlyFromItsSession(t *testing.T) {
	e := newAskingEndpoint(t)
	srv := httptest.NewServer(e)
	defer srv.Close()
	a := &httpClient{t: t, url: srv.URL + "/mcp"}
	a.open(`{"sampling":{}}`)
	b := &httpClient{t: t, url: srv.URL + "/mcp"}
	b.open(`{"sampling":{}}`)
	call := a.startCall(toolsCallBody(`5`, `{"name":"hostile__ask","arguments":{}}`))
	defer call.close()
	id := askedID(t, call.next(t))
	answer := `{"jsonrpc":"2.0","id":"` + id + `",` + sampledAnswer

	if resp := b.post(answer); resp.StatusCode == http.StatusAccepted {
		t.Fatal("an answer on another session was delivered")
	}
	unknown := `{"jsonrpc":"2.0","id":"` + askPrefix + `999999",` + sampledAnswer
	if resp := a.post(unknown); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a response to no request of toolgate's: %s, want mcp-go's 400", resp.Status)
	}
	bob := &httpClient{t: t, url: srv.URL + "/mcp", sid: a.sid}
	if resp := bob.postAs("bob", answer); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another principal's answer on alice's session: %s, want 404", resp.Status)
	}
	if n := e.fast.asks.pending(); n != 1 {
		t.Fatalf("%d requests wait, want the call's one", n)
	}
	if resp := a.post(answer); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer on the call's session: %s", resp.Status)
	}
	if got := call.next(t); !strings.Contains(got, `sampled 42`) {
		t.Fatalf("the call's answer %s", got)
	}
}

// A call that ends while its client has not answered (the client went
// away) leaves nothing waiting.
func TestFastCallEndingDropsItsRequest(t *testing.T) {
	e := newAskingEndpoint(t)
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := &httpClient{t: t, url: srv.URL + "/mcp"}
	c.open(`{"sampling":{}}`)
	call := c.startCall(toolsCallBody(`5`, `{"name":"hostile__ask","arguments":{}}`))
	askedID(t, call.next(t))
	if n := e.fast.asks.pending(); n != 1 {
		t.Fatalf("%d requests wait, want 1", n)
	}
	call.close()
	deadline := time.Now().Add(5 * time.Second)
	for e.fast.asks.pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request still waits after its call ended")
		}
		time.Sleep(time.Millisecond)
	}
}

// The map of waiting requests is bounded: past the bound, the upstream
// gets an error at once.
func TestClientAsksAreBounded(t *testing.T) {
	var a clientAsks
	for i := range maxClientAsks {
		session := fmt.Sprint("s", i/maxSessionAsks) // sessions of maxSessionAsks each
		if !a.open(askKey{session, fmt.Sprint(i)}, make(chan clientAnswer, 1)) {
			t.Fatalf("refused at %d", i)
		}
	}
	if _, err := a.ask(t.Context(), &callStream{}, "fresh", "roots/list", nil); err != errAsksFull {
		t.Fatalf("past the bound: %v", err)
	}
}

// One session cannot take every slot: past maxSessionAsks of its own, its
// requests are refused while another session's still go through, and a
// closed request frees its slot.
func TestOneSessionCannotFillTheAsks(t *testing.T) {
	var a clientAsks
	for i := range maxSessionAsks {
		if !a.open(askKey{"greedy", fmt.Sprint(i)}, make(chan clientAnswer, 1)) {
			t.Fatalf("refused at %d", i)
		}
	}
	if a.open(askKey{"greedy", "more"}, make(chan clientAnswer, 1)) {
		t.Fatal("a session went past its share")
	}
	if !a.open(askKey{"other", "1"}, make(chan clientAnswer, 1)) {
		t.Fatal("another session was refused")
	}
	a.close(askKey{"greedy", "0"})
	a.close(askKey{"greedy", "0"}) // twice: counted once
	if !a.open(askKey{"greedy", "again"}, make(chan clientAnswer, 1)) || a.open(askKey{"greedy", "past"}, make(chan clientAnswer, 1)) {
		t.Fatal("a closed request's slot was not freed exactly once")
	}
}

// postAs posts body on c's session as principal.
func (c *httpClient) postAs(principal, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+principal)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
