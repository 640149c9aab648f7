// Command loadbench is toolgate's load harness (issue 8): the same echo
// workload called directly, through toolgate over Streamable HTTP and
// stdio, through a zero-check Go relay on mcp-go (issue 22), and through
// the npm peers mcp-proxy and supergateway, in
// interleaved rounds, with the scaling figures on request. See
// bench/README.md.
//
//	go run ./bench/cmd/loadbench -scaling -out bench/results/latest.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/bench/harness"
	"github.com/toolgate/toolgate/bench/scaling"
	"github.com/toolgate/toolgate/bench/targets"
)

func main() {
	os.Exit(run())
}

func run() int {
	var o harness.Options
	var conc, ups, tgts, client, figs string
	flag.StringVar(&o.Out, "out", "bench/results/latest.md", "the Markdown report; the JSON goes beside it (.json)")
	flag.BoolVar(&o.Quick, "quick", false, "a smoke run of a few seconds per target: 1 round, 0.3 s cells")
	flag.BoolVar(&o.Table, "table", true, "measure the side-by-side table")
	flag.BoolVar(&o.Scaling, "scaling", false, "also measure the scaling figures (about 3 minutes)")
	flag.IntVar(&o.Rounds, "rounds", 0, "interleaved rounds (default 5; 1 with -quick)")
	flag.DurationVar(&o.Warmup, "warmup", 0, "warm-up per cell (default 500ms; 100ms with -quick)")
	flag.DurationVar(&o.Duration, "duration", 0, "measured time per cell (default 2s; 300ms with -quick)")
	flag.DurationVar(&o.Settle, "settle", 0, "the most each cell waits for the machine to be quiet first (default 30s; off with -quick; negative: off)")
	flag.StringVar(&conc, "concurrency", "1,16,64", "concurrent workers per cell, comma-separated")
	flag.StringVar(&ups, "upstreams", "go,everything", "upstreams: go (bench/echo), everything (npm server-everything)")
	flag.StringVar(&tgts, "targets", "direct,relay-http,relay-stdio,toolgate-http,toolgate-http-nofast,toolgate-stdio,mcp-proxy,supergateway", "targets, comma-separated")
	flag.StringVar(&o.Toolgate, "toolgate", "", "a toolgate binary to measure instead of building ./cmd/toolgate")
	flag.StringVar(&o.Revision, "toolgate-rev", "", "what the -toolgate binary was built from (a commit), for the report")
	flag.StringVar(&o.Baseline, "baseline", "", "a second toolgate binary, measured as the targets baseline-http and baseline-stdio (add them to -targets; they are added when -targets is not given)")
	flag.StringVar(&o.BaseRev, "baseline-rev", "", "what the -baseline binary was built from (a commit), for the report")
	flag.StringVar(&client, "client", "lean", "the load client: lean (the harness's own, cheap in CPU) or mcp-go (mcp-go's client)")
	flag.StringVar(&figs, "figures", "", "with -scaling, only these scaling figures, comma-separated: "+strings.Join(scaling.Figures(), ", ")+" (default all)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the work directory (generated configs, audit trails)")
	flag.Parse()
	o.Command = "go run ./bench/cmd/loadbench " + strings.Join(os.Args[1:], " ")
	var err error
	if o.Concurrency, err = ints(conc); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench: -concurrency:", err)
		return 2
	}
	if o.Client, err = targets.ParseClient(client); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench: -client:", err)
		return 2
	}
	o.Upstreams, o.Targets, o.Figures = split(ups), split(tgts), split(figs)
	if err := scaling.CheckFigures(o.Figures); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench: -figures:", err)
		return 2
	}
	if o.Baseline != "" && !targetsGiven() {
		o.Targets = append(o.Targets, harness.BaselineHTTP, harness.BaselineStdio)
	}
	cwd, _ := os.Getwd()
	if o.Root, err = harness.FindRoot(cwd); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		return 2
	}
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	if _, err := harness.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "report written to %s (and .json) in %s\n", o.Out, time.Since(t0).Round(time.Second))
	return 0
}

// targetsGiven reports whether -targets was on the command line.
func targetsGiven() bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "targets" })
	return given
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
