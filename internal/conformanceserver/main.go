package conformanceserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// shutdownGrace bounds how long stopping may take before connections are closed hard.
const shutdownGrace = 5 * time.Second

// Main runs the server as a process and returns its exit code (args excludes the program name).
// By default it serves MCP over stdio on stdin/stdout. With -http ADDR it serves Streamable HTTP
// at http://ADDR/mcp (port 0 picks a free port) and writes exactly one line to stdout,
// "LISTENING http://HOST:PORT/mcp", once the port accepts connections. Logs go to stderr only.
// It stops on SIGINT/SIGTERM, or in stdio mode at the end of stdin.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance-upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio (e.g. 127.0.0.1:3000)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conformance-upstream: unexpected arguments %q\n", fs.Args())
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s := newServer(logger)
	if *addr == "" {
		return serveStdio(ctx, s, stdin, stdout, stderr)
	}
	return serveHTTP(ctx, s, *addr, stdout, logger)
}

func serveStdio(ctx context.Context, s *server.MCPServer, stdin io.Reader, stdout, stderr io.Writer) int {
	ss := server.NewStdioServer(s)
	out := &lockedWriter{w: stdout} // a tool's notifications go out before its answer (ordered.go)
	ss.SetContextFunc(func(ctx context.Context) context.Context { return withNotifier(ctx, out.notify) })
	ss.SetErrorLogger(log.New(stderr, "conformance-upstream: ", log.LstdFlags))
	if err := ss.Listen(ctx, newCapabilityGateReader(stdin, out), out); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "conformance-upstream: %v\n", err)
		return 1
	}
	return 0
}

func serveHTTP(ctx context.Context, s *server.MCPServer, addr string, stdout io.Writer, logger *slog.Logger) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Error("listen", "err", err)
		return 1
	}
	h := newHTTPHandler(s, logger)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := fmt.Sprintf("http://%s%s", ln.Addr(), endpointPath)
	fmt.Fprintf(stdout, "LISTENING %s\n", url)
	logger.Info("serving Streamable HTTP", "url", url)

	select {
	case err := <-served:
		logger.Error("serve", "err", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Sessions first: their GET streams never end by themselves, and Shutdown waits for them.
	if err := h.Shutdown(sctx); err != nil {
		logger.Warn("closing sessions", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-served
	return 0
}
