package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/upstreams"
)

// fakePolicy allows exactly the listed principal/object pairs; denyArgs
// denies a call whose arguments contain it (a stand-in for a condition).
type fakePolicy struct {
	allow    map[string]bool // "principal object"
	denyArgs string
	err      error
}

func (f fakePolicy) Visible(s authz.Subject, obj string) bool { return f.allow[s.Principal+" "+obj] }

func (f fakePolicy) Decide(req authz.Request) authz.Decision {
	if f.err != nil {
		return authz.Decision{Internal: f.err}
	}
	if f.denyArgs != "" && strings.Contains(string(req.Args), f.denyArgs) {
		return authz.Decision{Rule: "policy.csv:9"}
	}
	return authz.Decision{Allowed: req.Action == authz.ActCall && f.allow[req.Subject.Principal+" "+req.Object], Rule: "policy.csv:1"}
}

// fakeUpstreams answers every call with fn.
type fakeUpstreams struct {
	fn    func(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error)
	calls int
	got   []byte
}

func (f *fakeUpstreams) CallToolProgress(ctx context.Context, server, tool string, args json.RawMessage, _ func(upstreams.Progress)) (json.RawMessage, error) {
	f.calls++
	f.got = append([]byte(nil), args...)
	return f.fn(ctx, server, tool, args)
}

func answer(raw string) func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(raw), nil
	}
}

func failWith(err error) func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	return func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) { return nil, err }
}

const (
	inputSchema  = `{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}`
	outputSchema = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`
)

// testCatalog has server "orders" (tools get, typed) and server "down"
// (not connected).
func testCatalog(t *testing.T) *upstreams.Catalog {
	t.Helper()
	cfg := &config.Config{Servers: map[string]*config.Server{
		"orders": {Name: "orders", Transport: config.TransportStdio, Command: "x",
			Tools: map[string]*config.Tool{"small": {MaxResultBytes: 2048}}},
		"down": {Name: "down", Transport: config.TransportStdio, Command: "x"},
	}}
	listed := map[string][]upstreams.Listed{"orders": {
		{Name: "get", InputSchema: json.RawMessage(inputSchema)},
		{Name: "typed", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(outputSchema)},
		{Name: "small", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}}
	cat, err := upstreams.Build(cfg, listed, map[string]string{"down": "exited"})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func newTestPipeline(t *testing.T, up *fakeUpstreams) *Pipeline {
	cat := testCatalog(t)
	return &Pipeline{
		Catalog: func() *upstreams.Catalog { return cat },
		Policy: fakePolicy{allow: map[string]bool{
			"alice orders/get": true, "alice orders/typed": true, "alice orders/small": true, "alice down/anything": true,
		}},
		Upstreams: up,
	}
}

// envelopeOf decodes the structured answer.
func envelopeOf(t *testing.T, res *mcp.CallToolResult) envelope.Envelope {
	t.Helper()
	var env envelope.Envelope
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &env); err != nil {
		t.Fatalf("structuredContent is not an envelope: %v", err)
	}
	if env.OK == res.IsError {
		t.Fatalf("ok=%v but isError=%v", env.OK, res.IsError)
	}
	return env
}

func codeOf(env envelope.Envelope) string {
	if env.ErrorCode == nil {
		return ""
	}
	return string(*env.ErrorCode)
}

var (
	alice = authz.Subject{Principal: "alice"}
	bob   = authz.Subject{Principal: "bob"}
)

const okText = `{"content":[{"type":"text","text":"{\"found\":true}"}]}`

func TestPipelineErrorCodes(t *testing.T) {
	cases := []struct {
		name      string
		call      Call
		upstream  func(context.Context, string, string, json.RawMessage) (json.RawMessage, error)
		wantCode  string
		wantSent  bool
		wantRetry bool
	}{
		{"ok", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}, answer(okText), "", true, false},
		{"unknown tool", Call{Subject: alice, Name: "orders__nope", Args: []byte(`{}`)}, answer(okText), "tool_not_found", false, false},
		{"denied", Call{Subject: bob, Name: "orders__get", Args: []byte(`{"order_id":1}`)}, answer(okText), "tool_not_allowed", false, false},
		{"bad arguments", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":"x"}`)}, answer(okText), "invalid_arguments", false, false},
		{"arguments not an object", Call{Subject: alice, Name: "orders__get", Args: []byte(`[1]`)}, answer(okText), "invalid_arguments", false, false},
		{"server down", Call{Subject: alice, Name: "down__anything", Args: []byte(`{}`)}, answer(okText), "upstream_unavailable", false, true},
		{"never sent", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			failWith(&upstreams.CallError{Where: upstreams.NotSent, Err: upstreams.ErrNotConnected}), "upstream_unavailable", true, true},
		{"transport broke", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			failWith(&upstreams.CallError{Where: upstreams.Sent, Err: transport.ErrTransportClosed}), "upstream_error", true, false},
		{"json-rpc error", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			failWith(&upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Code: -32603, Message: "db down"}}), "tool_failed", true, false},
		{"oversize while reading", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			failWith(&upstreams.CallError{Where: upstreams.Answered, Oversize: true}), "result_too_large", true, false},
		{"tool isError", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			answer(`{"content":[{"type":"text","text":"nope"}],"isError":true}`), "tool_failed", true, false},
		{"garbage result", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			answer(`{"content":42}`), "upstream_error", true, false},
		{"unknown content type", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			answer(`{"content":[{"type":"hologram"}]}`), "upstream_error", true, false},
		{"output schema violated", Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)},
			answer(`{"content":[],"structuredContent":{"value":"x"}}`), "invalid_result", true, false},
		{"output schema but no structured content", Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)},
			answer(`{"content":[{"type":"text","text":"7"}]}`), "invalid_result", true, false},
		{"over the per-tool cap", Call{Subject: alice, Name: "orders__small", Args: []byte(`{}`)},
			answer(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 3000) + `"}]}`), "result_too_large", true, false},
		{"panic becomes internal_error", Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) { panic("bug") }, "internal_error", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := &fakeUpstreams{fn: c.upstream}
			env := envelopeOf(t, newTestPipeline(t, up).Handle(context.Background(), c.call))
			if got := codeOf(env); got != c.wantCode {
				t.Fatalf("error_code %q, want %q (message %v)", got, c.wantCode, env.Message)
			}
			if (up.calls > 0) != c.wantSent {
				t.Errorf("upstream called %d times, want sent=%v", up.calls, c.wantSent)
			}
			if env.Retryable != c.wantRetry {
				t.Errorf("retryable %v, want %v", env.Retryable, c.wantRetry)
			}
		})
	}
}

func TestExecuteTimeoutAndCancel(t *testing.T) {
	blocks := func(ctx context.Context, _, _ string, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, &upstreams.CallError{Where: upstreams.Sent, Err: ctx.Err()}
	}
	call := Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
	t.Run("deadline", func(t *testing.T) {
		p := newTestPipeline(t, &fakeUpstreams{fn: blocks})
		cat := p.Catalog()
		tool, _ := cat.Resolve("orders__get")
		tool.Timeout = time.Millisecond // the fake blocks until the deadline: no sleep involved
		env := envelopeOf(t, p.Handle(context.Background(), call))
		if codeOf(env) != "tool_timeout" || env.Retryable {
			t.Fatalf("got %s retryable=%v, want tool_timeout not retryable (tool is not retry-safe)", codeOf(env), env.Retryable)
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		env := envelopeOf(t, newTestPipeline(t, &fakeUpstreams{fn: blocks}).Handle(ctx, call))
		if codeOf(env) != "upstream_error" {
			t.Fatalf("got %s, want upstream_error for a cancelled call", codeOf(env))
		}
	})
}

func TestArgumentsForwardedExactly(t *testing.T) {
	up := &fakeUpstreams{fn: answer(okText)}
	args := []byte(`{ "order_id" : 9007199254740993 }`)
	newTestPipeline(t, up).Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: args})
	if string(up.got) != string(args) {
		t.Fatalf("upstream got %s, want the exact bytes %s", up.got, args)
	}
}

// Argument conditions are decided after validation, on the arguments.
func TestConditionsDecidedOnArguments(t *testing.T) {
	up := &fakeUpstreams{fn: answer(okText)}
	p := newTestPipeline(t, up)
	p.Policy = fakePolicy{allow: map[string]bool{"alice orders/get": true}, denyArgs: "666"}
	if env := envelopeOf(t, p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})); !env.OK {
		t.Fatalf("allowed arguments denied: %v", env)
	}
	env := envelopeOf(t, p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":666}`)}))
	if codeOf(env) != "tool_not_allowed" || up.calls != 1 {
		t.Fatalf("condition not applied: %s, upstream calls %d", codeOf(env), up.calls)
	}
}

func TestPolicyErrorNeverReachesClient(t *testing.T) {
	p := newTestPipeline(t, &fakeUpstreams{fn: answer(okText)})
	p.Policy = fakePolicy{allow: map[string]bool{"alice orders/get": true}, err: errors.New("goroutine 7 [running]: /etc/toolgate/policy.csv")}
	res := p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	env := envelopeOf(t, res)
	body, _ := json.Marshal(res)
	if codeOf(env) != "tool_not_allowed" || strings.Contains(string(body), "goroutine") || strings.Contains(string(body), "policy.csv") {
		t.Fatalf("policy error leaked or did not deny: %s", body)
	}
}

func TestSuccessData(t *testing.T) {
	cases := []struct {
		name, tool, raw, want string
	}{
		{"json text decoded", "orders__get", okText, `{"found":true}`},
		{"plain text as string", "orders__get", `{"content":[{"type":"text","text":"hello"}]}`, `"hello"`},
		{"no content", "orders__get", `{"content":[]}`, `null`},
		{"structured wins", "orders__typed", `{"content":[{"type":"text","text":"x"}],"structuredContent":{"value":9007199254740993}}`, `{"value":9007199254740993}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := `{"order_id":1}`
			if c.tool == "orders__typed" {
				args = `{}`
			}
			env := envelopeOf(t, newTestPipeline(t, &fakeUpstreams{fn: answer(c.raw)}).Handle(context.Background(),
				Call{Subject: alice, Name: c.tool, Args: []byte(args)}))
			if !env.OK || string(env.Data) != c.want {
				t.Fatalf("data %s (ok=%v), want %s", env.Data, env.OK, c.want)
			}
		})
	}
}

func TestUpstreamMetaAndControlCharsDropped(t *testing.T) {
	raw := `{"_meta":{"secret":"x"},"content":[{"type":"text","text":"a\u001b[31mb\u0000c\u202ed","_meta":{"k":"v"}}]}`
	res := newTestPipeline(t, &fakeUpstreams{fn: answer(raw)}).Handle(context.Background(),
		Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	body, _ := json.Marshal(res)
	if strings.Contains(string(body), "secret") || strings.Contains(string(body), `"k"`) {
		t.Errorf("upstream _meta leaked: %s", body)
	}
	if text := res.Content[0].(mcp.TextContent).Text; text != "abcd" {
		t.Errorf("text %q, want %q", text, "abcd")
	}
}

func TestToolFailedMessageIsSanitisedAndBounded(t *testing.T) {
	long := strings.Repeat("é", 2000)
	raw := `{"content":[{"type":"text","text":"boom \u001b[31mred\u001b[0m\u0007 ` + long + `"}],"isError":true}`
	env := envelopeOf(t, newTestPipeline(t, &fakeUpstreams{fn: answer(raw)}).Handle(context.Background(),
		Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	msg := *env.Message
	if !strings.HasPrefix(msg, "boom red ") || strings.ContainsAny(msg, "\x1b\x07") || len(msg) > maxToolMessage+len("…") {
		t.Fatalf("message not sanitised/bounded: %.60q… (%d bytes)", msg, len(msg))
	}
}

// countingStore is a hot-reloaded policy that counts how often a call
// reads it.
type countingStore struct {
	fakePolicy
	reads int
	cur   *authz.Policy
}

func (c *countingStore) Current() *authz.Policy { c.reads++; return c.cur }

// One call is decided by one policy version: a hot-reloaded policy is read
// once per call, not once per stage.
func TestOnePolicySnapshotPerCall(t *testing.T) {
	cur, err := authz.LoadPolicy("../model.conf", "../policy.csv", authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{cur: cur}
	p := newTestPipeline(t, &fakeUpstreams{fn: answer(okText)})
	p.Policy = store
	p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	if store.reads != 1 {
		t.Fatalf("the policy was read %d times for one call", store.reads)
	}
}
