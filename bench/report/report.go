// Package report holds what a load harness run found and writes it as
// Markdown (for people and the README) and JSON (for tools), side by side.
package report

import (
	"encoding/json"
	"os"
	"strings"
	"time"
)

// Report is one run of the harness.
type Report struct {
	Command  string   `json:"command"`
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	Rows     []Row    `json:"rows,omitempty"`
	Scaling  *Scaling `json:"scaling,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Machine is what the figures were measured on.
type Machine struct {
	CPU      string    `json:"cpu"`
	Cores    int       `json:"cores"`
	Go       string    `json:"go"`
	Node     string    `json:"node"`
	Kernel   string    `json:"kernel"`
	Date     time.Time `json:"date"`
	Toolgate string    `json:"toolgate"` // the commit measured
}

// Settings are the run's shape.
type Settings struct {
	Rounds      int     `json:"rounds"`
	WarmupS     float64 `json:"warmup_s"`
	SettleS     float64 `json:"settle_max_s"`
	DurationS   float64 `json:"duration_s"`
	Concurrency []int   `json:"concurrency"`
	Quick       bool    `json:"quick"`
	Client      string  `json:"client"` // the load client, described
}

// Sample is one cell measured once: a target at one concurrency in one
// round. CPU figures are µs per completed call; a negative one means "no
// such process" (direct has no gateway).
type Sample struct {
	Round       int     `json:"round"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Throughput  float64 `json:"calls_per_s"`
	GatewayCPU  float64 `json:"gateway_cpu_us_per_call"`
	UpstreamCPU float64 `json:"upstream_cpu_us_per_call"`
	ClientCPU   float64 `json:"client_cpu_us_per_call"`
	PeakRSSMB   float64 `json:"peak_rss_mb"` // the gateway's VmHWM during the cell; 0 without a gateway
	// OtherCPUPct is the share of the machine's CPU that processes other
	// than the client and the target used meanwhile: interference.
	OtherCPUPct float64 `json:"other_cpu_pct"`
	SettleS     float64 `json:"settle_s"`         // waited for a quiet machine before the cell
	Failed      string  `json:"failed,omitempty"` // the cell could not be measured this round
}

// Row is one upstream × target × concurrency over all rounds: the median
// of the rounds' figures (peak RSS: the largest), and ratios to the direct
// call at the same concurrency (and, for toolgate, to the relay).
type Row struct {
	Upstream    string  `json:"upstream"`
	Target      string  `json:"target"`
	Concurrency int     `json:"concurrency"`
	NA          string  `json:"na,omitempty"` // why it was not measured
	Calls       int     `json:"calls"`        // over all rounds
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	Throughput  float64 `json:"calls_per_s"`
	P50Ratio    float64 `json:"p50_vs_direct"`                 // 0: no direct figure
	TputRatio   float64 `json:"throughput_vs_direct"`          // 0: no direct figure
	P50VsRelay  float64 `json:"p50_vs_relay,omitempty"`        // to the zero-check relay on the same transport (issue 22); 0: none
	TputVsRelay float64 `json:"throughput_vs_relay,omitempty"` // to the zero-check relay on the same transport; 0: none
	// VsRelayRounds are the same ratios round by round: each round's
	// sample over the relay's of that round (rounds where either side
	// failed, made no calls or had errors are left out).
	VsRelayRounds []RoundRatio `json:"vs_relay_rounds,omitempty"`
	// VsBaselineRounds are a toolgate row's samples over the baseline
	// binary's (-baseline) of the same target kind, round by round: a
	// change against the build before it, in the same rounds.
	VsBaselineRounds []RoundRatio `json:"vs_baseline_rounds,omitempty"`
	GatewayCPU       float64      `json:"gateway_cpu_us_per_call"`
	UpstreamCPU      float64      `json:"upstream_cpu_us_per_call"`
	ClientCPU        float64      `json:"client_cpu_us_per_call"`
	PeakRSSMB        float64      `json:"peak_rss_mb"`
	OtherCPUPct      float64      `json:"other_cpu_pct"`
	Samples          []Sample     `json:"samples,omitempty"`
}

// RoundRatio is one round's sample of a gateway over the relay's sample of
// the same round.
type RoundRatio struct {
	Round      int     `json:"round"`
	P50        float64 `json:"p50"`
	Throughput float64 `json:"calls_per_s"`
	GatewayCPU float64 `json:"gateway_cpu,omitempty"` // 0: a side measured none
}

// Scaling holds the figures of how toolgate's cost grows (issue 8, item 2).
type Scaling struct {
	Cost      []CostGroup `json:"cost,omitempty"`
	ToolsList []ListRow   `json:"tools_list,omitempty"`
	Memory    []MemRow    `json:"memory,omitempty"`
	Failed    []string    `json:"failed,omitempty"` // figures that could not be measured, and why
}

// CostGroup compares the per-call cost of variants of one gateway setting;
// the first variant is the baseline of the ratios.
type CostGroup struct {
	Name     string   `json:"name"`
	Variants []Row    `json:"variants"` // Target holds the variant's label
	Warmups  []Warmup `json:"warmups,omitempty"`
	// WarmupRule says how the variants were warmed up, as the figures'
	// package ran it (a sentence without its final colon).
	WarmupRule string `json:"warmup_rule,omitempty"`
}

// Warmup is how long one variant of a CostGroup served calls, before its
// rounds, until it stopped faulting in fresh memory.
type Warmup struct {
	Variant string  `json:"variant"`
	Calls   int     `json:"calls"`
	Seconds float64 `json:"seconds"`
	// FirstCalls, FirstFaults and FirstSeconds are the calls, minor page
	// faults and duration of the first batch (FirstCalls 0: none
	// measured; a batch lasts until its calls in flight end); LastFaults
	// is the faults a call of the last (under the threshold unless it gave
	// up).
	FirstCalls   int     `json:"first_calls"`
	FirstFaults  int64   `json:"first_faults"`
	FirstSeconds float64 `json:"first_seconds"`
	LastFaults   float64 `json:"last_faults_per_call"`
	Settled      bool    `json:"settled"`
	// Errors are the failed calls of the batch that stopped the warm-up.
	Errors     int    `json:"errors,omitempty"`
	FirstError string `json:"first_error,omitempty"`
}

// ListRow is tools/list latency for one principal.
type ListRow struct {
	Catalog   int     `json:"catalog_tools"`
	Principal string  `json:"principal"`
	Visible   int     `json:"visible_tools"`
	Calls     int     `json:"calls"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

// MemRow is the gateway's resident memory in one situation.
type MemRow struct {
	Situation string  `json:"situation"`
	RSSMB     float64 `json:"rss_mb"`
	Note      string  `json:"note,omitempty"`
}

// Write writes the report as Markdown to path and as JSON beside it
// (path with .json instead of .md).
func (r *Report) Write(path string) error {
	if err := os.WriteFile(path, []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(JSONPath(path), append(raw, '\n'), 0o644)
}

// JSONPath is where Write puts the JSON twin of a Markdown report.
func JSONPath(md string) string {
	return strings.TrimSuffix(md, ".md") + ".json"
}
