package tracing

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// The client's trace context, from the W3C Trace Context examples.
const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan   = "00f067aa0ba902b7"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
	clientState  = "congo=t61rcWkgMzE"
)

// pipelineStages are some of the links of gateway/chain.go, in its order.
var pipelineStages = []string{"resolve", "authorize", "validate", "conditions", "approve", "deduplicate", "execute", "normalize"}

// runCall drives the helpers the way the gateway does: a call span, a span
// per stage, and inside execute an upstream attempt whose injected _meta it
// returns.
func runCall(ctx context.Context, tr *Tracing, meta map[string]any, errCode string) map[string]string {
	ctx, call := tr.StartCall(ctx, "get_weather", meta)
	SetCaller(call, "alice", "sess-1")
	var sent map[string]string
	for _, st := range pipelineStages {
		sctx, span := tr.StartStage(ctx, st)
		if st == "resolve" {
			SetTool(call, "weather/get_weather")
		}
		if st == "execute" {
			uctx, up := tr.StartUpstream(sctx, "weather", "tools/call", 1)
			sent = Inject(uctx)
			End(up, errCode)
		}
		End(span, "")
	}
	End(call, errCode)
	return sent
}

func TestCallSpanShape(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewWithExporter(exp)
	meta := map[string]any{MetaTraceparent: clientParent, MetaTracestate: clientState, "progressToken": 7}
	sent := runCall(t.Context(), tr, meta, "tool_failed")

	spans := exp.GetSpans()
	if len(spans) != len(pipelineStages)+2 {
		t.Fatalf("%d spans, want %d", len(spans), len(pipelineStages)+2)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != clientTrace {
			t.Errorf("span %q in trace %s, want the client's %s", s.Name, s.SpanContext.TraceID(), clientTrace)
		}
		byName[s.Name] = s
	}
	call := byName["tools/call get_weather"]
	if call.Parent.SpanID().String() != clientSpan || !call.Parent.IsRemote() {
		t.Errorf("call span parent = %s (remote %v), want the client's %s", call.Parent.SpanID(), call.Parent.IsRemote(), clientSpan)
	}
	if call.SpanKind != trace.SpanKindServer {
		t.Errorf("call span kind %v, want server", call.SpanKind)
	}
	if call.SpanContext.TraceState().String() != clientState {
		t.Errorf("call span tracestate %q, want %q", call.SpanContext.TraceState(), clientState)
	}
	for _, st := range pipelineStages {
		if got := byName[st].Parent.SpanID(); got != call.SpanContext.SpanID() {
			t.Errorf("stage %s parent %s, want the call span %s", st, got, call.SpanContext.SpanID())
		}
	}
	up := byName["tools/call"]
	if up.Parent.SpanID() != byName["execute"].SpanContext.SpanID() || up.SpanKind != trace.SpanKindClient {
		t.Errorf("upstream span parent %s kind %v, want execute %s, client", up.Parent.SpanID(), up.SpanKind, byName["execute"].SpanContext.SpanID())
	}

	want := "00-" + clientTrace + "-" + up.SpanContext.SpanID().String() + "-01"
	if sent[MetaTraceparent] != want || sent[MetaTracestate] != clientState {
		t.Errorf("injected %v, want traceparent %s and tracestate %s", sent, want, clientState)
	}

	wantAttrs := map[attribute.Key]string{
		keyMethod: "tools/call", keyTool: "get_weather", keyPrincipal: "alice", keySession: "sess-1",
		keyToolID: "weather/get_weather", keyErrorType: "tool_failed",
	}
	got := attrs(call.Attributes)
	for k, v := range wantAttrs {
		if got[k] != v {
			t.Errorf("call attribute %s = %q, want %q", k, got[k], v)
		}
	}
	if call.Status.Code != codes.Error || call.Status.Description != "tool_failed" {
		t.Errorf("call status %v %q, want error tool_failed", call.Status.Code, call.Status.Description)
	}
	if got := attrs(up.Attributes); got[keyServer] != "weather" || got[keyAttempt] != "1" {
		t.Errorf("upstream attributes %v", got)
	}
	if byName["resolve"].Status.Code != codes.Unset {
		t.Errorf("a stage that passed has status %v", byName["resolve"].Status.Code)
	}
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// TestClientContext covers what StartCall makes of the client's _meta.
func TestClientContext(t *testing.T) {
	tests := []struct {
		name      string
		meta      map[string]any
		continued bool   // the call span continues the client's trace
		state     string // tracestate passed on
		unsampled bool   // the client decided not to sample: nothing exported
		flagsSent string // the trace flags the upstream is sent
	}{
		{name: "no _meta", meta: nil, flagsSent: "01"},
		{name: "no trace context", meta: map[string]any{"progressToken": "p"}, flagsSent: "01"},
		{name: "traceparent", meta: map[string]any{MetaTraceparent: clientParent}, continued: true, flagsSent: "01"},
		{name: "with tracestate", meta: map[string]any{MetaTraceparent: clientParent, MetaTracestate: clientState}, continued: true, state: clientState, flagsSent: "01"},
		{name: "malformed traceparent", meta: map[string]any{MetaTraceparent: "00-" + clientTrace + "-xyz-01"}, flagsSent: "01"},
		{name: "all-zero trace id", meta: map[string]any{MetaTraceparent: "00-00000000000000000000000000000000-" + clientSpan + "-01"}, flagsSent: "01"},
		{name: "not a string", meta: map[string]any{MetaTraceparent: 42}, flagsSent: "01"},
		{name: "tracestate alone is dropped", meta: map[string]any{MetaTracestate: clientState}, flagsSent: "01"},
		{name: "header-cased key is not _meta's", meta: map[string]any{"Traceparent": clientParent}, flagsSent: "01"},
		{name: "client did not sample", meta: map[string]any{MetaTraceparent: "00-" + clientTrace + "-" + clientSpan + "-00"}, continued: true, unsampled: true, flagsSent: "00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			sent := runCall(t.Context(), NewWithExporter(exp), tt.meta, "")
			parts := strings.Split(sent[MetaTraceparent], "-")
			if len(parts) != 4 {
				t.Fatalf("injected traceparent %q", sent[MetaTraceparent])
			}
			if (parts[1] == clientTrace) != tt.continued {
				t.Errorf("upstream trace %s, client's %s, want continued %v", parts[1], clientTrace, tt.continued)
			}
			if parts[3] != tt.flagsSent || sent[MetaTracestate] != tt.state {
				t.Errorf("injected flags %s tracestate %q, want %s %q", parts[3], sent[MetaTracestate], tt.flagsSent, tt.state)
			}
			spans := exp.GetSpans()
			if tt.unsampled != (len(spans) == 0) {
				t.Fatalf("%d spans exported, client unsampled %v", len(spans), tt.unsampled)
			}
			if tt.unsampled {
				return
			}
			call := spans[len(spans)-1]
			if call.Parent.IsValid() != tt.continued {
				t.Errorf("call span parent %v, want one %v", call.Parent.SpanID(), tt.continued)
			}
		})
	}
}

// TestOff covers every way tracing is off: nothing is recorded, the
// context comes back unchanged, and nothing is sent upstream, not even the
// client's own trace context.
func TestOff(t *testing.T) {
	clearEnv(t, nil)
	before := goleak.IgnoreCurrent()
	setup, err := Setup(t.Context(), "test")
	if err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before) // off by default starts no exporter, no batcher
	tests := []struct {
		name string
		tr   *Tracing
	}{
		{"nil", nil},
		{"zero", &Tracing{}},
		{"Setup without env", setup},
	}
	meta := map[string]any{MetaTraceparent: clientParent}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.tr.Enabled() {
				t.Fatal("enabled")
			}
			ctx := t.Context()
			cctx, span := tt.tr.StartCall(ctx, "get_weather", meta)
			if cctx != ctx || span.IsRecording() || span.SpanContext().IsValid() {
				t.Errorf("StartCall changed the context or recorded")
			}
			if sent := runCall(ctx, tt.tr, meta, "tool_failed"); sent != nil {
				t.Errorf("injected %v", sent)
			}
			if err := tt.tr.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	End(nil, "tool_failed") // a nil span is ignored
	SetCaller(nil, "alice", "s")
	SetTool(nil, "a/b")
}

// TestLongToolNameClipped: the client's tool name is free text.
func TestLongToolNameClipped(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	_, span := NewWithExporter(exp).StartCall(t.Context(), strings.Repeat("x", 10000), nil)
	End(span, "tool_not_found")
	s := exp.GetSpans()[0]
	if len(s.Name) > len("tools/call ")+maxName+len("…") {
		t.Errorf("span name of %d bytes", len(s.Name))
	}
	if !slices.ContainsFunc(s.Attributes, func(kv attribute.KeyValue) bool {
		return kv.Key == keyTool && len(kv.Value.AsString()) <= maxName+len("…")
	}) {
		t.Error("tool attribute not clipped")
	}
}
