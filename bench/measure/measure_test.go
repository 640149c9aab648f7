package measure

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/bench/report"
)

// The ratios to the relay by round pair each gateway sample with the
// relay's of the same round, whatever order the samples are in, and leave
// out a round where either side failed, made no calls or had failed calls
// (figures that look like a measurement but are not one).
func TestRelayRatiosPairRounds(t *testing.T) {
	ok := func(round int, p50, tput float64) report.Sample {
		return report.Sample{Round: round, Calls: 100, P50Ms: p50, Throughput: tput}
	}
	failedRelay := ok(3, 1, 100)
	failedRelay.Failed = "did not start"
	callless := ok(6, 1, 100)
	callless.Calls = 0
	relay := []report.Sample{ok(2, 2, 100), ok(1, 1, 200), failedRelay, ok(4, 4, 400), ok(5, 1, 100), callless, ok(7, 1, 100)}
	failedGateway := ok(4, 1, 100)
	failedGateway.Failed = "timed out"
	erring := ok(5, 0.1, 900)
	erring.Errors = 3
	gateway := []report.Sample{ok(1, 0.5, 300), ok(2, 3, 50), ok(3, 1, 100), failedGateway, erring, ok(6, 1, 100), ok(8, 1, 100), ok(7, 1, 100)}
	rows := []report.Row{
		Row("go", "relay-http", 16, relay),
		Row("go", "toolgate-http", 16, gateway),
		Row("go", "toolgate-http", 64, gateway), // no relay row at 64
	}
	RelayRatios(rows, map[string]string{"toolgate-http": "relay-http"})
	want := []report.RoundRatio{{Round: 1, P50: 0.5, Throughput: 1.5}, {Round: 2, P50: 1.5, Throughput: 0.5}, {Round: 7, P50: 1, Throughput: 1}}
	if got := rows[1].VsRelayRounds; !slices.Equal(got, want) {
		t.Errorf("ratios by round = %v, want %v", got, want)
	}
	if rows[2].VsRelayRounds != nil || rows[0].VsRelayRounds != nil {
		t.Errorf("rows without a relay got ratios by round: %v, %v", rows[2].VsRelayRounds, rows[0].VsRelayRounds)
	}
}

// A toolgate row is paired with the baseline binary's row of its kind,
// round by round, gateway CPU a call included when both sides measured it;
// a row without a baseline gets nothing.
func TestBaselineRatiosPairRounds(t *testing.T) {
	sample := func(round int, p50, tput, cpu float64) report.Sample {
		return report.Sample{Round: round, Calls: 100, P50Ms: p50, Throughput: tput, GatewayCPU: cpu}
	}
	rows := []report.Row{
		Row("go", "baseline-http", 16, []report.Sample{sample(1, 2, 100, 200), sample(2, 1, 100, 0)}),
		Row("go", "toolgate-http", 16, []report.Sample{sample(1, 1, 150, 100), sample(2, 2, 50, 100)}),
		Row("go", "toolgate-stdio", 16, []report.Sample{sample(1, 1, 150, 100)}),
	}
	BaselineRatios(rows, map[string]string{"toolgate-http": "baseline-http", "toolgate-stdio": "baseline-stdio"})
	want := []report.RoundRatio{{Round: 1, P50: 0.5, Throughput: 1.5, GatewayCPU: 0.5}, {Round: 2, P50: 2, Throughput: 0.5}}
	if got := rows[1].VsBaselineRounds; !slices.Equal(got, want) {
		t.Errorf("ratios to the baseline by round = %v, want %v", got, want)
	}
	if rows[2].VsBaselineRounds != nil || rows[0].VsBaselineRounds != nil {
		t.Errorf("rows without a baseline got ratios: %v, %v", rows[2].VsBaselineRounds, rows[0].VsBaselineRounds)
	}
}
