package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/sanitize"
)

// Attribute keys. The mcp.* and gen_ai.* ones follow the OpenTelemetry
// semantic conventions for MCP (not yet in the Go semconv package);
// toolgate.* are the gateway's own.
const (
	keyMethod    = attribute.Key("mcp.method.name")
	keyTool      = attribute.Key("gen_ai.tool.name")
	keySession   = attribute.Key("mcp.session.id")
	keyPrincipal = attribute.Key("enduser.id")
	keyToolID    = attribute.Key("toolgate.tool.id") // canonical <server>/<tool>
	keyServer    = attribute.Key("toolgate.upstream.server")
	keyAttempt   = attribute.Key("toolgate.upstream.attempt")
	keyErrorType = attribute.Key("error.type")
)

const methodToolsCall = "tools/call"

// maxName bounds the client's tool name in span names and attributes: an
// unknown name is the client's free text, and a trace backend indexes it.
const maxName = 128

// off is the span every helper returns while tracing is off. It is a
// zero-size value, so returning it allocates nothing.
var off trace.Span = noop.Span{}

// StartCall starts the span of one tools/call, "tools/call <tool>", kind
// server. Its parent is the trace context in the client request's _meta
// (traceparent, tracestate), when there is a valid one; otherwise it
// starts a new trace. meta is the _meta object as decoded, for mcp-go
// mcp.Meta.AdditionalFields; nil is fine. Off, it returns ctx unchanged:
// the client's context is not passed on either.
func (t *Tracing) StartCall(ctx context.Context, tool string, meta map[string]any) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, off
	}
	ctx = extract(ctx, meta)
	tool = sanitize.Clip(tool, maxName)
	return t.tracer.Start(ctx, methodToolsCall+" "+tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(keyMethod.String(methodToolsCall), keyTool.String(tool)))
}

// SetCaller records who made the call: the authenticated principal and
// the client's session id (either may be "").
func SetCaller(span trace.Span, principal, session string) {
	if span == nil || !span.IsRecording() {
		return
	}
	if principal != "" {
		span.SetAttributes(keyPrincipal.String(principal))
	}
	if session != "" {
		span.SetAttributes(keySession.String(session))
	}
}

// SetTool records the canonical "<server>/<tool>" the call resolved to,
// which policy was decided on (the client's name may differ).
func SetTool(span trace.Span, canonical string) {
	if span == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(keyToolID.String(canonical))
}

// StartStage starts the span of one pipeline stage, named after it, as a
// child of the span in ctx.
func (t *Tracing) StartStage(ctx context.Context, stage string) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, off
	}
	return t.tracer.Start(ctx, stage, trace.WithSpanKind(trace.SpanKindInternal))
}

// StartUpstream starts the span of one attempt to send method (tools/call)
// to the upstream server, kind client. attempt counts from 1. Inject on the
// returned context gives the trace context the upstream should continue.
func (t *Tracing) StartUpstream(ctx context.Context, server, method string, attempt int) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, off
	}
	return t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(keyMethod.String(method), keyServer.String(server), keyAttempt.Int(attempt)))
}

// End ends span with the call's outcome: errCode is the envelope's
// error_code, "" for success. Only the code is recorded, as error.type and
// the status description; the message may quote the tool or the arguments.
// A nil span is ignored.
func End(span trace.Span, errCode string) {
	if span == nil {
		return
	}
	if errCode != "" && span.IsRecording() {
		span.SetAttributes(keyErrorType.String(errCode))
		span.SetStatus(codes.Error, errCode)
	}
	span.End()
}
