// Package measure runs one cell of the harness (a target at one
// concurrency) and turns rounds of cells into table rows: latency from the
// load client, CPU and memory of the target's processes from /proc.
package measure

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
	"github.com/toolgate/toolgate/internal/procs"
)

// callTimeout bounds one call: a hung target costs a cell, not the run.
const callTimeout = 30 * time.Second

// Shape is how long a cell warms up and then measures, and how long it may
// first wait for the machine to be quiet.
type Shape struct {
	Warmup, Duration time.Duration
	Settle           time.Duration // 0: do not wait
}

// Cell opens conc sessions on t, warms them up, and measures calls back to
// back for the shape's duration. CPU is read around the measured part only;
// the gateway's peak RSS is reset first, so it is this cell's own. A cell
// of one caller first waits out quietAfterLoad.
func Cell(ctx context.Context, t targets.Target, conc int, shape Shape) (report.Sample, error) {
	gw := t.Gateway()
	if conc > 1 {
		defer MarkLoaded(gw)
	} else {
		waitOutLoad(ctx, gw)
	}
	waited := Settle(ctx, shape.Settle)
	sessions, closeSessions, err := t.Open(ctx, conc)
	if err != nil {
		return report.Sample{}, err
	}
	defer closeSessions()
	if warm := load.Run(ctx, sessions, shape.Warmup, callTimeout); warm.Errors == warm.Calls() {
		return report.Sample{}, fmt.Errorf("every warm-up call failed: %s", warm.FirstError)
	}
	if gw != 0 {
		_ = procstat.ResetPeak(gw) // without it, the peak so far: still an upper bound
	}
	before := snap(t)
	res := load.Run(ctx, sessions, shape.Duration, callTimeout)
	after := snap(t)
	s := report.Sample{Calls: res.Calls(), Errors: res.Errors, FirstError: res.FirstError,
		P50Ms: ms(res.Quantile(0.5)), P99Ms: ms(res.Quantile(0.99)), Throughput: res.Throughput(),
		GatewayCPU: -1, UpstreamCPU: perCall(after.upstreamSince(before), res.Calls()),
		ClientCPU: perCall(after.client-before.client, res.Calls()), SettleS: waited.Seconds()}
	ours := after.client - before.client + after.upstreamSince(before) + after.gateway - before.gateway
	s.OtherCPUPct = 100 * max(0, float64(after.machine-before.machine-ours)) / (res.Elapsed.Seconds() * float64(time.Second) * float64(runtime.NumCPU()))
	if gw != 0 {
		s.GatewayCPU = perCall(after.gateway-before.gateway, res.Calls())
		if m, err := procstat.ReadMemory(gw); err == nil {
			s.PeakRSSMB = float64(m.Peak) / (1 << 20)
		}
	}
	return s, nil
}

// quietAfterLoad is how long a cell of one caller waits after its gateway
// last served concurrent calls. toolgate gives Go every CPU while calls
// queue for its processor and keeps them for internal/procs' hold before
// it tries one fewer again; a cell of one caller measures one caller's
// steady state, not the tail of the load before it (in the scaling
// figures a variant's cell of one caller follows its own of 16).
var quietAfterLoad = procs.DefaultHold + 2*procs.DefaultWindow

// loaded is, per gateway process, when it last served concurrent calls.
var loaded sync.Map // pid -> time.Time

// MarkLoaded records that gateway process pid has just served concurrent
// calls (0: no gateway).
func MarkLoaded(pid int) {
	if pid != 0 {
		loaded.Store(pid, time.Now())
	}
}

// waitOutLoad waits until quietAfterLoad has passed since pid last served
// concurrent calls.
func waitOutLoad(ctx context.Context, pid int) {
	v, ok := loaded.Load(pid)
	if !ok {
		return
	}
	t := time.NewTimer(time.Until(v.(time.Time).Add(quietAfterLoad)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// quiet is the share of the machine's CPU that counts as idle enough to
// measure, and window how long each look at it lasts.
const (
	quiet  = 0.10
	window = 300 * time.Millisecond
)

// Settle waits, up to limit, until the machine has been quiet for one
// window: this machine's cores may be shared with other work (a test suite,
// a build), and a cell measured alongside it measures the contention. It
// returns how long it waited; the cell's other CPU % shows whether it was
// quiet in the end.
func Settle(ctx context.Context, limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	start := time.Now()
	capacity := float64(window) * float64(runtime.NumCPU())
	for time.Since(start) < limit && ctx.Err() == nil {
		before := procstat.MachineBusy()
		t := time.NewTimer(window)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if float64(procstat.MachineBusy()-before) < quiet*capacity {
			break
		}
	}
	return time.Since(start)
}

// cpuSnap is the CPU time of a target's processes and of the load client.
type cpuSnap struct {
	gateway, reaped, client time.Duration
	machine                 time.Duration // every process of the machine
	upstreams               procstat.TreeCPU
}

func snap(t targets.Target) cpuSnap {
	var s cpuSnap
	if gw := t.Gateway(); gw != 0 {
		c, _ := procstat.CPU(gw)
		s.gateway = c.Self
		s.reaped = c.Children // upstreams it has reaped (restarts, per-session children)
	}
	s.upstreams = procstat.ReadCPU(t.Upstreams())
	self, _ := procstat.CPU(os.Getpid())
	s.client = self.Self
	s.machine = procstat.MachineBusy()
	return s
}

// upstreamSince is the upstreams' CPU from before to s: each live process
// against its own earlier figure, plus what the gateway reaped meanwhile.
func (s cpuSnap) upstreamSince(before cpuSnap) time.Duration {
	return s.upstreams.Since(before.upstreams) + s.reaped - before.reaped
}

func perCall(d time.Duration, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(calls)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Row aggregates the rounds of one cell: medians of the rounds that were
// measured, the largest peak RSS, all calls and errors. A cell no round
// could measure becomes a row with NA set to the first reason.
func Row(upstream, target string, conc int, samples []report.Sample) report.Row {
	r := report.Row{Upstream: upstream, Target: target, Concurrency: conc, Samples: samples}
	var ok []report.Sample
	for _, s := range samples {
		if s.Failed != "" {
			if r.NA == "" {
				r.NA = s.Failed
			}
			continue
		}
		ok = append(ok, s)
		r.Calls += s.Calls
		r.Errors += s.Errors
		if r.FirstError == "" {
			r.FirstError = s.FirstError
		}
		r.PeakRSSMB = max(r.PeakRSSMB, s.PeakRSSMB)
	}
	if len(ok) == 0 {
		if r.NA == "" {
			r.NA = "not measured"
		}
		return r
	}
	r.NA = ""
	pick := func(f func(report.Sample) float64) float64 {
		v := make([]float64, len(ok))
		for i, s := range ok {
			v[i] = f(s)
		}
		return median(v)
	}
	r.P50Ms = pick(func(s report.Sample) float64 { return s.P50Ms })
	r.P99Ms = pick(func(s report.Sample) float64 { return s.P99Ms })
	r.Throughput = pick(func(s report.Sample) float64 { return s.Throughput })
	r.GatewayCPU = pick(func(s report.Sample) float64 { return s.GatewayCPU })
	r.UpstreamCPU = pick(func(s report.Sample) float64 { return s.UpstreamCPU })
	r.ClientCPU = pick(func(s report.Sample) float64 { return s.ClientCPU })
	r.OtherCPUPct = pick(func(s report.Sample) float64 { return s.OtherCPUPct })
	return r
}

func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// RelayRatios sets the ratios to the relay of each row whose target relays
// names (gateway target -> relay target): to the relay's row of the same
// upstream and concurrency, when it was measured.
func RelayRatios(rows []report.Row, relays map[string]string) {
	pairRows(rows, relays, func(r *report.Row, d report.Row) {
		if d.P50Ms > 0 {
			r.P50VsRelay = r.P50Ms / d.P50Ms
		}
		if d.Throughput > 0 {
			r.TputVsRelay = r.Throughput / d.Throughput
		}
		r.VsRelayRounds = pairedRatios(r.Samples, d.Samples)
	})
}

// BaselineRatios sets, for each row whose target baselines names (toolgate
// target -> the baseline binary's target), its ratios to that row of the
// same upstream and concurrency, round by round.
func BaselineRatios(rows []report.Row, baselines map[string]string) {
	pairRows(rows, baselines, func(r *report.Row, d report.Row) {
		r.VsBaselineRounds = pairedRatios(r.Samples, d.Samples)
	})
}

// pairRows calls set for each measured row whose target pairs names, with
// the measured row of the named target at the same upstream and
// concurrency.
func pairRows(rows []report.Row, pairs map[string]string, set func(r *report.Row, d report.Row)) {
	for i := range rows {
		r := &rows[i]
		other, ok := pairs[r.Target]
		if !ok || r.NA != "" {
			continue
		}
		for _, d := range rows {
			if d.Target == other && d.Upstream == r.Upstream && d.Concurrency == r.Concurrency && d.NA == "" {
				set(r, d)
			}
		}
	}
}

// pairedRatios divides each round's gateway sample by the relay's sample
// of the same round, in the gateway's round order. The machine's speed
// drifts between rounds (on the 2-core host the relay's own calls/s moved
// by a third and more between rounds of one run), and a round's two cells
// are a few cells apart, so the pairs show how much of a ratio of medians
// is drift. Only clean pairs count: a round where either side failed, made
// no calls or had failed calls (a quick error is fast) is left out.
func pairedRatios(gateway, relay []report.Sample) []report.RoundRatio {
	byRound := map[int]report.Sample{}
	for _, s := range relay {
		if clean(s) {
			byRound[s.Round] = s
		}
	}
	var out []report.RoundRatio
	for _, g := range gateway {
		d, ok := byRound[g.Round]
		if !ok || !clean(g) {
			continue
		}
		ratio := report.RoundRatio{Round: g.Round, P50: g.P50Ms / d.P50Ms, Throughput: g.Throughput / d.Throughput}
		if g.GatewayCPU > 0 && d.GatewayCPU > 0 {
			ratio.GatewayCPU = g.GatewayCPU / d.GatewayCPU
		}
		out = append(out, ratio)
	}
	return out
}

// clean says whether a sample can be divided by or into another: measured,
// with calls, none of them failed.
func clean(s report.Sample) bool {
	return s.Failed == "" && s.Calls > 0 && s.Errors == 0 && s.P50Ms > 0 && s.Throughput > 0
}

// Ratios sets each row's ratios to the direct row of the same upstream and
// concurrency.
func Ratios(rows []report.Row) {
	for i := range rows {
		r := &rows[i]
		if r.NA != "" {
			continue
		}
		for _, d := range rows {
			if d.Target == "direct" && d.Upstream == r.Upstream && d.Concurrency == r.Concurrency && d.NA == "" {
				if d.P50Ms > 0 {
					r.P50Ratio = r.P50Ms / d.P50Ms
				}
				if d.Throughput > 0 {
					r.TputRatio = r.Throughput / d.Throughput
				}
			}
		}
	}
}
