// Package harness is the load harness of issue 8: it builds toolgate and the
// Go echo upstream, starts every target in front of every upstream, measures
// them round by round, and writes the report. Only a run that cannot start
// at all (a build fails, the report cannot be written) is an error: a
// target that cannot start is reported as not measured, and no timing is
// ever a failure.
package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/scaling"
	"github.com/toolgate/toolgate/bench/targets"
)

// Target and upstream names, in the order the table lists them.
const (
	Direct        = "direct"
	ToolgateHTTP  = "toolgate-http"
	ToolgateStdio = "toolgate-stdio"
	// ToolgateHTTPSlow is toolgate-http with listen.fast_path: false, so
	// every call goes through mcp-go's Streamable HTTP handler.
	ToolgateHTTPSlow = "toolgate-http-nofast"
	MCPProxy         = "mcp-proxy"
	Supergateway     = "supergateway"
	// RelayHTTP and RelayStdio are the zero-check Go relay (bench/relay):
	// mcp-go's server in front, its client behind, nothing checked (issue
	// 22), over Streamable HTTP and over stdio.
	RelayHTTP  = "relay-http"
	RelayStdio = "relay-stdio"
	// BaselineHTTP and BaselineStdio are toolgate-http and toolgate-stdio
	// run from Options.Baseline, another toolgate binary (the commit
	// before a change), so that a change is measured against its baseline
	// in the same rounds (this host's speed moves between rounds).
	BaselineHTTP  = "baseline-http"
	BaselineStdio = "baseline-stdio"

	GoEcho     = "go"
	Everything = "everything"
)

// Options configures a run. Zero values take the defaults of Defaults.
type Options struct {
	Root    string // the module's root directory (go.mod)
	Out     string // the Markdown report; the JSON goes beside it
	Command string // the command line, as the report shows it

	Quick       bool
	Rounds      int
	Warmup      time.Duration
	Duration    time.Duration
	Settle      time.Duration // the most a cell waits for a quiet machine; negative: never
	Concurrency []int
	Upstreams   []string // GoEcho, Everything
	Targets     []string // Direct, ToolgateHTTP, ...
	Table       bool     // the side-by-side table
	Scaling     bool     // the scaling figures
	Figures     []string // which scaling figures (scaling.Figures); nil: all
	// Client is the load client: targets.Lean (the default) or targets.MCPGo.
	Client targets.Client

	Toolgate   string            // a toolgate binary; built from Root when empty
	Revision   string            // what Toolgate was built from, for the report
	Baseline   string            // the toolgate binary of the baseline-* targets
	BaseRev    string            // what Baseline was built from, for the report
	Echo       []string          // the Go echo server's command; built from Root when empty
	EchoEnv    map[string]string // its extra environment
	Relay      []string          // the relay's command; built from Root (bench/cmd/relay) when empty
	RelayEnv   map[string]string // its extra environment (not the upstream's)
	BuildFlags []string          // extra `go build` flags (the test passes -race under -race)
	NPMDir     string            // bench/npm
	Keep       bool              // keep the work directory (configs, audit trails)
	Log        io.Writer         // progress lines
}

// Defaults fills what o leaves zero: the full run, or the smoke run with
// Quick.
func (o *Options) Defaults() {
	if o.Rounds == 0 {
		o.Rounds = pick(o.Quick, 1, 5)
	}
	if o.Warmup == 0 {
		o.Warmup = pick(o.Quick, 100*time.Millisecond, 500*time.Millisecond)
	}
	if o.Duration == 0 {
		o.Duration = pick(o.Quick, 300*time.Millisecond, 2*time.Second)
	}
	if o.Settle == 0 {
		o.Settle = pick(o.Quick, -1, 30*time.Second)
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 16, 64}
	}
	if len(o.Upstreams) == 0 {
		o.Upstreams = []string{GoEcho, Everything}
	}
	if len(o.Targets) == 0 {
		o.Targets = []string{Direct, RelayHTTP, RelayStdio, ToolgateHTTP, ToolgateHTTPSlow, ToolgateStdio, MCPProxy, Supergateway}
	}
	if o.Client == "" {
		o.Client = targets.Lean
	}
	if o.NPMDir == "" {
		o.NPMDir = filepath.Join(o.Root, "bench", "npm")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

func pick[T any](quick bool, q, full T) T {
	if quick {
		return q
	}
	return full
}

// Run runs the harness and writes the report to o.Out.
func Run(ctx context.Context, o Options) (*report.Report, error) {
	o.Defaults()
	if err := scaling.CheckFigures(o.Figures); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "loadbench-")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		fmt.Fprintf(o.Log, "work directory kept: %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	env, err := prepare(ctx, &o, work)
	if err != nil {
		return nil, err
	}
	m := machine(ctx, o.Root)
	if o.Toolgate != "" {
		m.Toolgate = fmt.Sprintf("binary %s (%s)", o.Toolgate, cmp.Or(o.Revision, "revision not given"))
	}
	if o.Baseline != "" {
		m.Toolgate += fmt.Sprintf("; baseline-* targets: binary %s (%s)", o.Baseline, cmp.Or(o.BaseRev, "revision not given"))
	}
	rep := &report.Report{Command: o.Command, Machine: m, Settings: report.Settings{
		Rounds: o.Rounds, WarmupS: o.Warmup.Seconds(), DurationS: o.Duration.Seconds(), SettleS: max(0, o.Settle.Seconds()),
		Concurrency: o.Concurrency, Quick: o.Quick, Client: o.Client.Describe()}}
	if o.Table {
		rep.Rows = table(ctx, &o, env)
		rep.Notes = tableNotes(&o, env)
	}
	if o.Scaling {
		rep.Scaling = scaling.Run(ctx, scaling.Env{Toolgate: env.toolgate, Echo: env.echo, Model: env.model,
			Work: filepath.Join(work, "scaling"), Quick: o.Quick, Settle: o.Settle, Client: o.Client, Log: o.Log, Figures: o.Figures})
		rep.Notes = append(rep.Notes, scaling.Notes...)
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return nil, err
	}
	return rep, rep.Write(o.Out)
}

// env is what prepare made ready.
type env struct {
	toolgate string           // binary
	baseline string           // the baseline-* targets' binary; "" when not given
	echo     targets.Upstream // the Go echo server
	relay    targets.Relay    // the zero-check relay's command, when a relay target runs
	model    string           // model.conf text
	npm      error            // why the npm packages are unusable, or nil
	npmDir   string
	fsync    time.Duration // median small append+fsync in the work directory
	work     string
}
