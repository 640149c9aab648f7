package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/toolsets"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

var alice, bob = pipelinetest.Alice, pipelinetest.Bob

// Toolsets of the test catalog: a tool outside the call's toolset is not
// found, whatever the policy says.
var (
	typedOnly = &toolsets.Set{Name: "typed", Tools: []string{"orders/typed"}}
	getOnly   = &toolsets.Set{Name: "get", Tools: []string{"orders/get"}}
)

func TestPipelineErrorCodes(t *testing.T) {
	cases := []struct {
		name      string
		call      pipeline.Call
		upstream  func(context.Context, string, string, json.RawMessage) (json.RawMessage, error)
		wantCode  string
		wantSent  bool
		wantRetry bool
	}{
		{"ok", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}, pipelinetest.Answer(pipelinetest.OKText), "", true, false},
		{"unknown tool", pipeline.Call{Subject: alice, Name: "orders__nope", Args: []byte(`{}`)}, pipelinetest.Answer(pipelinetest.OKText), "tool_not_found", false, false},
		{"outside the toolset", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`), Toolset: typedOnly},
			pipelinetest.Answer(pipelinetest.OKText), "tool_not_found", false, false},
		{"in the toolset", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`), Toolset: getOnly},
			pipelinetest.Answer(pipelinetest.OKText), "", true, false},
		{"server down, outside the toolset", pipeline.Call{Subject: alice, Name: "down__anything", Args: []byte(`{}`), Toolset: getOnly},
			pipelinetest.Answer(pipelinetest.OKText), "tool_not_found", false, false},
		{"denied", pipeline.Call{Subject: bob, Name: "orders__get", Args: []byte(`{"order_id":1}`)}, pipelinetest.Answer(pipelinetest.OKText), "tool_not_allowed", false, false},
		{"bad arguments", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":"x"}`)}, pipelinetest.Answer(pipelinetest.OKText), "invalid_arguments", false, false},
		{"arguments not an object", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`[1]`)}, pipelinetest.Answer(pipelinetest.OKText), "invalid_arguments", false, false},
		{"server down", pipeline.Call{Subject: alice, Name: "down__anything", Args: []byte(`{}`)}, pipelinetest.Answer(pipelinetest.OKText), "upstream_unavailable", false, true},
		{"never sent", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.NotSent, Err: upstreams.ErrNotConnected}), "upstream_unavailable", true, true},
		{"transport broke", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Sent, Err: transport.ErrTransportClosed}), "upstream_error", true, false},
		{"json-rpc error", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Code: -32603, Message: "db down"}}), "tool_failed", true, false},
		{"oversize while reading", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Answered, Oversize: true}), "result_too_large", true, false},
		{"tool isError", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.Answer(`{"content":[{"type":"text","text":"nope"}],"isError":true}`), "tool_failed", true, false},
		{"garbage result", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.Answer(`{"content":42}`), "upstream_error", true, false},
		{"unknown content type", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			pipelinetest.Answer(`{"content":[{"type":"hologram"}]}`), "upstream_error", true, false},
		{"output schema violated", pipeline.Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)},
			pipelinetest.Answer(`{"content":[],"structuredContent":{"value":"x"}}`), "invalid_result", true, false},
		{"output schema but no structured content", pipeline.Call{Subject: alice, Name: "orders__typed", Args: []byte(`{}`)},
			pipelinetest.Answer(`{"content":[{"type":"text","text":"7"}]}`), "invalid_result", true, false},
		{"over the per-tool cap", pipeline.Call{Subject: alice, Name: "orders__small", Args: []byte(`{}`)},
			pipelinetest.Answer(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 3000) + `"}]}`), "result_too_large", true, false},
		{"panic becomes internal_error", pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)},
			func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) { panic("bug") }, "internal_error", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := &pipelinetest.Upstreams{Fn: c.upstream}
			env := pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, up).Handle(context.Background(), c.call))
			if got := pipelinetest.Code(env); got != c.wantCode {
				t.Fatalf("error_code %q, want %q (message %v)", got, c.wantCode, env.Message)
			}
			if (up.Calls() > 0) != c.wantSent {
				t.Errorf("upstream called %d times, want sent=%v", up.Calls(), c.wantSent)
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
	call := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
	t.Run("deadline", func(t *testing.T) {
		p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: blocks})
		cat := p.Catalog
		tool, _ := cat.Resolve("orders__get")
		tool.Timeout = time.Millisecond // the fake blocks until the deadline: no sleep involved
		env := pipelinetest.Envelope(t, p.Handle(context.Background(), call))
		if pipelinetest.Code(env) != "tool_timeout" || env.Retryable {
			t.Fatalf("got %s retryable=%v, want tool_timeout not retryable (tool is not retry-safe)", pipelinetest.Code(env), env.Retryable)
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		env := pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: blocks}).Handle(ctx, call))
		if pipelinetest.Code(env) != "upstream_error" {
			t.Fatalf("got %s, want upstream_error for a cancelled call", pipelinetest.Code(env))
		}
	})
}

func TestArgumentsForwardedExactly(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	args := []byte(`{ "order_id" : 9007199254740993 }`)
	pipelinetest.NewBuilder(t, up).Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: args})
	if string(up.Got()) != string(args) {
		t.Fatalf("upstream got %s, want the exact bytes %s", up.Got(), args)
	}
}

// Argument conditions are decided after validation, on the arguments.
func TestConditionsDecidedOnArguments(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	p := pipelinetest.NewBuilder(t, up)
	p.Policy = pipelinetest.Policy{Allow: map[string]bool{"alice orders/get": true}, DenyArgs: "666"}
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})); !env.OK {
		t.Fatalf("allowed arguments denied: %v", env)
	}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":666}`)}))
	if pipelinetest.Code(env) != "tool_not_allowed" || up.Calls() != 1 {
		t.Fatalf("condition not applied: %s, upstream calls %d", pipelinetest.Code(env), up.Calls())
	}
}

func TestPolicyErrorNeverReachesClient(t *testing.T) {
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.Policy = pipelinetest.Policy{Allow: map[string]bool{"alice orders/get": true}, Err: errors.New("goroutine 7 [running]: /etc/toolgate/policy.csv")}
	res := p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	env := pipelinetest.Envelope(t, res)
	body, _ := json.Marshal(res)
	if pipelinetest.Code(env) != "tool_not_allowed" || strings.Contains(string(body), "goroutine") || strings.Contains(string(body), "policy.csv") {
		t.Fatalf("policy error leaked or did not deny: %s", body)
	}
}

func TestSuccessData(t *testing.T) {
	cases := []struct {
		name, tool, raw, want string
	}{
		{"json text decoded", "orders__get", pipelinetest.OKText, `{"found":true}`},
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
			env := pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(c.raw)}).Handle(context.Background(),
				pipeline.Call{Subject: alice, Name: c.tool, Args: []byte(args)}))
			if !env.OK || string(env.Data) != c.want {
				t.Fatalf("data %s (ok=%v), want %s", env.Data, env.OK, c.want)
			}
		})
	}
}

func TestUpstreamMetaAndControlCharsDropped(t *testing.T) {
	raw := `{"_meta":{"secret":"x"},"content":[{"type":"text","text":"a\u001b[31mb\u0000c\u202ed","_meta":{"k":"v"}}]}`
	res := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)}).Handle(context.Background(),
		pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
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
	env := pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)}).Handle(context.Background(),
		pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	msg := *env.Message
	if !strings.HasPrefix(msg, "boom red ") || strings.ContainsAny(msg, "\x1b\x07") || len(msg) > pipeline.MaxToolMessage+len("…") {
		t.Fatalf("message not sanitised/bounded: %.60q… (%d bytes)", msg, len(msg))
	}
}

// One call is decided by one policy version: a hot-reloaded policy is read
// once per call, not once per link.
func TestOnePolicySnapshotPerCall(t *testing.T) {
	cur, err := authz.LoadPolicy("../model.conf", "../policy.csv", authz.Options{Servers: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.PolicySource = func() pipeline.Policy { reads++; return cur }
	p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	if reads != 1 {
		t.Fatalf("the policy was read %d times for one call", reads)
	}
}

// A link added to the chain runs in its place: after the links before it,
// before the ones after it; when it stops the call, nothing after it runs
// and the call fails with its error, named by its stage; a link that wraps
// the rest sees their outcome.
func TestNewLinkRunsInOrder(t *testing.T) {
	var ran []string
	trace := func(name string) pipeline.Link {
		return pipeline.Step(name, func(context.Context, *pipeline.Exchange) *envelope.Error {
			ran = append(ran, name)
			return nil
		})
	}
	var seen string
	wrap := pipeline.Link{Name: "wrap", Wrap: func(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
		ran = append(ran, "wrap")
		err := next(ctx, x)
		seen = x.ErrorCode()
		return err
	}}
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.Guards = []pipeline.Link{trace("first"), wrap, trace("second")}
	call := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), call)); !env.OK {
		t.Fatalf("call failed: %v", env.Message)
	}
	if got := strings.Join(ran, " "); got != "first wrap second" || seen != "" {
		t.Fatalf("ran %q, wrap saw %q", got, seen)
	}

	ran = nil
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	p.Upstreams = up
	stop := pipeline.Step("stop", func(context.Context, *pipeline.Exchange) *envelope.Error {
		ran = append(ran, "stop")
		return envelope.Errorf(envelope.RateLimited, "stopped")
	})
	p.Guards = []pipeline.Link{trace("first"), wrap, stop, trace("second")}
	trail := &recordingAudit{}
	p.Recorder = &pipeline.Recorder{Audit: trail}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), call))
	if got := strings.Join(ran, " "); got != "first wrap stop" || pipelinetest.Code(env) != "rate_limited" || up.Calls() != 0 {
		t.Fatalf("ran %q, answered %s, upstream called %d times", got, pipelinetest.Code(env), up.Calls())
	}
	if seen != "rate_limited" || len(trail.records) != 1 || trail.records[0].ErrorCode != "rate_limited" {
		t.Fatalf("wrap saw %q; audit %+v", seen, trail.records)
	}
}

// A panic in a link is that call's internal_error, recorded with the link
// that panicked; the chain goes on serving the next call.
func TestPanickingLinkIsInternalError(t *testing.T) {
	calls := 0
	boom := pipeline.Step("boom", func(context.Context, *pipeline.Exchange) *envelope.Error {
		calls++
		if calls == 1 {
			panic("bug")
		}
		return nil
	})
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.Guards = []pipeline.Link{boom}
	trail := &recordingAudit{}
	p.Recorder = &pipeline.Recorder{Audit: trail}
	chain := p.Chain()
	call := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
	res := chain.Handle(context.Background(), call)
	body, _ := json.Marshal(res)
	if env := pipelinetest.Envelope(t, res); pipelinetest.Code(env) != "internal_error" || strings.Contains(string(body), "bug") {
		t.Fatalf("a panicking link answered %s", body)
	}
	if r := trail.records[0]; !strings.Contains(r.Reason, "panic in boom: bug") {
		t.Fatalf("audit reason %q does not name the link", r.Reason)
	}
	if env := pipelinetest.Envelope(t, chain.Handle(context.Background(), call)); !env.OK {
		t.Fatalf("the next call failed: %v", env.Message)
	}
}

// A call that reaches the chain without an authenticated principal is
// refused, never decided as nobody.
func TestNoPrincipalRefused(t *testing.T) {
	up := &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)}
	p := pipelinetest.NewBuilder(t, up)
	p.Policy = pipelinetest.Policy{Allow: map[string]bool{" orders/get": true}}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "internal_error" || up.Calls() != 0 {
		t.Fatalf("answered %s after %d upstream calls", pipelinetest.Code(env), up.Calls())
	}
}

// In a trace, the links a wrapping link runs are its children; a wrapping
// link that passes the call on (Pass) leaves the rest beside it, children
// of the call.
func TestWrapAndPassInTraces(t *testing.T) {
	for _, pass := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		tr := tracing.NewWithExporter(mem)
		wrap := pipeline.Link{Name: "wrap", Wrap: func(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
			if pass {
				return x.Pass(next)
			}
			return next(ctx, x)
		}}
		p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
		p.Guards, p.Tracing = []pipeline.Link{wrap}, tr
		p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
		spans := map[string]tracetest.SpanStub{}
		for _, s := range mem.GetSpans() {
			spans[s.Name] = s
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := spans["wrap"].SpanContext.SpanID()
		if pass {
			want = spans["tools/call orders__get"].SpanContext.SpanID()
		}
		if got := spans["execute"].Parent.SpanID(); !want.IsValid() || got != want {
			t.Errorf("pass=%v: execute's parent %s, want %s", pass, got, want)
		}
	}
}

// A wrapping link that panics after the rest of the chain failed answers
// internal_error, recorded with its name: the panic is never hidden behind
// the earlier failure.
func TestPanicAfterAFailureWins(t *testing.T) {
	boom := pipeline.Link{Name: "boom", Wrap: func(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
		next(ctx, x)
		panic("settle bug")
	}}
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Sent, Err: transport.ErrTransportClosed})})
	p.Guards = []pipeline.Link{boom}
	trail := &recordingAudit{}
	p.Recorder = &pipeline.Recorder{Audit: trail}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "internal_error" || env.Retryable {
		t.Fatalf("answered %s (retryable %v), want internal_error", pipelinetest.Code(env), env.Retryable)
	}
	if r := trail.records[0]; r.ErrorCode != "internal_error" || !strings.Contains(r.Reason, "panic in boom: settle bug") {
		t.Fatalf("audit %+v", r)
	}
}

// A chain whose links all passed without answering (a bug in a link) fails
// with internal_error, and the record says so too.
func TestNoAnswerIsRecordedAsAFailure(t *testing.T) {
	swallow := pipeline.Link{Name: "swallow", Wrap: func(context.Context, *pipeline.Exchange, pipeline.Next) *envelope.Error { return nil }}
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.Guards = []pipeline.Link{swallow}
	trail := &recordingAudit{}
	p.Recorder = &pipeline.Recorder{Audit: trail}
	env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}))
	if pipelinetest.Code(env) != "internal_error" || trail.records[0].ErrorCode != "internal_error" {
		t.Fatalf("answered %s, recorded %+v", pipelinetest.Code(env), trail.records[0])
	}
}

// A wrapping link's span carries its own refusal only, not the failure of
// the links it ran; one that passes the call on ends at the hand-over.
func TestWrapSpanStatus(t *testing.T) {
	for _, pass := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		tr := tracing.NewWithExporter(mem)
		wrap := pipeline.Link{Name: "wrap", Wrap: func(ctx context.Context, x *pipeline.Exchange, next pipeline.Next) *envelope.Error {
			if pass {
				return x.Pass(next)
			}
			return next(ctx, x)
		}}
		p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Sent, Err: transport.ErrTransportClosed})})
		p.Guards, p.Tracing = []pipeline.Link{wrap}, tr
		p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
		spans := map[string]tracetest.SpanStub{}
		for _, s := range mem.GetSpans() {
			spans[s.Name] = s
		}
		w, exec := spans["wrap"], spans["execute"]
		if w.Status.Code == codes.Error || exec.Status.Code != codes.Error {
			t.Errorf("pass=%v: wrap status %v, execute %v; want the error on execute only", pass, w.Status, exec.Status)
		}
		if pass && w.EndTime.After(exec.StartTime) {
			t.Errorf("a link that passed the call on ended at %v, after execute started at %v", w.EndTime, exec.StartTime)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A tool without a timeout or a result cap (zero values) has none: its
// call runs under the caller's context and any result is taken.
func TestZeroLimitsMeanNone(t *testing.T) {
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 4096) + `"}]}`)})
	tool, _ := p.Catalog.Resolve("orders__get")
	tool.Timeout, tool.MaxResultBytes = 0, 0
	if env := pipelinetest.Envelope(t, p.Handle(context.Background(), pipelinetest.GetOrder)); !env.OK {
		t.Fatalf("a tool without limits answered %s: %v", pipelinetest.Code(env), env.Message)
	}
}

// A link that is neither a check nor a wrap (or both) is refused when the
// chain is built, not on every call.
func TestMalformedLinkRefusedAtBuild(t *testing.T) {
	for _, l := range []pipeline.Link{{Name: "empty"}, {Name: "both",
		Check: func(context.Context, *pipeline.Exchange) *envelope.Error { return nil },
		Wrap:  func(context.Context, *pipeline.Exchange, pipeline.Next) *envelope.Error { return nil }}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), l.Name) {
					t.Errorf("link %q: New recovered %v, want a panic naming it", l.Name, r)
				}
			}()
			pipeline.New(pipeline.Options{}, l)
		}()
	}
}
