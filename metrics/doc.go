// Package metrics is what an operator watches the gateway by: Prometheus metrics for /metrics and the
// liveness and readiness answers for /healthz and /readyz, all served on the admin listener (issue 7,
// item 2).
//
//   - Metrics owns its own prometheus.Registry, never the global default one, so tests and several
//     gateways in one process never clash. The gateway reports to it through narrow methods (CallFinished,
//     StageTimer, UpstreamAttempt, BreakerState, ...) and serves Handler at /metrics. A nil *Metrics
//     is valid: every method does nothing, so pipelines in unit tests need no metrics.
//   - Health answers /healthz (the process serves) and /readyz (every readiness check passes).
//
// # Serving
//
// All three paths belong on the admin listener (loopback by default), never on the MCP listener, and
// need no credential: Prometheus and probes must reach them without one, so they show only counts,
// names from the configuration and the catalog, and short check messages.
//
//	m, h := metrics.New(), &metrics.Health{}
//	h.AddReadiness("policy", func() error { ... })
//	mux.Handle("GET /metrics", m.Handler())
//	mux.Handle("GET /healthz", h.Healthz())
//	mux.Handle("GET /readyz", h.Readyz())
//
// # Units and buckets
//
// Durations are observed in seconds (the Prometheus base unit) from a time.Duration. Histograms are
// classic ones with fixed buckets: callBuckets (1ms..5m) for whole calls and upstream attempts, which
// the per-call deadline (10ms..10m, default 8s) bounds; stageBuckets (100µs..60s) for single stages,
// most of which take microseconds.
//
// # Label cardinality
//
// Every label value must come from a set the operator configured or the gateway defines, never from a
// client's string, or one client could create series without bound:
//
//   - tool: the canonical "<server>/<tool>" of a catalog entry (upstreams.Tool.ID), never the name the
//     client sent. A call that resolved no tool (tool_not_found) is reported with tool Unresolved.
//   - server: a configured server name.
//   - outcome of a call: "ok" or "error"; error_code: an envelope error code, "" on success.
//   - outcome of an upstream attempt: breaker.Outcome.String() ("succeeded", "timed_out", ...).
//   - stage: a pipeline stage name; how: "joined" or "replayed"; method: an MCP method the gateway
//     routes (resources/read, prompts/get, ...), never an arbitrary one a client made up.
//   - version: the policy version hash; only the current one has a series.
//   - feature: a feature that uses the shared state store (rate_limits, policy).
//
// Label values are escaped by the exposition format, so quotes, backslashes and newlines are safe;
// invalid UTF-8, which Prometheus refuses, is replaced with U+FFFD rather than panicking the gateway.
//
// # Where the gateway reports
//
//   - the record stage: CallFinished for every tools/call, whatever stopped it;
//   - each stage as it ends: StageTimer (deduplicate's figure includes the stages it runs itself,
//     or the wait for the identical call it joined);
//   - each upstream attempt in execute: UpstreamAttempt;
//   - the deduplicate stage, when a call joined or was replayed: DuplicateSuppressed;
//   - breaker state changes: BreakerState; upstreams.Set.OnStatusChange: UpstreamUp, and
//     UpstreamRestart when a connection that was up went down; OnCatalogChange and startup:
//     CatalogSize;
//   - every policy reload attempt: PolicyReload, and PolicyInfo and PolicyDenyLines for the policy in
//     force; one whose new policy removes deny lines (applied or refused): PolicyDenyRemoval;
//   - every reload of the config file's keys: ConfigReload;
//   - the approval store after each change: ApprovalsPending; each approval webhook delivery's
//     end: ApprovalWebhook;
//   - the audit writer on a failed write: AuditWriteError;
//   - forward (resources/read, prompts/get, completion/complete, ...): ForwardedRequest;
//   - the shared state store's health check: StateUp; its failed operations: StateError.
//
// Nothing here starts a goroutine, and no method blocks on anything but a short mutex. The methods on
// every call's path (CallFinished, what StageTimer returns, UpstreamAttempt) cache their series and do not
// allocate.
package metrics
