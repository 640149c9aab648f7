package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// refusingCalls answers every call as the chain does when its upstream
// refused it with -32021: the refusal noted on the request's slot, and the
// tool_failed envelope as the chain's own answer.
type refusingCalls struct{}

func (refusingCalls) Handle(ctx context.Context, call pipeline.Call) *mcp.CallToolResult {
	pipeline.NoteProtocolRefusal(ctx, &pipeline.ProtocolRefusal{Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY,
		Message: "Missing required client capability: sampling", RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}})
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("tool_failed: the server refused the call")},
		StructuredContent: json.RawMessage(`{"ok":false,"error":{"code":"tool_failed"}}`), IsError: true}
}

// TestRelayUpstreamCapabilityRefusal: a 2026-07-28 tools/call its upstream
// refused with -32021 is answered, on the fast path and on mcp-go's
// handler alike, with HTTP 400 and that JSON-RPC error under the request's
// id: the code, the message, data.requiredCapabilities, and nothing of the
// envelope.
func TestRelayUpstreamCapabilityRefusal(t *testing.T) {
	servers := []upstreams.Server{{Name: "hostile", Transport: upstreams.TransportStdio, Command: "x", ToolPrefix: "hostile__",
		InitTimeout: config.DefaultInitTimeout, CallTimeout: config.DefaultCallTimeout,
		MaxResultBytes: config.DefaultMaxResultBytes, DescriptionScan: config.DefaultDescriptionScan}}
	cat, err := upstreams.Build(servers, map[string][]upstreams.Listed{"hostile": {{Name: "needs_sampling", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := NewServer(Options{Calls: refusingCalls{}, Catalog: func() *upstreams.Catalog { return cat }, Policy: func() Policy { return allowAll{} }}, "test", log)
	for _, fast := range []bool{true, false} {
		o := HTTPOptions{Auth: bearerAuth{}, MaxBodyBytes: 1 << 20, Log: log, NoFastPath: !fast}
		h := srv.HTTPHandler(o)
		t.Cleanup(func() { _ = h.Shutdown(context.Background()) })
		w := serve(h, http.MethodPost, "", modernCallBody(`"r-7"`, "hostile__needs_sampling", ``), modernHeaders("hostile__needs_sampling"))
		var answer struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("fast=%v: %d %s: %v", fast, w.Code, w.Body, err)
		}
		if w.Code != http.StatusBadRequest || string(answer.ID) != `"r-7"` || answer.Result != nil || answer.Error.Code != -32021 ||
			answer.Error.Message != "Missing required client capability: sampling" ||
			string(answer.Error.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
			t.Fatalf("fast=%v: %d %s", fast, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("fast=%v: Content-Type %q", fast, ct)
		}
	}
}

// TestRefusalAnswerAlwaysNamesRequiredCapabilities: the schema requires
// data.requiredCapabilities, so an upstream's -32021 that named none is
// relayed with an empty ClientCapabilities object.
func TestRefusalAnswerAlwaysNamesRequiredCapabilities(t *testing.T) {
	data, err := json.Marshal(refusalAnswer(json.RawMessage(`3`), &pipeline.ProtocolRefusal{Code: -32021, Message: "m"}))
	if err != nil || string(data) != `{"jsonrpc":"2.0","id":3,"error":{"code":-32021,"message":"m","data":{"requiredCapabilities":{}}}}` {
		t.Fatalf("%s %v", data, err)
	}
}
