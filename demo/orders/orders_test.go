package orders

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T) *client.Client {
	t.Helper()
	ctx := testCtx(t)
	c, err := client.NewInProcessClient(NewServer())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "orders-test", Version: "0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo.Name != ServerName {
		t.Fatalf("server name %q", res.ServerInfo.Name)
	}
	return c
}

func call(t *testing.T, c *client.Client, name string, args string) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = json.RawMessage(args)
	res, err := c.CallTool(testCtx(t), req)
	if err != nil {
		t.Fatalf("call %s %s: %v", name, args, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// structured checks that a successful result carries structuredContent and the same JSON as text,
// and returns it decoded.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected tool error: %s", text(t, res))
	}
	if len(res.RawStructuredContent) == 0 {
		t.Fatal("no structuredContent")
	}
	var fromStructured, fromText map[string]any
	if err := json.Unmarshal(res.RawStructuredContent, &fromStructured); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(text(t, res)), &fromText); err != nil {
		t.Fatalf("text block is not JSON: %v", err)
	}
	if fmt.Sprint(fromStructured) != fmt.Sprint(fromText) {
		t.Fatalf("text %v != structured %v", fromText, fromStructured)
	}
	return fromStructured
}

func wantToolError(t *testing.T, res *mcp.CallToolResult, contains string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want isError, got %+v", res)
	}
	if got := text(t, res); !strings.Contains(got, contains) {
		t.Fatalf("error text %q does not contain %q", got, contains)
	}
}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  map[string]any  `json:"annotations"`
}

// rawTools lists tools through the transport, keeping schemas exactly as sent (Client.ListTools
// re-parses them and drops keywords).
func rawTools(t *testing.T, c *client.Client) map[string]wireTool {
	t.Helper()
	resp, err := c.GetTransport().SendRequest(testCtx(t), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId("orders-test-list"),
		Method:  string(mcp.MethodToolsList),
		Params:  map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Error != nil {
		t.Fatalf("tools/list: %+v", resp.Error)
	}
	var res struct {
		Tools      []wireTool `json:"tools"`
		NextCursor string     `json:"nextCursor"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.NextCursor != "" {
		t.Fatalf("unexpected pagination")
	}
	out := map[string]wireTool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func compile(t *testing.T, name string, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}

func TestListTools(t *testing.T) {
	c := newClient(t)
	res, err := c.ListTools(testCtx(t), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 4 {
		t.Fatalf("want 4 tools, got %d", len(res.Tools))
	}

	type hints struct{ readOnly, destructive, idempotent, openWorld bool }
	want := map[string]struct {
		hints    hints
		required []string
	}{
		"get_order":           {hints{true, false, true, false}, []string{"order_id"}},
		"update_order_status": {hints{false, false, true, false}, []string{"order_id", "status"}},
		"refund_order":        {hints{false, true, false, false}, []string{"order_id", "amount", "reason"}},
		"send_customer_reply": {hints{false, false, false, true}, []string{"order_id", "message"}},
	}
	wire := rawTools(t, c)
	if len(wire) != len(want) {
		t.Fatalf("wire tools: %v", wire)
	}
	for name, w := range want {
		tl, ok := wire[name]
		if !ok {
			t.Fatalf("missing tool %s", name)
		}
		if len(tl.Description) < 40 {
			t.Errorf("%s: description too thin: %q", name, tl.Description)
		}
		for key, v := range map[string]bool{
			"readOnlyHint": w.hints.readOnly, "destructiveHint": w.hints.destructive,
			"idempotentHint": w.hints.idempotent, "openWorldHint": w.hints.openWorld,
		} {
			if got, ok := tl.Annotations[key].(bool); !ok || got != v {
				t.Errorf("%s: %s = %v, want explicit %v", name, key, tl.Annotations[key], v)
			}
		}
		var in struct {
			Type                 string                     `json:"type"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
			Properties           map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &in); err != nil {
			t.Fatal(err)
		}
		if in.Type != "object" || in.AdditionalProperties == nil || *in.AdditionalProperties {
			t.Errorf("%s: input schema must be a closed object: %s", name, tl.InputSchema)
		}
		if fmt.Sprint(in.Required) != fmt.Sprint(w.required) {
			t.Errorf("%s: required %v, want %v", name, in.Required, w.required)
		}
		if !strings.Contains(string(in.Properties["order_id"]), `"minimum":1`) ||
			!strings.Contains(string(in.Properties["order_id"]), `"type":"integer"`) {
			t.Errorf("%s: order_id schema %s", name, in.Properties["order_id"])
		}
		if len(tl.OutputSchema) == 0 {
			t.Errorf("%s: no output schema", name)
		}
		compile(t, name+"-in.json", tl.InputSchema)
		compile(t, name+"-out.json", tl.OutputSchema)
	}
	if !strings.Contains(string(wire["update_order_status"].InputSchema),
		`"enum":["pending","processing","shipped","delivered","cancelled"]`) {
		t.Errorf("status enum missing: %s", wire["update_order_status"].InputSchema)
	}
}

// TestSeedScenario is the article's example: update order 4821 to shipped.
func TestSeedScenario(t *testing.T) {
	c := newClient(t)
	before := structured(t, call(t, c, "get_order", `{"order_id": 4821}`))
	if before["status"] != "processing" || before["region"] == "" || before["customer"] == "" || before["amount"] == nil {
		t.Fatalf("seed order 4821: %v", before)
	}

	res := call(t, c, "update_order_status", `{"order_id": 4821, "status": "shipped"}`)
	got := structured(t, res)
	if got["updated"] != true || got["order_id"] != float64(4821) || got["status"] != "shipped" {
		t.Fatalf("update result: %v", got)
	}
	if text(t, res) != `{"order_id":4821,"status":"shipped","updated":true}` {
		t.Fatalf("text %q", text(t, res))
	}
	// Idempotent: the same call again succeeds with the same answer.
	if again := structured(t, call(t, c, "update_order_status", `{"order_id": 4821, "status": "shipped"}`)); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("repeat: %v", again)
	}
	after := structured(t, call(t, c, "get_order", `{"order_id": 4821}`))
	if after["status"] != "shipped" {
		t.Fatalf("after: %v", after)
	}

	reply := structured(t, call(t, c, "send_customer_reply", `{"order_id": 4821, "message": "Your order #4821 has shipped."}`))
	if reply["sent"] != true || reply["message_id"] == "" {
		t.Fatalf("reply: %v", reply)
	}
	reply2 := structured(t, call(t, c, "send_customer_reply", `{"order_id": 4821, "message": "Again."}`))
	if reply2["message_id"] == reply["message_id"] {
		t.Fatal("message ids must differ")
	}
}

func TestResultsMatchOutputSchemas(t *testing.T) {
	c := newClient(t)
	wire := rawTools(t, c)
	calls := map[string]string{
		"get_order":           `{"order_id": 4822}`,
		"update_order_status": `{"order_id": 4822, "status": "processing"}`,
		"refund_order":        `{"order_id": 4822, "amount": 5.25, "reason": "late delivery"}`,
		"send_customer_reply": `{"order_id": 4822, "message": "hello"}`,
	}
	for name, args := range calls {
		schema := compile(t, name+"-out.json", wire[name].OutputSchema)
		res := call(t, c, name, args)
		structured(t, res)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(res.RawStructuredContent)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%s result %s violates its output schema: %v", name, res.RawStructuredContent, err)
		}
	}
}

func TestUnknownOrder(t *testing.T) {
	c := newClient(t)
	res := call(t, c, "get_order", `{"order_id": 9999}`)
	wantToolError(t, res, "order 9999 not found")
	if text(t, res) != "order 9999 not found" {
		t.Fatalf("text %q", text(t, res))
	}
	wantToolError(t, call(t, c, "update_order_status", `{"order_id": 9999, "status": "shipped"}`), "order 9999 not found")
	wantToolError(t, call(t, c, "refund_order", `{"order_id": 9999, "amount": 1, "reason": "x"}`), "order 9999 not found")
	wantToolError(t, call(t, c, "send_customer_reply", `{"order_id": 9999, "message": "x"}`), "order 9999 not found")
}

func TestRefund(t *testing.T) {
	c := newClient(t)
	// 4821 is 129.99 EUR.
	wantToolError(t, call(t, c, "refund_order", `{"order_id": 4821, "amount": 130, "reason": "too much"}`), "exceeds")

	r := structured(t, call(t, c, "refund_order", `{"order_id": 4821, "amount": 100, "reason": "damaged"}`))
	if r["amount"] != float64(100) || r["remaining_refundable"] != 29.99 || r["refund_id"] == "" || r["currency"] != "EUR" {
		t.Fatalf("refund: %v", r)
	}
	// Not idempotent: a second refund is a second refund, and the cap counts what was refunded.
	wantToolError(t, call(t, c, "refund_order", `{"order_id": 4821, "amount": 30, "reason": "again"}`), "remaining 29.99")
	r2 := structured(t, call(t, c, "refund_order", `{"order_id": 4821, "amount": 29.99, "reason": "rest"}`))
	if r2["refund_id"] == r["refund_id"] || r2["remaining_refundable"] != float64(0) {
		t.Fatalf("second refund: %v", r2)
	}
	if o := structured(t, call(t, c, "get_order", `{"order_id": 4821}`)); o["refunded"] != 129.99 {
		t.Fatalf("order after refunds: %v", o)
	}
}

func TestInvalidArguments(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct{ tool, args, want string }{
		{"get_order", `{}`, "order_id is required"},
		{"get_order", `{"order_id": "4821"}`, "order_id must be an integer"},
		{"get_order", `{"order_id": 0}`, "order_id must be an integer"},
		{"get_order", `{"order_id": 48.5}`, "order_id must be an integer"},
		{"get_order", `{"order_id": 4821, "extra": 1}`, `unknown field "extra"`},
		{"update_order_status", `{"order_id": 4821, "status": "lost"}`, "not one of"},
		{"update_order_status", `{"order_id": 4821}`, "status is required"},
		{"refund_order", `{"order_id": 4821, "amount": 0, "reason": "x"}`, "greater than 0"},
		{"refund_order", `{"order_id": 4821, "amount": "5", "reason": "x"}`, "greater than 0"},
		{"refund_order", `{"order_id": 4821, "amount": 5, "reason": ""}`, "reason must be 1 to 500"},
		{"refund_order", `{"order_id": 4821, "amount": 5, "reason": "` + strings.Repeat("é", 501) + `"}`, "got 501"},
		{"send_customer_reply", `{"order_id": 4821, "message": "` + strings.Repeat("a", 2001) + `"}`, "message must be 1 to 2000"},
	} {
		wantToolError(t, call(t, c, tc.tool, tc.args), tc.want)
	}
	// 4821.0 is an integer as far as JSON Schema is concerned.
	if o := structured(t, call(t, c, "get_order", `{"order_id": 4821.0}`)); o["order_id"] != float64(4821) {
		t.Fatal(o)
	}
}

func TestTerminalStatus(t *testing.T) {
	c := newClient(t)
	wantToolError(t, call(t, c, "update_order_status", `{"order_id": 4825, "status": "shipped"}`), "cancelled")
	structured(t, call(t, c, "update_order_status", `{"order_id": 4825, "status": "cancelled"}`))
}

func TestServersDoNotShareState(t *testing.T) {
	a, b := newClient(t), newClient(t)
	structured(t, call(t, a, "update_order_status", `{"order_id": 4822, "status": "cancelled"}`))
	if o := structured(t, call(t, b, "get_order", `{"order_id": 4822}`)); o["status"] != "pending" {
		t.Fatalf("state leaked between servers: %v", o)
	}
}

func TestConcurrentRefunds(t *testing.T) {
	c := newClient(t)
	// 4822 is 45.50 USD: exactly 45 refunds of 1.00 fit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 60; i++ {
		wg.Go(func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "refund_order"
			req.Params.Arguments = json.RawMessage(`{"order_id": 4822, "amount": 1, "reason": "goodwill"}`)
			res, err := c.CallTool(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			if !res.IsError {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 45 {
		t.Fatalf("%d refunds succeeded, want 45", ok)
	}
}

// TestServeStdio drives ServeStdio over pipes with raw JSON-RPC lines and checks that everything on
// out is a protocol message.
func TestServeStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(context.Background(), inR, outW)
		_ = outW.Close()
	}()

	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]json.RawMessage {
		if !lines.Scan() {
			t.Fatalf("no line: %v", lines.Err())
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("non-JSON on stdout: %q", lines.Text())
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			t.Fatalf("not JSON-RPC: %s", lines.Text())
		}
		return m
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if m := recv(); string(m["id"]) != "1" || !strings.Contains(string(m["result"]), ServerName) {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"update_order_status","arguments":{"order_id":4821,"status":"shipped"}}}`)
	m := recv()
	if string(m["id"]) != "2" || !strings.Contains(string(m["result"]), `"structuredContent":{"order_id":4821,"status":"shipped","updated":true}`) {
		t.Fatalf("call: %s", m["result"])
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return on EOF")
	}
	if lines.Scan() {
		t.Fatalf("unexpected output after EOF: %q", lines.Text())
	}
}

func TestServeStdioContextCancel(t *testing.T) {
	inR, inW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, inR, io.Discard) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio after cancel: %v", err)
	}
	// mcp-go's line reader goroutine stays blocked on in until it is closed.
	_ = inW.Close()
}
