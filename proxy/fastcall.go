package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
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
// answer is the JSON-RPC response mcp-go's encoder writes for it:
//
//   - a 2025-era session (Mcp-Session-Id of a session this server
//     registered (bindSession refuses another principal's), a valid MCP-Protocol-Version
//     header that is not 2026-07-28), a JSON body holding one tools/call
//     request (not also carrying a result, which mcp-go takes for a
//     response and ignores) with a plain string or integer id;
//   - no progress token, task, or 2026-07-28 multi round-trip fields (their
//     notifications and resumable streams are mcp-go's);
//   - a client that declared none of sampling, elicitation and roots: an
//     upstream's request to such a client fails on either path, and one to a
//     client that did declare them must travel on this call's stream;
//   - not the first request of the session in a quarter of its idle TTL:
//     such a request goes to mcp-go, which is what keeps the session alive
//     (its idle clock is private to it).
//
// Log messages an upstream sends during a fast call are written on the
// call's own response, upgraded to an event stream, as mcp-go does (from a
// goroutine of the call's, so a client that stops reading never stalls the
// upstream connection: past 64 waiting events, more are dropped, as
// mcp-go's full notification channel drops them). A client's
// notifications/cancelled for a fast call cancels it.
//
// Where the answers differ from mcp-go's: mcp-go answers every POST of a
// session with an event stream once the session was sent any notification,
// the fast path keeps answering plain JSON (clients must accept both); an
// event stream the fast path starts carries no event ids, so it cannot be
// resumed (it only ever holds one call's log messages and answer); and
// notifications queued on the session (list_changed, resources/updated)
// are written on the GET stream or the next request mcp-go handles, where
// mcp-go would also write them on a fast call's response.
type fastCalls struct {
	srv      *Server
	next     http.Handler
	idleTTL  time.Duration
	now      func() time.Time
	inflight sync.Map // fastKey -> context.CancelFunc
	taken    atomic.Uint64
}

// fastKey names a call in flight: the session and the request id's JSON.
type fastKey struct{ session, id string }

// clientSession is what the server knows of a client session, kept from
// mcp-go's hooks.
type clientSession struct {
	subject   authz.Subject                        // of the request that created the session
	cs        atomic.Pointer[server.ClientSession] // set when mcp-go registers the session
	relayCaps bool                                 // the client declared sampling, elicitation or roots, or it is unknown; fixed at registration
	lastSlow  atomic.Int64                         // unix nanos of the last request handed to mcp-go
}

// fastMessage is the one decode of a request body, params included.
type fastMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *fastParams     `json:"params"`
	Result  json.RawMessage `json:"result"`
}

// fastParams are tools/call params (the fields only mcp-go handles are
// read to refuse the call), and the request notifications/cancelled names.
type fastParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           *mcp.Meta       `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
	RequestID      json.RawMessage `json:"requestId"`
}

func (f *fastCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	entry, msg, ok := f.take(r)
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	f.taken.Add(1)
	f.serve(w, r, entry, msg)
}

// take decides whether the request is a fast call. Whatever it decides,
// r.Body reads the same bytes again afterwards.
func (f *fastCalls) take(r *http.Request) (*clientSession, fastMessage, bool) {
	var msg fastMessage
	sid := r.Header.Get(server.HeaderKeySessionID)
	if r.Method != http.MethodPost || sid == "" {
		return nil, msg, false
	}
	entry := f.srv.session(sid)
	if entry == nil || !f.eligibleRequest(r, entry) {
		return nil, msg, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = replayBody(body, err)
	if err != nil {
		return nil, msg, false
	}
	msg, ok := decodeFast(body)
	if !ok && json.Unmarshal(body, &msg) != nil {
		return nil, msg, false // mcp-go refuses it before it notes the session's activity
	}
	if msg.Method == string(mcp.MethodNotificationCancelled) && msg.Params != nil {
		f.cancel(sid, msg.Params.RequestID)
	}
	if !fastCall(msg) || !f.fresh(entry) {
		if msg.Method != "" { // a request or notification: mcp-go notes the activity (a response it answers first)
			f.markSlow(entry)
		}
		return nil, msg, false
	}
	return entry, msg, true
}

// eligibleRequest checks what the headers and the session say.
func (f *fastCalls) eligibleRequest(r *http.Request, entry *clientSession) bool {
	version := r.Header.Get(mcp.HeaderProtocolVersion)
	// Another principal's session was refused before (bindSession).
	return entry.cs.Load() != nil && !entry.relayCaps &&
		jsonContent(r.Header.Get("Content-Type")) && mcp.IsValidProtocolVersion(version) && !mcp.IsModernProtocol(version) &&
		!dnsRebinding(r)
}

// jsonContent is mcp-go's content type check, without parsing the usual
// exact value.
func jsonContent(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

// fresh reports whether mcp-go saw the session recently enough that this
// request need not keep it alive.
func (f *fastCalls) fresh(entry *clientSession) bool {
	if f.idleTTL <= 0 {
		return true
	}
	return f.now().UnixNano()-entry.lastSlow.Load() < int64(f.idleTTL/4)
}

func (f *fastCalls) markSlow(entry *clientSession) { entry.lastSlow.Store(f.now().UnixNano()) }

// fastCall reports whether msg is a tools/call the fast path answers
// exactly as mcp-go would.
func fastCall(msg fastMessage) bool {
	params := msg.Params
	if msg.JSONRPC != mcp.JSONRPC_VERSION || msg.Method != string(mcp.MethodToolsCall) || !plainID(msg.ID) || params == nil ||
		(len(msg.Result) > 0 && string(msg.Result) != "null") {
		return false
	}
	if len(params.Task) > 0 || len(params.InputResponses) > 0 || len(params.RequestState) > 0 {
		return false
	}
	m := params.Meta
	return m == nil || (m.ProgressToken == nil && !mcp.IsModernProtocol(m.ProtocolVersion()))
}

// plainID accepts ids mcp-go writes back with the very bytes the client
// sent: a string of printable ASCII that encoding/json leaves alone (no
// quote, backslash, or the <, >, & it escapes for HTML), or an integer of
// up to 15 digits.
func plainID(id json.RawMessage) bool {
	s := string(id)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		for i := 1; i < len(s)-1; i++ {
			if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 {
				return false
			}
		}
		return true
	}
	// mcp-go reads a numeric id as a float64: 15 digits stay exact.
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 15 || (digits[0] == '0' && s != "0") {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// cancel ends a fast call the client cancelled. mcp-go still gets the
// notification (and answers it); it knows nothing of the call.
func (f *fastCalls) cancel(sid string, requestID json.RawMessage) {
	if stop, ok := f.inflight.Load(fastKey{sid, string(requestID)}); ok {
		stop.(context.CancelFunc)()
	}
}

// serve runs the call through the pipeline and writes the answer.
func (f *fastCalls) serve(w http.ResponseWriter, r *http.Request, entry *clientSession, msg fastMessage) {
	params := msg.Params
	sid := r.Header.Get(server.HeaderKeySessionID)
	ctx, cancel := context.WithCancel(r.Context())
	key := fastKey{sid, string(msg.ID)}
	f.inflight.Store(key, cancel)
	defer func() {
		f.inflight.Delete(key)
		cancel()
	}()
	stream := &callStream{w: w}
	defer stream.stop() // whatever happens, no notification is written after the handler returns
	session := &callSession{ClientSession: *entry.cs.Load(), notes: make(chan mcp.JSONRPCNotification, 1)}
	ctx = f.srv.mcp.WithContext(ctx, session)
	ctx = upstreams.WithRelay(ctx, &clientRelay{srv: f.srv.mcp, ctx: ctx, session: sid, direct: stream, notes: session.notes})
	call := f.srv.newCall(SubjectFrom(r.Context()), params.Name, params.Arguments, params.Meta, sid)
	res, err := f.srv.runFast(ctx, call)
	stream.finish(msg.ID, res, err)
}

// runFast is the pipeline, with a panic answered as mcp-go's recovery
// would, minus the panic's text.
func (s *Server) runFast(ctx context.Context, call Call) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in a tools/call", "tool", call.Name, "panic", fmt.Sprint(p))
			res, err = nil, fmt.Errorf("panic recovered in %s tool handler", call.Name)
		}
	}()
	return s.pipe.Handle(ctx, call), nil
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

// dnsRebinding mirrors mcp-go's check (a loopback listener reached under a
// name that is not loopback): such a request goes to mcp-go, which refuses
// it.
func dnsRebinding(r *http.Request) bool {
	if loopbackHost(r.Host) {
		return false // the usual case, decided without the listener's address
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopbackHost(local.String())
}

func loopbackHost(hostport string) bool {
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
