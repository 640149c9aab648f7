package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgate/toolgate/tracing"
)

// A call through the real gateway with tracing on: the call span continues
// the client's trace (traceparent in _meta), every stage is a child of it,
// the upstream attempt is a child of the stage that ran it, and the
// upstream receives a traceparent naming that attempt's span.
func TestTraceSpansAndUpstreamContext(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	setupTracing = func(context.Context, string) (*tracing.Tracing, error) { return tracing.NewWithExporter(mem), nil }
	defer func() { setupTracing = tracing.Setup }()
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	c := connectHTTP(t, url, aliceKey)

	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := mcp.CallToolRequest{}
	req.Params.Name = "hostile__meta"
	req.Params.Arguments = map[string]any{}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}

	spans := mem.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	call, ok := byName["tools/call hostile__meta"]
	if !ok {
		t.Fatalf("no call span among %d spans", len(spans))
	}
	if call.SpanContext.TraceID().String() != clientTrace || call.Parent.SpanID().String() != clientSpan {
		t.Errorf("call span trace %s parent %s, want the client's %s/%s", call.SpanContext.TraceID(), call.Parent.SpanID(), clientTrace, clientSpan)
	}
	for _, stage := range []string{"resolve", "authorize", "validate", "deduplicate"} {
		if s, ok := byName[stage]; !ok || s.Parent.SpanID() != call.SpanContext.SpanID() {
			t.Errorf("stage %s: present %v, parent %s, want the call span %s", stage, ok, s.Parent.SpanID(), call.SpanContext.SpanID())
		}
	}
	upstream, ok := byName["tools/call"]
	if !ok || upstream.Parent.SpanID() != byName["execute"].SpanContext.SpanID() || byName["execute"].Parent.SpanID() != byName["deduplicate"].SpanContext.SpanID() {
		t.Errorf("upstream span parent %s, execute %s (under deduplicate %s)", upstream.Parent.SpanID(),
			byName["execute"].SpanContext.SpanID(), byName["deduplicate"].SpanContext.SpanID())
	}
	want := fmt.Sprintf("00-%s-%s-01", clientTrace, upstream.SpanContext.SpanID())
	if got := fmt.Sprint(res.StructuredContent); !strings.Contains(got, want) {
		t.Errorf("the upstream saw _meta %s, want traceparent %s", got, want)
	}
}
