package tracing

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// receiver is a stand-in OTLP/HTTP collector that counts trace exports.
func receiver(t *testing.T) (url string, posts *atomic.Int64) {
	posts = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		posts.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty body is an empty ExportTraceServiceResponse
	}))
	t.Cleanup(srv.Close)
	return srv.URL, posts
}

// TestSetupExports runs Setup against a local receiver: configured only
// through the standard variables, a call's spans reach it over HTTP by the
// time Shutdown returns (the batcher flushes then; no waiting), and when
// the environment turns tracing off nothing is sent and no goroutine runs.
func TestSetupExports(t *testing.T) {
	tests := []struct {
		name  string
		env   func(url string) map[string]string
		posts int64
	}{
		{"endpoint", func(u string) map[string]string { return map[string]string{envEndpoint: u} }, 1},
		{"traces endpoint", func(u string) map[string]string { return map[string]string{envTracesEndpoint: u + "/v1/traces"} }, 1},
		{"exporter none", func(u string) map[string]string { return map[string]string{envEndpoint: u, envExporter: "none"} }, 0},
		{"sdk disabled", func(u string) map[string]string { return map[string]string{envEndpoint: u, envSDKDisabled: "true"} }, 0},
		{"sampler off", func(u string) map[string]string {
			return map[string]string{envEndpoint: u, "OTEL_TRACES_SAMPLER": "always_off"}
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, posts := receiver(t)
			clearEnv(t, tt.env(url))
			before := goleak.IgnoreCurrent()
			tr, err := Setup(t.Context(), "test")
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Enabled() {
				goleak.VerifyNone(t, before) // off: Setup started nothing
			}
			sent := runCall(t.Context(), tr, map[string]any{MetaTraceparent: clientParent}, "")
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := posts.Load(); got != tt.posts {
				t.Errorf("%d exports, want %d", got, tt.posts)
			}
			if tr.Enabled() != (sent != nil) {
				t.Errorf("enabled %v but injected %v", tr.Enabled(), sent)
			}
		})
	}
}

// TestSetupRefuses: a configuration that cannot export is an error, and
// the nil it returns is a usable, off Tracing.
func TestSetupRefuses(t *testing.T) {
	clearEnv(t, map[string]string{envEndpoint: "http://127.0.0.1:4317", envProtocol: "grpc"})
	tr, err := Setup(t.Context(), "test")
	if err == nil {
		t.Fatal("no error for OTLP/gRPC")
	}
	if _, span := tr.StartCall(t.Context(), "x", nil); span.IsRecording() || tr.Shutdown(t.Context()) != nil {
		t.Error("the Tracing returned with an error is not off")
	}
}
