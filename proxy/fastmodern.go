package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/tracing"
	"github.com/toolgate/toolgate/upstreams"
)

// A 2026-07-28 tools/call is taken by the fast path too, for the reason
// it exists in the first place: its notifications. mcp-go serves such a
// request on a session of its own with a notification forwarder and no
// event store; a notification the forwarder took off the channel just as
// the handler returned is dropped (mcp-go trap 5), and the conformance
// suite's tools-call-with-progress lost one of its three notifications in
// about half its runs (issue 17). Here the call's progress is written on
// its own response before the answer, as for a 2025 call.
//
// What differs from a 2025 call:
//
//   - there is no session: the Mcp-Session-Id header means nothing (mcp-go
//     ignores it), and each request is served on a session of its own
//     (requestSession) that only carries its notifications;
//   - the request says who its client is and what it can answer in its
//     _meta (protocol version, client info and capabilities, log level),
//     and the headers must agree with the body (the version, Mcp-Method,
//     Mcp-Name and a tool's x-mcp-header parameters): a request that fails
//     any of mcp-go's checks goes to mcp-go, which answers the error;
//   - the call runs as mcp-go's handler runs it (Server.handleModern): an
//     upstream's request for input parks the call and answers
//     input_required, which mcp-go passes on unchanged to such a client
//     (resolveMultiRoundTrip), and a call with a requestState resumes one
//     (whose check, refuseStaleState, runs here first as mcp-go's hook
//     would);
//   - the result carries resultType and the server's identity in _meta
//     (decorateModern), as mcp-go's decorateResponse writes them.
//
// Allocation does not matter here as it does for 2025 calls (issue 22):
// the body is decoded once more with encoding/json, into the very
// CallToolRequest mcp-go's handler gets, so that what the call reads of
// _meta is mcp-go's reading by construction. The shape the fast path
// takes is still an allow-list (modernParamsMembers, modernMetaMembers):
// a member it does not name (a task, a subscription id, a vendor's key)
// sends the request to mcp-go.
var (
	modernParamsMembers = [...]string{"name", "arguments", "_meta", "requestState", "inputResponses"}
	modernMetaMembers   = [...]string{metaProgressToken, tracing.MetaTraceparent, tracing.MetaTracestate, dedup.MetaKey,
		mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel}
)

// modernRequest is what a 2026-07-28 call adds to a fastRequest.
type modernRequest struct {
	request mcp.CallToolRequest // as mcp-go's handler gets it
	info    *server.RequestProtocolInfo
	params  json.RawMessage // the body's params, for the header checks
	rounds  bool            // params has requestState or inputResponses (refuseStaleState reads them)
}

// takeModern decides whether a POST whose MCP-Protocol-Version header
// names a 2026-07-28 version is a call the fast path answers. r.Body reads
// the same bytes again afterwards.
func (f *fastCalls) takeModern(r *http.Request, version string) (fastRequest, bool) {
	if !jsonContent(r.Header.Get("Content-Type")) || dnsRebinding(r) || r.Header.Get(mcp.HeaderLastEventID) != "" {
		return fastRequest{}, false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = replayBody(body, err)
	if err != nil {
		return fastRequest{}, false
	}
	req, ok := decodeModern(body)
	if !ok || req.modern.info.ProtocolVersion != version || !f.srv.modernChecksPass(r, &req, body) {
		return fastRequest{}, false
	}
	return req, true
}

// decodeModern decodes a 2026-07-28 tools/call whose members the
// allow-lists name, and reports false for any other body (a 2025-era one
// included).
func decodeModern(body []byte) (fastRequest, bool) {
	var req fastRequest
	var params json.RawMessage
	var rounds bool
	c := jsonscan.NewCursor(body)
	seen := 0
	for more := c.Open(); more; {
		var ok bool
		switch c.Member(&seen, requestMembers[:]...) {
		case 1:
			ok = c.Literal(mcp.JSONRPC_VERSION)
		case 2:
			req.ID = c.Value()
			ok = plainID(req.ID)
		case 4:
			ok = c.Literal(string(mcp.MethodToolsCall))
		case 8:
			params = c.Value()
			ok = modernParamsAllowed(params, &rounds)
		}
		if more, ok = c.After(ok); !ok {
			return fastRequest{}, false
		}
	}
	if seen != 1<<len(requestMembers)-1 || !c.AtEnd() || !json.Valid(body) {
		return fastRequest{}, false
	}
	m := &modernRequest{params: params, rounds: rounds}
	if json.Unmarshal(body, &m.request) != nil {
		return fastRequest{}, false // mcp-go answers the error
	}
	meta := m.request.Params.Meta
	version := meta.ProtocolVersion()
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || !mcp.IsValidProtocolVersion(version) || caps == nil {
		return fastRequest{}, false
	}
	// As mcp-go's extractRequestProtocolInfo reads it.
	m.info = &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientInfo: meta.ClientInfo(),
		ClientCapabilities: caps, LogLevel: meta.LogLevel()}
	p := &m.request.Params
	req.Name, req.Args, req.Meta, req.modern = p.Name, p.RawArguments, p.Meta, m
	return req, true
}

// modernParamsAllowed reports whether params is an object of the members
// modernParamsMembers names, with a name, and a _meta of the members
// modernMetaMembers names, and sets *rounds when it has requestState or
// inputResponses. Values are left to encoding/json.
func modernParamsAllowed(params []byte, rounds *bool) bool {
	c := jsonscan.NewCursor(params)
	seen := 0
	for more := c.Open(); more; {
		var ok bool
		switch c.Member(&seen, modernParamsMembers[:]...) {
		case 1:
			var name string
			ok = c.KnownString(&name, "")
		case 2:
			args := c.Value()
			ok = args != nil && !c.BigNumber()
		case 4:
			ok = modernMetaAllowed(&c)
		case 8, 16:
			ok = c.Value() != nil
		}
		if more, ok = c.After(ok); !ok {
			return false
		}
	}
	*rounds = seen&(8|16) != 0
	return seen&1 != 0 && !c.Failed()
}

func modernMetaAllowed(c *jsonscan.Cursor) bool {
	seen := 0
	for more := c.Open(); more; {
		ok := c.Member(&seen, modernMetaMembers[:]...) != 0 && c.Value() != nil
		if more, ok = c.After(ok); !ok {
			return false
		}
	}
	return !c.Failed()
}

// modernChecksPass runs what mcp-go checks of a 2026-07-28 request before
// its handler runs (handlePost's validateModernRequest, HandleMessage's
// hooks and validateStandardHeadersForMessage): a request any of them
// refuses is left to mcp-go, which answers it.
func (s *Server) modernChecksPass(r *http.Request, req *fastRequest, body []byte) bool {
	m := req.modern
	if mcp.ValidateStandardHeaders(r.Header.Get, m.info.ProtocolVersion, mcp.MethodToolsCall, m.params) != nil {
		return false
	}
	if tool := s.mcp.GetTool(req.Name); tool != nil &&
		mcp.ValidateParamHeadersLookup(lookupHeader(r.Header), &tool.Tool, m.params) != nil {
		return false
	}
	// The hook decodes the body once more; without those members (and the
	// allow-list has refused their case variants) it finds nothing to refuse.
	return !m.rounds || s.refuseStaleState(r.Context(), nil, json.RawMessage(body)) == nil
}

// lookupHeader is validateStandardHeadersForMessage's: the first value of
// a header, and whether it was sent at all.
func lookupHeader(h http.Header) func(string) (string, bool) {
	return func(name string) (string, bool) {
		values := h.Values(name)
		if len(values) == 0 {
			return "", false
		}
		return values[0], true
	}
}

// requestSession is the session a 2026-07-28 fast call runs on: no id, as
// mcp-go's own for such a request, and a channel for the call's
// notifications, which the call writes on its response at once.
type requestSession struct {
	notes chan mcp.JSONRPCNotification
}

func (*requestSession) Initialize()                                           {}
func (*requestSession) Initialized() bool                                     { return true }
func (*requestSession) SessionID() string                                     { return "" }
func (r *requestSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return r.notes }

// serveModern runs a 2026-07-28 call as mcp-go's handler does (Server.handle
// for a modern request), with its progress written on its response.
func (f *fastCalls) serveModern(w http.ResponseWriter, r *http.Request, req *fastRequest) {
	m := req.modern
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream := &callStream{w: w, asks: &f.asks}
	defer stream.stop() // whatever happens, no notification is written after the handler returns
	session := &requestSession{notes: make(chan mcp.JSONRPCNotification, callNotes)}
	ctx = server.WithRequestProtocolInfo(withHTTP(f.srv.mcp.WithContext(ctx, session)), m.info)
	caps := f.srv.callerCaps(ctx, m.request.Params.Meta)
	// The relay writes the call's log messages on this response, at the
	// request's own level (mcp-go's SendLogMessageToClient reads it from
	// the request's protocol info), whichever round of the call sends them
	// (callListener). The upstream's requests never reach it: they become
	// input requests (parkedRelay).
	ctx = pipeline.WithInteraction(ctx)
	ctx = upstreams.WithRelay(ctx, &clientRelay{srv: f.srv.mcp, ctx: ctx, session: relaySession(ctx), direct: stream,
		notes: session.notes, caps: caps, redact: f.srv.opts.Redact})
	call := f.srv.callFrom(ctx, &m.request.Params)
	if progress := call.Progress; progress != nil {
		call.Progress = func(p upstreams.Progress) {
			progress(p)
			stream.notify(session.notes)
		}
	}
	res, err := f.srv.runModern(ctx, m.request, call, caps)
	if err == nil {
		res = f.srv.decorateModern(res)
	}
	stream.finish(req.ID, res, err)
}

// runModern is handleModern, with a panic answered as mcp-go's recovery
// would (panicError).
func (s *Server) runModern(ctx context.Context, req mcp.CallToolRequest, call Call, caps clientCaps) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in a tools/call", "tool", call.Name, "panic", fmt.Sprint(p))
			res, err = nil, panicError(call.Name)
		}
	}()
	return s.handleModern(ctx, req, call, caps)
}

// modernCancel reports whether a 2026-07-28 POST is a notifications/cancelled,
// which the gateway acknowledges and ignores, as the spec lets a server
// ignore one. Over Streamable HTTP that era cancels a request by closing
// its stream (which cancels the call, and the upstream's request with it),
// and expects no notification; with no session, one can name only a
// request id, which any client may be using. mcp-go would cancel the
// in-flight 2026-07-28 request of any client that has that id (its key is
// the empty session's), so the notification never reaches it. Only one
// that passes the checks mcp-go makes of every 2026-07-28 POST
// (validateModernRequest) is acknowledged here: mcp-go answers 400 to one
// without the protocol version in _meta, with another version there than
// in the header, with one it does not know, or with Last-Event-ID, and so
// must the gateway. r.Body reads the same bytes again afterwards.
func modernCancel(r *http.Request) bool {
	if !jsonContent(r.Header.Get("Content-Type")) || dnsRebinding(r) || r.Header.Get(mcp.HeaderLastEventID) != "" {
		return false // mcp-go refuses it
	}
	body, err := io.ReadAll(r.Body)
	r.Body = replayBody(body, err)
	var msg struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Params *struct {
			Meta *mcp.Meta `json:"_meta"` // as detectRequestEra reads it
		} `json:"params"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodNotificationCancelled) || len(msg.ID) != 0 {
		return false
	}
	version := r.Header.Get(mcp.HeaderProtocolVersion)
	return msg.Params != nil && msg.Params.Meta.ProtocolVersion() == version && mcp.IsValidProtocolVersion(version)
}
