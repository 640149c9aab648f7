package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// benchMeta is a client _meta with trace context, as a traced client sends it.
var benchMeta = map[string]any{MetaTraceparent: clientParent, MetaTracestate: clientState, "progressToken": "p1"}

// BenchmarkStartCallDisabled is the cost tracing adds to a call when it is
// off (the default): it must stay near zero.
func BenchmarkStartCallDisabled(b *testing.B) {
	var tr *Tracing
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tr.StartCall(ctx, "get_weather", benchMeta)
		SetCaller(span, "alice", "sess-1")
		End(span, "")
	}
}

// BenchmarkStartCallEnabled is one call span continuing the client's trace.
func BenchmarkStartCallEnabled(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewWithExporter(exp)
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		_, span := tr.StartCall(ctx, "get_weather", benchMeta)
		SetCaller(span, "alice", "sess-1")
		End(span, "")
		if n++; n%4096 == 0 {
			exp.Reset() // the in-memory exporter keeps every span otherwise
		}
	}
}

// BenchmarkCallDisabled is a whole call's tracing when off: the call span,
// eight stages, an upstream attempt and Inject.
func BenchmarkCallDisabled(b *testing.B) {
	var tr *Tracing
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		runCall(ctx, tr, benchMeta, "")
	}
}

// BenchmarkCallEnabled is the same call traced: ten spans exported
// synchronously to memory, and the injected _meta.
func BenchmarkCallEnabled(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewWithExporter(exp)
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		runCall(ctx, tr, benchMeta, "")
		if n++; n%512 == 0 {
			exp.Reset()
		}
	}
}

// BenchmarkCallEnabledDiscard is BenchmarkCallEnabled without the
// in-memory exporter's copying: the cost of creating and ending the spans
// themselves, which is what the call path pays under Setup's batcher.
func BenchmarkCallEnabledDiscard(b *testing.B) {
	tr := NewWithExporter(discard{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		runCall(ctx, tr, benchMeta, "")
	}
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
