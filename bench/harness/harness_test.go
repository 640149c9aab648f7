package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/bench/echo"
	"github.com/toolgate/toolgate/bench/harness"
	"github.com/toolgate/toolgate/bench/procstat"
	"github.com/toolgate/toolgate/bench/relay"
	"github.com/toolgate/toolgate/bench/report"
	"github.com/toolgate/toolgate/bench/targets"
)

// The test binary is also the Go echo upstream and the zero-check relay,
// re-executed with this variable set: no separate build. The relay passes
// the upstream its own value (-env), so the child it starts is the echo.
const execRole = "LOADBENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	switch os.Getenv(execRole) {
	case "echoserver":
		os.Exit(echo.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "relay":
		os.Exit(relay.Main(os.Args[1:]))
	}
	// Nothing is ignored, not even net/http's keep-alive loops: every
	// client and server a run starts is closed when the run ends, so a
	// goroutine blocked reading a connection is a connection left open.
	goleak.VerifyTestMain(m)
}

// TestQuickRun runs the harness in -quick mode against the Go echo server,
// directly, through the zero-check relay over HTTP and stdio, and through
// toolgate over HTTP (also as the baseline binary), with each load client, and checks the report's shape:
// every row there, every figure non-zero, toolgate's ratio to the relay,
// the client named. It asserts no timing.
//
// toolgate is built once, before either run's clock starts: a cold build
// with -race on a loaded machine can take most of a run's two minutes.
func TestQuickRun(t *testing.T) {
	root, err := harness.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	toolgate := buildToolgate(t, root)
	for _, client := range []targets.Client{targets.Lean, targets.MCPGo} {
		t.Run(string(client), func(t *testing.T) { quickRun(t, root, toolgate, client) })
	}
}

// buildToolgate builds ./cmd/toolgate the way this test binary was built
// (raceFlags) into a temp dir, bounded by a budget of its own.
func buildToolgate(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolgate")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, raceFlags...), "-o", bin, "./cmd/toolgate")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/toolgate: %v\n%s", err, out)
	}
	return bin
}

func quickRun(t *testing.T, root, toolgate string, client targets.Client) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report.md")
	var log strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = harness.Run(ctx, harness.Options{Root: root, Out: out, Command: "test", Quick: true, Table: true, Client: client,
		Upstreams: []string{harness.GoEcho}, Targets: []string{harness.Direct, harness.RelayHTTP, harness.RelayStdio, harness.ToolgateHTTP, harness.BaselineHTTP},
		Toolgate: toolgate, Revision: "this tree, built by the test", Baseline: toolgate, BaseRev: "the same binary",
		Echo: []string{self}, EchoEnv: map[string]string{execRole: "echoserver"},
		Relay: []string{self}, RelayEnv: map[string]string{execRole: "relay"}, Log: &log})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if left := procstat.Descendants(os.Getpid()); len(left) > 0 {
		t.Errorf("child processes left running: %v", left)
	}
	var rep report.Report
	raw, err := os.ReadFile(report.JSONPath(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	checkRows(t, rep.Rows, log.String())
	if !strings.HasPrefix(rep.Settings.Client, string(client)+" (") {
		t.Errorf("the report names the client %q, want %s", rep.Settings.Client, client)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| go | direct | 1 |", "| go | relay-http | 16 |", "| go | relay-stdio | 64 |", "| go | toolgate-http | 16 |",
		"| go | toolgate-http | 64 |", "| go | baseline-http | 16 |", "calls/s × relay", "baseline-* targets: binary " + toolgate, "Load client: " + string(client) + " ("} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the Markdown report lacks %q:\n%s", want, md)
		}
	}
	checkTable(t, string(md))
}

// checkTable wants every line of the side-by-side table to have as many
// cells as its header: a Markdown renderer drops a table whose rows do not.
func checkTable(t *testing.T, md string) {
	t.Helper()
	_, table, _ := strings.Cut(md, "| upstream |")
	table, _, _ = strings.Cut("| upstream |"+table, "\n\n")
	lines := strings.Split(table, "\n")
	for _, line := range lines[1:] {
		if got, want := strings.Count(line, "|"), strings.Count(lines[0], "|"); got != want {
			t.Errorf("table line has %d cell borders, the header %d: %s", got, want, line)
		}
	}
}

// checkRows wants direct, relay-http, relay-stdio, toolgate-http and
// baseline-http at concurrency 1, 16 and 64, each measured, with calls,
// latency and throughput, and toolgate-http's and baseline-http's ratios
// to relay-http. CPU is read in
// 10 ms ticks, so one short cell may show none: the sum over a target's
// cells must not be zero.
func checkRows(t *testing.T, rows []report.Row, log string) {
	t.Helper()
	if len(rows) != 15 {
		t.Fatalf("%d rows, want 15 (5 targets × 3 concurrencies):\n%s", len(rows), log)
	}
	var upstreamCPU float64
	gatewayCPU := map[string]float64{}
	for _, r := range rows {
		if r.NA != "" || r.Calls == 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.Throughput <= 0 || r.TputRatio <= 0 {
			t.Errorf("row %s/%s/%d is not a measurement: %+v\n%s", r.Upstream, r.Target, r.Concurrency, r, log)
		}
		if r.Errors > 0 {
			t.Errorf("row %s/%d: %d errors, first: %s", r.Target, r.Concurrency, r.Errors, r.FirstError)
		}
		upstreamCPU += r.UpstreamCPU
		if r.Target == harness.Direct {
			if r.GatewayCPU >= 0 || r.PeakRSSMB != 0 {
				t.Errorf("direct/%d has gateway figures: %+v", r.Concurrency, r)
			}
			continue
		}
		gatewayCPU[r.Target] += r.GatewayCPU
		if r.PeakRSSMB <= 0 {
			t.Errorf("%s/%d: no peak RSS", r.Target, r.Concurrency)
		}
		wantRelay := r.Target == harness.ToolgateHTTP || r.Target == harness.BaselineHTTP
		if got := r.P50VsRelay > 0 && r.TputVsRelay > 0; got != wantRelay {
			t.Errorf("%s/%d: ratios to the relay %v and %v, want them only for toolgate-http and baseline-http", r.Target, r.Concurrency, r.P50VsRelay, r.TputVsRelay)
		}
	}
	if upstreamCPU <= 0 {
		t.Errorf("upstream CPU per call %v, want above zero", upstreamCPU)
	}
	for _, target := range []string{harness.RelayHTTP, harness.RelayStdio, harness.ToolgateHTTP, harness.BaselineHTTP} {
		if gatewayCPU[target] <= 0 {
			t.Errorf("%s: gateway CPU per call %v, want above zero", target, gatewayCPU[target])
		}
	}
}

// The baseline targets without a baseline binary stop the run before it
// builds or starts anything, naming the flag.
func TestBaselineTargetsNeedABinary(t *testing.T) {
	root, err := harness.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	_, err = harness.Run(context.Background(), harness.Options{Root: root, Out: filepath.Join(t.TempDir(), "r.md"),
		Quick: true, Table: true, Upstreams: []string{harness.GoEcho}, Targets: []string{harness.ToolgateHTTP, harness.BaselineStdio}})
	if err == nil || !strings.Contains(err.Error(), "-baseline") {
		t.Fatalf("run: %v, want an error naming -baseline", err)
	}
}

// A scaling figure that does not exist stops the run before it builds or
// starts anything, with the list of those that do.
func TestUnknownFigureStopsTheRun(t *testing.T) {
	root, err := harness.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "r.md")
	_, err = harness.Run(context.Background(), harness.Options{Root: root, Out: out, Quick: true, Scaling: true,
		Figures: []string{"big-result"}})
	if err == nil || !strings.Contains(err.Error(), "big-results") {
		t.Fatalf("run: %v, want an error listing the figures", err)
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Errorf("a report was written: %v", statErr)
	}
}
