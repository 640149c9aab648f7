package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is everything one soak run found; the JSON beside the Markdown holds it whole.
type Report struct {
	Machine Machine `json:"machine"`
	Params  Params  `json:"params"`

	// Main is the measured calls (Params.Calls), Warmup the calls before them; both reached the
	// gateway and both are in the audit trail.
	Main   Phase `json:"main"`
	Warmup Phase `json:"warmup"`

	RSS        map[string]int64 `json:"rss_bytes"`  // idle_before, start (after warm-up), middle, end, end_settled, peak (VmHWM over the main calls)
	Goroutines map[string]int   `json:"goroutines"` // go_goroutines: idle_before (sessions open), start, middle, end_calls (right after the last call), end (after the settle)
	GatewayCPU time.Duration    `json:"gateway_cpu_ns"`
	OtherCPU   float64          `json:"other_cpu_percent"` // the machine's CPU used by other processes during the main calls, % of all cores

	Children Children `json:"children"`
	Audit    Audit    `json:"audit"`
	Faults   Faults   `json:"faults"`
	Metrics  Metrics  `json:"metrics"`

	Timeline []Sample `json:"timeline"` // once a second during the main calls
	Notes    []string `json:"notes"`
}

// Machine says where and on what the run happened.
type Machine struct {
	CPU      string    `json:"cpu"`
	Cores    int       `json:"cores"`
	Go       string    `json:"go"`
	Kernel   string    `json:"kernel"`
	Date     time.Time `json:"date"`
	Toolgate string    `json:"toolgate"`
	LoadAvg  string    `json:"loadavg_before"`
}

// Params are the run's settings.
type Params struct {
	Calls       int           `json:"calls"`
	Warmup      int           `json:"warmup"`
	Concurrency int           `json:"concurrency"`
	FaultRate   float64       `json:"fault_rate"`
	StdioFaults string        `json:"stdio_faults"`
	HTTPFaults  string        `json:"http_faults"`
	Repeat      float64       `json:"repeat"`
	Seed        uint64        `json:"seed"`
	Timeout     time.Duration `json:"server_timeout_ns"`
	CallTimeout time.Duration `json:"client_call_timeout_ns"`
	Settle      time.Duration `json:"settle_ns"`
}

// Phase is the calls of one phase, per upstream.
type Phase struct {
	Elapsed   time.Duration     `json:"elapsed_ns"`
	Servers   map[string]*Tally `json:"servers"`
	P50, P99  time.Duration     `json:"-"`
	P50MS     float64           `json:"p50_ms"`
	P99MS     float64           `json:"p99_ms"`
	P999MS    float64           `json:"p999_ms"`
	MaxMS     float64           `json:"max_ms"`
	Rate      float64           `json:"calls_per_s"`
	FirstErrs map[string]string `json:"first_detail"` // the first detail seen per outcome, for the outcomes that are not envelopes
}

// Tally counts one upstream's calls by outcome.
type Tally struct {
	Calls    int            `json:"calls"`
	ByCode   map[string]int `json:"by_code"`
	Replayed int            `json:"replayed"`
	Repeats  int            `json:"repeats"` // calls made with repeated arguments
	lat      []time.Duration
}

func newTally() *Tally { return &Tally{ByCode: map[string]int{}} }

// add counts one call.
func (t *Tally) add(o outcome, d time.Duration, repeat bool) {
	t.Calls++
	t.ByCode[o.code]++
	if o.replayed {
		t.Replayed++
	}
	if repeat {
		t.Repeats++
	}
	t.lat = append(t.lat, d)
}

// merge adds u into t.
func (t *Tally) merge(u *Tally) {
	t.Calls += u.Calls
	t.Replayed += u.Replayed
	t.Repeats += u.Repeats
	for k, v := range u.ByCode {
		t.ByCode[k] += v
	}
	t.lat = append(t.lat, u.lat...)
}

// finish sets the phase's latency figures and rate from its tallies.
func (p *Phase) finish() {
	var all []time.Duration
	for _, t := range p.Servers {
		all = append(all, t.lat...)
	}
	slices.Sort(all)
	p.P50, p.P99 = quantile(all, 0.50), quantile(all, 0.99)
	p.P50MS, p.P99MS = ms(p.P50), ms(p.P99)
	p.P999MS = ms(quantile(all, 0.999))
	if len(all) > 0 {
		p.MaxMS = ms(all[len(all)-1])
	}
	if p.Elapsed > 0 {
		p.Rate = float64(len(all)) / p.Elapsed.Seconds()
	}
}

// Calls is the phase's number of calls.
func (p *Phase) Calls() int {
	n := 0
	for _, t := range p.Servers {
		n += t.Calls
	}
	return n
}

// codes is the phase's outcomes summed over the upstreams.
func (p *Phase) codes() map[string]int {
	out := map[string]int{}
	for _, t := range p.Servers {
		for k, v := range t.ByCode {
			out[k] += v
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile is the q-quantile of sorted latencies, nearest rank (bench/load's rule).
func quantile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	i := int(q*float64(n)+0.5) - 1
	return sorted[min(max(i, 0), n-1)]
}

// Sample is one point of the timeline.
type Sample struct {
	At    float64 `json:"s"` // seconds since the main calls started
	Done  int64   `json:"done"`
	RSSMB float64 `json:"rss_mb"`
}

// Children is what the gateway had below it after the calls.
type Children struct {
	StdioUpstreams int      `json:"stdio_upstreams_configured"`
	AtEnd          []string `json:"at_end"`          // "pid comm state" of each process whose parent is the gateway, after the settle
	Zombies        int      `json:"zombies"`         // of them, in state Z
	Descendants    int      `json:"descendants"`     // every process below the gateway
	Orphans        []string `json:"orphans"`         // processes running the upstream binary (not the HTTP upstream) whose parent is not the gateway
	LeftAfterStop  []string `json:"left_after_stop"` // upstream processes of the gateway still alive after it stopped
}

// Audit is what the trail holds after the gateway stopped.
type Audit struct {
	Files       []string                  `json:"files"`
	Lines       int                       `json:"lines"`
	ByKind      map[string]int            `json:"by_kind"`
	Calls       map[string]map[string]int `json:"calls"` // kind "call": tool -> error_code ("ok" when none) -> records
	Verify      string                    `json:"verify"`
	VerifyOK    bool                      `json:"verify_ok"`
	CallRecords int                       `json:"call_records"`
	CallsMade   int                       `json:"calls_made"`
	Diffs       []string                  `json:"diffs"` // where the records differ from the client's outcomes
}

// Faults is what the upstreams' fault logs say they injected.
type Faults struct {
	Injected map[string]map[string]int `json:"injected"` // server -> fault line -> count
}

// Metrics is what the gateway's /metrics said at the end.
type Metrics struct {
	CallsTotal      map[string]float64 `json:"toolgate_calls_total"` // by error_code ("ok" when none)
	Restarts        map[string]float64 `json:"toolgate_upstream_restarts_total"`
	Duplicates      map[string]float64 `json:"toolgate_duplicates_suppressed_total"` // by how
	AuditErrors     float64            `json:"toolgate_audit_write_errors_total"`
	UpstreamOutcome map[string]float64 `json:"upstream_attempts"` // server/outcome -> attempts
}

// countFaults reads fault log lines ("crash", "garbage wrong_id", ...) into counts.
func countFaults(r io.Reader) map[string]int {
	out := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out[line]++
		}
	}
	return out
}

// auditLine is the part of an audit record the soak reads.
type auditLine struct {
	Kind      string `json:"kind"`
	Tool      string `json:"tool"`
	ErrorCode string `json:"error_code"`
}

// readAudit counts the records of the trail's files.
func readAudit(files []string) (Audit, error) {
	a := Audit{Files: files, ByKind: map[string]int{}, Calls: map[string]map[string]int{}}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return a, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			a.Lines++
			var l auditLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				a.ByKind["(unparseable)"]++
				continue
			}
			a.ByKind[l.Kind]++
			if l.Kind == "call" {
				a.CallRecords++
				code := l.ErrorCode
				if code == "" {
					code = "ok"
				}
				if a.Calls[l.Tool] == nil {
					a.Calls[l.Tool] = map[string]int{}
				}
				a.Calls[l.Tool][code]++
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return a, err
		}
	}
	return a, nil
}

// compareAudit lists where the call records differ from what the client saw, per tool and outcome.
// client maps tool -> outcome -> calls. An outcome the client saw without an envelope (client_error,
// http_*, bad_answer, ...) has no error_code to match, so those show as differences to explain.
func compareAudit(client map[string]map[string]int, audit map[string]map[string]int) []string {
	var diffs []string
	tools := map[string]bool{}
	for t := range client {
		tools[t] = true
	}
	for t := range audit {
		tools[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(tools)) {
		codes := map[string]bool{}
		for c := range client[t] {
			codes[c] = true
		}
		for c := range audit[t] {
			codes[c] = true
		}
		for _, c := range slices.Sorted(maps.Keys(codes)) {
			if got, want := audit[t][c], client[t][c]; got != want {
				diffs = append(diffs, fmt.Sprintf("%s %s: %d records, %d calls seen by the client (%+d)", t, c, got, want, got-want))
			}
		}
	}
	return diffs
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
