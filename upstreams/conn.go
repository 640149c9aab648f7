package upstreams

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// upstreamProtocol is the protocol version toolgate speaks to upstreams
// unless their config says protocol: 2026-07-28. The initialize-handshake
// era is the default: every server released before 2026 speaks it, and it
// skips the server/discover probe that costs seconds against servers that
// ignore it. (2026-07-28 requests carry per-request _meta: modern.go.)
const upstreamProtocol = "2025-11-25"

// Version is reported to upstreams as the client version.
var Version = "dev"

// Conn is one connection to an upstream server. It never reconnects: once
// it is down (Done is closed) every request answers NotSent, and the owner
// (the Set's supervisor) closes it and dials a new one.
type Conn struct {
	lostFault atomic.Uint64 // see lostFaultID
	name      string
	client    *client.Client
	tr        transport.Interface
	proc      *process        // nil unless stdio
	http      *http.Transport // nil unless HTTP or SSE
	log       *slog.Logger
	hooks     connHooks

	seq      atomic.Int64
	pending  pendingSet
	routes   progressRoutes
	relays   relaySet
	caps     mcp.ServerCapabilities // as declared in initialize (or server/discover)
	proto    string                 // the protocol version asked for (config: protocol)
	spoken   atomic.Pointer[string] // a 2026 version the upstream asked for with -32022 instead of proto (era.go)
	modern   bool                   // the 2026-07-28 era was negotiated (see modern.go)
	listener listener               // the subscriptions/listen request of a modern connection
	closed   atomic.Bool            // down or closing: no new requests
	// stuckDeclared: stuck ran. Not closed: a request failed by the same
	// stuck write may mark the connection down first, and the child must
	// still be stopped.
	stuckDeclared atomic.Bool
	stdin         *watchedWriter // nil unless stdio
	closing       sync.Once

	// versionRetried: a request was sent again after a -32022;
	// versionUnknown: a -32022 named no version toolgate speaks (each
	// logged once).
	versionRetried, versionUnknown atomic.Bool

	// life ends, with the reason as its cause, when the connection is known
	// to be down: the process exited, its output ended, the session ended,
	// or Close was called.
	life context.Context
	kill context.CancelCauseFunc

	// bg counts goroutines Close waits for: requests running aside and
	// cancellation notices. bgDone is set (under bgMu) once Close waits.
	bgMu   sync.Mutex
	bg     sync.WaitGroup
	bgDone bool
}

// connHooks are what the supervisor learns from a connection as it
// happens. They run on the transport's read loop (mcp-go trap 3) and must
// not block.
type connHooks struct {
	supervised  bool   // an owner watches Done and closes the connection
	listChanged func() // the upstream sent notifications/{tools,resources,prompts}/list_changed
	// resourceUpdated: the upstream sent notifications/resources/updated.
	resourceUpdated func(uri string)
	// logLevel is the level 2026-07-28 requests declare ("" for none).
	logLevel    func() string
	streamEnded func() // an HTTP event stream (the GET listening stream) ended
	// listenRefused: a 2026-07-28 upstream answered subscriptions/listen
	// as a method it does not serve (listen.go).
	listenRefused func(err error)
	// era is the protocol era to try first when the server's config names
	// none: the one the supervisor last connected in ("" for 2025-11-25).
	era string
}

// ErrClosed is the cause when the gateway closed the connection itself.
var ErrClosed = errors.New("connection closed by the gateway")

// ErrOutputEnded is the cause when a stdio upstream's output ended.
var ErrOutputEnded = errors.New("upstream output ended")

// errExited: a stdio upstream exited and its output did not end.
var errExited = errors.New("upstream exited")

// Dial starts (stdio) or connects to (HTTP, SSE) the server and completes
// the initialize handshake. ctx bounds the whole attempt; the connection
// itself outlives it. maxMessage caps every message the upstream sends.
func Dial(ctx context.Context, srv *Server, maxMessage int, log *slog.Logger) (*Conn, error) {
	return dial(ctx, srv, maxMessage, log, connHooks{})
}

// dial connects in the era the server's config names, else the era the
// supervisor learned (hooks.era), else 2025-11-25; an upstream without a
// configured era that refuses initialize as unknown is tried again in
// 2026-07-28 (era.go).
func dial(ctx context.Context, srv *Server, maxMessage int, log *slog.Logger, hooks connHooks) (*Conn, error) {
	proto := cmp.Or(srv.Protocol, hooks.era, upstreamProtocol)
	c, err := dialAs(ctx, srv, proto, maxMessage, log, hooks)
	if srv.Protocol == "" && hooks.era != "" {
		if err == nil && c.modern {
			return c, nil
		}
		if err == nil || eraRefused(err) {
			return dialLegacyAgain(ctx, srv, c, maxMessage, log, hooks)
		}
		return nil, err
	}
	if err == nil || srv.Protocol != "" || mcp.IsModernProtocol(proto) {
		return c, err
	}
	return dialModernAfter(ctx, srv, err, maxMessage, log, hooks)
}

// dialAs is one attempt to connect, speaking proto.
func dialAs(ctx context.Context, srv *Server, proto string, maxMessage int, log *slog.Logger, hooks connHooks) (*Conn, error) {
	c := &Conn{name: srv.Name, log: log, hooks: hooks, proto: proto}
	c.life, c.kill = context.WithCancelCause(context.Background())
	if err := c.openTransport(srv, maxMessage); err != nil {
		c.kill(err)
		return nil, err
	}
	c.client = client.NewClient(c.tr, client.WithProtocolVersion(c.proto))
	c.client.OnNotification(c.onNotification)
	// Legacy SSE: the event stream carries every answer, so its end is the
	// connection's end.
	c.client.OnConnectionLost(func(err error) { c.markDown(fmt.Errorf("event stream lost: %w", err)) })
	if c.proc != nil {
		c.goTracked(c.watchExit)
	}
	if err := c.handshake(ctx); err != nil {
		c.Close()
		if c.proc != nil {
			return nil, &startError{err: err, status: c.proc.status(), tail: c.proc.stderrTail(stderrTailWait)}
		}
		return nil, err
	}
	return c, nil
}

// startError is a stdio upstream that did not complete the handshake: how
// its process ended, and the last lines of its stderr (for the log).
type startError struct {
	err    error
	status string
	tail   []string
}

func (e *startError) Error() string { return fmt.Sprintf("%v (upstream %s)", e.err, e.status) }
func (e *startError) Unwrap() error { return e.err }

// watchExit marks a stdio connection down when its process exits. What the
// child wrote before it exited is still in the pipe, and the reader is
// given exitDrainGrace to reach the end of the output (which marks the
// connection down itself) before the connection is taken down regardless
// (a grandchild may hold the output open). Meanwhile Alive is already false:
// no new request goes to a process that is gone.
func (c *Conn) watchExit() {
	select {
	case <-c.proc.exited:
	case <-c.life.Done():
		return
	}
	t := time.NewTimer(exitDrainGrace)
	defer t.Stop()
	select {
	case <-t.C:
		c.markDown(fmt.Errorf("%w (%s)", errExited, c.proc.status()))
	case <-c.life.Done():
	}
}

// exitDrainGrace bounds how long the output of an exited child is read.
const exitDrainGrace = time.Second

// markDown records that the connection can no longer carry requests, and
// why (the first reason wins).
func (c *Conn) markDown(why error) {
	c.closed.Store(true)
	c.kill(why)
}

// Done is closed when the connection is down.
func (c *Conn) Done() <-chan struct{} { return c.life.Done() }

// Err says why the connection is down (nil while it is up).
func (c *Conn) Err() error {
	if c.life.Err() == nil {
		return nil
	}
	return context.Cause(c.life)
}

// downErr is the cause a request gets when the connection is down.
func (c *Conn) downErr() error {
	if err := c.Err(); err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return ErrNotConnected
}

// goTracked runs fn on a goroutine Close waits for, unless Close already
// waits (then it reports false and does not run fn).
func (c *Conn) goTracked(fn func()) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgDone {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		fn()
	}()
	return true
}

func (c *Conn) openTransport(srv *Server, maxMessage int) error {
	switch srv.Transport {
	case TransportStdio:
		return c.openStdio(srv, maxMessage)
	case TransportSSE:
		// The SSE transport gives up on an answer after its own response
		// timeout (60 s by default, or the caller's remaining time): make
		// the caller's deadline the only one.
		tr, err := transport.NewSSE(srv.URL, transport.WithHeaders(srv.Headers),
			transport.WithHTTPClient(c.httpClient(srv, maxMessage)), transport.WithSSELogger(libraryLogger(c.log)),
			transport.WithResponseTimeout(sseResponseTimeout))
		c.tr = tr
		return err
	default:
		// Continuous listening opens the GET stream on which the server
		// sends what is not an answer to a request: tools/list_changed.
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(srv.Headers),
			transport.WithHTTPBasicClient(c.httpClient(srv, maxMessage)), transport.WithHTTPLogger(libraryLogger(c.log))}
		if !mcp.IsModernProtocol(c.proto) {
			// 2026-07-28 has no listening stream (mcp-go refuses it there).
			opts = append(opts, transport.WithContinuousListening())
		}
		tr, err := transport.NewStreamableHTTP(srv.URL, opts...)
		c.tr = tr
		return err
	}
}

func (c *Conn) openStdio(srv *Server, maxMessage int) error {
	p, err := spawn(srv.Command, srv.Args, srv.Cwd, childEnv(os.Environ(), srv.Env), c.log, srv.Redact.Lines())
	if err != nil {
		return fmt.Errorf("start %q: %w", srv.Command, err)
	}
	c.proc = p
	c.stdin = &watchedWriter{w: p.stdin}
	// The stream ends before the process is reaped: notice the end itself,
	// so a call after a crash is known never to have been sent. The cap
	// reader sits outside the noticer, so a stream it gives up on (an
	// endless message) also ends the connection.
	out := &endNoticer{r: newCapReader(p.stdout, maxMessage, frameLine, c.noteOversize), onEnd: c.outputEnded}
	lt := newLineTransport(out, c.stdin)
	lt.onStuck = c.stuck
	c.tr = lt
	return nil
}

func (c *Conn) outputEnded(err error) {
	if errors.Is(err, io.EOF) {
		c.markDown(ErrOutputEnded)
		return
	}
	c.markDown(fmt.Errorf("%w: %w", ErrOutputEnded, err))
}

// httpClient caps every response body the upstream sends, and dials every
// connection through the server's egress guard. No client-wide timeout: it
// would also cut long-lived SSE streams; each call carries its own
// deadline instead.
func (c *Conn) httpClient(srv *Server, maxMessage int) *http.Client {
	base := egress.New(srv.Egress).Transport()
	c.http = base
	return &http.Client{
		Transport: &cappedTransport{base: base, max: maxMessage, onOversize: c.noteOversize, onStreamEnd: c.hooks.streamEnded, creds: srv.Credentials, life: c.life},
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
	// The gateway answers the upstream's own requests itself, raw, so
	// nothing is lost in mcp-go's typed handlers (Start installed those).
	if bidi, ok := c.tr.(transport.BidirectionalInterface); ok {
		bidi.SetRequestHandler(c.answerUpstream)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = c.proto
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate", Version: Version}
	req.Params.Capabilities = relayedCapabilities()
	res, err := c.client.Initialize(ctx, req)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	c.caps = res.Capabilities
	// A server that does not speak 2026-07-28 answers the discover probe
	// with an error, and mcp-go falls back to initialize.
	c.modern = mcp.IsModernProtocol(c.client.ProtocolVersion())
	if c.modern {
		c.listen()
	}
	return nil
}

// relayedCapabilities are what the gateway declares as a client: it can
// pass sampling, elicitation and roots requests on to the client whose
// request is in flight (see relaySet for when it cannot).
func relayedCapabilities() mcp.ClientCapabilities {
	caps := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}, Elicitation: &mcp.ElicitationCapability{}}
	caps.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}
	return caps
}

// declaredCapabilities is what to tell a 2026-07-28 upstream the client of
// ctx can answer: what that client declared, if its relay knows, else all
// the gateway can relay.
func declaredCapabilities(ctx context.Context) mcp.ClientCapabilities {
	if d, ok := relayFrom(ctx).(CapabilityDeclarer); ok {
		if caps, known := d.Declared(); known {
			return caps
		}
	}
	return relayedCapabilities()
}

// Protocol is the protocol version the connection speaks: the one
// negotiated in initialize, or the 2026-07-28 version its requests declare.
func (c *Conn) Protocol() string {
	if c.modern {
		return c.version()
	}
	return c.client.ProtocolVersion()
}

// Name is the configured server name.
func (c *Conn) Name() string { return c.name }

// Alive reports whether the connection can still carry requests as far as
// the gateway knows (for stdio: the process has not exited).
func (c *Conn) Alive() bool { return !c.closed.Load() && (c.proc == nil || c.proc.alive()) }

// request sends one raw JSON-RPC request and returns its raw result.
func (c *Conn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.requestWithInput(ctx, method, params, nil, nil)
}

// roundTrip sends one request; while it waits, progress queued on route is
// handed to onProgress on the caller's goroutine. A 2026-07-28 upstream
// that refuses the request's protocol version (-32022) and names one
// toolgate speaks gets the request once more in that version (era.go).
func (c *Conn) roundTrip(ctx context.Context, method string, params any, route *progressRoute, onProgress func(Progress)) (json.RawMessage, error) {
	raw, err := c.roundTripOnce(ctx, method, params, route, onProgress)
	if version, ok := c.versionAskedFor(err); ok {
		level := slog.LevelDebug
		if c.versionRetried.CompareAndSwap(false, true) {
			level = slog.LevelInfo // once per connection: an upstream that always asks would fill the log
		}
		c.log.Log(ctx, level, "upstream refused the request's protocol version (-32022); sending it again with the version it asked for in _meta and Mcp-Protocol-Version",
			"method", method, "version", version)
		c.speak(version)
		raw, err = c.roundTripOnce(ctx, method, params, route, onProgress)
	}
	return raw, err
}

// roundTripOnce is one attempt of roundTrip.
func (c *Conn) roundTripOnce(ctx context.Context, method string, params any, route *progressRoute, onProgress func(Progress)) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.Alive() {
		return nil, &CallError{Where: NotSent, Err: c.downErr()}
	}
	id := mcp.NewRequestId("gw-" + strconv.FormatInt(c.seq.Add(1), 10))
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params}
	if c.modern {
		if err := c.modernize(ctx, &req); err != nil {
			return nil, &CallError{Where: NotSent, Err: fmt.Errorf("encode request: %w", err)}
		}
	}
	key := idKey(id)
	c.pending.add(key)
	if r := relayFrom(ctx); r != nil {
		c.relays.add(key, r)
		defer c.relays.remove(key)
	}
	resp, err := c.send(ctx, req, route, onProgress)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		waitDeadline(ctx) // a write gave up at the deadline a moment before the context's timer
	}
	oversize := c.pending.remove(key)
	switch {
	case errors.Is(err, errNotStarted):
		return nil, &CallError{Where: NotSent, Err: c.downErr()}
	case err != nil && ctx.Err() != nil:
		// The caller gave up (deadline, or the client cancelled): tell the
		// upstream, so a tool still running can stop; unless the request
		// was never written.
		if !notSent(err) {
			c.goTracked(func() { c.cancelUpstream(id, ctx.Err()) })
		}
		return nil, ctx.Err()
	case err != nil:
		c.noteFailure(err)
		if c.modern && errors.Is(err, transport.ErrSessionTerminated) {
			// 2026-07-28 has no session: a 404 refuses this request only.
			return nil, &CallError{Where: NotSent, Err: errNotServed}
		}
		var located *CallError
		if errors.As(err, &located) {
			if errors.Is(err, errGarbage) {
				// A stdio reply that was garbage (Sent). The request may be
				// one failed only because the garbage could not be
				// attributed, its tool still running: tell the upstream.
				c.log.Warn("upstream output was garbage; the request failed", "err", err)
				c.goTracked(func() { c.cancelUpstream(id, errGarbage) })
			}
			return nil, located
		}
		if neverLeft(err) || errors.As(err, new(*RateLimitedError)) {
			// A 429 (or 503 with Retry-After) says the request was not
			// processed; breaker.Classify still calls it rate limited.
			return nil, &CallError{Where: NotSent, Err: err}
		}
		ce := &CallError{Where: Sent, Err: err}
		if lost := (*connLostError)(nil); errors.As(err, &lost) {
			ce.Fault = lost.fault
		}
		return nil, ce
	case idKey(resp.ID) != key && !(resp.Error != nil && resp.ID.IsNil()):
		// Over HTTP the answer is whatever the POST's body or stream
		// carries, and mcp-go does not check its id: refuse an answer
		// labelled for another request. (An error may carry a null id:
		// JSON-RPC's "could not tell which request".)
		return nil, &CallError{Where: Sent, Err: fmt.Errorf("answer carries id %s, not %s", sanitize.Clip(idKey(resp.ID), 80), key)}
	case resp.Error != nil && oversize:
		return nil, &CallError{Where: Answered, Oversize: true, Err: errors.New(resp.Error.Message)}
	case resp.Error != nil:
		return nil, rpcError(resp.Error)
	}
	return resp.Result, nil
}

// noteFailure marks the connection down when a failed request proves it
// is: the transport is closed, the HTTP session is gone, or the server
// cannot be reached at all. A 2026-07-28 connection has no session, so a
// 404 there says only that the server does not serve that request (a
// method it lacks, as subscriptions/listen may be): taking the connection
// down for it would reconnect for ever and refuse every call meanwhile.
func (c *Conn) noteFailure(err error) {
	var op *net.OpError
	if errors.Is(err, transport.ErrTransportClosed) || (errors.Is(err, transport.ErrSessionTerminated) && !c.modern) ||
		errors.Is(err, errConnLost) || (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, syscall.ECONNREFUSED) {
		c.markDown(err)
	}
}

// errNotStarted: Close was already waiting, so the request was not sent.
var errNotStarted = errors.New("connection closing; request not sent")

// errConnLost: the connection went down while the request was waiting.
var errConnLost = errors.New("connection lost while the request was in flight")

// connLostError is errConnLost for one request, naming the connection's
// loss as one fault: every request waiting when it went down fails with
// the same fault id, so the breaker counts the loss once.
type connLostError struct {
	fault uint64
	cause error
}

func (e *connLostError) Error() string   { return errConnLost.Error() + ": " + e.cause.Error() }
func (e *connLostError) Unwrap() []error { return []error{errConnLost, e.cause} }

// lostFaultID is the fault id of this connection going down: one per
// connection, since a connection goes down once.
func (c *Conn) lostFaultID() uint64 {
	if id := c.lostFault.Load(); id != 0 {
		return id
	}
	c.lostFault.CompareAndSwap(0, newFault())
	return c.lostFault.Load()
}

// send hands the request to the transport on a goroutine of its own and
// waits for the answer, the caller's context, or the connection going down,
// delivering progress meanwhile.
//
// A write to a child's stdin that cannot time out (its stdin is not a
// polled pipe) blocks while the child is not reading, and would hold the call (and every call queued behind it) past
// its deadline. Running the request aside lets the caller leave at its
// deadline; when every write since it began is still blocked then, the
// child is declared down (its owner stops it, which also unblocks the
// write). A write that can time out is the transport's to judge: every
// such write is bounded, and the transport declares the child stuck when
// one times out.
func (c *Conn) send(ctx context.Context, req transport.JSONRPCRequest, route *progressRoute, onProgress func(Progress)) (*transport.JSONRPCResponse, error) {
	lt, _ := c.tr.(*lineTransport)
	timed := lt != nil && lt.timedWrites()
	if _, bounded := ctx.Deadline(); timed && bounded && route == nil {
		return c.sendInline(ctx, lt, req)
	}
	type answer struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Over HTTP and SSE a connection that went down takes its requests
	// with it. Over stdio the transport itself ends every request when the
	// output ends or it is closed, and not before: answers the child wrote
	// before it exited are still in the pipe.
	var down <-chan struct{}
	if c.proc == nil {
		stop := context.AfterFunc(c.life, cancel)
		defer stop()
		down = c.life.Done()
	}
	done := make(chan answer, 1)
	watch := c.stdin != nil && !timed
	var mark int64
	if watch {
		mark = c.stdin.mark()
	}
	var claim *writeClaim
	if lt != nil {
		claim = new(writeClaim)
	}
	if !c.goTracked(func() {
		var resp *transport.JSONRPCResponse
		var err error
		if lt != nil {
			resp, err = lt.sendClaimed(reqCtx, req, claim)
		} else {
			resp, err = c.tr.SendRequest(reqCtx, req)
		}
		done <- answer{resp, err}
	}) {
		return nil, errNotStarted
	}
	var progressed <-chan struct{}
	if route != nil {
		progressed = route.signal
	}
	for {
		select {
		case a := <-done:
			route.deliver(onProgress)
			if _, bounded := ctx.Deadline(); bounded && errors.Is(a.err, errWriteStuck) {
				return nil, endAtDeadline(ctx)
			}
			if a.err != nil && down != nil && c.life.Err() != nil && ctx.Err() == nil {
				// The connection going down cancelled the request (the
				// AfterFunc above), and its failure came first: it is
				// the loss, one fault with the others'.
				return nil, &connLostError{fault: c.lostFaultID(), cause: context.Cause(c.life)}
			}
			if sseGaveUp(a.err) {
				// Its timer is the caller's deadline: let the deadline
				// itself end the call, so it counts as one.
				waitDeadline(ctx)
			}
			return a.resp, a.err
		case <-progressed:
			route.deliver(onProgress)
		case <-ctx.Done():
			if watch && c.stdin.stuckSince(mark) {
				c.stuck()
			}
			if claim != nil && claim.abandon() {
				// Its write had not begun, and now will not: no
				// cancellation follows a request the child never saw.
				return nil, &CallError{Where: NotSent, Err: fmt.Errorf("%w while waiting to be written", ctx.Err())}
			}
			return nil, ctx.Err()
		case <-down:
			select {
			case a := <-done:
				route.deliver(onProgress)
				if a.err == nil || ctx.Err() != nil {
					return a.resp, a.err // answered before the loss, or the caller's own end
				}
			default:
			}
			return nil, &connLostError{fault: c.lostFaultID(), cause: context.Cause(c.life)}
		}
	}
}

// sendInline is send on the caller's goroutine, for a stdio upstream whose
// stdin can time out a write at the caller's deadline: no goroutine to
// start, and no answer handed from one goroutine to another (two wake-ups
// per call, which at concurrency 1 cost more than the rest of the
// connection's work). A write still stuck at the deadline means the child
// stopped reading its input: it is declared down, as send does.
func (c *Conn) sendInline(ctx context.Context, lt *lineTransport, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := lt.SendRequest(ctx, req)
	if errors.Is(err, errWriteStuck) {
		return nil, endAtDeadline(ctx)
	}
	return resp, err
}

// notSent reports a CallError saying the request was not written.
func notSent(err error) bool {
	ce := (*CallError)(nil)
	return errors.As(err, &ce) && ce.Where == NotSent
}

// endAtDeadline is a request's end when its write timed out at the
// caller's deadline (the transport declared the child stuck): the call
// ends as the deadline it met.
func endAtDeadline(ctx context.Context) error {
	<-ctx.Done() // the pipe's timer may fire a moment before the context's
	return ctx.Err()
}

// stuck declares down a child that stopped reading its input: its
// transport's write timed out, or (when its stdin cannot time out a write)
// a call's deadline passed with every write since it began still blocked.
// Every call waiting then sees it at once; only the first declares it, so
// the log says it once and one Close stops the child.
func (c *Conn) stuck() {
	if c.stuckDeclared.Swap(true) {
		return
	}
	c.log.Error("upstream stopped reading its input; stopping it")
	c.markDown(errors.New("upstream stopped reading its input"))
	if !c.hooks.supervised {
		go c.Close() // no owner watches this connection
	}
}

// sseResponseTimeout is longer than any call's deadline.
const sseResponseTimeout = 24 * time.Hour

// sseGaveUp reports the SSE transport's own response timeout, which it
// sets to the caller's remaining time and which can fire a moment before
// the caller's context ends. (mcp-go does not export the error.)
func sseGaveUp(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "timeout waiting for SSE response")
}

// waitDeadline waits for ctx to end if its deadline is at most a second
// away.
func waitDeadline(ctx context.Context) {
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > time.Second {
		return
	}
	t := time.NewTimer(time.Until(deadline) + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// cancelUpstream tells the upstream the gateway no longer waits for id, so
// a tool that is still running can stop before it causes side effects no
// one will hear about.
//
// Not on a 2026-07-28 Streamable HTTP connection: that era has no
// notifications/cancelled over HTTP, closing the request's stream is the
// cancellation (the caller's context ending aborted the POST already), and
// an upstream keyed by request id alone could take the notice for another
// replica's request that happens to carry the same id. Over stdio, and in
// the 2025 eras, the notice is how a cancellation is said.
func (c *Conn) cancelUpstream(id mcp.RequestId, why error) {
	if c.modern && c.http != nil {
		return
	}
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
	switch v := id.Value().(type) {
	case string:
		if plainJSONString(v) {
			return `"` + v + `"` // what json.Marshal writes, without its cost (two keys per request)
		}
	case int64:
		return strconv.FormatInt(v, 10)
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// plainJSONString reports whether json.Marshal writes s as is between
// quotes: printable ASCII without quotes, backslashes or the characters it
// escapes for HTML.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
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
	return c.CallToolProgress(ctx, tool, args, nil)
}

// CallToolProgress is CallTool that, when onProgress is not nil, sends a
// progress token of the gateway's own (unique per call) and hands the
// upstream's notifications/progress for it to onProgress, on the caller's
// goroutine and in order, until the call returns (none after). A consumer
// slower than the upstream sees the newest notifications coalesced, never
// a blocked connection.
func (c *Conn) CallToolProgress(ctx context.Context, tool string, args json.RawMessage, onProgress func(Progress)) (json.RawMessage, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	params := toolCallParams{Name: tool, Arguments: args}
	var route *progressRoute
	if onProgress != nil {
		token := newProgressToken()
		route = c.routes.add(token)
		defer c.routes.remove(token)
		params.Meta = &callMeta{ProgressToken: token}
	}
	// The trace continues upstream (W3C trace context in _meta), from the
	// gateway's own span: the client's context never passes unseen.
	if tc := tracing.Inject(ctx); tc != nil {
		if params.Meta == nil {
			params.Meta = &callMeta{}
		}
		params.Meta.Traceparent, params.Meta.Tracestate = tc[tracing.MetaTraceparent], tc[tracing.MetaTracestate]
	}
	return c.requestWithInput(ctx, string(mcp.MethodToolsCall), params, route, onProgress)
}

type toolCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *callMeta       `json:"_meta,omitempty"`
}

type callMeta struct {
	ProgressToken string `json:"progressToken,omitempty"`
	Traceparent   string `json:"traceparent,omitempty"`
	Tracestate    string `json:"tracestate,omitempty"`
}

// onNotification runs on the transport's read loop (mcp-go trap 3): it
// only queues or signals, never calls the upstream or waits.
func (c *Conn) onNotification(n mcp.JSONRPCNotification) {
	switch n.Method {
	case string(mcp.MethodNotificationProgress):
		c.routes.route(n.Params.AdditionalFields)
	case string(mcp.MethodNotificationToolsListChanged), string(mcp.MethodNotificationResourcesListChanged),
		string(mcp.MethodNotificationPromptsListChanged):
		if c.hooks.listChanged != nil {
			c.hooks.listChanged()
		}
	case string(mcp.MethodNotificationResourceUpdated):
		if uri, ok := n.Params.AdditionalFields["uri"].(string); ok && c.hooks.resourceUpdated != nil {
			c.hooks.resourceUpdated(uri)
		}
	case "notifications/message":
		c.relayLog(n.Params.AdditionalFields)
	}
}

// Close ends the connection; for stdio it stops the child process and
// every process in its group. It returns once every goroutine the
// connection started has ended. Concurrent calls all wait for the first.
func (c *Conn) Close() {
	c.markDown(ErrClosed)
	c.closing.Do(func() {
		c.bgMu.Lock()
		c.bgDone = true
		c.bgMu.Unlock()
		if c.client != nil {
			// For stdio this only closes the child's stdin: the transport
			// (lineTransport) owns no process.
			_ = c.client.Close()
		}
		if c.proc != nil {
			c.proc.stop()
		}
		c.bg.Wait()
		if c.http != nil {
			// Each connection has its own pool: idle keep-alive
			// connections would otherwise outlive it.
			c.http.CloseIdleConnections()
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

// watchedWriter is a stdio child's stdin that knows when writing is
// stuck. Writes are serialised by the transport, so counting the writes
// begun and completed is enough to tell "no write has finished since this
// call started, and one is waiting" (the child is not reading) from "a
// write happens to be in progress right now" (the normal case, even under
// load).
type watchedWriter struct {
	w                  io.WriteCloser
	started, completed atomic.Int64
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.started.Add(1)
	defer w.completed.Add(1)
	return w.w.Write(p)
}

func (w *watchedWriter) Close() error { return w.w.Close() }

// SetWriteDeadline bounds the writes to come, when the child's stdin can.
func (w *watchedWriter) SetWriteDeadline(t time.Time) error {
	if d, ok := w.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return os.ErrNoDeadline
}

// canTimeOut reports whether SetWriteDeadline works: the child's stdin is
// a pipe the runtime polls, as exec's StdinPipe gives.
func (w *watchedWriter) canTimeOut() bool {
	f, ok := w.w.(*os.File)
	return ok && f.SetWriteDeadline(time.Time{}) == nil
}

// mark is taken before a call writes; stuckSince tests against it.
func (w *watchedWriter) mark() int64 { return w.started.Load() }

// stuckSince reports whether no write that began after mark was taken has
// completed while a write is pending: for the whole life of the call the
// child has not taken a single message.
func (w *watchedWriter) stuckSince(mark int64) bool {
	done := w.completed.Load()
	return done <= mark && w.started.Load() > done
}

// endNoticer calls onEnd when its reader fails (EOF included): the child's
// stdout is gone, so nothing more can be answered. The transport is told
// io.EOF whatever the cause (it ends its read loop on any error alike, and
// logs others to the default logger); the cause is the connection's.
type endNoticer struct {
	r     io.Reader
	onEnd func(error)
}

func (e *endNoticer) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.onEnd(err)
		err = io.EOF
	}
	return n, err
}

// libraryLogger is the log for mcp-go's transports: everything they say
// is debug detail, since the connection reports what matters itself.
func libraryLogger(log *slog.Logger) *slog.Logger { return slog.New(debugOnly{log.Handler()}) }

type debugOnly struct{ h slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(attrs []slog.Attr) slog.Handler { return debugOnly{d.h.WithAttrs(attrs)} }
func (d debugOnly) WithGroup(name string) slog.Handler       { return debugOnly{d.h.WithGroup(name)} }
