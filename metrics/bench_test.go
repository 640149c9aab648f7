package metrics

import (
	"testing"
	"time"
)

// BenchmarkCallFinished is what the record stage adds to every call: the cached children of one
// series, a counter increment and a histogram observation.
func BenchmarkCallFinished(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.CallFinished("orders/update_order_status", "ok", "", 250*time.Millisecond)
	}
}

// BenchmarkCallFinishedParallel is the same from every CPU at once, on a few series.
func BenchmarkCallFinishedParallel(b *testing.B) {
	m := New()
	tools := []string{"orders/update_order_status", "orders/get_order", "orders/refund_order", "search/query"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.CallFinished(tools[i%len(tools)], "ok", "", 250*time.Millisecond)
			i++
		}
	})
}

// BenchmarkCallFinishedUncached is the baseline the cache is measured against: looking the children
// up in the vectors by label values on every call.
func BenchmarkCallFinishedUncached(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.calls.WithLabelValues("orders/update_order_status", "ok", "").Inc()
		m.callDuration.WithLabelValues("orders/update_order_status").Observe(0.25)
	}
}

// BenchmarkCallFinishedUncachedParallel is the uncached baseline from every CPU.
func BenchmarkCallFinishedUncachedParallel(b *testing.B) {
	m := New()
	tools := []string{"orders/update_order_status", "orders/get_order", "orders/refund_order", "search/query"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tool := tools[i%len(tools)]
			m.calls.WithLabelValues(tool, "ok", "").Inc()
			m.callDuration.WithLabelValues(tool).Observe(0.25)
			i++
		}
	})
}

// BenchmarkStageTimer is paid once per stage, up to eight times per call
// (the timer is taken once, when the chain is built).
func BenchmarkStageTimer(b *testing.B) {
	observe := New().StageTimer("validate")
	b.ReportAllocs()
	for b.Loop() {
		observe(50 * time.Microsecond)
	}
}

// BenchmarkUpstreamAttempt is paid once per upstream attempt.
func BenchmarkUpstreamAttempt(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.UpstreamAttempt("orders", "succeeded", 250*time.Millisecond)
	}
}
