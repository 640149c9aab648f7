package conformanceserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/listenstream"
)

const (
	endpointPath   = "/mcp"
	maxRequestBody = 4 << 20 // mcp-go reads bodies whole and sets no limit of its own
	// sessionIdleTTL reclaims sessions whose client left without a DELETE (the suite never sends
	// one); with an event store mcp-go would otherwise keep them, and their events, forever.
	sessionIdleTTL = 10 * time.Minute
)

// HTTPHandler serves an MCP server over Streamable HTTP at /mcp. On top of mcp-go's transport it
// adds what the conformance scenarios check and mcp-go lacks: an Origin check next to mcp-go's
// Host check (dns-rebinding-protection), and SEP-1699 polling, where a tool call closes its SSE
// stream early and the client collects the answer with a GET carrying Last-Event-ID
// (server-sse-polling, tool test_reconnection).
type HTTPHandler struct {
	mcp     http.Handler // mcp-go's transport, its GET streams counted by streams
	srv     *server.StreamableHTTPServer
	polls   *polls
	streams *listenstream.Streams // see sample: mcp-go loses a sampling request sent with no GET attached
}

// NewHTTPHandler returns the Streamable HTTP endpoint for s. Call Shutdown when done: it ends
// sessions, their streams and any call still held for a client to resume. The transport's own
// diagnostics at warning level and above go to stderr.
func NewHTTPHandler(s *server.MCPServer) *HTTPHandler {
	return newHTTPHandler(s, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// newHTTPHandler is NewHTTPHandler with the transport's diagnostics going to logger.
func newHTTPHandler(s *server.MCPServer, logger *slog.Logger) *HTTPHandler {
	streams := &listenstream.Streams{}
	srv := server.NewStreamableHTTPServer(s,
		server.WithStreamableHTTPLogger(logger),
		server.WithStateful(true), // the polling scenarios need a session ID to resume under
		// An event store makes mcp-go record the last notifications of a call before the
		// answer; without one it can drop a notification sent just before the handler returns
		// (the forwarder takes it off the channel after the response path closed `done`,
		// mcp-go server/streamable_http.go:823-834), which made logging/progress flaky.
		server.WithEventStore(listenstream.Resumable(server.NewInMemoryEventStore())),
		server.WithSessionIdleTTL(sessionIdleTTL),
		server.WithHTTPContextFunc(func(ctx context.Context, _ *http.Request) context.Context {
			return listenstream.With(ctx, streams)
		}))
	return &HTTPHandler{mcp: capabilityGate(orderedPOSTs(streams.Track(srv))), srv: srv, polls: newPolls(), streams: streams}
}

// ServeHTTP implements http.Handler.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != endpointPath {
		http.NotFound(w, r)
		return
	}
	if err := checkLoopbackOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	}
	switch {
	case r.Method == http.MethodGet && isPollEventID(r.Header.Get("Last-Event-ID")):
		h.polls.resume(w, r)
	case r.Method == http.MethodPost && pollable(r):
		h.polls.serve(w, r, h.mcp)
	default:
		h.mcp.ServeHTTP(w, r)
	}
}

// Shutdown releases the calls held for resumption and closes every session (which ends their
// GET streams, so that an http.Server can then shut down). It does not stop a listener.
func (h *HTTPHandler) Shutdown(ctx context.Context) error {
	h.polls.close(ctx)
	return h.srv.Shutdown(ctx)
}

// pollable reports whether a POST may close its stream early: only within a session (the resume
// must be matched to it) and before protocol 2026-07-28, which removed stream resumption.
func pollable(r *http.Request) bool {
	return r.Header.Get(server.HeaderKeySessionID) != "" &&
		!mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
}

// checkLoopbackOrigin refuses, on a loopback listener, requests whose Host or Origin names
// another host: that is what a DNS-rebound browser page sends. mcp-go checks Host only
// (server/http_localhost.go), and not at all on the resume path served here.
func checkLoopbackOrigin(r *http.Request) error {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !isLoopback(local.String()) {
		return nil // a non-loopback listener was exposed on purpose; its allowed origins are unknown
	}
	if !isLoopback(r.Host) {
		return fmt.Errorf("forbidden: Host %q is not a loopback host", r.Host)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !isLoopback(u.Host) {
			return fmt.Errorf("forbidden: Origin %q is not a loopback origin", origin)
		}
	}
	return nil
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
