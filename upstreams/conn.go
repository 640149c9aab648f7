package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

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

	seq      atomic.Int64
	oversize sync.Map // JSON id (as bytes in a string) of answers the capReader replaced
	closing  sync.Once
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
	out := newCapReader(p.stdout, maxMessage, true, c.noteOversize)
	c.tr = transport.NewIO(out, p.stdin, nil)
	return nil
}

// httpClient caps every response body the upstream sends. No client-wide
// timeout: it would also cut long-lived SSE streams; each call carries its
// own deadline instead.
func (c *Conn) httpClient(maxMessage int) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Transport: &cappedTransport{base: base, max: maxMessage, onOversize: c.noteOversize}}
}

func (c *Conn) noteOversize(id []byte) { c.oversize.Store(string(id), struct{}{}) }

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
func (c *Conn) Alive() bool { return c.proc == nil || c.proc.alive() }

// request sends one raw JSON-RPC request and returns its raw result.
func (c *Conn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.Alive() {
		return nil, &CallError{Where: NotSent, Err: ErrNotConnected}
	}
	id := mcp.NewRequestId(fmt.Sprintf("gw-%d", c.seq.Add(1)))
	resp, err := c.tr.SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && neverLeft(err):
		return nil, &CallError{Where: NotSent, Err: err}
	case err != nil:
		return nil, &CallError{Where: Sent, Err: err}
	case resp.Error != nil:
		return nil, c.answerError(id, resp.Error)
	}
	return resp.Result, nil
}

func (c *Conn) answerError(id mcp.RequestId, details *mcp.JSONRPCErrorDetails) *CallError {
	key, _ := json.Marshal(id)
	if _, ok := c.oversize.LoadAndDelete(string(key)); ok {
		return &CallError{Where: Answered, Oversize: true, Err: errors.New(details.Message)}
	}
	return rpcError(details)
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
