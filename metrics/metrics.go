package metrics

import (
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Unresolved is the tool label of a call that named no tool in the catalog. Canonical tool IDs always
// contain a "/", so it never collides with one.
const Unresolved = "unresolved"

// callBuckets (seconds) cover a whole call or one upstream attempt: from a refusal before the upstream
// (well under 1ms) to the longest deadline a tool may be given.
var callBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// stageBuckets (seconds) start lower: resolve, authorize and validate take microseconds.
var stageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// breakerValues are the toolgate_breaker_state values of the states breaker.Set.State names.
var breakerValues = map[string]float64{"closed": 0, "half-open": 1, "open": 2}

// Metrics holds the gateway's metrics in its own registry. It is safe for concurrent use, and a nil
// *Metrics does nothing.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	calls          *prometheus.CounterVec
	callDuration   *prometheus.HistogramVec
	callCache      children[callKey, callSeries]
	stageDuration  *prometheus.HistogramVec
	stageCache     children[string, prometheus.Observer]
	upstreamTime   *prometheus.HistogramVec
	upstreamCache  children[[2]string, prometheus.Observer]
	breakerState   *prometheus.GaugeVec
	upstreamUp     *prometheus.GaugeVec
	restarts       *prometheus.CounterVec
	catalogTools   prometheus.Gauge
	policyReloads  *prometheus.CounterVec
	policyInfo     *prometheus.GaugeVec
	policyDenies   prometheus.Gauge
	denyRemovals   *prometheus.CounterVec // by result
	policyMu       sync.Mutex             // makes PolicyInfo's reset and set one step
	configReloads  *prometheus.CounterVec // by result
	approvals      prometheus.Gauge
	duplicates     *prometheus.CounterVec
	auditErrors    prometheus.Counter
	forwardedTimes *prometheus.HistogramVec
	stateUp        *prometheus.GaugeVec   // no labels: the series exists only once StateUp is called
	stateErrors    *prometheus.CounterVec // by feature
	shadow         shadowMetrics          // shadow.go
	webhooks       webhookMetrics         // webhooks.go
	discovery      discoveryMetrics       // discovery.go
	redactions     *prometheus.CounterVec // by pattern
	egressRefused  *prometheus.CounterVec // by server and class
}

// New returns Metrics registered in a fresh registry, with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.calls = m.counterVec("toolgate_calls_total", "tools/call requests finished, by canonical tool, outcome (ok|error) and error_code (\"\" when ok).", "tool", "outcome", "error_code")
	m.callDuration = m.histogramVec("toolgate_call_duration_seconds", "Time from receiving a tools/call to its answer, in seconds.", callBuckets, "tool")
	m.stageDuration = m.histogramVec("toolgate_stage_duration_seconds", "Time one pipeline stage took, in seconds.", stageBuckets, "stage")
	m.upstreamTime = m.histogramVec("toolgate_upstream_request_duration_seconds", "Time of one upstream tools/call attempt, in seconds, by server and how the attempt ended.", callBuckets, "server", "outcome")
	m.breakerState = m.gaugeVec("toolgate_breaker_state", "Circuit breaker state per upstream: 0 closed, 1 half-open, 2 open.", "server")
	m.upstreamUp = m.gaugeVec("toolgate_upstream_up", "1 while the upstream has a live connection, else 0.", "server")
	m.restarts = m.counterVec("toolgate_upstream_restarts_total", "Live upstream connections lost (child exited, session ended) and being re-established.", "server")
	m.catalogTools = m.gauge("toolgate_catalog_tools", "Tools in the current catalog.")
	m.policyReloads = m.counterVec("toolgate_policy_reloads_total", "Policy reload attempts by result (ok|error); on error the last good policy stays in force.", "result")
	m.policyInfo = m.gaugeVec("toolgate_policy_info", "1 for the version of the policy in force; no other version has a series.", "version")
	m.policyDenies = m.gauge("toolgate_policy_deny_lines", "Deny lines in the policy in force.")
	m.denyRemovals = m.counterVec("toolgate_policy_reloads_removing_denies_total", "Policy reloads whose new policy removes deny lines, by result: applied, or refused (authz.refuse_deny_removal without the marker).", "result")
	m.configReloads = m.counterVec("toolgate_config_reloads_total", "Reloads of the config file's keys (auth.api_keys, admin.key_sha256, console.approvers) by result: applied, or rejected (the file did not load; the last good keys stay in force).", "result")
	m.approvals = m.gauge("toolgate_approvals_pending", "Approval requests waiting for an approver.")
	m.duplicates = m.counterVec("toolgate_duplicates_suppressed_total", "Calls answered without running upstream because an identical call ran: how is joined (in flight), replayed (recorded) or refused (ran, answer not kept: duplicate_call).", "tool", "how")
	m.auditErrors = m.counter("toolgate_audit_write_errors_total", "Audit trail failures: records that could not be written, failed rotations and flushes, the file moved or removed.")
	m.forwardedTimes = m.histogramVec("toolgate_forwarded_request_duration_seconds", "Time of one forwarded non-tool request (resources/read, prompts/get, ...), in seconds, by method, server and outcome (ok|error).", callBuckets, "method", "server", "outcome")
	m.stateUp = m.gaugeVec("toolgate_state_up", "1 while the shared state store (Redis) answers, else 0; absent without state.redis.")
	m.stateErrors = m.counterVec("toolgate_state_errors_total", "Shared state store operations that failed, or were not tried because the store was down, by feature (rate_limits|policy).", "feature")
	m.shadow.register(m)
	m.webhooks.register(m)
	m.discovery.register(m)
	m.egressRefused = m.counterVec("toolgate_egress_refused_total", "Connections toward an upstream or its token endpoint that the egress guard refused, by server and address class (metadata, loopback, private, ...).", "server", "class")
	m.redactions = m.counterVec("toolgate_redactions_total", "Secrets replaced in what upstreams sent (results, error text, stderr), by redaction pattern.", "pattern")
	// Both results exist from the start, so rate() and alerts see 0 rather than no data.
	m.policyReloads.WithLabelValues("ok")
	m.policyReloads.WithLabelValues("error")
	m.denyRemovals.WithLabelValues("applied")
	m.denyRemovals.WithLabelValues("refused")
	m.configReloads.WithLabelValues("applied")
	m.configReloads.WithLabelValues("rejected")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = m.newHandler()
	return m
}

// newHandler serves the registry. It is built once, because the scrape counters it adds register in
// the registry. One failing collector must not blank the whole scrape, so errors are skipped (and
// counted in promhttp_metric_handler_errors_total).
func (m *Metrics) newHandler() http.Handler {
	opts := promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError}
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, opts))
}

// Handler serves the metrics in the Prometheus exposition format, for /metrics on the admin listener.
// A nil *Metrics serves 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return m.handler
}

func (m *Metrics) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	m.reg.MustRegister(c)
	return c
}

func (m *Metrics) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	m.reg.MustRegister(c)
	return c
}

func (m *Metrics) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	m.reg.MustRegister(g)
	return g
}

func (m *Metrics) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	m.reg.MustRegister(g)
	return g
}

func (m *Metrics) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	m.reg.MustRegister(h)
	return h
}

// labels makes label values acceptable to Prometheus, which panics on invalid UTF-8: a metric must
// never take a call down. Quotes, backslashes and newlines need nothing here; the exposition format
// escapes them. lvs is changed in place and returned.
func labels(lvs ...string) []string {
	for i, v := range lvs {
		if !utf8.ValidString(v) {
			lvs[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	return lvs
}
