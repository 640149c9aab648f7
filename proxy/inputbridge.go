package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// Clients on protocol 2026-07-28 cannot be sent requests (sampling,
// elicitation, roots) in the middle of a call. When an upstream asks for
// one during such a client's tools/call, the call is parked: the client
// gets an input_required result carrying the upstream's request and an
// opaque requestState, answers it, and calls again with the answers; the
// parked call then continues where it was. The upstream never notices the
// difference.
//
// The requestState is a random token bound to the principal and the tool:
// another principal, or a call of another tool, cannot resume it. A parked
// call the client never resumes ends with its own deadline (the tool's
// timeout), like any call.

// parkedCalls are the calls waiting for their clients' answers.
type parkedCalls struct {
	mu    sync.Mutex
	calls map[string]*parkedCall
}

type parkedCall struct {
	principal, tool string
	finished        chan struct{}            // closed when the pipeline returned
	cancel          context.CancelFunc       // ends the pipeline's context (the client left)
	asks            chan *inputAsk           // requests the upstream made, in order
	done            chan *mcp.CallToolResult // the pipeline's answer (capacity 1)
	pending         map[string]*inputAsk     // asked, not yet answered; only the waiting handler touches it
}

// inputAsk is one request waiting for the client's answer.
type inputAsk struct {
	method string
	params json.RawMessage
	answer chan inputAnswer // capacity 1
}

type inputAnswer struct {
	result json.RawMessage
	err    error
}

// parkedRelay is the Relay of a parked call: the upstream's requests
// become input requests for the client.
type parkedRelay struct {
	call    *parkedCall
	ctx     context.Context // the parked call's, for NoteInteraction
	session string
	caps    clientCaps // from the call's _meta: what the client can be asked
}

func (r *parkedRelay) Session() string { return r.session }

// Request waits for the client's answer, at most as long as the call
// lasts (its deadline ends it) and as the asking request's ctx allows (a
// 2026-07-28 upstream's input round runs under the call's deadline).
func (r *parkedRelay) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	pipeline.NoteInteraction(r.ctx)
	if refused := r.caps.refusal(method); refused != nil {
		return nil, refused
	}
	params, err := sanitize.JSON(params)
	if err != nil {
		return nil, &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "params are not valid JSON"}
	}
	ask := &inputAsk{method: method, params: params, answer: make(chan inputAnswer, 1)}
	gone := &upstreams.RelayError{Code: mcp.INTERNAL_ERROR, Message: "the call ended before the client answered " + method}
	select {
	case r.call.asks <- ask:
	case <-r.call.finished:
		return nil, gone
	case <-ctx.Done():
		return nil, gone
	}
	select {
	case a := <-ask.answer:
		return a.result, a.err
	case <-r.call.finished:
		return nil, gone
	case <-ctx.Done():
		return nil, gone
	}
}

// Log drops log lines: a modern client declares its log level per
// request, and the parked call's request is over.
func (r *parkedRelay) Log(json.RawMessage) {}

// newToken is an unguessable requestState.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "tg-input-" + hex.EncodeToString(b)
}

// handleModern runs a 2026-07-28 client's tools/call: a new call, or the
// resumption of a parked one (requestState set).
func (s *Server) handleModern(ctx context.Context, req mcp.CallToolRequest, call Call, caps clientCaps) *mcp.CallToolResult {
	if token := req.Params.RequestState; token != "" {
		return s.resume(ctx, token, call, req.Params.InputResponses)
	}
	// The pipeline outlives this request if the upstream asks for input:
	// it runs on a context of its own, ended by the call's deadline (in
	// execute), or by cancel when the client leaves while it runs.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &parkedCall{principal: call.Subject.Principal, tool: call.Name, finished: make(chan struct{}), cancel: cancel,
		asks: make(chan *inputAsk), done: make(chan *mcp.CallToolResult, 1), pending: map[string]*inputAsk{}}
	relay := &parkedRelay{call: p, ctx: runCtx, session: relaySession(ctx), caps: caps}
	go func() {
		defer cancel()
		p.done <- s.opts.Calls.Handle(upstreams.WithRelay(runCtx, relay), call)
		close(p.finished)
	}()
	return s.await(ctx, newToken(), p)
}

// await waits for the parked call's answer, or for the next request it
// makes of the client (then the client gets input_required).
func (s *Server) await(ctx context.Context, token string, p *parkedCall) *mcp.CallToolResult {
	select {
	case res := <-p.done:
		s.parked.remove(token)
		return res
	case ask := <-p.asks:
		id := "q" + newToken()[9:17]
		p.pending[id] = ask
		s.parked.put(token, p)
		return inputRequired(id, ask, token)
	case <-ctx.Done():
		// The client left before it learnt the token: nobody can resume
		// the call. Cancel it (the upstream is told, like any abandoned
		// call); whether the tool ran is unknown.
		p.cancel()
		return pipeline.FailureResult(&envelope.Error{Code: envelope.UpstreamError,
			Message: "the client request ended while the call was running; its outcome is unknown"}, false, false)
	}
}

// resume hands the client's answers to a parked call and waits again.
func (s *Server) resume(ctx context.Context, token string, call Call, answers mcp.InputResponses) *mcp.CallToolResult {
	p := s.parked.take(token)
	if p == nil || p.principal != call.Subject.Principal || p.tool != call.Name {
		if p != nil {
			s.parked.put(token, p) // not this caller's: leave it for its owner
		}
		return pipeline.FailureResult(&envelope.Error{Code: envelope.InvalidArguments,
			Message: "requestState does not name a call of this tool waiting for this caller's input (it may have ended)"}, false, false)
	}
	for id, ask := range p.pending {
		answer, ok := answers[id]
		if !ok {
			ask.answer <- inputAnswer{err: &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "the client did not answer " + ask.method}}
		} else if raw, err := json.Marshal(answer); err != nil {
			ask.answer <- inputAnswer{err: err}
		} else {
			ask.answer <- inputAnswer{result: raw}
		}
		delete(p.pending, id)
	}
	return s.await(ctx, token, p)
}

// inputRequired is the result asking the client for one input.
func inputRequired(id string, ask *inputAsk, token string) *mcp.CallToolResult {
	in := mcp.InputRequest{Method: mcp.MCPMethod(ask.method)}
	switch in.Method {
	case mcp.MethodSamplingCreateMessage:
		in.Sampling = &mcp.CreateMessageParams{}
		_ = json.Unmarshal(ask.params, in.Sampling)
	case mcp.MethodElicitationCreate:
		in.Elicitation = &mcp.ElicitationParams{}
		_ = json.Unmarshal(ask.params, in.Elicitation)
	default:
		in.Roots = &mcp.ListRootsParams{}
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	res.ResultType = mcp.ResultTypeInputRequired
	res.InputRequests = mcp.InputRequests{id: in}
	res.RequestState = token
	return res
}

func (c *parkedCalls) put(token string, p *parkedCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]*parkedCall{}
	}
	c.calls[token] = p
	// A call whose client never comes back is forgotten once it could no
	// longer be running (its pipeline has ended by its deadline by then).
	time.AfterFunc(parkedLifetime, func() { c.remove(token) })
}

func (c *parkedCalls) take(token string) *parkedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[token]
	delete(c.calls, token)
	return p
}

func (c *parkedCalls) remove(token string) { c.take(token) }

// parkedLifetime bounds how long a parked call is remembered.
const parkedLifetime = 10 * time.Minute
