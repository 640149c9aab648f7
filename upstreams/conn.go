package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
)

// upstreamProtocol is the protocol version toolgate speaks to upstreams.
// Pinning the initialize-handshake era keeps raw requests valid as they are
// (the 2026-07-28 era wants per-request _meta that only mcp-go's typed
// client adds) and skips the server/discover probe that costs seconds
// against servers that ignore it.
const upstreamProtocol = "2025-11-25"

// Version is reported to upstreams as the client version.
var Version = "dev"

// Conn is one live connection to an upstream server.
type Conn struct {
	name   string
	client *client.Client
	tr     transport.Interface
	proc   *process // nil unless stdio
	log    *slog.Logger

	seq     atomic.Int64
	pending pendingSet
	closed  atomic.Bool    // Close was called (or is about to be): no new requests
	stdin   *watchedWriter // nil unless stdio
	closing sync.Once
}

// Dial starts (stdio) or connects to (HTTP, SSE) the server and completes
// the initialize handshake. ctx bounds the whole attempt; the connection
// itself outlives it. maxMessage caps every message the upstream sends.
func Dial(ctx context.Context, srv *config.Server, maxMessage int, log *slog.Logger) (*Conn, error) {
	c := &Conn{name: srv.Name, log: log}
	if err := c.openTransport(srv, maxMessage); err != nil {
		return nil, err
	}
	c.client = client.NewClient(c.tr, client.WithProtocolVersion(upstreamProtocol))
	if err := c.handshake(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) openTransport(srv *config.Server, maxMessage int) error {
	switch srv.Transport {
	case config.TransportStdio:
		return c.openStdio(srv, maxMessage)
	case config.TransportSSE:
		tr, err := transport.NewSSE(srv.URL, transport.WithHeaders(srv.Headers),
			transport.WithHTTPClient(c.httpClient(maxMessage)))
		c.tr = tr
		return err
	default:
		tr, err := transport.NewStreamableHTTP(srv.URL, transport.WithHTTPHeaders(srv.Headers),
			transport.WithHTTPBasicClient(c.httpClient(maxMessage)))
		c.tr = tr
		return err
	}
}

func (c *Conn) openStdio(srv *config.Server, maxMessage int) error {
	p, err := spawn(srv.Command, srv.Args, srv.Cwd, childEnv(os.Environ(), srv.Env), c.log)
	if err != nil {
		return fmt.Errorf("start %q: %w", srv.Command, err)
	}
	c.proc = p
	c.stdin = &watchedWriter{w: p.stdin}
	// The stream ends before the process is reaped: notice the end itself,
	// so a call after a crash is known never to have been sent.
	out := newCapReader(&endNoticer{r: p.stdout, ended: &c.closed}, maxMessage, frameLine, c.noteOversize)
	c.tr = transport.NewIO(out, c.stdin, nil)
	return nil
}

// httpClient caps every response body the upstream sends. No client-wide
// timeout: it would also cut long-lived SSE streams; each call carries its
// own deadline instead.
func (c *Conn) httpClient(maxMessage int) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{
		Transport: &cappedTransport{base: base, max: maxMessage, onOversize: c.noteOversize},
		// A redirect would carry the configured upstream headers (its
		// credentials) to whatever host the upstream names: refuse it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (c *Conn) noteOversize(id []byte) { c.pending.markOversize(string(id)) }

// handshake starts the transport and runs initialize.
func (c *Conn) handshake(ctx context.Context) error {
	// The transport keeps the context it is started with for its whole
	// life (mcp-go trap 2): give it one that does not end with ctx.
	if err := c.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start transport: %w", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = upstreamProtocol
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate", Version: Version}
	if _, err := c.client.Initialize(ctx, req); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

// Name is the configured server name.
func (c *Conn) Name() string { return c.name }

// Alive reports whether the connection can still carry requests as far as
// the gateway knows (for stdio: the process has not exited).
func (c *Conn) Alive() bool { return !c.closed.Load() && (c.proc == nil || c.proc.alive()) }

// request sends one raw JSON-RPC request and returns its raw result.
func (c *Conn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.Alive() {
		return nil, &CallError{Where: NotSent, Err: ErrNotConnected}
	}
	id := mcp.NewRequestId(fmt.Sprintf("gw-%d", c.seq.Add(1)))
	key := idKey(id)
	c.pending.add(key)
	resp, err := c.send(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params,
	})
	oversize := c.pending.remove(key)
	switch {
	case err != nil && ctx.Err() != nil:
		go c.cancelUpstream(id, ctx.Err())
		return nil, ctx.Err()
	case err != nil && neverLeft(err):
		return nil, &CallError{Where: NotSent, Err: err}
	case err != nil:
		return nil, &CallError{Where: Sent, Err: err}
	case resp.Error != nil && oversize:
		return nil, &CallError{Where: Answered, Oversize: true, Err: errors.New(resp.Error.Message)}
	case resp.Error != nil:
		return nil, rpcError(resp.Error)
	}
	return resp.Result, nil
}

// send hands the request to the transport. mcp-go writes a stdio request
// with a blocking write that ignores the context, so a child that stops
// reading its stdin would hold the call (and every call queued behind it)
// past its deadline. The write runs aside; when the deadline passes with
// the write still blocked, the child is declared broken and stopped, which
// also unblocks the write.
func (c *Conn) send(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if c.proc == nil {
		return c.tr.SendRequest(ctx, req)
	}
	type answer struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.tr.SendRequest(ctx, req)
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-ctx.Done():
		if c.stdin.blocked() {
			c.log.Error("upstream stopped reading its input; stopping it")
			c.closed.Store(true)
			go c.Close()
		}
		return nil, ctx.Err()
	}
}

// cancelUpstream tells the upstream the gateway no longer waits for id, so
// a tool that is still running can stop before it causes side effects no
// one will hear about.
func (c *Conn) cancelUpstream(id mcp.RequestId, why error) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelNoticeTimeout)
	defer cancel()
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: "notifications/cancelled",
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": why.Error()}},
	}}
	if err := c.tr.SendNotification(ctx, n); err != nil {
		c.log.Debug("cancellation not delivered", "err", err)
	}
}

// cancelNoticeTimeout bounds sending notifications/cancelled.
const cancelNoticeTimeout = time.Second

func idKey(id mcp.RequestId) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// pendingSet holds the ids of requests still waiting for an answer, and
// whether the capReader replaced that answer for being oversize. Only ids
// that are waiting can be marked, so an upstream cannot mark an id it
// expects the gateway to use later.
type pendingSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (p *pendingSet) add(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]bool{}
	}
	p.m[key] = false
}

func (p *pendingSet) markOversize(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, waiting := p.m[key]; waiting {
		p.m[key] = true
	}
}

// remove forgets key and reports whether its answer was oversize.
func (p *pendingSet) remove(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	oversize := p.m[key]
	delete(p.m, key)
	return oversize
}

// CallTool sends tools/call with the arguments exactly as given (they were
// validated against the raw bytes; re-encoding would lose big integers) and
// returns the raw result for the normalize stage.
func (c *Conn) CallTool(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{tool, args}
	return c.request(ctx, string(mcp.MethodToolsCall), params)
}

// Close ends the connection; for stdio it stops the child process and
// every process in its group.
func (c *Conn) Close() {
	c.closed.Store(true)
	c.closing.Do(func() {
		if c.client != nil {
			// For stdio this only closes our pipe ends: the transport was
			// built with NewIO, so it owns no process.
			_ = c.client.Close()
		}
		if c.proc != nil {
			c.proc.stop()
		}
	})
}

// ExitStatus describes how a stdio upstream ended, for the log.
func (c *Conn) ExitStatus() string {
	if c.proc == nil || c.proc.alive() {
		return ""
	}
	if c.proc.err == nil {
		return "exited with status 0"
	}
	return strings.TrimPrefix(c.proc.err.Error(), "exit status ")
}

// watchedWriter is a stdio child's stdin that knows when a write is stuck.
type watchedWriter struct {
	w       io.WriteCloser
	writing atomic.Int32
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.writing.Add(1)
	defer w.writing.Add(-1)
	return w.w.Write(p)
}

func (w *watchedWriter) Close() error { return w.w.Close() }

// blocked reports whether a write is in progress right now.
func (w *watchedWriter) blocked() bool { return w.writing.Load() > 0 }

// endNoticer sets ended when its reader fails (EOF included): the child's
// stdout is gone, so nothing more can be answered.
type endNoticer struct {
	r     io.Reader
	ended *atomic.Bool
}

func (e *endNoticer) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.ended.Store(true)
	}
	return n, err
}
