// Package scaling measures how toolgate's cost grows with what it is
// configured with (issue 8, item 2): per-call cost with 10 vs 100,000
// policy lines and with 10 vs 10,000 catalog tools over many upstreams,
// tools/list latency over 10,000 tools filtered per principal, and the
// gateway's memory idle and with 1,000 client sessions. Every gateway is
// the real binary on a generated config, in front of the Go echo server.
package scaling

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bench/measure"
	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// Env is what the figures need from the harness.
type Env struct {
	Toolgate string           // binary
	Echo     targets.Upstream // the Go echo server
	Model    string           // model.conf text
	Work     string           // a directory for the gateways' files
	Quick    bool
	Settle   time.Duration  // the most a cell waits for a quiet machine
	Client   targets.Client // the per-call figures' load client
	Log      io.Writer
	// Figures names the figures to measure (Figures lists them); nil:
	// all. One figure alone is how to watch it while changing what it
	// measures: the large-results figure takes under a minute.
	Figures []string
}

// The figures, by name.
var figures = []figure{
	{"policy", policyFigures},
	{"catalog", catalogFigures},
	{"sessions", sessionFigures},
	{"big-results", bigResultFigures},
}

// Figures are the names Env.Figures takes.
func Figures() []string {
	names := make([]string, len(figures))
	for i, f := range figures {
		names[i] = f.name
	}
	return names
}

// Notes explain the scaling sections.
var Notes = []string{
	"Scaling: each variant is its own `toolgate serve` (full pipeline as in the table) in front of bench/echo, measured at concurrency 1 and 16, interleaved round by round like the table; ratios are to the first variant. Before the rounds each variant is warmed up until its calls stop faulting in fresh memory (the line under each table): a gateway's heap first grows to the collector's goal, and a large config's first calls pay for it. Policy filler lines name other roles and principals (allow lines on other tools, a deny on the same tool, role assignments), so none applies to the caller. The 10,000-tool catalog is 20 upstreams × 500 tools; the call goes to one of them.",
	"tools/list: sequential calls on one session per principal; each answer holds only the tools that principal may call. Memory: VmRSS of the gateway process alone (upstreams not counted), read when it is ready (idle) and with the sessions open. The per-call figures use the table's load client; tools/list and the 1,000 sessions use mcp-go's client whatever it is.",
}

// Shared names of the generated configs.
const (
	principal = "bench"
	key       = "tg_bench_scaling_key"
)

// Run measures every figure; one that cannot be measured is listed in
// Failed and the others still run.
func Run(ctx context.Context, e Env) *report.Scaling {
	s := &report.Scaling{}
	if err := os.MkdirAll(e.Work, 0o755); err != nil {
		s.Failed = append(s.Failed, err.Error())
		return s
	}
	for _, f := range e.chosen() {
		f.measure(ctx, e, s)
	}
	return s
}

// figure is one scaling figure: its name and how it is measured.
type figure struct {
	name    string
	measure func(context.Context, Env, *report.Scaling)
}

// chosen are the figures e.Figures names, in the report's order; all when
// it is nil.
func (e Env) chosen() []figure {
	var out []figure
	for _, f := range figures {
		if e.Figures == nil || slices.Contains(e.Figures, f.name) {
			out = append(out, f)
		}
	}
	return out
}

// CheckFigures refuses a name that is not one of Figures, naming them.
func CheckFigures(names []string) error {
	for _, n := range names {
		if !slices.Contains(Figures(), n) {
			return fmt.Errorf("%q is not a scaling figure; the figures are %s", n, strings.Join(Figures(), ", "))
		}
	}
	return nil
}

// shape is the cell shape and rounds of the per-call figures.
func (e Env) shape() (measure.Shape, int) {
	if e.Quick {
		return measure.Shape{Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond, Settle: e.Settle}, 1
	}
	return measure.Shape{Warmup: 500 * time.Millisecond, Duration: 2 * time.Second, Settle: e.Settle}, 5
}

// variant is one gateway of a comparison.
type variant struct {
	label string
	gw    *targets.Toolgate
}

// start writes g into a directory named dir and starts it, recording its
// idle memory and how long it took to become ready.
func start(ctx context.Context, e Env, s *report.Scaling, dir, situation string, g targets.Gateway, tool string) *targets.Toolgate {
	fmt.Fprintf(e.Log, "scaling: starting toolgate (%s)\n", situation)
	dir = filepath.Join(e.Work, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.Failed = append(s.Failed, err.Error())
		return nil
	}
	cfg, err := g.Write(dir, e.Model)
	if err != nil {
		s.Failed = append(s.Failed, err.Error())
		return nil
	}
	t0 := time.Now()
	gw, err := targets.StartToolgateHTTP(ctx, e.Client, "toolgate-http", e.Toolgate, cfg, tool, key)
	if err != nil {
		s.Failed = append(s.Failed, fmt.Sprintf("%s: %v", situation, err))
		return nil
	}
	ready := time.Since(t0)
	if m, err := procstat.ReadMemory(gw.Gateway()); err == nil {
		s.Memory = append(s.Memory, report.MemRow{Situation: "idle: " + situation, RSSMB: mb(m.RSS),
			Note: fmt.Sprintf("ready %.2f s after start", ready.Seconds())})
	}
	return gw
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// compare measures the variants' per-call cost, interleaved round by round.
func compare(ctx context.Context, e Env, name string, vs []variant) report.CostGroup {
	shape, rounds := e.shape()
	conc := []int{1, 16}
	samples := map[string][]report.Sample{}
	g := report.CostGroup{Name: name, WarmupRule: fmt.Sprintf(
		"Warm-up before the rounds, at %d callers in batches of %v until one took under %g minor page faults a call (at most %v)",
		warmCallers, warmBatch, settledFaults, warmLimit(e))}
	for _, v := range vs {
		if v.gw != nil {
			w := warmUp(ctx, e, v)
			g.Warmups = append(g.Warmups, w)
			fmt.Fprintf(e.Log, "scaling: %s, %s: warmed up with %d calls in %.1f s (first batch %d calls, %d page faults; last %.2f a call)\n",
				name, v.label, w.Calls, w.Seconds, w.FirstCalls, w.FirstFaults, w.LastFaults)
		}
	}
	for r := range rounds {
		for _, c := range conc {
			for i := range vs {
				v := vs[(i+r)%len(vs)]
				if v.gw == nil {
					continue
				}
				sample, err := measure.Cell(ctx, v.gw, c, shape)
				sample.Round = r + 1
				if err != nil {
					sample.Failed = err.Error()
				}
				fmt.Fprintf(e.Log, "scaling: %s, %s, c=%d: p50 %.3f ms, %.0f calls/s, gateway %.0f µs/call %s\n",
					name, v.label, c, sample.P50Ms, sample.Throughput, sample.GatewayCPU, sample.Failed)
				k := fmt.Sprintf("%s/%d", v.label, c)
				samples[k] = append(samples[k], sample)
			}
		}
	}
	for _, c := range conc {
		for _, v := range vs {
			row := measure.Row("go", v.label, c, samples[fmt.Sprintf("%s/%d", v.label, c)])
			if v.gw == nil {
				row.NA = "did not start"
			}
			g.Variants = append(g.Variants, row)
		}
	}
	return g
}

// The warm-up before a comparison's rounds: each variant serves calls at
// warmCallers in batches of warmBatch until a batch takes fewer than
// settledFaults minor page faults a call, for at most maxWarm. A gateway's
// heap grows after start to the collector's goal (five times its live
// heap: cmd/toolgate/tuning.go), and until it has, its calls fault in
// fresh pages: over the first 4,000 calls one at a time, 4.2 faults a call
// with 100,000 policy lines (an 80 MB live heap) and 0.7 with 10, and 1.7
// times the CPU a call; once grown, the two cost the same (273 and 280 µs).
// That is a cost of starting, paid once; the rounds compare the cost of a
// call, and the report gives the warm-up beside them.
const (
	warmCallers   = 16
	warmBatch     = 500 * time.Millisecond
	settledFaults = 0.1
	maxWarm       = 30 * time.Second
	maxWarmQuick  = 2 * time.Second
)

// warmUp runs the warm-up of one variant (see warmCallers).
func warmUp(ctx context.Context, e Env, v variant) report.Warmup {
	w := report.Warmup{Variant: v.label}
	sessions, closeSessions, err := v.gw.Open(ctx, warmCallers)
	if err != nil {
		return w
	}
	defer closeSessions()
	limit := warmLimit(e)
	pid := v.gw.Gateway()
	defer measure.MarkLoaded(pid)
	start := time.Now()
	for time.Since(start) < limit && ctx.Err() == nil {
		before, err := procstat.MinorFaults(pid)
		res := load.Run(ctx, sessions, warmBatch, time.Minute)
		after, err2 := procstat.MinorFaults(pid)
		if err != nil || err2 != nil || res.Calls() == 0 {
			break
		}
		if res.Errors > 0 {
			w.Errors, w.FirstError = res.Errors, res.FirstError
			break
		}
		if w.Calls == 0 {
			w.FirstCalls, w.FirstFaults, w.FirstSeconds = res.Calls(), after-before, res.Elapsed.Seconds()
		}
		w.Calls += res.Calls()
		w.LastFaults = float64(after-before) / float64(res.Calls())
		if w.LastFaults < settledFaults {
			w.Settled = true
			break
		}
	}
	w.Seconds = time.Since(start).Seconds()
	return w
}

// warmLimit is the longest a variant's warm-up may last.
func warmLimit(e Env) time.Duration {
	if e.Quick {
		return maxWarmQuick
	}
	return maxWarm
}

func stopAll(vs []variant) {
	for _, v := range vs {
		if v.gw != nil {
			_ = v.gw.Close()
		}
	}
}
