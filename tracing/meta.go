package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The _meta keys of W3C trace context, as SEP-414 and mcp-go's
// MetaPropagator place them: at the top level of _meta.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// w3c is the W3C Trace Context format. It is used directly rather than
// through otel's global propagator, which other code could replace.
var w3c propagation.TraceContext

// extract returns ctx carrying the remote span context found in meta. An
// absent or malformed traceparent leaves ctx as it was (the W3C parser
// rejects anything but the exact format, and a tracestate without a valid
// traceparent is dropped with it).
func extract(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, metaCarrier(meta))
}

// metaCarrier reads trace context from a decoded _meta object. Values that
// are not strings are treated as absent.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set is never called: the carrier is only extracted from.
func (m metaCarrier) Set(string, string) {}

func (m metaCarrier) Keys() []string { return []string{MetaTraceparent, MetaTracestate} }

// Inject returns the traceparent (and tracestate, when there is one) of the
// span in ctx, to be added to the upstream request's _meta under the same
// keys, or nil when ctx has no span context (tracing off, or no span
// started). Called with the context StartUpstream returned, the upstream
// continues the trace as a child of that attempt.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := make(map[string]string, 2)
	w3c.Inject(ctx, propagation.MapCarrier(m))
	return m
}
