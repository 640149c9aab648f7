package proxy

import (
	"context"
	"io"
	"log/slog"

	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
)

// The stdio server's concurrency: calls run at once, and calls queued.
const (
	stdioWorkers = 64
	stdioQueue   = 1024
)

// ServeStdio serves one client on in/out as principal until ctx ends or in
// closes. Nothing but protocol is written to out. Plain tools/calls take
// the fast path (stdioFast) unless Options.NoStdioFastPath.
func (s *Server) ServeStdio(ctx context.Context, subject authz.Subject, in io.Reader, out io.Writer) error {
	// mcp-go runs 5 tool calls at once by default (trap 6); a client that
	// sends more waits on the gateway, not on its upstreams, which have
	// their own in-flight limits (max_in_flight). 64 matches the default
	// max_in_flight.
	stdio := server.NewStdioServer(s.mcp)
	for _, opt := range []server.StdioOption{server.WithWorkerPoolSize(stdioWorkers), server.WithQueueSize(stdioQueue)} {
		opt(stdio)
	}
	if s.log != nil { // mcp-go's own errors (a worker's panic, a full queue) as our log lines, not raw stderr
		stdio.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelError))
	}
	// The session registers with Listen's context: carry the subject there
	// too, so policy changes reach this client; the requests' context is
	// made from it.
	ctx = WithSubject(ctx, subject)
	if !s.opts.NoStdioFastPath {
		return s.serveStdioFast(ctx, stdio, in, out)
	}
	return stdio.Listen(ctx, in, out)
}
