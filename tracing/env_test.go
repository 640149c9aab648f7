package tracing

import (
	"os"
	"testing"
)

func TestEnabledByEnv(t *testing.T) {
	const url = "http://collector:4318"
	tests := []struct {
		name    string
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{name: "nothing set is off", env: nil},
		{name: "endpoint", env: map[string]string{envEndpoint: url}, want: true},
		{name: "traces endpoint", env: map[string]string{envTracesEndpoint: url + "/v1/traces"}, want: true},
		{name: "exporter otlp without endpoint", env: map[string]string{envExporter: "otlp"}, want: true},
		{name: "exporter list, spaces, case", env: map[string]string{envExporter: " OTLP "}, want: true},
		{name: "exporter none wins over endpoint", env: map[string]string{envExporter: "none", envEndpoint: url}},
		{name: "none in a list", env: map[string]string{envExporter: "otlp,none"}},
		{name: "sdk disabled wins", env: map[string]string{envSDKDisabled: "true", envEndpoint: url}},
		{name: "sdk disabled any case", env: map[string]string{envSDKDisabled: "TRUE", envExporter: "otlp"}},
		{name: "sdk disabled false", env: map[string]string{envSDKDisabled: "false", envEndpoint: url}, want: true},
		{name: "unknown exporter", env: map[string]string{envExporter: "zipkin"}, wantErr: true},
		{name: "unknown exporter with otlp", env: map[string]string{envExporter: "otlp,console"}, wantErr: true},
		{name: "grpc protocol", env: map[string]string{envEndpoint: url, envProtocol: "grpc"}, wantErr: true},
		{name: "grpc traces protocol", env: map[string]string{envEndpoint: url, envTracesProtocol: "grpc"}, wantErr: true},
		{name: "traces protocol overrides general", env: map[string]string{envEndpoint: url, envProtocol: "grpc", envTracesProtocol: "http/protobuf"}, want: true},
		{name: "http/json", env: map[string]string{envEndpoint: url, envProtocol: "http/json"}, want: true},
		{name: "grpc protocol while off is no error", env: map[string]string{envProtocol: "grpc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t, tt.env)
			got, err := enabledByEnv(os.Getenv)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestResourceServiceName(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "default", want: "toolgate"},
		{name: "OTEL_SERVICE_NAME", env: map[string]string{"OTEL_SERVICE_NAME": "gw-eu"}, want: "gw-eu"},
		{name: "OTEL_RESOURCE_ATTRIBUTES", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=gw-us"}, want: "gw-us"},
		{name: "OTEL_SERVICE_NAME wins", env: map[string]string{"OTEL_SERVICE_NAME": "a", "OTEL_RESOURCE_ATTRIBUTES": "service.name=b"}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t, tt.env)
			res, err := newResource(t.Context(), "1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range res.Attributes() {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if got["service.name"] != tt.want || got["service.version"] != "1.2.3" {
				t.Errorf("service = %q %q, want %q 1.2.3", got["service.name"], got["service.version"], tt.want)
			}
		})
	}
}
