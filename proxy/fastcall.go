package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// fastCalls answers the common tools/call over Streamable HTTP itself,
// without mcp-go's transport layer, and hands every other request to mcp-go
// unchanged. mcp-go decodes a request body about five times and starts a
// notification forwarder per request; the profile of the gateway under load
// showed its layer at a quarter of the gateway's CPU. Here the body is
// decoded once and the answer written directly.
//
// A call is taken only when nothing about it needs mcp-go's machinery; its
// answer is the JSON-RPC response mcp-go's encoder writes for it. What
// mcp-go checks and writes that the fast path must copy is in
// mcpgomirror.go, which says which mcp-go version it mirrors. A call is
// taken when:
//
//   - the request is a POST of a 2025-era session: the Mcp-Session-Id of a
//     session this server registered (bindSession refuses another
//     principal's), no MCP-Protocol-Version header or a valid one that
//     is not 2026-07-28, an application/json body, no DNS rebinding;
//   - the body is a tools/call made only of the members the allow-list in
//     fastdecode.go names (anything else, and any other method, goes to
//     mcp-go as it is);
//   - or the request is a 2026-07-28 tools/call (a modern
//     MCP-Protocol-Version header, no session) that passes every check
//     mcp-go makes of one, made only of the members the allow-lists in
//     fastmodern.go name: see there for what differs.
//
// The first call of a session in each quarter of its idle TTL first sends
// mcp-go a ping on the session, which is what keeps the session alive in
// mcp-go (its idle clock is private to it; see fastkeepalive.go).
//
// Both paths build the chain's Call with one function (Server.callFrom).
//
// Log messages and progress notifications an upstream sends during a fast
// call are written on the call's own response, upgraded to an event
// stream, before the answer (from a goroutine of the call's, so a client
// that stops reading never stalls the upstream connection: past 64 waiting
// events, more are dropped, as mcp-go's full notification channel drops
// them). That is where they belong: MCP relates them to the request, and a
// client drops progress that arrives after the answer. mcp-go's handler
// puts them on the session's one notification channel, which its GET
// stream's pump drains too when the client listens, so part of them
// travel on the GET stream, late (issue 17). A client's
// notifications/cancelled for a fast call cancels it; a 2026-07-28 call is
// cancelled by closing its stream, and a 2026-07-28 notifications/cancelled
// is acknowledged and ignored (modernCancel).
//
// An upstream's request to the client during a fast call (sampling,
// elicitation, roots), once the client's declared capabilities allow it,
// is written on the call's response too, and the client's answer, POSTed
// on the session, is taken here and delivered to it (fastrequests.go).
//
// Where the answers differ from mcp-go's: mcp-go answers every POST of a
// session with an event stream once the session was sent any notification,
// the fast path keeps answering plain JSON (clients must accept both); an
// event stream the fast path starts carries no event ids, so it cannot be
// resumed (it only ever holds one call's log messages and answer); and
// notifications queued on the session (list_changed, resources/updated)
// are written on the GET stream or the next request mcp-go handles, where
// mcp-go would also write them on a fast call's response; a panic of the
// chain's own is answered without its text (panicError).
type fastCalls struct {
	srv      *Server
	next     http.Handler
	idleTTL  time.Duration
	now      func() time.Time
	inflight sync.Map   // fastKey -> context.CancelFunc
	asks     clientAsks // fast calls' requests to their clients, waiting for answers
	taken    atomic.Uint64
	pings    atomic.Uint64 // keep-alive pings sent to mcp-go (keepAlive)
}

// fastKey names a call in flight: the session and the request id's JSON.
type fastKey struct{ session, id string }

// clientSession is what the server knows of a client session, kept from
// mcp-go's hooks.
type clientSession struct {
	subject  authz.Subject                        // of the request that created the session
	cs       atomic.Pointer[server.ClientSession] // set when mcp-go registers the session
	caps     atomic.Pointer[clientCaps]           // what its client declared at initialize; nil: unknown
	client   atomic.Pointer[string]               // the clientInfo name its client gave at initialize; nil: unknown
	lastSlow atomic.Int64                         // unix nanos of the last request handed to mcp-go
}

func (f *fastCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	entry, req, took := f.take(r)
	switch took {
	case tookCall:
		if req.Name == discovery.SearchTool { // answered by its own handler (discovery.go), not the chain
			f.next.ServeHTTP(w, r)
			return
		}
		f.taken.Add(1)
		if req.modern != nil {
			f.serveModern(w, r, &req)
			return
		}
		f.serve(w, r, entry, &req)
	case tookAnswer, tookModernCancel:
		w.WriteHeader(http.StatusAccepted) // as mcp-go acknowledges a client's response or notification
	default:
		f.next.ServeHTTP(w, r)
	}
}

// What take took: nothing (the request is mcp-go's), a call to answer, a
// client's answer to a request of a fast call's, delivered, or a
// 2026-07-28 notifications/cancelled, ignored (modernCancel).
const (
	tookNothing = iota
	tookCall
	tookAnswer
	tookModernCancel
)

// take decides whether the request is a fast call or a client's answer to
// one's request. Whatever it decides, r.Body reads the same bytes again
// afterwards.
func (f *fastCalls) take(r *http.Request) (*clientSession, fastRequest, int) {
	if r.Method != http.MethodPost {
		return nil, fastRequest{}, tookNothing
	}
	version := r.Header.Get(mcp.HeaderProtocolVersion)
	if mcp.IsModernProtocol(version) {
		if req, ok := f.takeModern(r, version); ok {
			return nil, req, tookCall
		}
		if modernCancel(r) {
			return nil, fastRequest{}, tookModernCancel
		}
		return nil, fastRequest{}, tookNothing
	}
	sid := r.Header.Get(server.HeaderKeySessionID)
	if sid == "" {
		return nil, fastRequest{}, tookNothing
	}
	entry := f.srv.session(sid)
	if entry == nil || !f.eligibleRequest(r, entry, version) {
		return nil, fastRequest{}, tookNothing
	}
	body, err := io.ReadAll(r.Body)
	r.Body = replayBody(body, err)
	if err != nil {
		return nil, fastRequest{}, tookNothing
	}
	req, ok := decodeFast(body)
	switch {
	case ok:
		return entry, req, tookCall
	case f.aside(sid, entry, body):
		return nil, fastRequest{}, tookAnswer
	}
	return nil, fastRequest{}, tookNothing
}

// aside notes what mcp-go will do with a body the allow-list refused: a
// request or notification is the session's activity (a response it
// answers first), and a notifications/cancelled may name a fast call. A
// client's answer to a request a fast call of this session sent it is
// delivered here (true): mcp-go knows nothing of that request.
func (f *fastCalls) aside(sid string, entry *clientSession, body []byte) bool {
	var msg sideMessage
	if json.Unmarshal(body, &msg) != nil {
		return false // mcp-go refuses it before it notes the session's activity
	}
	if f.asks.answer(sid, &msg) {
		return true
	}
	if msg.Method == string(mcp.MethodNotificationCancelled) && msg.Params != nil {
		f.cancel(sid, msg.Params.RequestID)
	}
	if msg.Method != "" {
		f.markSlow(entry)
	}
	return false
}

// eligibleRequest checks what the headers and the session say.
func (f *fastCalls) eligibleRequest(r *http.Request, entry *clientSession, version string) bool {
	// Another principal's session was refused before (bindSession).
	return entry.cs.Load() != nil && jsonContent(r.Header.Get("Content-Type")) &&
		legacyVersion(version) && !dnsRebinding(r)
}

// fresh reports whether mcp-go saw the session recently enough that this
// request need not keep it alive (see keepAlive).
func (f *fastCalls) fresh(entry *clientSession) bool {
	if f.idleTTL <= 0 {
		return true
	}
	return f.now().UnixNano()-entry.lastSlow.Load() < int64(f.idleTTL/4)
}

func (f *fastCalls) markSlow(entry *clientSession) { entry.lastSlow.Store(f.now().UnixNano()) }

// cancel ends a fast call the client cancelled. mcp-go still gets the
// notification (and answers it); it knows nothing of the call.
func (f *fastCalls) cancel(sid string, requestID json.RawMessage) {
	if stop, ok := f.inflight.Load(fastKey{sid, string(requestID)}); ok {
		stop.(context.CancelFunc)()
	}
}

// serve runs the call through the chain and writes the answer.
func (f *fastCalls) serve(w http.ResponseWriter, r *http.Request, entry *clientSession, req *fastRequest) {
	sid := r.Header.Get(server.HeaderKeySessionID)
	carried := f.keepAlive(r, entry)
	ctx, cancel := context.WithCancel(r.Context())
	key := fastKey{sid, string(req.ID)}
	f.inflight.Store(key, cancel)
	defer func() {
		f.inflight.Delete(key)
		cancel()
	}()
	stream := &callStream{w: w, asks: &f.asks}
	defer stream.stop() // whatever happens, no notification is written after the handler returns
	for _, n := range carried {
		stream.send(n)
	}
	session := &callSession{ClientSession: *entry.cs.Load(), notes: make(chan mcp.JSONRPCNotification, callNotes)}
	// As mcp-go's handler (Server.handle): the relay notes on the call's
	// context that its client was asked something, so that duplicate
	// suppression never shares the answer with another request.
	ctx = pipeline.WithInteraction(f.srv.mcp.WithContext(ctx, session))
	caps := clientCaps{} // unknown: the client is asked, and answers what it can
	if c := entry.caps.Load(); c != nil {
		caps = *c
	}
	ctx = upstreams.WithRelay(ctx, &clientRelay{srv: f.srv.mcp, ctx: ctx, session: sid, direct: stream, notes: session.notes, caps: caps,
		redact: f.srv.opts.Redact})
	params := req.params()
	call := f.srv.callFrom(ctx, &params)
	if progress := call.Progress; progress != nil {
		// progressRelay sent it through the ctx's session (callSession): it
		// waits on notes, to be written on this call's response at once,
		// so it reaches the client before the answer.
		call.Progress = func(p upstreams.Progress) {
			progress(p)
			stream.notify(session.notes)
		}
	}
	res, err := f.srv.runFast(ctx, call)
	stream.finish(req.ID, res, err)
}

// callNotes is the room for a fast call's notifications between their
// sending and stream.notify, which follows each at once: room for a few
// sent at the same moment (a log message and a progress notification from
// two goroutines), since mcp-go drops one sent to a full channel.
const callNotes = 8

// runFast is the chain, with a panic answered as mcp-go's recovery
// would (panicError).
func (s *Server) runFast(ctx context.Context, call Call) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in a tools/call", "tool", call.Name, "panic", fmt.Sprint(p))
			res, err = nil, panicError(call.Name)
		}
	}()
	return s.opts.Calls.Handle(ctx, call), nil
}

// replayBody gives r.Body back its bytes, and the read error after them.
func replayBody(body []byte, err error) io.ReadCloser {
	if err == nil {
		return io.NopCloser(bytes.NewReader(body))
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
