package tracing

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: the
// batch processor of an enabled Setup must stop at Shutdown, and an off
// Setup must start nothing.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// otelEnv is every variable the tests' outcome depends on.
var otelEnv = []string{
	envSDKDisabled, envExporter, envEndpoint, envTracesEndpoint, envProtocol, envTracesProtocol,
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}

// clearEnv unsets otelEnv for the test (the runner's environment may set
// some) and then sets env. t.Setenv restores the originals afterwards.
func clearEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}
