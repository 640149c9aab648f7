package report

import (
	"strings"
	"testing"
)

// The warm-up line names every variant with its calls, seconds and faults,
// says when one did not settle or could not be measured, and ends in a
// full stop.
func TestWriteWarmups(t *testing.T) {
	var b strings.Builder
	writeWarmups(&b, []Warmup{
		{Variant: "10 policy lines", Calls: 2100, Seconds: 0.5, FirstCalls: 2100, FirstFaults: 1491, LastFaults: 0.04, Settled: true},
		{Variant: "100,000 policy lines", Calls: 61000, Seconds: 30.2, FirstCalls: 2, FirstFaults: 9892, LastFaults: 0.3},
		{Variant: "broken"},
	})
	got := b.String()
	for _, want := range []string{
		" 10 policy lines, 2,100 calls in 0.5 s (the first half-second 2,100 calls and 1,491 page faults, the last 0.04 faults a call);",
		" 100,000 policy lines, 61,000 calls in 30.2 s (the first half-second 2 calls and 9,892 page faults, the last 0.30 faults a call; not settled);",
		" broken: could not be measured.\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warm-up line lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	writeWarmups(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no warm-ups wrote %q", b.String())
	}
}
