package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/bench/measure"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// The principal and key every toolgate target authenticates the load with.
const (
	benchPrincipal = "bench"
	benchKey       = "tg_bench_load_key"
)

// slot is one target in front of one upstream: running, or why not.
type slot struct {
	name string
	t    targets.Target
	na   string
}

// table measures every target in front of every upstream and returns the
// rows, upstream by upstream, concurrency by concurrency.
func table(ctx context.Context, o *Options, e *env) []report.Row {
	slots := map[string][]*slot{}
	for _, up := range o.Upstreams {
		slots[up] = startAll(ctx, o, e, up)
	}
	defer func() {
		for _, ss := range slots {
			for _, s := range ss {
				if s.t != nil {
					_ = s.t.Close()
				}
			}
		}
	}()
	samples := rounds(ctx, o, slots)
	var rows []report.Row
	for _, up := range o.Upstreams {
		for _, c := range o.Concurrency {
			for _, s := range slots[up] {
				row := measure.Row(up, s.name, c, samples[key(up, s.name, c)])
				if s.na != "" {
					row.NA = s.na
				}
				rows = append(rows, row)
			}
		}
	}
	measure.Ratios(rows)
	measure.RelayRatios(rows, relayOf)
	measure.BaselineRatios(rows, map[string]string{ToolgateHTTP: BaselineHTTP, ToolgateStdio: BaselineStdio})
	return rows
}

// relayOf pairs each toolgate target with the relay on its transport, for
// the × relay columns.
var relayOf = map[string]string{ToolgateHTTP: RelayHTTP, ToolgateHTTPSlow: RelayHTTP, ToolgateStdio: RelayStdio,
	BaselineHTTP: RelayHTTP, BaselineStdio: RelayStdio}

// rounds measures the cells round by round: round r runs, per upstream and
// concurrency, every target once, starting with the r-th, so slow drift
// (thermal, a noisy neighbour, a long-lived process's heap) spreads over
// all targets instead of biasing one.
func rounds(ctx context.Context, o *Options, slots map[string][]*slot) map[string][]report.Sample {
	samples := map[string][]report.Sample{}
	shape := measure.Shape{Warmup: o.Warmup, Duration: o.Duration, Settle: o.Settle}
	for r := range o.Rounds {
		for _, up := range o.Upstreams {
			for _, c := range o.Concurrency {
				ss := slots[up]
				for i := range ss {
					s := ss[(i+r)%len(ss)]
					if s.t == nil || ctx.Err() != nil {
						continue
					}
					k := key(up, s.name, c)
					samples[k] = append(samples[k], cell(ctx, o, s, up, c, r, shape))
				}
			}
		}
	}
	return samples
}

func key(up, target string, c int) string { return fmt.Sprintf("%s/%s/%d", up, target, c) }

// cell measures one cell once and logs a line about it.
func cell(ctx context.Context, o *Options, s *slot, up string, c, round int, shape measure.Shape) report.Sample {
	sample, err := measure.Cell(ctx, s.t, c, shape)
	sample.Round = round + 1
	if err != nil {
		sample.Failed = err.Error()
		fmt.Fprintf(o.Log, "round %d  %-10s %-14s c=%-3d failed: %v\n", round+1, up, s.name, c, err)
		return sample
	}
	fmt.Fprintf(o.Log, "round %d  %-10s %-14s c=%-3d p50 %.3f ms  p99 %.3f ms  %8.0f calls/s  errors %d  other CPU %.0f%%  settled in %.1f s\n",
		round+1, up, s.name, c, sample.P50Ms, sample.P99Ms, sample.Throughput, sample.Errors, sample.OtherCPUPct, sample.SettleS)
	return sample
}

// startAll starts every target in front of upstream up and checks each with
// one call; one that fails is kept as a slot with its reason.
func startAll(ctx context.Context, o *Options, e *env, up string) []*slot {
	u, upErr := upstream(e, up)
	var out []*slot
	for _, name := range o.Targets {
		s := &slot{name: name}
		out = append(out, s)
		if upErr != nil {
			s.na = upErr.Error()
			continue
		}
		fmt.Fprintf(o.Log, "starting %s in front of %s\n", name, up)
		t, err := start(ctx, o.Client, e, name, u)
		if err == nil {
			err = probe(ctx, t)
			if err != nil {
				_ = t.Close()
			}
		}
		if err != nil {
			s.na = fmt.Sprintf("did not start: %v", err)
			fmt.Fprintf(o.Log, "  %s\n", s.na)
			continue
		}
		s.t = t
	}
	return out
}

// upstream is the spec of upstream name, or why it cannot run.
func upstream(e *env, name string) (targets.Upstream, error) {
	switch name {
	case GoEcho:
		return e.echo, nil
	case Everything:
		if e.npm != nil {
			return targets.Upstream{}, e.npm
		}
		return targets.Upstream{Name: Everything, Command: targets.NPMBin(e.npmDir, "mcp-server-everything"),
			Args: []string{"stdio"}, Tool: "echo"}, nil
	}
	return targets.Upstream{}, fmt.Errorf("unknown upstream %q", name)
}

// start starts one target in front of u, its sessions client's.
func start(ctx context.Context, client targets.Client, e *env, name string, u targets.Upstream) (targets.Target, error) {
	tool := u.Name + "__" + u.Tool // toolgate's client-facing name
	switch name {
	case Direct:
		return targets.StartDirect(ctx, client, u)
	case ToolgateHTTP, ToolgateHTTPSlow, ToolgateStdio, BaselineHTTP, BaselineStdio:
		cfg, err := writeGateway(e, name+"-"+u.Name, u, name == ToolgateHTTPSlow)
		if err != nil {
			return nil, err
		}
		bin := e.toolgate
		if name == BaselineHTTP || name == BaselineStdio {
			bin = e.baseline
		}
		if name != ToolgateStdio && name != BaselineStdio {
			return targets.StartToolgateHTTP(ctx, client, name, bin, cfg, tool, benchKey)
		}
		return targets.StartToolgateStdio(ctx, client, name, bin, cfg, tool)
	case RelayHTTP:
		return targets.StartRelayHTTP(ctx, client, name, e.relay, u)
	case RelayStdio:
		return targets.StartRelayStdio(ctx, client, name, e.relay, u)
	case MCPProxy, Supergateway:
		if e.npm != nil {
			return nil, e.npm
		}
		if name == MCPProxy {
			return targets.StartMCPProxy(ctx, client, e.npmDir, u)
		}
		return targets.StartSupergateway(ctx, client, e.npmDir, u)
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

// writeGateway writes the full-pipeline config of one toolgate target into
// a directory of its own (each gateway process holds its audit trail
// alone): API key, a Casbin policy allowing exactly the echo tool, and
// every default, the audit trail's fsync (interval) included.
func writeGateway(e *env, dir string, u targets.Upstream, noFastPath bool) (string, error) {
	dir = filepath.Join(e.work, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	policy := fmt.Sprintf("p, benchers, %s/%s, call, allow\ng, %s, benchers\n", u.Name, u.Tool, benchPrincipal)
	g := targets.Gateway{Servers: []targets.Upstream{u}, Policy: policy,
		Keys: map[string]string{benchPrincipal: benchKey}, Stdio: benchPrincipal, NoFastPath: noFastPath}
	return g.Write(dir, e.model)
}

// probes numbers the probe calls, apart from the load's.
var probes atomic.Int64

// probe makes one call through a freshly started target.
func probe(ctx context.Context, t targets.Target) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sessions, closeSessions, err := t.Open(ctx, 1)
	if err != nil {
		return err
	}
	defer closeSessions()
	return sessions[0].Call(ctx, -probes.Add(1))
}

// tableNotes explains the table's terms and what bounds it here.
func tableNotes(o *Options, e *env) []string {
	notes := []string{
		"Workload: the upstream's `echo` tool with `{\"message\": \"ping <n>\"}`, n unique per call (so toolgate's duplicate suppression runs on every call but never replays one); each answer must carry the message back, or the call counts as an error. Upstreams: `go` is bench/echo (mcp-go, stdio); `everything` is npm @modelcontextprotocol/server-everything over stdio.",
		clientNote(o.Client),
		"direct: the client talks to the upstream process over stdio: the physical limit. toolgate-http: `toolgate serve` with the full pipeline (API key, Casbin, schema validation, breaker, retries, duplicate suppression, envelope, audit trail with its default fsync (interval: written before the answer, on disk within 1 s), the log at the default level info, which since issue 22 has a line for each refused or failed call and leaves a success the audit trail recorded to debug); max_in_flight raised to 256 so the 64 workers are never refused. toolgate-http-nofast: the same with `listen.fast_path: false`, so every call goes through mcp-go's Streamable HTTP handler (toolgate-http answers plain tools/calls itself). toolgate-stdio: `toolgate serve --stdio`, same config. relay-http and relay-stdio: a zero-check Go relay on mcp-go (bench/relay: mcp-go's server in front, over Streamable HTTP or stdio, mcp-go's stdio client behind, the upstream's tools listed at start and passed through; no auth, policy, validation, audit or log line; every mcp-go default kept, untuned); × relay compares toolgate-http and toolgate-http-nofast with relay-http, toolgate-stdio with relay-stdio. mcp-proxy 6.7.19 (one upstream for all sessions) and supergateway 4.0.0 --stateful (one upstream process per session) check nothing.",
		"CPU µs/call: utime+stime from /proc/<pid>/stat (10 ms ticks) around the measured part of the cell, divided by its calls. gateway: the gateway or proxy process; upstream: every process below it (or the direct upstream process), plus children it reaped meanwhile; client: this harness process, which makes the calls on the same cores (and reads the targets' log output). Peak RSS: the gateway's VmHWM, reset at each cell's start (clear_refs), so each cell shows its own peak. other CPU %: the share of the machine's CPU that other processes used during the cell (from /proc/stat): anything above a few % means the cell was disturbed.",
		fmt.Sprintf("What bounds it on this machine: %d cores shared by the load client, the gateway and the upstream, so at saturation calls/s ≈ cores ÷ (client + gateway + upstream CPU per call). A small append+fsync in the work directory takes %.2f ms (median of 50) here: what every call would pay at concurrency 1 with audit.fsync: always (the default, interval, pays it once a second).",
			runtime.NumCPU(), float64(e.fsync)/float64(time.Millisecond)),
	}
	if e.baseline != "" {
		notes = append(notes, "baseline-http and baseline-stdio: toolgate-http and toolgate-stdio run from the baseline binary named above (the build before a change), same config; measured in the same rounds as toolgate, so that a change is compared with its baseline round by round.")
	}
	return notes
}

// clientNote says what the load client is and how it holds its sessions.
func clientNote(c targets.Client) string {
	what := "the harness's lean client: a full MCP session (initialize, notifications/initialized, tools/call, DELETE at the end), its requests hand-encoded and each answer (JSON or an event stream) decoded once, so that its CPU per call takes as little as possible from the gateway and upstream sharing the cores"
	if c == targets.MCPGo {
		what = "mcp-go's client"
	}
	return "Load client: " + what + ", protocol 2025-11-25. Over Streamable HTTP each worker has its own session (one keep-alive connection each). Over stdio (direct, toolgate-stdio) a process has exactly one session, so the workers share it with their calls in flight concurrently."
}
