package proxy

import (
	"context"
	"io"
	"math"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/metrics"
)

// recordingAudit keeps the records appended.
type recordingAudit struct{ records []audit.Record }

func (r *recordingAudit) Append(rec audit.Record) error {
	r.records = append(r.records, rec)
	return nil
}
func (r *recordingAudit) Err() error       { return nil }
func (r *recordingAudit) FailClosed() bool { return false }

// Each stage starts where the one before it ended (one clock reading per
// stage), so with a clock that moves on every reading the top-level
// stages' times add up to the call's, which metrics and the audit record
// share. A stage run inside another (execute, inside deduplicate) starts
// when its caller hands over, not when the caller began.
func TestStageTimesAddUpToTheCall(t *testing.T) {
	p := newTestPipeline(t, &fakeUpstreams{fn: answer(okText)})
	now := time.Unix(1000, 0)
	p.Now = func() time.Time { now = now.Add(time.Millisecond); return now }
	// The duplicate table's own clock makes deduplicate's work before it
	// runs execute take a second.
	tableClock := func() time.Time { now = now.Add(time.Second); return now }
	p.Dedup = &Dedup{Table: dedup.NewTable[Recorded](100, tableClock), Window: time.Minute, KeyWindow: 24 * time.Hour}
	p.Metrics = metrics.New()
	trail := &recordingAudit{}
	p.Audit = trail
	if res := p.Handle(context.Background(), Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); res.IsError {
		t.Fatalf("call failed: %+v", res)
	}
	stage := sums(t, p.Metrics, `toolgate_stage_duration_seconds_sum\{stage="(\w+)"\} (\S+)`)
	call := sums(t, p.Metrics, `toolgate_call_duration_seconds_sum\{tool="(\S+)"\} (\S+)`)["orders/get"]
	var topLevel float64
	for name, d := range stage {
		if name != "execute" && name != "normalize" { // run inside deduplicate
			topLevel += d
		}
	}
	if math.Abs(topLevel-call) > 1e-9 || call == 0 {
		t.Fatalf("top-level stages took %v s in all, the call %v s: %v", topLevel, call, stage)
	}
	if len(trail.records) != 1 || math.Abs(float64(trail.records[0].DurationMS)-call*1000) > 1e-6 {
		t.Fatalf("audit duration_ms %+v, want %v", trail.records, call*1000)
	}
	if stage["execute"] >= 1 || stage["deduplicate"] < 1 {
		t.Fatalf("execute took %v s, deduplicate %v s: execute includes deduplicate's own second", stage["execute"], stage["deduplicate"])
	}
}

// sums reads the series the pattern matches (label, value) off the metrics page.
func sums(t *testing.T, m *metrics.Metrics, pattern string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	page, _ := io.ReadAll(rec.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(string(page), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = v
	}
	if len(out) == 0 {
		t.Fatalf("no series match %s", pattern)
	}
	return out
}
