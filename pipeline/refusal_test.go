package pipeline_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

// TestExecuteNotesUpstreamCapabilityRefusal: an upstream's -32021 to a
// tools/call is noted on the request's RefusalSlot with its code, its
// message sanitised and data.requiredCapabilities as a ClientCapabilities
// object (the upstream's other data dropped); the chain's own answer stays
// a tool_failed envelope that says the server refused the call. Without a
// slot (stdio, a 2025-era request) nothing is noted, and any other
// JSON-RPC error notes nothing.
func TestExecuteNotesUpstreamCapabilityRefusal(t *testing.T) {
	refused := &upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{
		Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, Message: "Missing required client capability: sampling\x1b[31m",
		Data: map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}, "internal": "/srv/app.py:12"},
	}}
	call := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}

	ctx, slot := pipeline.WithRefusalSlot(context.Background())
	env := pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(refused)}).Handle(ctx, call))
	if pipelinetest.Code(env) != "tool_failed" || env.Message == nil || *env.Message != "the server refused the call: Missing required client capability: sampling" {
		t.Fatalf("envelope %s %v", pipelinetest.Code(env), env.Message)
	}
	r := slot.Refusal()
	if r == nil || r.Code != -32021 || r.Message != "Missing required client capability: sampling" ||
		r.RequiredCapabilities == nil || r.RequiredCapabilities.Sampling == nil || r.RequiredCapabilities.Roots != nil {
		t.Fatalf("refusal noted: %+v", r)
	}

	other := &upstreams.CallError{Where: upstreams.Answered, RPC: &mcp.JSONRPCErrorDetails{Code: -32603, Message: "db down"}}
	ctx, slot = pipeline.WithRefusalSlot(context.Background())
	pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(other)}).Handle(ctx, call)
	if slot.Refusal() != nil {
		t.Fatalf("-32603 noted as a refusal: %+v", slot.Refusal())
	}
	// No slot: the call fails as before, and nothing panics.
	env = pipelinetest.Envelope(t, pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.FailWith(refused)}).Handle(context.Background(), call))
	if pipelinetest.Code(env) != "tool_failed" {
		t.Fatalf("without a slot: %s", pipelinetest.Code(env))
	}
}
