package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/procs"
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
	stdin := os.Stdin
	if *stdio {
		var restore func()
		stdin, restore = pollableStdin(os.Stdin, os.Stdout, os.Stderr)
		defer restore()
	}
	live := settledHeap()
	limitMemory(log, live, gw.Config().DedupMaxBytes())
	if few := leaveCPUForUpstreams(log, gw.Config(), *stdio && !polled(stdin)); few > 0 {
		go procs.Run(ctx, procs.Options{Few: few, Many: few + 1, Log: log})
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // before serving: a SIGHUP must never end the process
	defer signal.Stop(hup)
	go reloadOnHangUp(ctx, gw, hup, log)
	if *stdio {
		if err := gw.ServeStdio(ctx, stdin, os.Stdout); err != nil {
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

// setupTracing is tracing.Setup; tests replace it with an in-memory
// exporter.
var setupTracing = tracing.Setup
