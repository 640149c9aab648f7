// Package testupstream is a deliberately hostile, configurable MCP upstream for toolgate's
// end-to-end tests. It is an mcp-go server whose tools misbehave on purpose (protocol garbage,
// unknown content types, invalid structured output, control characters, huge results, hanging,
// crashing, leaking _meta, hostile input schemas), and it runs either in-process (NewServer,
// StartHTTP, StartSSE) or as a child process over stdio, Streamable HTTP or legacy SSE (Main).
//
// Tools (see each handler for the exact answer):
//
//	echo            the call's arguments as the client sent them (RawArguments: no float64 round trip),
//	                as structuredContent and text; on the wire encoding/json compacts the structured
//	                copy and escapes <, >, & (values and digits stay exact)
//	sleep {ms}      waits ms, or until the call's context ends (then a JSON-RPC error); one
//	                progress notification first when the call carries a progressToken
//	fail {message?} isError with text "boom: \x1b[31mred\x1b[0m\x07 <message>"
//	rpc_error       a Go error from the handler: JSON-RPC error -32603
//	big {bytes}     one text block of that many 'x' (up to 64 MiB)
//	bad_output      structuredContent {"value":"not an integer"} against an output schema demanding an integer
//	good_output     structuredContent {"value":42} against the same schema
//	with_meta       result _meta {"secret":"upstream-internal"}, text "ok"
//	ansi            text "a\x1b[2Jb\x00c\u202ed\r\ne"
//	env             structuredContent: the process environment as a JSON object
//	stop_reading    stdio: stop reading stdin, so a writer of a large request blocks
//	tick            counts its executions: {"executions": n} (not idempotent); waits ms first;
//	                pad N adds {"pad": N bytes of 'x'} (a large answer)
//	headers         structuredContent: the HTTP request headers the call arrived with ({} over stdio)
//	log {message, hold?} sends message as notifications/message (level error) during the call, then
//	                answers "logged", or with hold waits until the call is cancelled (a JSON-RPC error):
//	                mcp-go may write a notification after the answer, or on another stream, so a test
//	                that must see it during the call holds the call until it did
//	crash           ends the process with exit code 3 mid-call (Options.Exit)
//	garbage         answered with {"jsonrpc":"2.0","id":<id>,"result":{"content":42}}
//	unknown_content answered with {"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"hologram","data":"x"}]}}
//	                (garbage, unknown_content, wrong_id, stdout_noise and endless also send one progress
//	                notification first when the call carries a progressToken, which makes Streamable HTTP
//	                answer as text/event-stream)
//	flip_tools {hostile?} adds the tool flipped (input schema RemoteRefSchema when hostile), or removes
//	                it; mcp-go then sends notifications/tools/list_changed
//	progress {steps, ms?, ordered?, message?} sends steps notifications/progress (ms apart) with the
//	                call's progressToken (none without one), each with message ("step <i> of <steps>"
//	                without it), then answers "done <steps> steps"; with ordered
//	                (no ms, a token, over stdio) the notifications and the answer are written at once,
//	                in that order (OrderedProgressMarker)
//	wrong_id        answered under another id: a string id gets "-wrong" appended, a number +1000003
//	stdout_noise    writes NoiseLine (not JSON) to the output, then answers NoiseAnswer
//	split_line      answered with SplitAnswer, its line split by a raw newline inside the text (over
//	                HTTP: a body that is not JSON)
//	drip {bytes, chunk?, ms_per_chunk?} answers a text of bytes 'x', the response written chunk bytes
//	                (default 16) at a time, ms_per_chunk (default 10) apart (stdio: one line in pieces)
//	ignore_cancel {ms} runs ms whatever happens, then answers; a call whose context ended meanwhile
//	                is counted as ignored
//	cancelled_requests {wait_for?, ms?} structuredContent {"cancelled":[ids], "ignored":n}: the
//	                request ids (JSON text, e.g. "\"gw-3\"") named by notifications/cancelled received
//	                so far, waiting up to ms for at least wait_for of them
//	endless         an answer whose text never ends (stdio: a line that never ends), written until
//	                the reader goes away
//	extra_N         (Options.ExtraTools) text "extra N"
//	flaky           (Options.Faults) echo, except on the fraction of its calls that get an injected fault:
//	                crash, hang, garbage or (HTTP) 429 (see Faults)
//	remote_ref, file_ref, self_ref, deep_allof   (Options.HostileSchemas) hostile input schemas
//	deploy          (Options.Nested) echo, with parameters nested in objects (DeploySchema)
//
// garbage, unknown_content, wrong_id, stdout_noise, split_line, drip and endless need control of the raw bytes,
// which an mcp-go handler does not have:
// the handler answers a marker text, and a writer wrapped around the transport's output replaces the
// whole response line that carries it. That wrapper is in place for Main over stdio, and for
// StartHTTP / StartSSE / Main over HTTP (both the application/json and the text/event-stream answers
// of Streamable HTTP, and legacy SSE's event stream). A bare NewServer driven by an in-process client
// answers the marker text itself.
package testupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Options configures an upstream.
type Options struct {
	// Name is the server name reported in initialize ("testupstream" when empty).
	Name string
	// HostileSchemas also registers remote_ref, file_ref, self_ref and deep_allof.
	HostileSchemas bool
	// Nested also registers deploy, an echo whose input schema (DeploySchema) nests
	// parameters in objects, inline and through a $ref: tool overrides reach into them.
	Nested bool
	// ExtraTools registers extra_0 .. extra_{N-1}, each taking {} and answering "extra N".
	ExtraTools int
	// PageSize is the server-side tools/list page size (0: everything in one page).
	PageSize int
	// StopReading is what the stop_reading tool calls: over stdio, Main
	// stops reading stdin afterwards (nil: the tool does nothing).
	StopReading func()
	// Exit is what the crash tool calls with code 3 (and -crash-after with CrashAfterCode). Nil
	// means os.Exit, which is right for an upstream in its own process and ends the whole test
	// binary otherwise. StartHTTP and StartSSE default it to aborting the HTTP request instead (see
	// there).
	Exit func(code int)
	// CrashAfter makes the upstream call Exit(CrashAfterCode) right after it wrote its answer to
	// the CrashAfter-th tool call (0: never). It needs the output wrapper (Main, StartHTTP,
	// StartSSE).
	CrashAfter int
	// Faults, when set, adds the tool flaky (FlakyTool), which answers as echo except on the
	// fraction of its calls that get an injected fault (see Faults). Over stdio the tool injects
	// them; over HTTP a wrapper before mcp-go does (Main, StartHTTP).
	Faults *Faults

	rt         *runtimeState // shared with the I/O wrappers; NewServer makes one when nil
	httpFaults bool          // serveHTTP injects the faults: flaky only echoes
}

// Markers a handler returns so that the output wrapper replaces the whole response (see package doc).
const (
	GarbageMarker        = "__TESTUPSTREAM_GARBAGE__"
	UnknownContentMarker = "__TESTUPSTREAM_UNKNOWN_CONTENT__"
)

// FailText is the fixed start of the fail tool's error text; the optional message follows after a space.
const FailText = "boom: \x1b[31mred\x1b[0m\x07"

// ANSIText is the ansi tool's text.
const ANSIText = "a\x1b[2Jb\x00c\u202ed\r\ne"

// OutputSchema is the output schema of bad_output and good_output.
const OutputSchema = `{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`

// MaxBigBytes is the largest result the big tool produces.
const MaxBigBytes = 64 << 20

// DeploySchema is the input schema of deploy (Options.Nested).
const DeploySchema = `{"type":"object","properties":{"name":{"type":"string"},` +
	`"options":{"type":"object","properties":{"dry_run":{"type":"boolean"},"level":{"type":"string","enum":["low","mid","high"]}},` +
	`"required":["dry_run"],"additionalProperties":false},"target":{"$ref":"#/$defs/place"}},` +
	`"required":["name","options"],"additionalProperties":false,` +
	`"$defs":{"place":{"type":"object","properties":{"region":{"type":"string","enum":["eu","us"]},"zone":{"type":"string"}},"additionalProperties":false}}}`

// Hostile input schemas, compact so that a test can compare them byte for byte with the wire.
const (
	RemoteRefSchema = `{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`
	FileRefSchema   = `{"type":"object","properties":{"x":{"$ref":"file:///etc/passwd"}}}`
	SelfRefSchema   = `{"$ref":"#","type":"object"}`
	// DeepAllOfDepth is how many allOf levels deep_allof nests below its root.
	DeepAllOfDepth = 1000
)

// DeepAllOfSchema returns deep_allof's input schema: an object whose allOf nests DeepAllOfDepth levels.
func DeepAllOfSchema() string {
	var b strings.Builder
	b.WriteString(`{"type":"object","allOf":[`)
	for range DeepAllOfDepth - 1 {
		b.WriteString(`{"allOf":[`)
	}
	b.WriteString(`{"type":"object"}`)
	for range DeepAllOfDepth - 1 {
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// ServerVersion is reported in initialize.
const ServerVersion = "0.0.1-test"

func hints(readOnly, destructive, idempotent, openWorld bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{ReadOnlyHint: &readOnly, DestructiveHint: &destructive, IdempotentHint: &idempotent, OpenWorldHint: &openWorld}
}

// NewServer returns an upstream with the tools described in the package doc.
func NewServer(o Options) *server.MCPServer {
	name := o.Name
	if name == "" {
		name = "testupstream"
	}
	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if o.PageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(o.PageSize))
	}
	exit := o.Exit
	if exit == nil {
		exit = os.Exit
	}
	rt := o.rt
	if rt == nil {
		rt = newRuntime(exit, o.CrashAfter)
	}
	hooks := &server.Hooks{}
	hooks.AddAfterCallTool(rt.afterCallTool)
	opts = append(opts, server.WithHooks(hooks))
	srv := server.NewMCPServer(name, ServerVersion, opts...)

	tool := func(name, desc, schema string, ann mcp.ToolAnnotation) mcp.Tool {
		return mcp.Tool{Name: name, Description: desc, RawInputSchema: json.RawMessage(schema), Annotations: ann}
	}
	noArgs := `{"type":"object","properties":{},"additionalProperties":false}`
	sideEffectFree := hints(true, false, true, false)

	tools := []server.ServerTool{
		{Tool: tool("echo", "Returns its arguments exactly as sent.", `{"type":"object","additionalProperties":true}`, sideEffectFree), Handler: echo},
		{Tool: tool("sleep", "Waits ms milliseconds, or until the call is cancelled.",
			`{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"],"additionalProperties":false}`, sideEffectFree), Handler: sleep},
		{Tool: tool("fail", "Always reports a tool error whose text holds ANSI and control characters.",
			`{"type":"object","properties":{"message":{"type":"string"}},"additionalProperties":false}`, sideEffectFree), Handler: fail},
		{Tool: tool("rpc_error", "Its handler fails: the answer is a JSON-RPC error.", noArgs, sideEffectFree), Handler: rpcError},
		{Tool: tool("big", "Returns one text block of the given number of bytes.",
			`{"type":"object","properties":{"bytes":{"type":"integer","minimum":0,"maximum":`+strconv.Itoa(MaxBigBytes)+`}},"required":["bytes"],"additionalProperties":false}`, sideEffectFree), Handler: big},
		{Tool: mcp.Tool{Name: "bad_output", Description: "Returns structured output that violates its own output schema.",
			RawInputSchema: json.RawMessage(noArgs), RawOutputSchema: json.RawMessage(OutputSchema), Annotations: sideEffectFree},
			Handler: structuredValue(`{"value":"not an integer"}`)},
		{Tool: mcp.Tool{Name: "good_output", Description: "Returns structured output that matches its output schema.",
			RawInputSchema: json.RawMessage(noArgs), RawOutputSchema: json.RawMessage(OutputSchema), Annotations: sideEffectFree},
			Handler: structuredValue(`{"value":42}`)},
		{Tool: tool("with_meta", "Returns a result carrying upstream-internal _meta.", noArgs, sideEffectFree), Handler: withMeta},
		{Tool: tool("ansi", "Returns text with ANSI escapes, NUL, a bidi override and CRLF.", noArgs, sideEffectFree), Handler: ansi},
		{Tool: tool("env", "Returns the upstream process environment.", noArgs, sideEffectFree), Handler: env},
		{Tool: tool("stop_reading", "Stops reading requests (stdio): later requests fill the pipe and block their writer.", noArgs, sideEffectFree),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if o.StopReading != nil {
					o.StopReading()
				}
				return mcp.NewToolResultText("stopped reading"), nil
			}},
		{Tool: tool("tick", "Counts its executions (a side effect that must not run twice); waits ms first.",
			`{"type":"object","properties":{"ms":{"type":"integer","minimum":0},"label":{"type":"string"},"pad":{"type":"integer","minimum":0,"maximum":`+strconv.Itoa(MaxBigBytes)+`}},"additionalProperties":false}`,
			hints(false, false, false, false)), Handler: tick},
		{Tool: tool("headers", "Returns the HTTP request headers this call arrived with ({} over stdio).", noArgs, sideEffectFree), Handler: headers},
		{Tool: tool("meta", "Returns the _meta this call arrived with (trace context, progress token).", noArgs, sideEffectFree), Handler: meta},
		{Tool: tool("log", "Sends its message as a log notification (level error) during the call, then answers \"logged\"; with hold, waits until the call is cancelled instead.",
			`{"type":"object","properties":{"message":{"type":"string"},"hold":{"type":"boolean"}},"required":["message"],"additionalProperties":false}`,
			sideEffectFree), Handler: logMessage},
		{Tool: tool("gather", "Waits until n calls with the same key are in flight at once, then answers them all: proves concurrency without timing.",
			`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":`+strconv.Itoa(maxGather)+`},"key":{"type":"string"},"i":{"type":"integer"}},"required":["n","key"],"additionalProperties":false}`,
			sideEffectFree), Handler: gather},
		{Tool: tool("crash", "Ends the upstream process with exit code 3 in the middle of the call.", noArgs, hints(false, true, false, false)),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				exit(3)
				return nil, errors.New("crash: exit returned")
			}},
		{Tool: tool("garbage", "Answered with a result that is not a valid CallToolResult.", noArgs, sideEffectFree), Handler: marker(GarbageMarker)},
		{Tool: tool("unknown_content", "Answered with a content block of an unknown type.", noArgs, sideEffectFree), Handler: marker(UnknownContentMarker)},
	}
	for i := range o.ExtraTools {
		text := fmt.Sprintf("extra %d", i)
		tools = append(tools, server.ServerTool{
			Tool: tool(fmt.Sprintf("extra_%d", i), "A trivial extra tool.", noArgs, sideEffectFree),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(text), nil
			},
		})
	}
	if o.Nested {
		tools = append(tools, server.ServerTool{Tool: tool("deploy", "Returns its arguments exactly as sent.", DeploySchema, sideEffectFree), Handler: echo})
	}
	if o.HostileSchemas {
		for _, h := range []struct{ name, schema string }{
			{"remote_ref", RemoteRefSchema},
			{"file_ref", FileRefSchema},
			{"self_ref", SelfRefSchema},
			{"deep_allof", DeepAllOfSchema()},
		} {
			text := "hostile tool " + h.name + " was called"
			tools = append(tools, server.ServerTool{
				Tool: tool(h.name, "A tool with a hostile input schema; a gateway should refuse to compile or expose it.", h.schema, sideEffectFree),
				Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText(text), nil
				},
			})
		}
	}
	if o.Faults != nil {
		var p *faultPicker
		if !o.httpFaults {
			p = newFaultPicker(*o.Faults, "stdio")
		}
		tools = append(tools, flakyTool(p, exit))
	}
	tools = append(tools, modeTools(srv, rt)...)
	tools = append(tools, rugTools(srv)...)
	srv.AddTools(tools...)
	return srv
}

// rawArgs returns the arguments as the client sent them ({} when there were none).
func rawArgs(req mcp.CallToolRequest) json.RawMessage {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments
	}
	if req.Params.Arguments == nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	raw := rawArgs(req)
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(string(raw))},
		StructuredContent:    raw,
		RawStructuredContent: raw,
	}, nil
}

// intArg reads an integer argument from the raw bytes (no float64 round trip).
func intArg(req mcp.CallToolRequest, name string) (int64, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(rawArgs(req), &args); err != nil {
		return 0, fmt.Errorf("arguments: %w", err)
	}
	raw, ok := args[name]
	if !ok {
		return 0, fmt.Errorf("%s is required", name)
	}
	t := bytes.TrimSpace(raw)
	if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%s must be an integer", name)
	}
	return int64(f), nil
}

func sleep(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ms, err := intArg(req, "ms")
	if err != nil || ms < 0 {
		return mcp.NewToolResultError(fmt.Sprintf("sleep: ms must be an integer >= 0 (%v)", err)), nil
	}
	progress(ctx, req, 0, float64(ms), "sleeping")
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return mcp.NewToolResultText(fmt.Sprintf("slept %d ms", ms)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func fail(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(rawArgs(req), &args)
	text := FailText
	if args.Message != "" {
		text += " " + args.Message
	}
	return mcp.NewToolResultError(text), nil
}

func rpcError(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("rpc_error: the handler failed on purpose")
}

func big(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := intArg(req, "bytes")
	if err != nil || n < 0 || n > MaxBigBytes {
		return mcp.NewToolResultError(fmt.Sprintf("big: bytes must be an integer in [0, %d]", MaxBigBytes)), nil
	}
	return mcp.NewToolResultText(strings.Repeat("x", int(n))), nil
}

func structuredValue(raw string) server.ToolHandlerFunc {
	return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content:              []mcp.Content{mcp.NewTextContent(raw)},
			StructuredContent:    json.RawMessage(raw),
			RawStructuredContent: json.RawMessage(raw),
		}, nil
	}
}

func withMeta(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res := mcp.NewToolResultText("ok")
	res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"secret": "upstream-internal"}}
	return res, nil
}

func ansi(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText(ANSIText), nil
}

func env(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(string(b))},
		StructuredContent:    json.RawMessage(b),
		RawStructuredContent: json.RawMessage(b),
	}, nil
}

func marker(m string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		progress(ctx, req, 0, 1, "answering")
		return mcp.NewToolResultText(m), nil
	}
}

// progress sends notifications/progress when the caller asked for it (a progressToken in the call's
// _meta). Over Streamable HTTP that turns the answer into a text/event-stream response.
func progress(ctx context.Context, req mcp.CallToolRequest, done, total float64, message string) {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return
	}
	_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
		"progressToken": req.Params.Meta.ProgressToken, "progress": done, "total": total, "message": message,
	})
}

// headers reports the HTTP headers of the request that carried this call,
// so a test can prove what a gateway forwards upstream (and what it never
// forwards, such as the client's credential).
// maxGather bounds gather's n (and the stdio server's workers).
const maxGather = 100

// gatherings are gather's groups, by key.
var gatherings = struct {
	sync.Mutex
	m map[string]*gathering
}{m: map[string]*gathering{}}

type gathering struct {
	in   int
	full chan struct{}
}

func gather(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		N   int    `json:"n"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal(rawArgs(req), &args); err != nil {
		return nil, err
	}
	gatherings.Lock()
	g := gatherings.m[args.Key]
	if g == nil {
		g = &gathering{full: make(chan struct{})}
		gatherings.m[args.Key] = g
	}
	if g.in++; g.in == args.N {
		close(g.full)
		delete(gatherings.m, args.Key)
	}
	gatherings.Unlock()
	select {
	case <-g.full:
		return mcp.NewToolResultText(fmt.Sprintf("gathered %d", args.N)), nil
	case <-ctx.Done():
		gatherings.Lock()
		if gatherings.m[args.Key] == g { // still gathering: this caller leaves it
			g.in--
		}
		gatherings.Unlock()
		return nil, ctx.Err()
	}
}

// logMessage logs during the call, so a test can see where the gateway
// relays an upstream's log messages.
func logMessage(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return nil, err
	}
	n := mcp.NewLoggingMessageNotification(mcp.LoggingLevelError, "testupstream", msg)
	if err := server.ServerFromContext(ctx).SendLogMessageToClient(ctx, n); err != nil {
		return nil, err
	}
	if req.GetBool("hold", false) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return mcp.NewToolResultText("logged"), nil
}

func meta(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	fields := map[string]any{}
	if req.Params.Meta != nil {
		for k, v := range req.Params.Meta.AdditionalFields {
			fields[k] = v
		}
		if req.Params.Meta.ProgressToken != nil {
			fields["progressToken"] = req.Params.Meta.ProgressToken
		}
	}
	b, err := json.Marshal(map[string]any{"meta": fields})
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, RawStructuredContent: b}, nil
}

func headers(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	got := map[string]string{}
	for k, v := range req.Header {
		got[k] = strings.Join(v, ", ")
	}
	b, err := json.Marshal(got)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, RawStructuredContent: b}, nil
}

// ticks counts tick executions in this process.
var ticks atomic.Int64

func tick(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		MS  int `json:"ms"`
		Pad int `json:"pad"`
	}
	_ = json.Unmarshal(rawArgs(req), &args)
	if args.MS > 0 {
		t := time.NewTimer(time.Duration(args.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b := []byte(fmt.Sprintf(`{"executions":%d}`, ticks.Add(1)))
	if args.Pad > 0 && args.Pad <= MaxBigBytes {
		b = fmt.Appendf(b[:len(b)-1], `,"pad":%q}`, strings.Repeat("x", args.Pad))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, RawStructuredContent: b}, nil
}
