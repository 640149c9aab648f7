package pipeline_test

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
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// recordingAudit keeps the records appended.
type recordingAudit struct{ records []audit.Record }

func (r *recordingAudit) Append(rec audit.Record) error {
	r.records = append(r.records, rec)
	return nil
}
func (r *recordingAudit) Err() error       { return nil }
func (r *recordingAudit) FailClosed() bool { return false }

// Each link's time is its own: the clock is read at every hand-over and
// return, and what ran inside a link is not charged to it. So with a clock
// that moves on every reading, the links' times add up to the whole chain's
// run, and the call's duration (which metrics and the audit record share)
// is that run up to the end of the links the record link wraps. A link run
// inside another (execute, inside deduplicate) starts when its caller hands
// over, not when the caller began.
func TestStageTimesAddUpToTheCall(t *testing.T) {
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	now := time.Unix(1000, 0)
	p.Now = func() time.Time { now = now.Add(time.Millisecond); return now }
	// The duplicate table's own clock makes deduplicate's work before it
	// runs execute take a second.
	tableClock := func() time.Time { now = now.Add(time.Second); return now }
	p.Guards = []pipeline.Link{dedup.NewGuard(dedup.Options{MaxEntries: 100, Now: tableClock, Window: time.Minute, KeyWindow: 24 * time.Hour}).Link()}
	p.Metrics = metrics.New()
	trail := &recordingAudit{}
	p.Recorder = &pipeline.Recorder{Audit: trail, Metrics: p.Metrics}
	start := now
	if res := p.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}); res.IsError {
		t.Fatalf("call failed: %+v", res)
	}
	whole := now.Sub(start).Seconds() - 0.001 // the last reading was the record link's return
	stage := sums(t, p.Metrics, `toolgate_stage_duration_seconds_sum\{stage="(\w+)"\} (\S+)`)
	call := sums(t, p.Metrics, `toolgate_call_duration_seconds_sum\{tool="(\S+)"\} (\S+)`)["orders/get"]
	var sum float64
	for _, d := range stage {
		sum += d
	}
	// Chain.Handle reads the clock once before the first link; the record
	// link's own time ends with its return.
	if math.Abs(sum-whole) > 1e-9 {
		t.Fatalf("links took %v s in all, the chain ran %v s: %v", sum, whole, stage)
	}
	// The record link reads the duration once the links inside it
	// returned: only its own return (one reading) is after it.
	if math.Abs(call-(whole-0.001)) > 1e-9 {
		t.Fatalf("call duration %v s, want the run before the record link's return, %v s", call, whole-0.001)
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
