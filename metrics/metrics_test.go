package metrics

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeText GETs h's /metrics through a real HTTP server, as Prometheus would.
func scrapeText(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	return string(body)
}

// scrape parses a scrape into its metric families.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(scrapeText(t, h)))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// samples flattens the toolgate_ families into `name{k="v",...}` -> value, labels sorted by name.
// A histogram gives its _count and _sum; its buckets are left to buckets.
func samples(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "toolgate_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			sig := signature(mt.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+sig] = mt.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+sig] = mt.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+sig] = float64(mt.GetHistogram().GetSampleCount())
				out[name+"_sum"+sig] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// buckets returns the cumulative bucket counts of one histogram series, by upper bound.
func buckets(t *testing.T, fams map[string]*dto.MetricFamily, name, sig string) map[float64]uint64 {
	t.Helper()
	for _, mt := range fams[name].GetMetric() {
		if signature(mt.GetLabel()) == sig {
			out := map[float64]uint64{}
			for _, b := range mt.GetHistogram().GetBucket() {
				out[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			return out
		}
	}
	t.Fatalf("no series %s%s", name, sig)
	return nil
}

func signature(lps []*dto.LabelPair) string {
	if len(lps) == 0 {
		return ""
	}
	parts := make([]string, 0, len(lps))
	for _, lp := range lps {
		parts = append(parts, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// TestScrapeAfterScriptedCalls reports what a short gateway session would and checks every toolgate_
// series of the scrape: nothing missing, nothing extra, exact values. Durations are binary fractions
// so that sums are exact.
func TestScrapeAfterScriptedCalls(t *testing.T) {
	const update, refund = "orders/update_order_status", "orders/refund_order"
	m := New()
	m.CallFinished(update, "ok", "", 250*time.Millisecond)
	m.CallFinished(update, "ok", "", 250*time.Millisecond)
	m.CallFinished(update, "error", "tool_not_allowed", 125*time.Millisecond)
	m.CallFinished(Unresolved, "error", "tool_not_found", 125*time.Millisecond)
	m.CallFinished(refund, "error", "tool_timeout", 2*time.Second)
	m.StageTimer("resolve")(125 * time.Millisecond)
	m.StageTimer("resolve")(250 * time.Millisecond)
	m.StageTimer("execute")(2 * time.Second)
	m.UpstreamAttempt("orders", "succeeded", 250*time.Millisecond)
	m.UpstreamAttempt("orders", "succeeded", 500*time.Millisecond)
	m.UpstreamAttempt("orders", "timed_out", time.Second)
	m.BreakerState("orders", "closed")
	m.BreakerState("orders", "open")
	m.BreakerState("orders", "half-open")
	m.BreakerState("search", "open")
	m.UpstreamUp("orders", true)
	m.UpstreamUp("search", true)
	m.UpstreamUp("search", false)
	m.UpstreamRestart("search")
	m.CatalogSize(3)
	m.CatalogSize(7)
	m.PolicyReload(true)
	m.PolicyReload(false)
	m.PolicyReload(true)
	m.ConfigReload(true)
	m.ConfigReload(false)
	m.ConfigReload(true)
	m.ConfigReload(true)
	m.PolicyInfo("a1b2c3d4e5f6")
	m.PolicyInfo("0123456789ab")
	m.PolicyDenyLines(3)
	m.PolicyDenyLines(1)
	m.PolicyDenyRemoval(true)
	m.PolicyDenyRemoval(false)
	m.PolicyDenyRemoval(false)
	m.ApprovalsPending(2)
	m.ApprovalsPending(1)
	m.ApprovalWebhook("approvals.rules[0].webhooks[0]", WebhookFailed)
	m.ApprovalWebhook("approvals.rules[0].webhooks[0]", WebhookDelivered)
	m.ApprovalWebhook("approvals.rules[0].webhooks[0]", WebhookDelivered)
	m.ToolSearch("agent", SearchFound)
	m.ToolSearch("agent", SearchFound)
	m.ToolSearch("agent", SearchEmpty)
	m.DuplicateSuppressed(refund, "joined")
	m.DuplicateSuppressed(refund, "replayed")
	m.DuplicateSuppressed(refund, "replayed")
	m.AuditWriteError()
	m.AuditWriteError()
	m.AuditWriteError()
	m.ForwardedRequest("resources/read", "orders", "ok", 125*time.Millisecond)
	m.ForwardedRequest("prompts/get", "orders", "error", 250*time.Millisecond)
	m.Redacted("aws_access_key", 2)
	m.Redacted("aws_access_key", 1)
	m.Redacted("jwt", 1)
	m.EgressRefused("search", "metadata")

	fams := scrape(t, m.Handler())
	want := map[string]float64{
		`toolgate_calls_total{error_code="",outcome="ok",tool="orders/update_order_status"}`:                    2,
		`toolgate_calls_total{error_code="tool_not_allowed",outcome="error",tool="orders/update_order_status"}`: 1,
		`toolgate_calls_total{error_code="tool_not_found",outcome="error",tool="unresolved"}`:                   1,
		`toolgate_calls_total{error_code="tool_timeout",outcome="error",tool="orders/refund_order"}`:            1,
		`toolgate_call_duration_seconds_count{tool="orders/update_order_status"}`:                               3,
		`toolgate_call_duration_seconds_sum{tool="orders/update_order_status"}`:                                 0.625,
		`toolgate_call_duration_seconds_count{tool="unresolved"}`:                                               1,
		`toolgate_call_duration_seconds_sum{tool="unresolved"}`:                                                 0.125,
		`toolgate_call_duration_seconds_count{tool="orders/refund_order"}`:                                      1,
		`toolgate_call_duration_seconds_sum{tool="orders/refund_order"}`:                                        2,
		`toolgate_stage_duration_seconds_count{stage="resolve"}`:                                                2,
		`toolgate_stage_duration_seconds_sum{stage="resolve"}`:                                                  0.375,
		`toolgate_stage_duration_seconds_count{stage="execute"}`:                                                1,
		`toolgate_stage_duration_seconds_sum{stage="execute"}`:                                                  2,
		`toolgate_upstream_request_duration_seconds_count{outcome="succeeded",server="orders"}`:                 2,
		`toolgate_upstream_request_duration_seconds_sum{outcome="succeeded",server="orders"}`:                   0.75,
		`toolgate_upstream_request_duration_seconds_count{outcome="timed_out",server="orders"}`:                 1,
		`toolgate_upstream_request_duration_seconds_sum{outcome="timed_out",server="orders"}`:                   1,
		`toolgate_breaker_state{server="orders"}`:                                                               1,
		`toolgate_breaker_state{server="search"}`:                                                               2,
		`toolgate_upstream_up{server="orders"}`:                                                                 1,
		`toolgate_upstream_up{server="search"}`:                                                                 0,
		`toolgate_upstream_restarts_total{server="search"}`:                                                     1,
		`toolgate_catalog_tools`:                                                                                  7,
		`toolgate_policy_reloads_total{result="ok"}`:                                                              2,
		`toolgate_policy_reloads_total{result="error"}`:                                                           1,
		`toolgate_policy_info{version="0123456789ab"}`:                                                            1,
		`toolgate_config_reloads_total{result="applied"}`:                                                         3,
		`toolgate_config_reloads_total{result="rejected"}`:                                                        1,
		`toolgate_policy_deny_lines`:                                                                              1,
		`toolgate_policy_reloads_removing_denies_total{result="applied"}`:                                         1,
		`toolgate_policy_reloads_removing_denies_total{result="refused"}`:                                         2,
		`toolgate_approvals_pending`:                                                                              1,
		`toolgate_approval_webhooks_total{result="delivered",webhook="approvals.rules[0].webhooks[0]"}`:           2,
		`toolgate_approval_webhooks_total{result="failed",webhook="approvals.rules[0].webhooks[0]"}`:              1,
		`toolgate_tool_searches_total{result="found",toolset="agent"}`:                                            2,
		`toolgate_tool_searches_total{result="empty",toolset="agent"}`:                                            1,
		`toolgate_duplicates_suppressed_total{how="joined",tool="orders/refund_order"}`:                           1,
		`toolgate_duplicates_suppressed_total{how="replayed",tool="orders/refund_order"}`:                         2,
		`toolgate_audit_write_errors_total`:                                                                       3,
		`toolgate_redactions_total{pattern="aws_access_key"}`:                                                     3,
		`toolgate_redactions_total{pattern="jwt"}`:                                                                1,
		`toolgate_egress_refused_total{class="metadata",server="search"}`:                                         1,
		`toolgate_forwarded_request_duration_seconds_count{method="resources/read",outcome="ok",server="orders"}`: 1,
		`toolgate_forwarded_request_duration_seconds_sum{method="resources/read",outcome="ok",server="orders"}`:   0.125,
		`toolgate_forwarded_request_duration_seconds_count{method="prompts/get",outcome="error",server="orders"}`: 1,
		`toolgate_forwarded_request_duration_seconds_sum{method="prompts/get",outcome="error",server="orders"}`:   0.25,
	}
	got := samples(fams)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("missing %s", k)
		} else if g != want[k] {
			t.Errorf("%s = %v, want %v", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, got[k])
		}
	}

	// Buckets are cumulative and an upper bound is inclusive: 0.125 and 0.25 fall in le=0.25.
	b := buckets(t, fams, "toolgate_call_duration_seconds", `{tool="orders/update_order_status"}`)
	for le, n := range map[float64]uint64{0.1: 0, 0.25: 3, 0.5: 3, 300: 3} {
		if b[le] != n {
			t.Errorf("call duration bucket le=%v = %d, want %d", le, b[le], n)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"} {
		if fams[name] == nil {
			t.Errorf("scrape has no %s", name)
		}
	}
}

// TestOwnRegistry: two gateways in one process register the same names without a clash, see only
// their own values, and leave the global default registry alone.
func TestOwnRegistry(t *testing.T) {
	a, b := New(), New()
	a.AuditWriteError()
	if got := samples(scrape(t, a.Handler()))["toolgate_audit_write_errors_total"]; got != 1 {
		t.Errorf("a: audit write errors = %v, want 1", got)
	}
	if got := samples(scrape(t, b.Handler()))["toolgate_audit_write_errors_total"]; got != 0 {
		t.Errorf("b: audit write errors = %v, want 0", got)
	}
	global, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range global {
		if strings.HasPrefix(f.GetName(), "toolgate_") {
			t.Errorf("the default registry has %s", f.GetName())
		}
	}
}

func TestBreakerState(t *testing.T) {
	tests := []struct {
		states []string
		want   float64
	}{
		{[]string{"closed"}, 0},
		{[]string{"half-open"}, 1},
		{[]string{"open"}, 2},
		{[]string{"open", "half-open", "closed"}, 0},
		{[]string{"open", "bogus"}, 2}, // an unknown state keeps the last known one
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.states, ","), func(t *testing.T) {
			m := New()
			for _, s := range tt.states {
				m.BreakerState("orders", s)
			}
			if got := samples(scrape(t, m.Handler()))[`toolgate_breaker_state{server="orders"}`]; got != tt.want {
				t.Errorf("breaker state = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStateMetrics: the state series exist only once reported, errors start at 0 per feature, and the
// gauge follows the store.
func TestStateMetrics(t *testing.T) {
	m := New()
	for k := range samples(scrape(t, m.Handler())) {
		if strings.HasPrefix(k, "toolgate_state_") {
			t.Errorf("%s exists before the gateway reported a shared store", k)
		}
	}
	m.StateFeatures("rate_limits", "policy")
	m.StateUp(true)
	m.StateUp(false)
	m.StateError("rate_limits")
	m.StateError("rate_limits")
	got := samples(scrape(t, m.Handler()))
	for k, want := range map[string]float64{
		"toolgate_state_up": 0, `toolgate_state_errors_total{feature="rate_limits"}`: 2, `toolgate_state_errors_total{feature="policy"}`: 0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}

// TestPolicyInfoOneSeries: however versions race, one series with value 1 is left.
func TestPolicyInfoOneSeries(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { m.PolicyInfo(fmt.Sprintf("v%02d", i)) })
	}
	wg.Wait()
	var series []string
	for k, v := range samples(scrape(t, m.Handler())) {
		if strings.HasPrefix(k, "toolgate_policy_info") {
			series = append(series, k)
			if v != 1 {
				t.Errorf("%s = %v, want 1", k, v)
			}
		}
	}
	if len(series) != 1 {
		t.Errorf("policy info series = %v, want exactly one", series)
	}
}

// TestConcurrentCallFinished: the call cache loses no increment when many goroutines create and use
// the same series at once (run with -race).
func TestConcurrentCallFinished(t *testing.T) {
	m := New()
	tools := []string{"a/x", "a/y", "b/x", "b/y"}
	const goroutines, calls = 8, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range calls {
				m.CallFinished(tools[i%len(tools)], "ok", "", time.Millisecond)
			}
		})
	}
	wg.Wait()
	got := samples(scrape(t, m.Handler()))
	for _, tool := range tools {
		k := `toolgate_calls_total{error_code="",outcome="ok",tool="` + tool + `"}`
		if want := float64(goroutines * calls / len(tools)); got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

// TestLabelEscaping: label values with quotes, backslashes, newlines and non-ASCII survive the
// exposition format escaped, and invalid UTF-8 becomes U+FFFD instead of a panic, in the cached
// (call, stage, upstream) and the uncached paths alike.
func TestLabelEscaping(t *testing.T) {
	tests := []struct {
		name, tool string
		wantText   string // as it appears in the scrape
		wantValue  string // as a parser reads it back
	}{
		{"quote", `srv/say"hi"`, `tool="srv/say\"hi\""`, `srv/say"hi"`},
		{"backslash", `srv/C:\dir`, `tool="srv/C:\\dir"`, `srv/C:\dir`},
		{"newline", "srv/two\nlines", `tool="srv/two\nlines"`, "srv/two\nlines"},
		{"unicode", "srv/zürich→東京", `tool="srv/zürich→東京"`, "srv/zürich→東京"},
		{"invalid utf-8", "srv/bad\xffbyte", `tool="srv/bad` + "\uFFFD" + `byte"`, "srv/bad\uFFFDbyte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.CallFinished(tt.tool, "ok", "", time.Second)
			m.DuplicateSuppressed(tt.tool, "joined")
			m.StageTimer(tt.tool)(time.Second)
			m.UpstreamAttempt(tt.tool, "succeeded", time.Second)
			text := scrapeText(t, m.Handler())
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("scrape lacks %s:\n%s", tt.wantText, grep(text, "toolgate_calls_total"))
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(text))
			if err != nil {
				t.Fatal(err)
			}
			got := samples(fams)
			for _, k := range []string{
				`toolgate_calls_total{error_code="",outcome="ok",tool=` + strconv.Quote(tt.wantValue) + `}`,
				`toolgate_duplicates_suppressed_total{how="joined",tool=` + strconv.Quote(tt.wantValue) + `}`,
				`toolgate_stage_duration_seconds_count{stage=` + strconv.Quote(tt.wantValue) + `}`,
				`toolgate_upstream_request_duration_seconds_count{outcome="succeeded",server=` + strconv.Quote(tt.wantValue) + `}`,
			} {
				if got[k] != 1 {
					t.Errorf("%s = %v, want 1", k, got[k])
				}
			}
		})
	}
}

func grep(text, prefix string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// TestNilMetrics: a gateway without metrics calls every method on a nil *Metrics.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.CallFinished("a/b", "ok", "", time.Second)
	m.StageTimer("resolve")(time.Second)
	m.UpstreamAttempt("a", "succeeded", time.Second)
	m.ForwardedRequest("resources/read", "a", "ok", time.Second)
	m.DuplicateSuppressed("a/b", "joined")
	m.BreakerState("a", "open")
	m.UpstreamUp("a", true)
	m.UpstreamRestart("a")
	m.CatalogSize(1)
	m.PolicyReload(true)
	m.ConfigReload(true)
	m.PolicyInfo("v")
	m.PolicyDenyLines(1)
	m.PolicyDenyRemoval(true)
	m.ApprovalsPending(1)
	m.ApprovalWebhook("approvals.rules[0].webhooks[0]", WebhookDelivered)
	m.AuditWriteError()
	m.StateUp(true)
	m.StateFeatures("policy")
	m.StateError("policy")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Handler: %d, want 404", rec.Code)
	}
}

// TestPolicyDenyRemovalMetrics: the deny-line gauge follows the policy in force, and reloads that
// remove deny lines are counted by result, both results present at 0 from the start.
func TestPolicyDenyRemovalMetrics(t *testing.T) {
	m := New()
	got := samples(scrape(t, m.Handler()))
	for _, k := range []string{`toolgate_policy_reloads_removing_denies_total{result="applied"}`, `toolgate_policy_reloads_removing_denies_total{result="refused"}`,
		`toolgate_config_reloads_total{result="applied"}`, `toolgate_config_reloads_total{result="rejected"}`} {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 from the start", k, v, ok)
		}
	}
	m.PolicyDenyLines(4)
	m.PolicyDenyRemoval(false)
	m.PolicyDenyLines(0)
	m.PolicyDenyRemoval(true)
	got = samples(scrape(t, m.Handler()))
	want := map[string]float64{
		`toolgate_policy_deny_lines`:                                      0,
		`toolgate_policy_reloads_removing_denies_total{result="applied"}`: 1,
		`toolgate_policy_reloads_removing_denies_total{result="refused"}`: 1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
