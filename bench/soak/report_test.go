package main

// These tests cover the soak's arithmetic only; the soak itself is `go run ./bench/soak`, never a
// test.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 1000; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {1, time.Second}, {0, time.Millisecond}} {
		if got := quantile(lat, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}

// TestCallArgs: the repeated calls are exactly the share asked for, spread over both upstreams, and
// every other call's message is unique.
func TestCallArgs(t *testing.T) {
	const n, share = 200000, 0.01
	seen := map[string]bool{}
	repeats := map[string]int{}
	for i := range n {
		server, msg, repeat := callArgs(i, share)
		if repeat {
			repeats[server]++
			continue
		}
		if want := [2]string{stdioServer, httpServer}[i%2]; server != want {
			t.Fatalf("call %d goes to %s, want %s", i, server, want)
		}
		if seen[msg] {
			t.Fatalf("call %d repeats %q", i, msg)
		}
		seen[msg] = true
	}
	if repeats[stdioServer] != n*share/2 || repeats[httpServer] != n*share/2 {
		t.Errorf("repeated calls %v, want %d each", repeats, int(n*share/2))
	}
	if _, _, r := callArgs(5, 0); r {
		t.Error("share 0 repeated a call")
	}
}

func TestTallyAndPhase(t *testing.T) {
	a, b := newTally(), newTally()
	a.add(outcome{code: "ok"}, time.Millisecond, false)
	a.add(outcome{code: "ok", replayed: true}, 3*time.Millisecond, true)
	b.add(outcome{code: "tool_timeout"}, 2*time.Second, false)
	p := Phase{Servers: map[string]*Tally{stdioServer: a, httpServer: b}, Elapsed: 2 * time.Second}
	p.finish()
	if p.Calls() != 3 || p.Rate != 1.5 || p.P50MS != 3 || p.MaxMS != 2000 {
		t.Errorf("phase: calls %d rate %v p50 %v max %v", p.Calls(), p.Rate, p.P50MS, p.MaxMS)
	}
	if c := p.codes(); c["ok"] != 2 || c["tool_timeout"] != 1 {
		t.Errorf("codes %v", c)
	}
	a.merge(b)
	if a.Calls != 3 || a.Replayed != 1 || a.Repeats != 1 || a.ByCode["tool_timeout"] != 1 || len(a.lat) != 3 {
		t.Errorf("merged %+v", a)
	}
}

func TestAuditCount(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "toolgate.audit.log")
	files := map[string]string{
		base + ".2": `{"kind":"call","tool":"stdio/flaky"}` + "\n" + `{"kind":"pin_change","tool":"stdio/flaky"}` + "\n",
		base + ".1": `{"kind":"call","tool":"http/flaky","error_code":"rate_limited"}` + "\n",
		base:        `{"kind":"call","tool":"http/flaky"}` + "\n" + `{"kind":"call","tool":"stdio/flaky","error_code":"upstream_error"}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	order := auditFiles(base)
	if want := []string{base + ".2", base + ".1", base}; !slices.Equal(order, want) {
		t.Fatalf("auditFiles = %v, want %v", order, want)
	}
	a, err := readAudit(order)
	if err != nil {
		t.Fatal(err)
	}
	if a.Lines != 5 || a.CallRecords != 4 || a.ByKind["pin_change"] != 1 || a.Calls["http/flaky"]["ok"] != 1 || a.Calls["stdio/flaky"]["upstream_error"] != 1 {
		t.Errorf("audit %+v", a)
	}
	client := map[string]map[string]int{
		"stdio/flaky": {"ok": 1, "upstream_error": 1},
		"http/flaky":  {"ok": 1, "rate_limited": 1},
	}
	if d := compareAudit(client, a.Calls); len(d) != 0 {
		t.Errorf("equal counts differ: %v", d)
	}
	client["http/flaky"]["client_error"] = 1
	client["stdio/flaky"]["ok"] = 2
	d := compareAudit(client, a.Calls)
	want := []string{
		"http/flaky client_error: 0 records, 1 calls seen by the client (-1)",
		"stdio/flaky ok: 1 records, 2 calls seen by the client (-1)",
	}
	if !slices.Equal(d, want) {
		t.Errorf("diffs %q, want %q", d, want)
	}
}

func TestCountFaults(t *testing.T) {
	got := countFaults(strings.NewReader("crash\nhang\ngarbage wrong_id\n\ncrash\n"))
	if got["crash"] != 2 || got["hang"] != 1 || got["garbage wrong_id"] != 1 || len(got) != 3 {
		t.Errorf("countFaults = %v", got)
	}
}

func TestMetricsParse(t *testing.T) {
	m := metricSet{
		`toolgate_calls_total{error_code="",outcome="ok",tool="a/x"}`:                      3,
		`toolgate_calls_total{error_code="tool_timeout",outcome="error",tool="a/x"}`:       1,
		`toolgate_calls_total{error_code="",outcome="ok",tool="b/x"}`:                      2,
		`toolgate_upstream_request_duration_seconds_count{outcome="succeeded",server="a"}`: 5,
		`go_goroutines`: 40,
	}
	got := metricsOf(m)
	if got.CallsTotal["ok"] != 5 || got.CallsTotal["tool_timeout"] != 1 || got.UpstreamOutcome["a/succeeded"] != 5 {
		t.Errorf("metricsOf = %+v", got)
	}
	if m.value("go_goroutines") != 40 {
		t.Error("go_goroutines")
	}
}
