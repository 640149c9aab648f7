package report

import (
	"slices"
	"strings"
	"testing"
)

// The warm-up line names every variant with its calls, seconds and faults,
// says when one did not settle or could not be measured, and ends in a
// full stop.
func TestWriteWarmups(t *testing.T) {
	var b strings.Builder
	writeWarmups(&b, "Warm-up, until settled", []Warmup{
		{Variant: "10 policy lines", Calls: 2100, Seconds: 0.5, FirstCalls: 2100, FirstSeconds: 0.5, FirstFaults: 1491, LastFaults: 0.04, Settled: true},
		{Variant: "100,000 policy lines", Calls: 61000, Seconds: 30.2, FirstCalls: 2, FirstSeconds: 1.04, FirstFaults: 9892, LastFaults: 0.3},
		{Variant: "failing", Calls: 10, Errors: 3, FirstError: "access_denied:\nno"},
		{Variant: "broken"},
	})
	got := b.String()
	for _, want := range []string{
		"Warm-up, until settled: 10 policy lines",
		" 10 policy lines, 2,100 calls in 0.5 s (the first batch 2,100 calls in 0.5 s and 1,491 page faults, the last 0.04 faults a call);",
		" 100,000 policy lines, 61,000 calls in 30.2 s (the first batch 2 calls in 1.0 s and 9,892 page faults, the last 0.30 faults a call; not settled);",
		" failing: stopped by 3 failed calls (access_denied: no);",
		" broken: could not be measured.\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warm-up line lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	writeWarmups(&b, "Warm-up", nil)
	if b.Len() != 0 {
		t.Errorf("no warm-ups wrote %q", b.String())
	}
}

// The round-by-round section gives each row with paired ratios its median,
// range and the rounds on toolgate's side of 1 as printed (1.00 counts,
// 0.996 is printed 1.00), leaves the row's ratios in round order, and is
// left out when no row has any.
func TestWriteRelayRounds(t *testing.T) {
	rounds := []RoundRatio{
		{Round: 1, Throughput: 0.9, P50: 1.05},
		{Round: 2, Throughput: 1.2, P50: 0.8},
		{Round: 3, Throughput: 0.996, P50: 1},
		{Round: 4, Throughput: 1.1, P50: 1.004},
	}
	kept := slices.Clone(rounds)
	var b strings.Builder
	writeRelayRounds(&b, []Row{
		{Upstream: "go", Target: "relay-http", Concurrency: 16},
		{Upstream: "go", Target: "toolgate-http", Concurrency: 16, VsRelayRounds: rounds},
		{Upstream: "go", Target: "toolgate-http", Concurrency: 64, NA: "did not start", VsRelayRounds: rounds[:1]},
	})
	got := b.String()
	for _, want := range []string{
		"### Against the relay, round by round\n",
		"| rounds ≤ 1 |\n|---|---|---|---|---|---|---|\n| go |",
		"| go | toolgate-http | 16 | 1.05 (0.90–1.20) | 3 of 4 | 1.00 (0.80–1.05) | 3 of 4 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 64 |") || strings.Contains(got, "relay-http") {
		t.Errorf("section has a row without paired ratios:\n%s", got)
	}
	if !slices.Equal(rounds, kept) {
		t.Errorf("the row's ratios were reordered: %v", rounds)
	}
	b.Reset()
	writeRelayRounds(&b, []Row{{Upstream: "go", Target: "relay-http", Concurrency: 1}})
	if b.Len() != 0 {
		t.Errorf("no paired ratios wrote %q", b.String())
	}
}

// The baseline section gives each toolgate row's ratios to the baseline by
// round, gateway CPU a call included, and nothing when there are none.
func TestWriteBaselineRounds(t *testing.T) {
	var b strings.Builder
	writeBaselineRounds(&b, []Row{
		{Upstream: "go", Target: "baseline-http", Concurrency: 16},
		{Upstream: "go", Target: "toolgate-http", Concurrency: 16, VsBaselineRounds: []RoundRatio{
			{Round: 1, Throughput: 1.1, P50: 0.9, GatewayCPU: 0.8},
			{Round: 2, Throughput: 0.95, P50: 1.1, GatewayCPU: 1.05},
			{Round: 3, Throughput: 1.2, P50: 0.8},
		}},
	})
	got := b.String()
	for _, want := range []string{
		"### Against the baseline, round by round\n",
		"| rounds ≤ 1 |\n|---|---|---|---|---|---|---|---|---|\n| go |",
		"| go | toolgate-http | 16 | 1.10 (0.95–1.20) | 2 of 3 | 0.90 (0.80–1.10) | 2 of 3 | 0.93 (0.80–1.05) | 1 of 2 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	writeBaselineRounds(&b, []Row{{Upstream: "go", Target: "toolgate-http", Concurrency: 1}})
	if b.Len() != 0 {
		t.Errorf("no paired ratios wrote %q", b.String())
	}
}
