package upstreams

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// declaring is a relay whose client declared caps (known) or nothing known.
type declaring struct {
	caps  mcp.ClientCapabilities
	known bool
}

func (declaring) Session() string { return "s" }
func (declaring) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, nil
}
func (declaring) Log(json.RawMessage)                        {}
func (d declaring) Declared() (mcp.ClientCapabilities, bool) { return d.caps, d.known }

// A 2026-07-28 request declares the calling client's capabilities, not
// everything the gateway could relay: an upstream must not plan an input
// request the caller cannot answer (issue 17, item 4). Without a caller
// whose capabilities are known (the gateway's own listing), it declares
// all it can relay, so the catalog holds what any client may use.
func TestModernRequestDeclaresTheCallersCapabilities(t *testing.T) {
	c := &Conn{proto: mcp.LATEST_PROTOCOL_VERSION}
	declared := func(ctx context.Context) mcp.ClientCapabilities {
		t.Helper()
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(1), Method: "tools/call",
			Params: map[string]any{"name": "t"}}
		if err := c.modernize(ctx, &req); err != nil {
			t.Fatal(err)
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(req.Params.(json.RawMessage), &p); err != nil {
			t.Fatal(err)
		}
		var caps mcp.ClientCapabilities
		if err := json.Unmarshal(p.Meta[mcp.MetaKeyClientCapabilities], &caps); err != nil {
			t.Fatalf("%s: %v", p.Meta[mcp.MetaKeyClientCapabilities], err)
		}
		return caps
	}
	samplingOnly := declaring{caps: mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}, known: true}
	if got := declared(WithRelay(context.Background(), samplingOnly)); got.Sampling == nil || got.Elicitation != nil || got.Roots != nil {
		t.Errorf("a caller that declared sampling only: declared %+v", got)
	}
	if got := declared(WithRelay(context.Background(), declaring{known: true})); got.Sampling != nil || got.Elicitation != nil || got.Roots != nil {
		t.Errorf("a caller that declared nothing: declared %+v", got)
	}
	for name, ctx := range map[string]context.Context{
		"the gateway's own request": context.Background(),
		"a caller not known":        WithRelay(context.Background(), declaring{}),
	} {
		if got := declared(ctx); got.Sampling == nil || got.Elicitation == nil || got.Roots == nil {
			t.Errorf("%s: declared %+v, want all the gateway relays", name, got)
		}
	}
}
