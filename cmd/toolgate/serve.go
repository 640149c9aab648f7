package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/tracing"
)

func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "toolgate.yaml", "configuration file")
	stdio := fs.Bool("stdio", false, "serve one client on stdin/stdout instead of HTTP")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log, sink, err := newLogger(*level)
	if err != nil {
		return startFailed(ctx, *stdio, fmt.Sprintf("toolgate: %v\n", err))
	}
	defer sink.Close() // deferred first, so it runs last: after gw.Close's lines
	gw, problem := newGateway(ctx, *configPath, log)
	if gw == nil {
		_ = sink.Flush() // what was logged before the problem is printed comes before it
		return startFailed(ctx, *stdio, problem)
	}
	defer gw.Close()
	limitMemory(log, gw.Config().DedupMaxBytes())
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // before serving: a SIGHUP must never end the process
	defer signal.Stop(hup)
	go reloadOnHangUp(ctx, gw, hup, log)
	if *stdio {
		if err := gw.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
			log.Error("stdio server stopped", "err", err)
			return 1
		}
		return 0
	}
	if err := gw.Start(ctx); err != nil {
		log.Error(err.Error())
		return 1
	}
	select {
	case err := <-gw.Failed():
		log.Error("HTTP server stopped", "err", err)
		return 1
	case <-ctx.Done():
		return 0 // Close shuts the listeners down gracefully
	}
}

// startFailed prints why the gateway cannot start (problem, as
// printProblems wrote it) and returns exit code 2. Under --stdio it first
// answers the client's requests with that text (see stdiofail.go), so the
// client shows why instead of "Connection closed".
func startFailed(ctx context.Context, stdio bool, problem string) int {
	fmt.Fprint(os.Stderr, problem)
	if stdio {
		fmt.Fprintf(os.Stderr, "toolgate: not serving: answering every stdio request with the error above until stdin closes (at most %v)\n", stdioFailLinger)
		why := answerStartupError(ctx, os.Stdin, os.Stdout, strings.TrimRight(problem, "\n"), stdioFailLinger)
		fmt.Fprintf(os.Stderr, "toolgate: exiting: %s\n", why)
	}
	return 2
}

// startGateway builds the gateway, printing why it cannot (exit code 2).
func startGateway(ctx context.Context, path string, log *slog.Logger) (*gateway.Gateway, int) {
	gw, problem := newGateway(ctx, path, log)
	if gw == nil {
		fmt.Fprint(os.Stderr, problem)
		return nil, 2
	}
	return gw, 0
}

// newGateway builds the gateway, or says why it cannot: the text an
// operator reads on stderr, what failed and every problem in it (file,
// line, key), one per line.
func newGateway(ctx context.Context, path string, log *slog.Logger) (*gateway.Gateway, string) {
	gw, err := gateway.New(ctx, gateway.Options{ConfigPath: path, Log: log, Version: version, Tracing: setupTracing})
	var se *gateway.StartError
	var b strings.Builder
	switch {
	case errors.As(err, &se):
		printProblems(&b, se.What, se.Err)
		return nil, b.String()
	case err != nil:
		printProblems(&b, "cannot start", err)
		return nil, b.String()
	}
	return gw, ""
}

// reloadOnHangUp reloads the policy, the tool pins, and the API keys and
// admin key from the config file on SIGHUP (gateway.Reload), until ctx ends.
func reloadOnHangUp(ctx context.Context, gw *gateway.Gateway, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading the policy, the tool pins, and the API keys and admin key from the config file")
			gw.Reload()
		}
	}
}

// gcPercent is the garbage collector's target for the serving gateway
// unless GOGC says otherwise. Every call allocates (JSON in and out, the
// envelope, the audit record); at Go's default of 100 the collector took
// about 15% of the gateway's CPU under load. 400 lets the heap grow to five
// times the live data between collections instead of twice: measured with
// bench/, 15% more calls per second at 16 concurrent callers, for about
// 30 MB more memory under that load (the idle footprint barely changes).
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// memoryHeadroom is the least room the soft memory limit leaves above the
// heap the ready gateway holds. gcPercent alone lets the heap grow to five
// times its live data: fine for the ~15 MB a busy gateway keeps live, not
// for large results, whose burst of live data raises that target with it.
// 50 callers each pulling two distinct 5 MiB results (bench/, the
// large-results figure) peaked at 1,025 MB without a limit, at 217 MB with
// live + 112 MiB + a 64 MiB replay table (which that load filled), and at
// 128-138 MB with live + 80 MiB + 16 MiB (whose quarter, 4 MiB, keeps a
// 5 MiB answer out). Ordinary load stays under the limit and keeps
// gcPercent's pace: 64 callers over HTTP keep 13-15 MB live and collect at
// a 72-78 MB goal, twelve collections in 30,000 calls either way. A replay
// table full of small answers (16 MiB) makes it collect about twice as
// often as gcPercent would.
const memoryHeadroom = 80 << 20

// limitMemory sets the Go runtime's soft memory limit, unless GOMEMLIMIT
// says otherwise, to the live heap of the ready gateway (its catalog,
// policy and sessions), plus held: what it is configured to hold later
// (the answers kept for replay, limits.dedup.max_bytes), plus the larger of
// memoryHeadroom and the growth gcPercent allows that heap. So a large
// policy keeps its pace: with 100,000 lines (~190 MB live) a limit of live
// + 128 MiB made each call cost 1.31 times the CPU of a small policy's at
// 16 callers, collecting six times as often; and so would a full replay
// table without held. The limit is not moved later: a policy that grows
// tenfold on reload collects more often until a restart (or GOMEMLIMIT).
// It returns the limit it set (0: none).
func limitMemory(log *slog.Logger, held int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	// Once, at start: collect, so that what is live is what the gateway
	// keeps, and give the rest back: starting up (a policy's parse, the
	// catalog's schemas) leaves garbage that otherwise stays resident until
	// the scavenger returns it, 290 MB idle with 100,000 policy lines instead
	// of 132, 30.5 with 10 upstreams instead of 29.0.
	debug.FreeOSMemory()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	live := int64(sample[0].Value.Uint64())
	limit := live + held + max(memoryHeadroom, live*gcPercent/100)
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set (GOMEMLIMIT overrides it)", "limit_mb", limit>>20, "live_heap_mb", live>>20,
		"held_mb", held>>20)
	return limit
}

// setupTracing is tracing.Setup; tests replace it with an in-memory
// exporter.
var setupTracing = tracing.Setup
