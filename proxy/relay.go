package proxy

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/listenstream"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// clientRelay passes an upstream's requests (sampling, elicitation, roots)
// and log messages to the client whose request caused them, over that
// client's own MCP session. It is bound to the client request's context: once
// the client's request is over, nothing more reaches the client through it.
type clientRelay struct {
	srv     *server.MCPServer
	ctx     context.Context // the client request's
	session string
	// direct is set for a fast call (see fastCalls): log messages land on
	// notes and are written on the call's response at once; requests are
	// written there too, and wait for the client's answer (fastrequests.go).
	direct *callStream
	notes  chan mcp.JSONRPCNotification
	caps   clientCaps // what the client declared it answers
	// listening is set for a 2025-era Streamable HTTP session, whose
	// client gets sampling and roots only on its GET stream.
	listening *listenstream.Streams
	redact    *redact.Redactor // log notifications' secrets; nil: none
}

// withClientRelay marks ctx so upstream requests made for it reach this
// client, if it declared it can answer them.
func (s *Server) withClientRelay(ctx context.Context, caps clientCaps) context.Context {
	r := &clientRelay{srv: s.mcp, ctx: ctx, session: relaySession(ctx), caps: caps, redact: s.opts.Redact}
	if viaHTTP(ctx) && !server.IsModernRequest(ctx) && sessionID(ctx) != "" {
		r.listening = &s.listening
	}
	return upstreams.WithRelay(ctx, r)
}

// relaySession identifies the client for relaying. A 2026-07-28 request
// has no session (mcp-go gives it an unnamed one, ID ""): each such request
// is its own client, or two tenants' requests would look like one.
func relaySession(ctx context.Context) string {
	if id := sessionID(ctx); id != "" {
		return id
	}
	return "request-" + newToken()
}

func (r *clientRelay) Session() string { return r.session }

// Request asks the client. The upstream's params are decoded into mcp-go's
// types (which is how mcp-go sends them); what the client answers is
// passed back as the result. A client that cannot or will not answer
// becomes a JSON-RPC error for the upstream, with no gateway internals.
func (r *clientRelay) Request(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	pipeline.NoteInteraction(r.ctx) // asked, or refused for the client: either way the answer is this caller's
	if refused := r.caps.refusal(method, params); refused != nil {
		return nil, refused
	}
	if refused := r.awaitListener(method); refused != nil {
		return nil, refused
	}
	params, err := sanitize.JSON(params) // the upstream's text reaches a user (elicitation) or a model (sampling)
	if err != nil {
		return nil, &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "params are not valid JSON"}
	}
	var res any
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		var req mcp.CreateMessageRequest // its params are the embedded CreateMessageParams
		if json.Unmarshal(params, &req.CreateMessageParams) != nil {
			return nil, &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "invalid sampling/createMessage params"}
		}
		if r.direct != nil {
			res, err = askClient(r, method, req.CreateMessageParams)
		} else {
			res, err = r.srv.RequestSampling(r.ctx, req)
		}
	case string(mcp.MethodElicitationCreate):
		var req mcp.ElicitationRequest
		if json.Unmarshal(params, &req.Params) != nil {
			return nil, &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "invalid elicitation/create params"}
		}
		switch {
		case r.direct == nil:
			res, err = r.srv.RequestElicitation(r.ctx, req)
		case req.Params.Validate() != nil: // as RequestElicitation checks them
			err = req.Params.Validate()
		default:
			res, err = askClient(r, method, req.Params)
		}
	default: // roots/list
		if r.direct != nil {
			res, err = askClient(r, method, nil)
		} else {
			res, err = r.srv.RequestRoots(r.ctx, mcp.ListRootsRequest{})
		}
	}
	if err != nil {
		return nil, &upstreams.RelayError{Code: mcp.INTERNAL_ERROR, Message: "the client did not answer " + method + ": " + sanitize.Clip(sanitize.Text(err.Error()), 300)}
	}
	return json.Marshal(res)
}

// cleanLog is a notifications/message's params sanitised and redacted.
func (r *clientRelay) cleanLog(params json.RawMessage) (json.RawMessage, error) {
	clean, err := sanitize.JSON(params)
	if err != nil {
		return nil, err
	}
	clean, _, err = r.redact.JSON(clean)
	return clean, err
}

// Log passes one notifications/message on, at the client's chosen level,
// with every string in it sanitised and its secrets redacted. It is noted on the call, whatever the
// level (pipeline.NoteLog): duplicate suppression sends it again to a call
// that joins or replays this one, through that call's relay, at its
// client's level.
func (r *clientRelay) Log(params json.RawMessage) {
	clean, err := r.cleanLog(params)
	if err != nil {
		return
	}
	var n mcp.LoggingMessageNotification
	if json.Unmarshal(clean, &n.Params) != nil {
		return
	}
	pipeline.NoteLog(r.ctx, clean)
	n.Method = string(mcp.MethodNotificationMessage)
	_ = r.srv.SendLogMessageToClient(r.ctx, n)
	if r.direct != nil {
		r.direct.notify(r.notes)
	}
}
