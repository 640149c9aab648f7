package tracing

import (
	"cmp"
	"fmt"
	"strings"
)

// The standard variables that decide whether traces are exported at all.
// The rest of OTEL_* is read by the SDK and the exporter.
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// enabledByEnv decides whether to export traces. The specification's
// default exporter is otlp, but the gateway must not start sending to
// localhost:4318 just because nothing was configured: without an explicit
// OTEL_TRACES_EXPORTER, an endpoint is what turns tracing on.
func enabledByEnv(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return false, nil
	}
	on, err := exporterWanted(getenv)
	if err != nil || !on {
		return false, err
	}
	if err := checkProtocol(getenv); err != nil {
		return false, err
	}
	return true, nil
}

// exporterWanted reads OTEL_TRACES_EXPORTER (a comma-separated list), or
// the endpoints when it is unset. An exporter the gateway does not have is
// an error rather than silence: the operator asked for traces that would
// never arrive.
func exporterWanted(getenv func(string) string) (bool, error) {
	list := strings.TrimSpace(getenv(envExporter))
	if list == "" {
		return getenv(envEndpoint) != "" || getenv(envTracesEndpoint) != "", nil
	}
	on := false
	for name := range strings.SplitSeq(list, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "none":
			return false, nil
		case "otlp":
			on = true
		default:
			return false, fmt.Errorf("%s=%q: only otlp (or none) is supported", envExporter, list)
		}
	}
	return on, nil
}

// checkProtocol refuses OTLP/gRPC: the exporter here speaks OTLP/HTTP only,
// and would send HTTP to a gRPC port (4317) and fail on every batch.
func checkProtocol(getenv func(string) string) error {
	proto := strings.TrimSpace(cmp.Or(getenv(envTracesProtocol), getenv(envProtocol)))
	switch proto {
	case "", "http/protobuf", "http/json":
		return nil
	default:
		return fmt.Errorf("OTLP protocol %q: only http/protobuf and http/json are supported (a collector's :4318 receiver)", proto)
	}
}
