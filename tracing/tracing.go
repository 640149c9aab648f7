package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracing starts the gateway's spans. The zero value and nil are off.
type Tracing struct {
	tracer   trace.Tracer // nil when off
	provider *sdktrace.TracerProvider
}

// scope names the instrumentation in every exported span.
const scope = "github.com/toolgate/toolgate/tracing"

// defaultServiceName is service.name unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const defaultServiceName = "toolgate"

// Setup reads the standard OTEL_* environment (see the package comment).
// When tracing is off it returns an off Tracing and starts nothing. On
// error the *Tracing is nil, which is off as well, so a caller may log the
// error and carry on without traces.
func Setup(ctx context.Context, serviceVersion string) (*Tracing, error) {
	on, err := enabledByEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if !on {
		return &Tracing{}, nil
	}
	res, err := newResource(ctx, serviceVersion)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The exporter reads endpoint, headers, timeout, TLS and compression
	// from OTEL_EXPORTER_OTLP_* itself.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
	}
	// The batcher keeps export off the call path (its OTEL_BSP_* settings
	// come from the environment); the sampler comes from
	// OTEL_TRACES_SAMPLER, parent-based always-on when unset.
	return newTracing(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))), nil
}

// NewWithExporter is an enabled Tracing that hands every span to exporter
// synchronously as it ends, with every span sampled: for tests (an
// in-memory exporter sees a span as soon as End returns, no waiting).
func NewWithExporter(exporter sdktrace.SpanExporter) *Tracing {
	res, _ := newResource(context.Background(), "") // only attributes given here: it cannot fail
	return newTracing(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())), sdktrace.WithResource(res)))
}

func newTracing(tp *sdktrace.TracerProvider) *Tracing {
	return &Tracing{tracer: tp.Tracer(scope), provider: tp}
}

// newResource describes the gateway: service.name "toolgate" and its
// version, then whatever OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
// say, which win (later detectors override earlier ones).
func newResource(ctx context.Context, serviceVersion string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(defaultServiceName)}
	if serviceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(serviceVersion))
	}
	return resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.tracer != nil }

// Shutdown exports the spans still buffered and stops the exporter. It
// waits at most until ctx ends. Off, it does nothing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
