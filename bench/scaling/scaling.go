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
	"time"

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
}

// Notes explain the scaling sections.
var Notes = []string{
	"Scaling: each variant is its own `toolgate serve` (full pipeline as in the table) in front of bench/echo, measured at concurrency 1 and 16, interleaved round by round like the table; ratios are to the first variant. Policy filler lines name other roles and principals (allow lines on other tools, a deny on the same tool, role assignments), so none applies to the caller. The 10,000-tool catalog is 20 upstreams × 500 tools; the call goes to one of them.",
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
	policyFigures(ctx, e, s)
	catalogFigures(ctx, e, s)
	sessionFigures(ctx, e, s)
	bigResultFigures(ctx, e, s)
	return s
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
	g := report.CostGroup{Name: name}
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

func stopAll(vs []variant) {
	for _, v := range vs {
		if v.gw != nil {
			_ = v.gw.Close()
		}
	}
}
