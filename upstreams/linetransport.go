package upstreams

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/internal/jsonwrite"
	"github.com/toolgate/toolgate/sanitize"
)

// lineTransport speaks newline-delimited JSON-RPC to a stdio upstream. It
// implements mcp-go's transport.BidirectionalInterface, so mcp-go's client
// (initialize, the upstream's own requests) runs over it unchanged.
//
// It replaces transport.NewIO, which cost about 7.5% of the gateway's CPU
// under load: its read loop allocated every line as a string and decoded it
// twice (once to classify it, once into the answer), and every request was
// encoded with json.Marshal (reflection, and a copy of the arguments it
// re-compacts), waited on a fresh channel, and took a map entry under two
// locks. Here each line is read into a reused buffer and decoded once
// (the usual answer without encoding/json: decodeAnswerFast), copying out
// only the result; a tools/call request is written by appending bytes;
// waiting calls are pooled. BenchmarkStdioRoundTrip (one tools/call over OS
// pipes to an echo server, 2 CPUs) measured per call, mcp-go then this: one
// caller 18.7 µs, 41 allocs / 8.6 µs, 9 allocs; 16 callers 14.4 / 4.9 µs
// of CPU (4 of the allocations are the benchmark's and the cap reader's, in
// both).
//
// What it does, as mcp-go's does: notifications go to the handler on the
// read loop (which must not block); the upstream's
// requests run on goroutines of their own and are answered, method not found
// with no handler. When the input ends or Close is called, every waiting
// request fails with transport.ErrTransportClosed (each in a CallError{Where:
// Sent} naming the same Fault: one fault of the connection, counted once by
// the breaker), and so does every later one (bare); an answer read before
// that is still delivered.
//
// Where it differs, on purpose: the upstream's requests reach the handler
// with their params raw (json.RawMessage: big numbers and key order
// survive the relay to the client), and even the method-not-found answer
// is written off the read loop (a child that is not reading its input must
// not stop the reading of its output). A waiting request is only ever
// answered by its own id; a second request with the same id is refused.
//
// Garbage, unlike mcp-go (which skips it and leaves the caller waiting to
// its deadline): see garbled. In short, a line that starts a JSON object
// but does not parse (an answer split by a raw newline), an answer whose
// id names no request (wrong or null id), or an answer that is not one
// (bad error member, neither result nor error) fails at once, as a
// CallError{Where: Sent} wrapping errGarbage, the request it names, or,
// when it names none, every request waiting (all naming the same Fault). Lines
// that do not start with '{' (a log line on stdout), JSON objects that are no JSON-RPC message at
// all (a structured log line), malformed notifications and requests from
// the upstream (they have a method: never an answer), and late answers to
// requests given up on are skipped, as before.
type lineTransport struct {
	in  *bufio.Reader
	out io.WriteCloser

	// writeTurn is the right to write (one message per Write, never
	// interleaved): a one-slot semaphore rather than a mutex, so that a
	// request waits for its turn only until its deadline.
	writeTurn chan struct{}
	deadliner writeDeadliner // out, when it can time out a write; else nil

	mu      sync.Mutex
	pending map[string]*pendingCall // by the id's JSON (idKey)
	closed  atomic.Bool             // set under mu; read without it
	done    chan struct{}           // closed with closed

	// serving holds a token per upstream request being served: at
	// maxServing the read loop waits, so an upstream that floods requests
	// (and stops reading the answers) holds a bounded number of goroutines.
	serving chan struct{}

	started   atomic.Bool
	ctx       context.Context // Start's, for the upstream's requests
	onNote    atomic.Pointer[func(mcp.JSONRPCNotification)]
	onRequest atomic.Pointer[transport.RequestHandler]
	closing   sync.Once

	long []byte // a line longer than in's buffer, assembled (read loop only)

	// untimedBound and stuckAfter are the constants of those names,
	// shorter in tests. Set before Start.
	untimedBound, stuckAfter time.Duration
	clock                    func() time.Time // time.Now; a test's own for stuckAfter
	written                  atomic.Int64     // writes that succeeded
	blockedSince             atomic.Int64     // see tookNoneSince; unix ns, 0: none

	// onStuck is called once a write timed out, after the transport shut
	// down: the child stopped reading, and its owner stops it. Set before
	// Start.
	onStuck func()

	// gaveUp holds the keys of requests no longer waiting that the
	// upstream may still answer (abandoned at their deadline, cancelled,
	// or failed by garbage): their late answers are dropped, not taken as
	// garbage. Bounded (maxGaveUp, oldest forgotten first); under mu.
	gaveUp     map[string]struct{}
	gaveUpFIFO []string
	// broken: the last line read that was not skipped did not parse (read
	// loop only). The next one that does not parse either is taken as the
	// rest of the same message, split by a raw newline: it fails nothing
	// more (a request registered in between is not its victim).
	broken bool
}

// maxGaveUp bounds the keys of requests given up on that are remembered:
// an answer later than the maxGaveUp-th request abandoned after it is taken
// as garbage (it then fails what waits, see garbled).
const maxGaveUp = 4096

// errGarbage is the cause of a request failed because the upstream's
// output was garbage: the request was sent, the outcome is unknown.
var errGarbage = errors.New("the reply was garbage")

var _ transport.BidirectionalInterface = (*lineTransport)(nil)

// pendingCall is one request waiting. Whoever removes it from pending
// sends on ch exactly once, under mu: the answer, or nil when the
// transport closed or (with err set) the output was garbage. Calls are pooled: a round trip allocates no channel.
type pendingCall struct {
	key string
	id  mcp.RequestId
	ch  chan *transport.JSONRPCResponse // capacity 1
	err error                           // with a nil answer: why, when not closed (set before the send)
}

var pendingCalls = sync.Pool{New: func() any {
	return &pendingCall{ch: make(chan *transport.JSONRPCResponse, 1)}
}}

// lineReadSize is the read buffer: most lines fit, longer ones are
// assembled in long (kept for reuse up to maxKeptLine).
const (
	lineReadSize = 64 << 10
	maxKeptLine  = 1 << 20
)

// maxServing bounds the upstream's requests served at once (sampling,
// elicitation and roots relays wait for the client; pings answer at once).
const maxServing = 64

func newLineTransport(in io.Reader, out io.WriteCloser) *lineTransport {
	t := &lineTransport{in: bufio.NewReaderSize(in, lineReadSize), out: out,
		pending: map[string]*pendingCall{}, gaveUp: map[string]struct{}{}, done: make(chan struct{}), serving: make(chan struct{}, maxServing),
		writeTurn: make(chan struct{}, 1), untimedBound: untimedWriteBound, stuckAfter: stuckAfter, clock: time.Now,
		ctx: context.Background()}
	if d, ok := out.(writeDeadliner); ok && d.canTimeOut() {
		t.deadliner = d
	}
	return t
}

// Start starts the read loop; ctx is given to the upstream's requests.
// Later calls do nothing.
func (t *lineTransport) Start(ctx context.Context) error {
	if t.started.Swap(true) {
		return nil
	}
	t.ctx = ctx
	go t.readLoop()
	return nil
}

func (t *lineTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	if h == nil {
		t.onNote.Store(nil)
		return
	}
	t.onNote.Store(&h)
}

func (t *lineTransport) SetRequestHandler(h transport.RequestHandler) {
	if h == nil {
		t.onRequest.Store(nil)
		return
	}
	t.onRequest.Store(&h)
}

// GetSessionId: stdio has no session.
func (t *lineTransport) GetSessionId() string { return "" }

// Close fails every waiting request and closes the output (the child's
// stdin). The read loop ends when the input does: the owner closes it.
func (t *lineTransport) Close() error {
	var err error
	t.closing.Do(func() {
		t.shutdown()
		err = t.out.Close()
	})
	return err
}

// shutdown marks the transport closed and ends every waiting request, all
// with one Fault: the connection ending is one fault of the upstream, however
// many requests were waiting on it.
func (t *lineTransport) shutdown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed.Swap(true) {
		close(t.done)
	}
	if len(t.pending) == 0 {
		return
	}
	fault := newFault()
	for key, call := range t.pending {
		delete(t.pending, key)
		call.err = &CallError{Where: Sent, Fault: fault, Err: transport.ErrTransportClosed}
		call.ch <- nil
	}
}

func (t *lineTransport) isClosed() bool { return t.closed.Load() }

// SendRequest writes the request and waits for its answer, ctx, or the
// transport closing. The write gives up at ctx's deadline when the output
// can time out a write (see writeWithin); otherwise it does not watch ctx,
// and the Conn runs the request on a goroutine of its own.
func (t *lineTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	return t.sendClaimed(ctx, req, nil)
}

// sendClaimed is SendRequest for a request whose caller may leave before
// its write begins (Conn.send's goroutine path): claim decides, once,
// whether it is written or abandoned. nil: the caller is the writer.
func (t *lineTransport) sendClaimed(ctx context.Context, req transport.JSONRPCRequest, claim *writeClaim) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	buf := getLineBuf()
	defer putLineBuf(buf)
	if err := appendRequest(buf, &req); err != nil {
		return nil, fmt.Errorf("failed to marshal request: %w", err)
	}
	call, err := t.register(idKey(req.ID), req.ID)
	if err != nil {
		return nil, err
	}
	if err := t.writeLine(ctx, buf.Bytes(), request, claim); err != nil {
		t.abandon(call)
		return nil, fmt.Errorf("failed to write request: %w", err)
	}
	select {
	case resp := <-call.ch:
		failed := call.err
		recycle(call)
		if failed != nil {
			return nil, failed
		}
		if resp == nil {
			return nil, transport.ErrTransportClosed
		}
		return resp, nil
	case <-ctx.Done():
		// An answer that comes later finds no one waiting and is dropped.
		t.abandon(call)
		return nil, ctx.Err()
	}
}

// register makes a call the one waiting for key.
func (t *lineTransport) register(key string, id mcp.RequestId) (*pendingCall, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return nil, fmt.Errorf("%w: %w", errNotStarted, transport.ErrTransportClosed) // nothing was written
	}
	if _, dup := t.pending[key]; dup {
		return nil, fmt.Errorf("request id %s is already waiting for an answer", key)
	}
	call := pendingCalls.Get().(*pendingCall)
	call.key, call.id = key, id
	t.pending[key] = call
	return call, nil
}

// abandon stops waiting for call. When it is no longer pending, its answer
// (or nil) was already sent: take it, so the call goes back to the pool
// empty.
func (t *lineTransport) abandon(call *pendingCall) {
	t.mu.Lock()
	if t.pending[call.key] == call {
		delete(t.pending, call.key)
		t.giveUp(call.key) // its answer may still come
	} else {
		<-call.ch
	}
	t.mu.Unlock()
	recycle(call)
}

func recycle(call *pendingCall) {
	call.key, call.id, call.err = "", mcp.RequestId{}, nil
	pendingCalls.Put(call)
}

// giveUp remembers key as a request whose answer is to be dropped if it
// still comes. Under mu.
func (t *lineTransport) giveUp(key string) {
	if _, ok := t.gaveUp[key]; ok {
		return
	}
	if len(t.gaveUpFIFO) >= maxGaveUp {
		delete(t.gaveUp, t.gaveUpFIFO[0])
		t.gaveUpFIFO = t.gaveUpFIFO[1:]
	}
	t.gaveUp[key] = struct{}{}
	t.gaveUpFIFO = append(t.gaveUpFIFO, key)
}

// fail ends a waiting call with a garbage error (cause wraps errGarbage),
// remembering its key (the upstream may still answer it). fault is the
// CallError's Fault: shared by the calls one stray line failed, 0 for a call
// failed alone. Under mu.
func (t *lineTransport) fail(call *pendingCall, cause error, fault uint64) {
	delete(t.pending, call.key)
	t.giveUp(call.key)
	call.err = &CallError{Where: Sent, Fault: fault, Err: cause}
	call.ch <- nil
}

// SendNotification writes one notification.
func (t *lineTransport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.isClosed() {
		return transport.ErrTransportClosed
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("failed to write notification: %w", err)
	}
	if err := t.writeLine(ctx, append(b, '\n'), notice, nil); err != nil {
		return fmt.Errorf("failed to write notification: %w", err)
	}
	return nil
}

// writeJSON writes v as one line; it is for the rare messages (the
// upstream's answers, notifications) that need no fast path.
func (t *lineTransport) writeJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.writeLine(context.Background(), append(b, '\n'), notice, nil)
}

// errWriteStuck: a write did not finish by its caller's deadline, because
// the child stopped reading its input. Part of the line may have been
// written, so the transport is closed: nothing more can follow it.
var errWriteStuck = errors.New("upstream stopped reading its input")

// timedWrites reports whether the output can time out a write, so a
// request may be written on its caller's goroutine (Conn.send).
func (t *lineTransport) timedWrites() bool { return t.deadliner != nil }

// writeDeadliner is an output that can bound a write: the child's stdin
// pipe (an *os.File the runtime polls) behind the watchedWriter.
type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
	canTimeOut() bool
}

// writeKind says what a write that timed out having written nothing may
// conclude: a request's caller waited its whole deadline, a notice is best
// effort.
type writeKind int

const (
	request writeKind = iota // may judge the child stuck (see writeLine)
	notice                   // a notification or an answer: dropped
)

// writeWithin writes a request's line when its turn comes (writeLine).
//
// Each request is its own write(2). Grouping the requests of concurrent
// calls into one write (package flights, as the audit trail does) took the
// writes to a child's stdin from 0.91 to 0.27 a call at 16 callers, but a
// group needs one deadline for callers with different ones: the earliest
// let one caller's short deadline fail the others' requests and stop a
// child that was slow, not stuck; the latest held a short-deadline caller
// for a later caller's whole deadline. Its gain was inside this host's
// spread, so the simple rule stays until writes that advance deadline by
// deadline are worth building.
func (t *lineTransport) writeWithin(ctx context.Context, line []byte) error {
	return t.writeLine(ctx, line, request, nil)
}

// writeClaim settles, once, a race between a request's write and its
// caller leaving: the write begins only while the caller waits, and a
// caller that leaves first knows nothing was written (so no cancellation
// follows it).
type writeClaim struct{ state atomic.Int32 } // 0 waiting, 1 written, 2 abandoned

func (w *writeClaim) write() bool   { return w == nil || w.state.CompareAndSwap(0, 1) }
func (w *writeClaim) abandon() bool { return w.state.CompareAndSwap(0, 2) }

// writeLine writes line when its turn comes, waiting for the turn only
// until ctx ends (then nothing was written). When the output can time out
// a write (a pipe the runtime polls), every write is bounded, so no message
// waits behind one for ever:
//
//   - With a deadline (a request; a cancellation notice), the write gives
//     up at it. Bytes written and the rest not: a partial line, which
//     nothing may follow, so the transport shuts down and the child is
//     declared stuck (it stops and restarts). Nothing written: the stream
//     is whole. A notice is dropped. A request fails as not sent, unless
//     the child took no message at all in at least stuckAfter, over this
//     request's wait and those of the requests that timed out the same
//     way before it (tookNoneSince): then it stopped reading.
//   - Without one (an answer to the upstream's request, a notification),
//     the write goes on as long as the child takes bytes, and the child is
//     declared stuck after untimedBound with none taken.
//
// Cancellation does not interrupt a write once it began.
func (t *lineTransport) writeLine(ctx context.Context, line []byte, kind writeKind, claim *writeClaim) error {
	mark, since := t.written.Load(), t.clock()
	if err := t.takeTurn(ctx); err != nil {
		return err
	}
	defer t.endTurn()
	if t.isClosed() {
		return errClosedBeforeWrite
	}
	if err := ctx.Err(); err != nil || !claim.write() {
		// The turn came as the caller left (select picks either when
		// both are ready).
		return &CallError{Where: NotSent, Err: fmt.Errorf("%w while waiting to be written", cmp.Or(err, context.Canceled))}
	}
	d := t.deadliner
	if d == nil {
		_, err := t.out.Write(line) // unbounded: the Conn watches the caller's deadline (Conn.send)
		return t.wrote(err)
	}
	deadline, bounded := ctx.Deadline()
	if !bounded {
		return t.writeWhileTaken(d, line)
	}
	if !time.Now().Before(deadline) {
		// The deadline passed while the message waited for its turn
		// (writes before it were slow). A write started now would time
		// out at once, and that would read as a child that stopped reading.
		return notWritten(os.ErrDeadlineExceeded)
	}
	if err := d.SetWriteDeadline(deadline); err != nil {
		return &CallError{Where: NotSent, Err: fmt.Errorf("bound the write to the upstream's input: %w", err)}
	}
	n, err := t.out.Write(line)
	_ = d.SetWriteDeadline(time.Time{})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return t.wrote(err)
	}
	if n > 0 || (kind == request && t.tookNoneSince(mark, since)) {
		return t.declareStuck(err)
	}
	return notWritten(err)
}

// tookNoneSince reports, for a request whose write timed out having
// written nothing, whether the child took no message for stuckAfter. No
// write completed while this request waited (mark), nor since the first
// of the requests before it that timed out the same way (blockedSince,
// cleared by every write that completes): so a child stuck under calls
// whose deadlines are all shorter than stuckAfter is still found.
func (t *lineTransport) tookNoneSince(mark int64, since time.Time) bool {
	if t.written.Load() != mark {
		return false // the child took a message meanwhile: slow, not stuck
	}
	t.blockedSince.CompareAndSwap(0, since.UnixNano())
	return t.clock().UnixNano()-t.blockedSince.Load() >= int64(t.stuckAfter)
}

// notWritten is the error of a message of which nothing was written
// before its deadline: not sent, and a timeout.
func notWritten(err error) error {
	return &CallError{Where: NotSent, Err: fmt.Errorf("%w while waiting to be written (%w)", context.DeadlineExceeded, err)}
}

// writeWhileTaken writes line without a deadline of its own: in windows
// of untimedBound, for as long as each window takes some of it.
func (t *lineTransport) writeWhileTaken(d writeDeadliner, line []byte) error {
	defer func() { _ = d.SetWriteDeadline(time.Time{}) }()
	for begun := false; ; begun = true {
		if err := d.SetWriteDeadline(time.Now().Add(t.untimedBound)); err != nil {
			if begun { // part of the line is out: nothing may follow it
				return t.declareStuck(err)
			}
			return &CallError{Where: NotSent, Err: fmt.Errorf("bound the write to the upstream's input: %w", err)}
		}
		n, err := t.out.Write(line)
		line = line[n:]
		switch {
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return t.wrote(err)
		case n == 0 && !begun:
			return &CallError{Where: NotSent, Err: t.declareStuck(err)}
		case n == 0:
			return t.declareStuck(err)
		}
	}
}

// wrote counts a write that succeeded: a sign the child reads.
func (t *lineTransport) wrote(err error) error {
	if err == nil {
		t.written.Add(1)
		t.blockedSince.Store(0)
	}
	return err
}

// declareStuck ends the transport after a write that timed out. Declared
// first: the shutdown fails the requests waiting for answers, and the
// child's cause must be this, not their "transport closed". Only this one
// write can time out: the transport is closed after it.
func (t *lineTransport) declareStuck(err error) error {
	if t.onStuck != nil {
		t.onStuck()
	}
	t.shutdown()
	return fmt.Errorf("%w: %w", errWriteStuck, err)
}

// untimedWriteBound: a child that takes nothing of a message for this long,
// with nothing else to do than read it, has stopped reading.
const untimedWriteBound = 10 * time.Second

// stuckAfter: a request whose write timed out having written nothing
// declares the child stuck only if the child took no message for at least
// this long; a shorter wait (a call with little time left, a pipe full for
// a moment) says nothing about the child.
const stuckAfter = time.Second

// takeTurn waits for the right to write, or for ctx to end: then nothing
// was written, and the message was not sent.
func (t *lineTransport) takeTurn(ctx context.Context) error {
	select {
	case t.writeTurn <- struct{}{}:
		return nil
	default:
	}
	select {
	case t.writeTurn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &CallError{Where: NotSent, Err: fmt.Errorf("%w while waiting to be written", context.Cause(ctx))}
	}
}

func (t *lineTransport) endTurn() { <-t.writeTurn }

// errClosedBeforeWrite: the transport closed (a write before timed out,
// or Close ran) while the message waited for its turn to be written;
// nothing of it was written, and nothing may follow a partial line.
var errClosedBeforeWrite = fmt.Errorf("%w: %w", errNotStarted, transport.ErrTransportClosed)

// lineBufs are the buffers requests are built in.
var lineBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getLineBuf() *bytes.Buffer { return lineBufs.Get().(*bytes.Buffer) }

func putLineBuf(b *bytes.Buffer) {
	if b.Cap() > maxKeptLine {
		return // a huge request's buffer is not worth keeping
	}
	b.Reset()
	lineBufs.Put(b)
}

// appendRequest writes req as one line, as json.Marshal would (bar HTML
// escaping in raw params, which changes no value). The tools/call params
// and raw params are appended as they are, after one compacting pass that
// also validates them (a newline inside would split the message; invalid
// bytes could smuggle members into the params); anything else goes through
// json.Marshal.
func appendRequest(buf *bytes.Buffer, req *transport.JSONRPCRequest) error {
	buf.WriteString(`{"jsonrpc":`)
	appendJSONString(buf, req.JSONRPC)
	buf.WriteString(`,"id":`)
	if err := appendID(buf, req.ID); err != nil {
		return err
	}
	buf.WriteString(`,"method":`)
	appendJSONString(buf, req.Method)
	if req.Params != nil {
		buf.WriteString(`,"params":`)
		if err := appendParams(buf, req.Params); err != nil {
			return err
		}
	}
	buf.WriteString("}\n")
	return nil
}

func appendID(buf *bytes.Buffer, id mcp.RequestId) error {
	switch v := id.Value().(type) {
	case string:
		appendJSONString(buf, v)
		return nil
	case int64:
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), v, 10))
		return nil
	}
	return appendMarshal(buf, id)
}

func appendParams(buf *bytes.Buffer, params any) error {
	switch p := params.(type) {
	case json.RawMessage:
		return appendRaw(buf, p)
	case toolCallParams:
		return appendToolCall(buf, &p)
	case *toolCallParams:
		if p != nil {
			return appendToolCall(buf, p)
		}
	}
	return appendMarshal(buf, params)
}

func appendToolCall(buf *bytes.Buffer, p *toolCallParams) error {
	buf.WriteString(`{"name":`)
	appendJSONString(buf, p.Name)
	buf.WriteString(`,"arguments":`)
	if err := appendRaw(buf, p.Arguments); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	if m := p.Meta; m != nil {
		buf.WriteString(`,"_meta":{`)
		sep := appendMember(buf, "", "progressToken", m.ProgressToken)
		sep = appendMember(buf, sep, "traceparent", m.Traceparent)
		appendMember(buf, sep, "tracestate", m.Tracestate)
		buf.WriteByte('}')
	}
	buf.WriteByte('}')
	return nil
}

// appendMember writes an omitempty string member after sep, and returns
// the separator for the next one.
func appendMember(buf *bytes.Buffer, sep, name, value string) string {
	if value == "" {
		return sep
	}
	buf.WriteString(sep)
	buf.WriteByte('"')
	buf.WriteString(name)
	buf.WriteString(`":`)
	appendJSONString(buf, value)
	return ","
}

// appendRaw writes raw JSON compacted, failing on invalid JSON; empty is
// null, as json.Marshal writes a nil RawMessage.
func appendRaw(buf *bytes.Buffer, raw json.RawMessage) error {
	if len(raw) == 0 {
		buf.WriteString("null")
		return nil
	}
	return json.Compact(buf, raw)
}

// appendJSONString writes s quoted as json.Marshal would, into buf's room.
func appendJSONString(buf *bytes.Buffer, s string) {
	buf.Grow(jsonwrite.StringLen(s))
	buf.Write(jsonwrite.AppendString(buf.AvailableBuffer(), s))
}

func appendMarshal(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// readLoop dispatches each line until the input ends, then fails every
// request still waiting.
func (t *lineTransport) readLoop() {
	defer t.shutdown()
	for {
		line, err := t.readLine()
		if err != nil || t.isClosed() {
			// An unterminated last line is dropped, as mcp-go does: the
			// upstream did not finish writing it.
			return
		}
		t.dispatch(line)
	}
}

// readLine returns the next line, valid until the next call.
func (t *lineTransport) readLine() ([]byte, error) {
	if cap(t.long) > maxKeptLine {
		t.long = nil // the last line was huge: do not keep it, even for a short one
	}
	line, err := t.in.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	t.long = appendDoubling(t.long[:0], line, 0)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = t.in.ReadSlice('\n')
		t.long = appendDoubling(t.long, line, 0)
	}
	return t.long, err
}

// wireMessage is any JSON-RPC message, decoded once. Params and error are
// decoded further only for the messages that need them.
type wireMessage struct {
	ID     wireID          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// dispatch handles one line. Like mcp-go: a method without an id is a
// notification, with one a request. Unlike it, only a message with an id,
// a result or an error is taken as an answer, and garbage fails requests
// (see garbled).
func (t *lineTransport) dispatch(line []byte) {
	var m wireMessage
	if decodeAnswerFast(line, &m) {
		t.broken = false
		t.answer(&m)
		return
	}
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return // a blank line, or one that is not a message at all (a log line): skipped
	}
	if err := json.Unmarshal(line, &m); err != nil {
		if json.Valid(line) {
			// An object whose method is not a string (the only member
			// decoded with a type): a malformed request or notification,
			// never an answer. Skipped.
			t.broken = false
			return
		}
		if !t.broken {
			t.broken = true
			t.garbled(nil, "a line that is not valid JSON")
		}
		return
	}
	t.broken = false
	switch {
	case m.Method != "" && !m.ID.present():
		t.notify(&m)
	case m.Method != "":
		t.serve(&m)
	case m.ID.present() || m.Result != nil || m.Error != nil:
		t.answer(&m)
	default:
		// A JSON object that is no JSON-RPC message (a structured log
		// line on stdout): skipped.
	}
}

// decodeAnswerFast decodes the usual answer line,
// {"jsonrpc":"2.0","id":<plain id>,"result":<JSON>} (jsonscan.Answer), into
// m, as json.Unmarshal would (the result copied out of the line), and
// reports false, leaving m alone, for any other line. json.Unmarshal took
// 2% of the gateway's CPU per call decoding the answers; this costs one
// validating scan of the result. TestDecodeAnswerFastAgrees and
// FuzzDecodeAnswerFast hold it to json.Unmarshal's answer.
func decodeAnswerFast(line []byte, m *wireMessage) bool {
	id, result, ok := jsonscan.Answer(line)
	if !ok {
		return false
	}
	if err := m.ID.UnmarshalJSON(id); err != nil {
		return false
	}
	m.Result = bytes.Clone(result)
	return true
}

// notify runs the notification handler on the read loop.
func (t *lineTransport) notify(m *wireMessage) {
	h := t.onNote.Load()
	if h == nil {
		return
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: m.Method}}
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &n.Params) != nil {
		return // mcp-go skips a notification whose params are not an object
	}
	(*h)(n)
}

// answer hands an answer to the request waiting for its id. An answer
// that is not valid fails that request; one for a request given up on is
// dropped; one that names no request is garbage (garbled).
func (t *lineTransport) answer(m *wireMessage) {
	var details *mcp.JSONRPCErrorDetails
	invalid := ""
	if len(m.Error) > 0 && string(m.Error) != "null" {
		details = new(mcp.JSONRPCErrorDetails)
		if json.Unmarshal(m.Error, details) != nil {
			invalid = "an answer whose error member is not a JSON-RPC error"
		}
	} else if m.Result == nil {
		invalid = "an answer with neither a result nor an error"
	}
	key := m.ID.key()
	t.mu.Lock()
	defer t.mu.Unlock()
	call := t.pending[string(key)]
	switch {
	case key == nil:
		t.garbledLocked(details, "an answer without an id")
	case call != nil && invalid != "":
		t.fail(call, fmt.Errorf("%w: %s", errGarbage, invalid), 0) // it names its request: only that one fails
	case call != nil:
		delete(t.pending, call.key)
		call.ch <- &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: call.id, Result: m.Result, Error: details}
	default:
		if _, late := t.gaveUp[string(key)]; late {
			delete(t.gaveUp, string(key)) // answered at last; its FIFO entry just ages out
			return
		}
		t.garbledLocked(details, "an answer for id "+sanitize.Clip(string(key), 80)+", which no request has")
	}
}

// garbled handles output that is garbage and names no waiting request: a
// line that starts a JSON object but does not parse (typically an answer
// split by a raw newline: its id, if any, cannot be trusted), or an answer
// whose id is null or names no request (a wrong id).
//
// Every request waiting fails at once, with errGarbage (Where: Sent: the
// outcome is unknown), and the connection stays up. The decision, and why:
//   - With one request waiting the garbage is attributed to it: nothing
//     else could be waiting for an answer, and left waiting it would hang
//     to its deadline (then duplicate suppression replays that timeout).
//   - With several waiting, the garbage cannot be attributed: the one it
//     was meant for is unknown, and it will never be answered. Failing
//     only when exactly one waits would hang that one to its deadline;
//     failing one by guess could fail the wrong one. So all of them fail:
//     an operator would rather lose the calls in flight to an upstream
//     that emits garbage (they report upstream_error, and a retry-safe
//     tool is retried) than hang them. Garbage that does name its request
//     (an invalid answer with a known id, see answer) fails that request
//     only: the others are not hurt.
//   - The connection is not reset: once every waiting request has failed,
//     no stray line can be matched to one of them (their late answers are
//     dropped, as for a request given up on), new requests have new ids,
//     and the stream resynchronises at the next newline. Restarting the
//     child would lose its state and refuse every call during the restart,
//     for no gain. An upstream that keeps emitting garbage trips the
//     breaker, as these failures count against it (Sent); the requests one
//     line failed share one Fault and count as one failure (one fault of
//     the connection, whatever the number of requests waiting), so a single
//     stray line does not open the breaker of a healthy upstream.
//   - With nothing waiting, nothing fails: the line is skipped.
//
// details is the error the answer carried, if any (for the message).
func (t *lineTransport) garbled(details *mcp.JSONRPCErrorDetails, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.garbledLocked(details, why)
}

func (t *lineTransport) garbledLocked(details *mcp.JSONRPCErrorDetails, why string) {
	if details != nil {
		why += fmt.Sprintf(" (error %d: %s)", details.Code, sanitize.Clip(details.Message, 200))
	}
	n := len(t.pending)
	if n == 0 {
		return
	}
	if n > 1 {
		why += fmt.Sprintf(", while %d requests waited: it could be the answer to any of them", n)
	}
	cause, fault := fmt.Errorf("%w: %s", errGarbage, why), newFault()
	for _, call := range t.pending {
		t.fail(call, cause, fault)
	}
}

// serve runs the upstream's request on a goroutine of its own (it may wait
// for a client, as sampling does) and writes the answer back.
func (t *lineTransport) serve(m *wireMessage) {
	var id mcp.RequestId
	if json.Unmarshal(m.ID.bytes(), &id) != nil {
		return // an id that is neither a string nor a number: skipped
	}
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: m.Method}
	if len(m.Params) > 0 && string(m.Params) != "null" {
		req.Params = m.Params // raw: numbers and key order reach the client as sent
	}
	select {
	case t.serving <- struct{}{}:
	case <-t.done:
		return
	}
	h := t.onRequest.Load()
	go t.respond(h, req)
}

func (t *lineTransport) respond(h *transport.RequestHandler, req transport.JSONRPCRequest) {
	defer func() { <-t.serving }()
	resp := t.handle(h, req)
	if resp == nil || t.isClosed() {
		return
	}
	// A failed write means the output is gone: the connection is down
	// already, and the upstream waits for nothing more.
	_ = t.writeJSON(resp)
}

// handle is mcp-go's answer to a request from the upstream.
func (t *lineTransport) handle(h *transport.RequestHandler, req transport.JSONRPCRequest) *transport.JSONRPCResponse {
	if h == nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil)
	}
	if err := t.ctx.Err(); err != nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
	}
	resp, err := (*h)(t.ctx, req)
	if err != nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
	}
	return resp
}

// wireID holds a message's id as raw JSON, copied out of the line into a
// fixed array (ids are short: no allocation per answer); a longer one is
// allocated.
type wireID struct {
	n     int
	short [40]byte
	long  []byte
}

func (w *wireID) UnmarshalJSON(b []byte) error {
	if len(b) <= len(w.short) {
		w.n, w.long = copy(w.short[:], b), nil
		return nil
	}
	w.long = append([]byte(nil), b...)
	return nil
}

func (w *wireID) bytes() []byte {
	if w.long != nil {
		return w.long
	}
	return w.short[:w.n]
}

// present reports an id that is there and not null (mcp-go takes a null
// id as none).
func (w *wireID) present() bool {
	b := w.bytes()
	return len(b) > 0 && string(b) != "null"
}

// key is the id as idKey names it, or nil for none. The gateway's ids
// ("gw-N") and mcp-go's (integers) are already in that form; others are
// decoded and named again, so 1.0 finds the request 1 (as in mcp-go).
func (w *wireID) key() []byte {
	b := w.bytes()
	if !w.present() {
		return nil
	}
	if canonicalID(b) {
		return b
	}
	var id mcp.RequestId
	if json.Unmarshal(b, &id) != nil {
		return nil
	}
	return []byte(idKey(id))
}

// canonicalID reports whether b is already what idKey writes: a plain
// quoted string, or digits.
func canonicalID(b []byte) bool {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return plainJSONString(string(b[1 : len(b)-1]))
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
