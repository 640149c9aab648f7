// Package tracing gives every tools/call an OpenTelemetry trace: a server
// span for the call, a child span per pipeline stage and a client span per
// upstream attempt, continuing the client's trace and handing it on to the
// upstream.
//
// It is off by default. Setup turns it on only when the standard
// environment asks for traces (OTEL_TRACES_EXPORTER=otlp, or an
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// never when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. Everything
// else (endpoint, headers, timeout, compression, sampler, batching, resource)
// is read by the OpenTelemetry SDK and exporter themselves from their OTEL_*
// variables, so the gateway has no tracing configuration of its own. Off,
// every helper returns at once without allocating, and a nil *Tracing is
// off too, so callers never test for it.
//
// Trace context travels in _meta, the MCP convention (SEP-414) that works on
// every transport, stdio included: StartCall reads the W3C "traceparent" and
// "tracestate" keys at the top level of the client request's _meta, and
// Inject returns the same two keys for the upstream request's _meta. These
// are the keys mcp-go's own MetaPropagator reads and writes
// (mcp.Meta.AdditionalFields), so a client or upstream built on mcp-go's
// tracing joins the same trace. "baggage" is neither read nor passed on: it
// is free-form data the client chose, and upstreams are untrusted.
//
// Spans carry names, kinds, the tool, the caller and the envelope
// error_code, never arguments, results or error messages: those can hold
// the very data the audit log digests instead of storing, and a trace
// backend is not where it should leak to.
//
// Why this dependency: OpenTelemetry is the standard the operators' tools
// already speak and the one issue 7 asks for; writing OTLP by hand would
// mean owning its encoding, retries and the OTEL_* configuration surface.
// The exporter is OTLP/HTTP, to a collector's standard :4318 receiver: an
// export is one HTTP POST from the batcher's goroutine, never on a call's
// path. Its generated OTLP package still links gRPC and grpc-gateway into
// the binary (about 10 MB; they are in go.sum for that reason) but no gRPC
// connection, resolver or goroutine is ever started.
package tracing
