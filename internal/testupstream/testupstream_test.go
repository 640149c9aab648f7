package testupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

// reexecEnv makes this test binary run Main instead of the tests (see TestMain), the way the
// gateway's own tests start a testupstream child.
const reexecEnv = "TESTUPSTREAM_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// baseTools are the tools every upstream has.
var baseTools = []string{
	"ansi", "bad_output", "big", "cancelled_requests", "crash", "drip", "echo", "endless", "env", "fail",
	"flip_tools", "garbage", "gather", "good_output", "headers", "ignore_cancel", "log", "meta", "progress", "rpc_error", "sleep",
	"rug_pull", "split_line", "stdout_noise", "stop_reading", "target", "tick", "unknown_content", "with_meta", "wrong_id",
}

var hostileTools = []string{"deep_allof", "file_ref", "remote_ref", "self_ref"}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func initialize(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "testupstream-test", Version: "0"}
	res, err := c.Initialize(testCtx(t), req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func inProcessClient(t *testing.T, o Options) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(NewServer(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	initialize(t, c)
	return c
}

func callTool(ctx context.Context, c *client.Client, name, args string) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	return c.CallTool(ctx, req)
}

func mustCall(t *testing.T, c *client.Client, name, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(testCtx(t), c, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func onlyText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want 1 content block, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

func toolNames(tools []mcp.Tool) []string {
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func wantNames(o Options) []string {
	names := slices.Clone(baseTools)
	for i := range o.ExtraTools {
		names = append(names, fmt.Sprintf("extra_%d", i))
	}
	if o.HostileSchemas {
		names = append(names, hostileTools...)
	}
	slices.Sort(names)
	return names
}

func TestListToolsPaged(t *testing.T) {
	o := Options{Name: "paged", ExtraTools: 25, PageSize: 7, HostileSchemas: true}
	c := inProcessClient(t, o)

	first, err := c.ListToolsByPage(testCtx(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 7 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(first.Tools), first.NextCursor)
	}
	all, err := c.ListTools(testCtx(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(all.Tools), wantNames(o); !slices.Equal(got, want) {
		t.Fatalf("tools:\n got %v\nwant %v", got, want)
	}
	for _, tl := range all.Tools {
		if tl.Annotations.ReadOnlyHint == nil || tl.Annotations.IdempotentHint == nil {
			t.Errorf("%s: annotations not set explicitly", tl.Name)
		}
	}
	if res := mustCall(t, c, "extra_12", `{}`); onlyText(t, res) != "extra 12" {
		t.Fatalf("extra_12: %q", onlyText(t, res))
	}
}

func TestServerName(t *testing.T) {
	c, err := client.NewInProcessClient(NewServer(Options{Name: "named-upstream"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res := initialize(t, c); res.ServerInfo.Name != "named-upstream" {
		t.Fatalf("name %q", res.ServerInfo.Name)
	}
}

// rawRequest sends one JSON-RPC request through the client's transport (string IDs of our own, so
// they cannot collide with the client's counter) and returns the raw result.
func rawRequest(t *testing.T, c *client.Client, id, method string, params any) json.RawMessage {
	t.Helper()
	resp, err := c.GetTransport().SendRequest(testCtx(t), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: method, Params: params,
	})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		t.Fatalf("%s: %+v", method, resp.Error)
	}
	return resp.Result
}

// TestHostileSchemasIntact pages tools/list by hand and checks that every raw schema reaches the
// wire byte for byte.
func TestHostileSchemasIntact(t *testing.T) {
	c := inProcessClient(t, Options{HostileSchemas: true, PageSize: 3})
	type wireTool struct {
		Name         string          `json:"name"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	schemas := map[string]wireTool{}
	cursor := ""
	for page := 0; ; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var res struct {
			Tools      []wireTool `json:"tools"`
			NextCursor string     `json:"nextCursor"`
		}
		if err := json.Unmarshal(rawRequest(t, c, fmt.Sprintf("raw-list-%d", page), "tools/list", params), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) > 3 {
			t.Fatalf("page of %d", len(res.Tools))
		}
		for _, tl := range res.Tools {
			schemas[tl.Name] = tl
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	for name, want := range map[string]string{
		"remote_ref": RemoteRefSchema,
		"file_ref":   FileRefSchema,
		"self_ref":   SelfRefSchema,
		"deep_allof": DeepAllOfSchema(),
		"echo":       `{"type":"object","additionalProperties":true}`,
	} {
		if got := string(schemas[name].InputSchema); got != want {
			t.Errorf("%s input schema on the wire differs:\n got %.200s\nwant %.200s", name, got, want)
		}
	}
	if depth := strings.Count(string(schemas["deep_allof"].InputSchema), `"allOf"`); depth != DeepAllOfDepth {
		t.Errorf("deep_allof depth %d", depth)
	}
	for _, name := range []string{"bad_output", "good_output"} {
		if got := string(schemas[name].OutputSchema); got != OutputSchema {
			t.Errorf("%s output schema %s", name, got)
		}
	}
	if len(schemas) != len(baseTools)+len(hostileTools) {
		t.Errorf("%d tools", len(schemas))
	}
}

const bigIntArgs = `{"id": 9007199254740993, "nested": {"n": -123456789012345678901234567890, "f": 1.000000000000000000001}}`

// bigIntCompact is bigIntArgs as encoding/json compacts it on the way out.
const bigIntCompact = `{"id":9007199254740993,"nested":{"n":-123456789012345678901234567890,"f":1.000000000000000000001}}`

func TestEchoKeepsNumbersExact(t *testing.T) {
	c := inProcessClient(t, Options{})
	raw := rawRequest(t, c, "echo-1", "tools/call", map[string]any{"name": "echo", "arguments": json.RawMessage(bigIntArgs)})
	if !bytes.Contains(raw, []byte(`"structuredContent":`+bigIntCompact)) {
		t.Fatalf("structuredContent not exact: %s", raw)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != bigIntCompact {
		t.Fatalf("text block: %+v", res.Content)
	}
	// encoding/json compacts and HTML-escapes raw JSON on the way out (mcp-go marshals whole
	// responses with it): values and digits stay exact, the bytes are not the client's bytes.
	raw = rawRequest(t, c, "echo-2", "tools/call", map[string]any{"name": "echo", "arguments": json.RawMessage(`{ "h" : "<&>" }`)})
	if !bytes.Contains(raw, []byte(`"structuredContent":{"h":"\u003c\u0026\u003e"}`)) {
		t.Fatalf("echo of HTML characters: %s", raw)
	}
	// With no arguments at all, echo answers {}.
	if res := mustCall(t, c, "echo", ""); string(res.RawStructuredContent) != `{}` {
		t.Fatalf("no arguments: %s", res.RawStructuredContent)
	}
}

func TestToolBehaviour(t *testing.T) {
	c := inProcessClient(t, Options{})

	if res := mustCall(t, c, "fail", `{"message":"hi"}`); !res.IsError || onlyText(t, res) != FailText+" hi" {
		t.Fatalf("fail: %+v", res)
	}
	if res := mustCall(t, c, "fail", `{}`); !res.IsError || onlyText(t, res) != FailText {
		t.Fatalf("fail without message: %+v", res)
	}
	if _, err := callTool(testCtx(t), c, "rpc_error", `{}`); err == nil || !strings.Contains(err.Error(), "on purpose") {
		t.Fatalf("rpc_error: %v", err)
	}
	if res := mustCall(t, c, "big", `{"bytes": 1048576}`); len(onlyText(t, res)) != 1<<20 || strings.Trim(onlyText(t, res), "x") != "" {
		t.Fatal("big: wrong size or content")
	}
	if res := mustCall(t, c, "big", `{"bytes": 67108865}`); !res.IsError {
		t.Fatal("big: over MaxBigBytes must be a tool error")
	}
	if res := mustCall(t, c, "bad_output", `{}`); string(res.RawStructuredContent) != `{"value":"not an integer"}` {
		t.Fatalf("bad_output: %s", res.RawStructuredContent)
	}
	if res := mustCall(t, c, "good_output", `{}`); string(res.RawStructuredContent) != `{"value":42}` {
		t.Fatalf("good_output: %s", res.RawStructuredContent)
	}
	res := mustCall(t, c, "with_meta", `{}`)
	if res.Meta == nil || res.Meta.AdditionalFields["secret"] != "upstream-internal" || onlyText(t, res) != "ok" {
		t.Fatalf("with_meta: %+v", res.Meta)
	}
	if res := mustCall(t, c, "ansi", `{}`); onlyText(t, res) != ANSIText {
		t.Fatalf("ansi: %q", onlyText(t, res))
	}
	t.Setenv("TESTUPSTREAM_ENV_PROBE", "probe=value")
	var envMap map[string]string
	if err := json.Unmarshal(mustCall(t, c, "env", `{}`).RawStructuredContent, &envMap); err != nil || envMap["TESTUPSTREAM_ENV_PROBE"] != "probe=value" {
		t.Fatalf("env: %v %v", err, envMap["TESTUPSTREAM_ENV_PROBE"])
	}
	if res := mustCall(t, c, "sleep", `{"ms": 1}`); onlyText(t, res) != "slept 1 ms" {
		t.Fatalf("sleep: %q", onlyText(t, res))
	}
	// Without an output rewriter the markers come through as plain text.
	if res := mustCall(t, c, "garbage", `{}`); onlyText(t, res) != GarbageMarker {
		t.Fatalf("garbage in-process: %q", onlyText(t, res))
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	c := inProcessClient(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, c, "sleep", `{"ms": 600000}`)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sleep returned no error after cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sleep ignored cancellation")
	}
}

func TestRewriteLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"` + GarbageMarker + `"}]}}`,
			`{"jsonrpc":"2.0","id":5,"result":{"content":42}}`},
		{`data: {"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"` + UnknownContentMarker + `"}],"resultType":"complete"}}`,
			`data: {"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"hologram","data":"x"}]}}`},
		// An echoed marker is not a marker answer.
		{`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"x\":\"` + GarbageMarker + `\"}"}],"structuredContent":{"x":"` + GarbageMarker + `"}}}`, ``},
		{`{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`, ``},
		{`event: message`, ``},
	} {
		got := string(rewriteLine([]byte(tc.in)))
		if got != tc.want {
			t.Errorf("rewriteLine(%s)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}

	// Partial writes are reassembled; other lines pass unchanged.
	var out bytes.Buffer
	lw := newLineRewriter(&out)
	msg := `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + GarbageMarker + `"}]}}` + "\r\n"
	for _, chunk := range []string{"first line\n" + msg[:20], msg[20:40], msg[40:] + "tail"} {
		if _, err := lw.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := lw.flushPartial(); err != nil {
		t.Fatal(err)
	}
	if want := "first line\n" + `{"jsonrpc":"2.0","id":9,"result":{"content":42}}` + "\r\ntail"; out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
}

// stdioPipe runs MainIO on pipes and returns the writer to its stdin, a line reader on its stdout,
// and a channel with its exit code.
func stdioPipe(t *testing.T, args ...string) (io.WriteCloser, *bufio.Reader, <-chan int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := MainIO(args, inR, outW, io.Discard)
		_ = outW.Close()
		_ = inR.Close()
		code <- c
	}()
	return inW, bufio.NewReaderSize(outR, 1<<16), code
}

func waitCode(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("MainIO did not return")
		return -1
	}
}

func TestGarbageOverStdio(t *testing.T) {
	in, out, code := stdioPipe(t, "-transport", "stdio", "-name", "piped")
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(in, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() string {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v (%q)", err, line)
		}
		return strings.TrimSuffix(line, "\n")
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if line := recv(); !strings.Contains(line, `"name":"piped"`) {
		t.Fatalf("initialize: %s", line)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"garbage","arguments":{}}}`)
	if line := recv(); line != `{"jsonrpc":"2.0","id":7,"result":{"content":42}}` {
		t.Fatalf("garbage: %s", line)
	}
	send(`{"jsonrpc":"2.0","id":"u-1","method":"tools/call","params":{"name":"unknown_content","arguments":{}}}`)
	if line := recv(); line != `{"jsonrpc":"2.0","id":"u-1","result":{"content":[{"type":"hologram","data":"x"}]}}` {
		t.Fatalf("unknown_content: %s", line)
	}
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"m":"` + GarbageMarker + `"}}}`)
	if line := recv(); !strings.Contains(line, `"structuredContent":{"m":"`+GarbageMarker+`"}`) {
		t.Fatalf("echoed marker was rewritten: %s", line)
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":` + bigIntArgs + `}}`)
	if line := recv(); !strings.Contains(line, `"structuredContent":`+bigIntCompact) {
		t.Fatalf("echo over stdio: %s", line)
	}
	// 10 MiB in one line, through the rewriter's fast path (raw bytes: decoding them under -race
	// costs seconds).
	send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"big","arguments":{"bytes":10485760}}}`)
	line := recv()
	_, text, ok := strings.Cut(line, `"text":"`)
	if !ok || len(text) < 10<<20+1 || strings.IndexByte(text, '"') != 10<<20 || strings.Count(text[:10<<20], "x") != 10<<20 {
		t.Fatalf("big over stdio: %d bytes, %.100s", len(line), line)
	}
	_ = in.Close()
	if c := waitCode(t, code); c != 0 {
		t.Fatalf("exit code %d", c)
	}
}

// TestClientOverStdioPipes drives MainIO with mcp-go's own client: the rewritten answers must reach
// a real client as the failures the gateway has to handle.
func TestClientOverStdioPipes(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := MainIO([]string{"-extra-tools", "10", "-page-size", "4"}, inR, outW, io.Discard)
		_ = outW.Close()
		code <- c
	}()
	c := client.NewClient(transport.NewIO(outR, inW, nil))
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	checkClient(t, c, Options{ExtraTools: 10})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := waitCode(t, code); got != 0 {
		t.Fatalf("exit code %d", got)
	}
}

// checkClient runs the checks that hold whatever the transport, when the output rewriter is in place.
func checkClient(t *testing.T, c *client.Client, o Options) {
	t.Helper()
	all, err := c.ListTools(testCtx(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(all.Tools), wantNames(o); !slices.Equal(got, want) {
		t.Fatalf("tools:\n got %v\nwant %v", got, want)
	}
	if res := mustCall(t, c, "echo", `{"a":[1,2,3]}`); string(res.RawStructuredContent) != `{"a":[1,2,3]}` {
		t.Fatalf("echo: %s", res.RawStructuredContent)
	}
	if _, err := callTool(testCtx(t), c, "garbage", `{}`); err == nil {
		t.Fatal("garbage: want an error from the client")
	}
	if _, err := callTool(testCtx(t), c, "unknown_content", `{}`); err == nil || !strings.Contains(err.Error(), "unknown content type") {
		t.Fatalf("unknown_content: %v", err)
	}
	if res := mustCall(t, c, "fail", `{"message":"x"}`); !res.IsError || onlyText(t, res) != FailText+" x" {
		t.Fatalf("fail: %+v", res)
	}
	if res := mustCall(t, c, "with_meta", `{}`); res.Meta == nil || res.Meta.AdditionalFields["secret"] != "upstream-internal" {
		t.Fatalf("with_meta: %+v", res.Meta)
	}
	if res := mustCall(t, c, "big", `{"bytes": 1048576}`); len(onlyText(t, res)) != 1<<20 {
		t.Fatal("big")
	}
	// The upstream still answers after the garbage.
	if res := mustCall(t, c, "good_output", `{}`); string(res.RawStructuredContent) != `{"value":42}` {
		t.Fatalf("good_output: %s", res.RawStructuredContent)
	}
}

func httpClient(t *testing.T, url string, sse bool) *client.Client {
	t.Helper()
	var c *client.Client
	var err error
	if sse {
		c, err = client.NewSSEMCPClient(url)
	} else {
		c, err = client.NewStreamableHttpClient(url)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	return c
}

func TestStartHTTP(t *testing.T) {
	o := Options{ExtraTools: 5, PageSize: 4}
	url, stop, err := StartHTTP(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("url %q", url)
	}
	c := httpClient(t, url, false)
	checkClient(t, c, o)

	// crash aborts the request in-process: the client sees the connection drop, and the upstream keeps serving.
	if _, err := callTool(testCtx(t), c, "crash", `{}`); err == nil {
		t.Fatal("crash: want a transport error")
	}
	mustCall(t, c, "good_output", `{}`)

	// A client that gives up cancels the handler.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := callTool(ctx, c, "sleep", `{"ms": 600000}`); err == nil {
		t.Fatal("sleep: want deadline error")
	}
	_ = c.Close()
	stop()
	stop() // idempotent
}

func TestStartSSE(t *testing.T) {
	o := Options{ExtraTools: 3, PageSize: 5, HostileSchemas: true}
	url, stop, err := StartSSE(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasSuffix(url, "/sse") {
		t.Fatalf("url %q", url)
	}
	c := httpClient(t, url, true)
	checkClient(t, c, o)
	if _, err := callTool(testCtx(t), c, "crash", `{}`); err == nil {
		t.Fatal("crash over SSE: want an error")
	}
	mustCall(t, c, "good_output", `{}`)
	_ = c.Close()
}

// post sends one raw JSON-RPC message to a Streamable HTTP endpoint and returns the body.
func post(t *testing.T, url, session, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestRawHTTP checks the exact bytes over Streamable HTTP with plain net/http.
func TestRawHTTP(t *testing.T) {
	url, stop, err := StartHTTP(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()

	resp, _ := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d session %q", resp.StatusCode, session)
	}
	if resp, _ := post(t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}

	resp, body := post(t, url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":`+bigIntArgs+`}}`)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !bytes.Contains(body, []byte(`"structuredContent":`+bigIntCompact)) {
		t.Fatalf("echo: %s %s", resp.Header.Get("Content-Type"), body)
	}
	if _, body := post(t, url, session, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"garbage","arguments":{}}}`); string(body) != `{"jsonrpc":"2.0","id":3,"result":{"content":42}}`+"\n" {
		t.Fatalf("garbage: %q", body)
	}
	if _, body := post(t, url, session, `{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"unknown_content","arguments":{}}}`); string(body) != `{"jsonrpc":"2.0","id":"h","result":{"content":[{"type":"hologram","data":"x"}]}}`+"\n" {
		t.Fatalf("unknown_content: %q", body)
	}

	// With a progressToken the tool sends a notification first, and mcp-go answers as an event
	// stream. (mcp-go may drop a notification that races the final answer and then answer JSON; the
	// replacement must hold either way.)
	sse, notified := 0, 0
	for i := range 20 {
		resp, body := post(t, url, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"garbage","arguments":{},"_meta":{"progressToken":"p%d"}}}`, 100+i, i))
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":42}}`, 100+i)
		switch ct := resp.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream"):
			sse++
			// The progress notification itself may be missing (mcp-go drops a notification that
			// races the answer but still answers as an event stream).
			if !bytes.HasSuffix(body, []byte("\ndata: "+want+"\n\n")) {
				t.Fatalf("event stream: %q", body)
			}
			if bytes.Contains(body, []byte(`"method":"notifications/progress"`)) {
				notified++
			}
		case strings.HasPrefix(ct, "application/json"):
			if string(body) != want+"\n" {
				t.Fatalf("json: %q", body)
			}
		default:
			t.Fatalf("content type %q", ct)
		}
	}
	t.Logf("%d of 20 answers came as text/event-stream, %d of them with the progress notification", sse, notified)
}

// child starts this test binary as a testupstream process (see TestMain).
func child(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// Under -race a child otherwise sleeps 1 s before exiting with status 0 (atexit_sleep_ms).
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), reexecEnv+"=1", "TESTUPSTREAM_CHILD_MARK=yes", "GORACE="+race)
	return cmd
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	return ee.ExitCode()
}

func TestProcessExitAtStart(t *testing.T) {
	cmd := child(t, "-stderr-line", "upstream is broken", "-exit-at-start", "7")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != 7 {
		t.Fatalf("exit code %d", code)
	}
	if stderr.String() != "upstream is broken\n" || stdout.Len() != 0 {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if code := exitCode(t, child(t, "-transport", "carrier-pigeon").Run()); code != 2 {
		t.Fatalf("bad flag: exit code %d", code)
	}
}

// stdioChild starts a stdio child and connects mcp-go's client to its pipes.
func stdioChild(t *testing.T, args ...string) (*exec.Cmd, *client.Client, *bytes.Buffer) {
	t.Helper()
	cmd := child(t, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(transport.NewIO(stdout, stdin, nil))
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return cmd, c, &stderr
}

func TestProcessStdio(t *testing.T) {
	cmd, c, stderr := stdioChild(t, "-transport", "stdio", "-stderr-line", "hello from upstream", "-hostile-schemas")
	initialize(t, c)
	checkClient(t, c, Options{HostileSchemas: true})

	var envMap map[string]string
	if err := json.Unmarshal(mustCall(t, c, "env", `{}`).RawStructuredContent, &envMap); err != nil || envMap["TESTUPSTREAM_CHILD_MARK"] != "yes" {
		t.Fatalf("env: %v %v", err, envMap)
	}
	if _, err := callTool(testCtx(t), c, "crash", `{}`); err == nil {
		t.Fatal("crash: want an error")
	}
	if code := exitCode(t, cmd.Wait()); code != 3 {
		t.Fatalf("crash exit code %d", code)
	}
	_ = c.Close()
	if !strings.HasPrefix(stderr.String(), "hello from upstream\n") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

func TestProcessHangInit(t *testing.T) {
	cmd, c, _ := stdioChild(t, "-hang-init")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "0"}
	if _, err := c.Initialize(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("initialize: want deadline exceeded, got %v", err)
	}
	_ = c.Close() // closes stdin: the child exits cleanly
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestProcessHTTPHang(t *testing.T) {
	cmd, stdin, url := httpChild(t, "-transport", "http", "-hang-init")
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "0"}
	if _, err := c.Initialize(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("initialize: want deadline exceeded, got %v", err)
	}
	_ = c.Close()
	_ = stdin.Close()
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// httpChild starts an http/sse child and returns its URL from the LISTENING line.
func httpChild(t *testing.T, args ...string) (*exec.Cmd, io.WriteCloser, string) {
	t.Helper()
	cmd := child(t, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("LISTENING line: %v %q", err, line)
	}
	url, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "LISTENING ")
	if !ok {
		t.Fatalf("first stdout line %q", line)
	}
	return cmd, stdin, url
}

func TestProcessHTTP(t *testing.T) {
	for _, tr := range []string{"http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			cmd, stdin, url := httpChild(t, "-transport", tr, "-extra-tools", "4", "-page-size", "3", "-name", "proc-"+tr)
			suffix := map[string]string{"http": "/mcp", "sse": "/sse"}[tr]
			if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, suffix) {
				t.Fatalf("url %q", url)
			}
			c := httpClient(t, url, tr == "sse")
			checkClient(t, c, Options{ExtraTools: 4})
			_ = c.Close()
			_ = stdin.Close() // EOF on stdin ends the upstream
			if code := exitCode(t, cmd.Wait()); code != 0 {
				t.Fatalf("exit code %d", code)
			}
		})
	}
}

func TestProcessHTTPSignal(t *testing.T) {
	cmd, stdin, url := httpChild(t, "-transport", "http")
	defer stdin.Close()
	c := httpClient(t, url, false)
	mustCall(t, c, "good_output", `{}`)
	_ = c.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit code after SIGTERM %d", code)
	}
}

func TestProcessHTTPCrash(t *testing.T) {
	cmd, stdin, url := httpChild(t, "-transport", "http")
	defer stdin.Close()
	c := httpClient(t, url, false)
	defer c.Close()
	if _, err := callTool(testCtx(t), c, "crash", `{}`); err == nil {
		t.Fatal("crash: want an error")
	}
	if code := exitCode(t, cmd.Wait()); code != 3 {
		t.Fatalf("exit code %d", code)
	}
}
