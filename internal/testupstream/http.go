package testupstream

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// httpUpstream is one upstream served over HTTP on its own listener.
type httpUpstream struct {
	url      string
	srv      *http.Server
	served   chan struct{}
	closeMCP func(context.Context) // ends mcp-go's long-lived streams so that Shutdown can finish
	hang     chan struct{}         // closed on stop: releases hanging handlers
	stopOnce sync.Once
}

// serveHTTP serves an upstream for o on ln: transport "http" (Streamable HTTP at /mcp) or "sse"
// (legacy SSE at /sse, messages at /message). With hang, every request is read and never answered
// (until the client gives up or the upstream stops). logw receives library diagnostics.
func serveHTTP(ln net.Listener, transport string, o Options, hang bool, logw io.Writer) (*httpUpstream, error) {
	base := "http://" + ln.Addr().String()
	u := &httpUpstream{served: make(chan struct{}), hang: make(chan struct{})}
	if o.rt == nil {
		exit := o.Exit
		if exit == nil {
			exit = os.Exit
		}
		o.rt = newRuntime(exit, o.CrashAfter)
	}
	var faults *faultPicker
	if o.Faults != nil {
		faults = newFaultPicker(*o.Faults, transport)
		o.httpFaults = true
	}
	mcpSrv := NewServer(o)
	var h http.Handler
	switch transport {
	case "http":
		s := server.NewStreamableHTTPServer(mcpSrv,
			server.WithStreamableHTTPLogger(slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		h = s
		u.url = base + "/mcp"
		u.closeMCP = func(ctx context.Context) { _ = s.Shutdown(ctx) } // no http.Server inside: closes sessions only
	case "sse":
		s := server.NewSSEServer(mcpSrv, server.WithBaseURL(base))
		h = s
		u.url = base + "/sse"
		u.closeMCP = func(context.Context) { s.CloseSessions() }
	default:
		return nil, fmt.Errorf("unknown HTTP transport %q (want http or sse)", transport)
	}
	h = recordingHandler(rewriting(h, o.rt.afterLine), o.rt)
	if faults != nil {
		h = faultHandler(h, faults, u.hang)
	}
	if hang {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-u.hang:
			}
		})
	}
	u.srv = &http.Server{Handler: h, ErrorLog: log.New(logw, "testupstream: ", log.LstdFlags), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(u.served)
		_ = u.srv.Serve(ln)
	}()
	return u, nil
}

// stop ends long-lived streams, shuts the server down (at most 5 s, then closes what is left) and
// waits for the serving goroutine. Safe to call more than once.
func (u *httpUpstream) stop() {
	u.stopOnce.Do(func() {
		close(u.hang)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u.closeMCP(ctx)
		if err := u.srv.Shutdown(ctx); err != nil {
			_ = u.srv.Close()
		}
		<-u.served
	})
}

// abortRequest is the in-process crash: it aborts the HTTP request being served, so the client sees
// the connection break mid-call, as it would if the upstream process died.
func abortRequest(int) { panic(http.ErrAbortHandler) }

func startInProcess(transport string, o Options) (string, func(), error) {
	if o.Exit == nil {
		o.Exit = abortRequest
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	u, err := serveHTTP(ln, transport, o, false, os.Stderr)
	if err != nil {
		_ = ln.Close()
		return "", nil, err
	}
	return u.url, u.stop, nil
}

// StartHTTP serves an upstream over Streamable HTTP on a loopback port and returns its endpoint
// (http://127.0.0.1:PORT/mcp) and a stop func that shuts it down and waits for it (idempotent).
// Marker responses (garbage, unknown_content) are rewritten in both application/json and
// text/event-stream answers. Unless o.Exit is set, crash aborts the HTTP request (the client sees
// the connection drop mid-call) instead of exiting the process.
func StartHTTP(o Options) (url string, stop func(), err error) {
	return startInProcess("http", o)
}

// StartSSE serves an upstream over the legacy HTTP+SSE transport on a loopback port and returns its
// SSE endpoint (http://127.0.0.1:PORT/sse) and a stop func (idempotent). Marker responses are
// rewritten on the event stream. Unless o.Exit is set, crash panics in the handler; mcp-go's SSE
// server recovers that and answers a JSON-RPC internal error (legacy SSE answers on the event
// stream, not on the request, so there is no request to abort). Note that mcp-go runs legacy SSE
// handlers on a context detached from the request: a client that goes away does not cancel sleep.
func StartSSE(o Options) (url string, stop func(), err error) {
	return startInProcess("sse", o)
}
