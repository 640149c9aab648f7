package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Protocol 2026-07-28 (config: protocol) drops the initialize handshake:
// every request carries the client's protocol version, identity,
// capabilities and log level in its _meta, and over Streamable HTTP the
// standard Mcp-Method / Mcp-Name headers. A server that needs the client's
// input mid-request answers input_required with the requests it needs
// answered; the gateway asks its own client (the Relay) and sends the
// request again with the answers. mcp-go's typed client does all of this,
// but the gateway sends raw requests (see ListTools), so it does it here.

// maxInputRounds bounds input_required round trips for one request.
const maxInputRounds = 10

// modernize adds what a 2026-07-28 request carries besides its params.
// The capabilities it declares are those of the client whose request this
// is, when its relay knows them (CapabilityDeclarer): a 2026 upstream plans
// its input requests per request, and must not plan on one the client
// cannot answer. The gateway's own requests (listing, refreshing) declare
// everything it can relay, so the catalog holds what any client may use.
//
// The version goes in _meta and in the Mcp-Protocol-Version header (which
// mcp-go's HTTP transport sets again from its own record of the version:
// speak keeps the two equal).
func (c *Conn) modernize(ctx context.Context, req *transport.JSONRPCRequest) error {
	version := c.version()
	fields := map[string]json.RawMessage{}
	if req.Params != nil {
		b, err := json.Marshal(req.Params)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
	}
	meta := map[string]any{}
	if raw, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[mcp.MetaKeyProtocolVersion] = version
	meta[mcp.MetaKeyClientCapabilities] = declaredCapabilities(ctx)
	meta[mcp.MetaKeyClientInfo] = mcp.Implementation{Name: "toolgate", Version: Version}
	if level := c.requestLogLevel(ctx); level != "" {
		meta[mcp.MetaKeyLogLevel] = level
	}
	encodedMeta, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	fields["_meta"] = encodedMeta
	encoded, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	req.Params = json.RawMessage(encoded)
	req.Header = http.Header{}
	for name, value := range mcp.StandardHeaders(version, mcp.MCPMethod(req.Method), encoded) {
		req.Header.Set(name, value)
	}
	req.Header.Set(transport.HeaderKeyProtocolVersion, version)
	return nil
}

// inputRequired is a result asking for the client's input.
type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// needsInput reports whether raw is an input_required result.
func needsInput(raw json.RawMessage) (*inputRequired, bool) {
	// Decoding a whole result to look for one field costs as much as the
	// rest of the call's handling: look for the marker first.
	if !bytes.Contains(raw, []byte(mcp.ResultTypeInputRequired)) {
		return nil, false
	}
	var r inputRequired
	if json.Unmarshal(raw, &r) != nil || r.ResultType != string(mcp.ResultTypeInputRequired) {
		return nil, false
	}
	return &r, true
}

// requestWithInput sends one request, fulfilling input_required answers
// through the caller's relay until the server answers for real.
func (c *Conn) requestWithInput(ctx context.Context, method string, params any, route *progressRoute, onProgress func(Progress)) (json.RawMessage, error) {
	for round := 0; ; round++ {
		raw, err := c.roundTrip(ctx, method, params, route, onProgress)
		if err != nil {
			return nil, err
		}
		need, ok := needsInput(raw)
		if !ok {
			return raw, nil
		}
		if round >= maxInputRounds {
			return nil, inputFailure(fmt.Errorf("more than %d input_required rounds", maxInputRounds))
		}
		responses, err := c.fulfil(ctx, need.InputRequests)
		if err != nil {
			return nil, inputFailure(err)
		}
		if params, err = withInput(params, responses, need.RequestState); err != nil {
			return nil, inputFailure(err)
		}
	}
}

// inputFailure: the server asked for input the gateway could not get. The
// server answered, and did nothing yet (it is waiting for the input).
func inputFailure(err error) error {
	details := &mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "the upstream needs input the client did not give"}
	return &CallError{Where: Answered, RPC: details, Err: err} // the cause goes to the log, not to the client
}

// fulfil asks the caller's client each input request: all at once when its
// relay can (InputBatcher), else in turn.
func (c *Conn) fulfil(ctx context.Context, requests map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	r := relayFrom(ctx)
	if r == nil {
		return nil, errors.New("no client to ask")
	}
	asks := make(map[string]InputRequest, len(requests))
	for id, raw := range requests {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || !relayedMethods[req.Method] {
			return nil, fmt.Errorf("input request %q is not one the gateway relays", id)
		}
		if len(req.Params) == 0 {
			req.Params = json.RawMessage(`{}`)
		}
		asks[id] = InputRequest{Method: req.Method, Params: req.Params}
	}
	var out map[string]json.RawMessage
	if b, ok := r.(InputBatcher); ok {
		var err error
		if out, err = b.RequestInputs(ctx, asks); err != nil {
			return nil, err
		}
	} else {
		out = make(map[string]json.RawMessage, len(asks))
		for id, ask := range asks {
			res, err := r.Request(ctx, ask.Method, ask.Params)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ask.Method, err)
			}
			out[id] = res
		}
	}
	for id, ask := range asks {
		if res, ok := out[id]; ok && ask.Method == string(mcp.MethodElicitationCreate) {
			out[id] = withElicitationDefaults(ask.Params, res) // elicitdefaults.go
		}
	}
	return out, nil
}

// withInput is params with the answers and the server's state added.
func withInput(params any, responses map[string]json.RawMessage, state string) (any, error) {
	fields := map[string]json.RawMessage{}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
	}
	encoded, err := json.Marshal(responses)
	if err != nil {
		return nil, err
	}
	fields["inputResponses"] = encoded
	if state != "" {
		s, _ := json.Marshal(state)
		fields["requestState"] = s
	} else {
		delete(fields, "requestState")
	}
	return fields, nil
}

// requestLogLevel is the log level a 2026-07-28 request of ctx asks for:
// the more verbose of the level clients set for the whole gateway and the
// one the request's own client asked for (LogLeveler); "" for none.
func (c *Conn) requestLogLevel(ctx context.Context) string {
	var set string
	if c.hooks.logLevel != nil {
		set = c.hooks.logLevel()
	}
	l, ok := relayFrom(ctx).(LogLeveler)
	if !ok {
		return set
	}
	own := l.LogLevel()
	if !mcp.LoggingLevelEmergency.ShouldSendTo(mcp.LoggingLevel(own)) {
		return set // none, or not a level: never passed on
	}
	if set == "" || mcp.LoggingLevel(set).ShouldSendTo(mcp.LoggingLevel(own)) {
		return own // set is at least as severe: own lets more through
	}
	return set
}
