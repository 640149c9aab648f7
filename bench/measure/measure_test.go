package measure

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/bench/report"
)

// The ratios to the relay by round pair each gateway sample with the
// relay's of the same round, whatever order the samples are in, and leave
// out a round where either side failed or the relay has no sample.
func TestRelayRatiosPairRounds(t *testing.T) {
	relay := []report.Sample{
		{Round: 2, P50Ms: 2, Throughput: 100},
		{Round: 1, P50Ms: 1, Throughput: 200},
		{Round: 3, Failed: "did not start"},
		{Round: 4, P50Ms: 4, Throughput: 400},
	}
	gateway := []report.Sample{
		{Round: 1, P50Ms: 0.5, Throughput: 300},
		{Round: 2, P50Ms: 3, Throughput: 50},
		{Round: 3, P50Ms: 1, Throughput: 100},
		{Round: 4, Failed: "timed out"},
		{Round: 5, P50Ms: 1, Throughput: 100},
	}
	rows := []report.Row{
		Row("go", "relay-http", 16, relay),
		Row("go", "toolgate-http", 16, gateway),
		Row("go", "toolgate-http", 64, gateway), // no relay row at 64
	}
	RelayRatios(rows, map[string]string{"toolgate-http": "relay-http"})
	got := rows[1]
	if want := []float64{0.5, 1.5}; !slices.Equal(got.P50VsRelayRounds, want) {
		t.Errorf("p50 by round = %v, want %v", got.P50VsRelayRounds, want)
	}
	if want := []float64{1.5, 0.5}; !slices.Equal(got.TputVsRelayRounds, want) {
		t.Errorf("calls/s by round = %v, want %v", got.TputVsRelayRounds, want)
	}
	if rows[2].TputVsRelayRounds != nil || rows[0].TputVsRelayRounds != nil {
		t.Errorf("rows without a relay got ratios by round: %v, %v", rows[2].TputVsRelayRounds, rows[0].TputVsRelayRounds)
	}
}
