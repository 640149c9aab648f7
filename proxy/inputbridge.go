package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// Clients on protocol 2026-07-28 cannot be sent requests (sampling,
// elicitation, roots) in the middle of a call. When an upstream asks for
// input during such a client's tools/call, the call is parked: the client
// gets an input_required result carrying the upstream's requests and an
// opaque requestState, answers them, and calls again with the answers; the
// parked call then continues where it was. The upstream never notices the
// difference.
//
// A round is what the upstream asked at once: a 2026 upstream's
// input_required reaches the client whole, under the upstream's own keys
// (several requests, one result); a 2025 upstream's request is a round of
// one, under a key of the gateway's. Every round gets a new requestState,
// so a client that echoes an old one resumes nothing.
//
// The requestState is a random token bound to the principal and the tool:
// another principal, or a call of another tool, cannot resume it. One that
// names no call waiting for this caller is refused as a JSON-RPC error
// (-32600, before the call is handled: refuseStaleState), never run as a
// new call. A parked call the client never resumes ends with its own
// deadline (the tool's timeout), like any call, or when the server shuts
// down (Shutdown cancels it).
//
// A call's progress and log messages go to the client request waiting on
// it at that moment (callListener): the first request until it is answered
// input_required, then the request that resumes it, each under its own
// progress token and at its own log level, as the spec asks of a
// notification related to a request. Between rounds no request waits, and
// what the upstream sends then is dropped.
//
// A new call (no requestState) may carry inputResponses already: a client
// of a stateless server can answer before it is asked. The upstream's
// requests are answered from them when they hold every key of a round, each
// key once; keys nobody asked for are ignored, as the spec asks of a
// server. A round they do not answer in full parks the call as usual.

// parkedCalls are the calls waiting for their clients' answers.
type parkedCalls struct {
	mu          sync.Mutex
	calls       map[string]*parkedCall
	byPrincipal map[string]int           // how many of calls each principal has whose pipelines run
	endedBy     map[string]int           // how many of calls each principal has that ended (forget)
	endings     uint64                   // how many pipelines have ended: orders ended calls
	live        map[*parkedCall]struct{} // every 2026-07-28 call whose pipeline runs, parked or not
	closed      bool                     // Shutdown began: no call starts
}

// maxParkedPerPrincipal bounds the calls one principal has waiting for its
// input at once. A parked call holds its pipeline, an upstream request
// and the call's slot of its upstream's max_in_flight until the client
// answers or the call's deadline passes; a client that starts interactive
// calls and never answers them could otherwise take every slot of an
// upstream for every caller. Past the bound, the upstream's request is
// answered with an error (errTooManyParked) instead of parking the call: a
// client waits for the answers of at most this many questions at once.
const maxParkedPerPrincipal = 32

// errTooManyParked answers the upstream when its caller already has
// maxParkedPerPrincipal calls waiting for input.
var errTooManyParked = &upstreams.RelayError{Code: mcp.INTERNAL_ERROR,
	Message: "the client has too many calls waiting for its input; it was not asked"}

type parkedCall struct {
	principal, tool string
	finished        chan struct{}            // closed when the pipeline returned
	cancel          context.CancelFunc       // ends the pipeline's context (the client left); nil once it ended; parkedCalls.mu guards it
	asks            chan inputRound          // what the upstream asked, a round at a time
	done            chan *mcp.CallToolResult // the pipeline's answer (capacity 1)
	pending         inputRound               // asked, not yet answered; only the waiting handler touches it
	token           string                   // the requestState it is parked under; parkedCalls.mu guards it
	expiry          *time.Timer              // forgets it under token (parkedLifetime); parkedCalls.mu guards it
	ended           uint64                   // when its pipeline returned, in forget's count (0: runs); parkedCalls.mu guards it
	listener        atomic.Pointer[callListener]
}

// callListener is the client request a parked call's notifications go to
// now (see above): its own progress relay (nil when it asked for none), its
// own relay for log messages (which filters by level and, on the fast path,
// writes them on the request's response), and the level it asked for.
type callListener struct {
	progress func(upstreams.Progress)
	log      func(params json.RawMessage)
	level    mcp.LoggingLevel
}

// listenerOf is the callListener of the request of ctx, whose call is call.
func listenerOf(ctx context.Context, call Call) *callListener {
	l := &callListener{progress: call.Progress}
	if r, ok := upstreams.RelayFrom(ctx).(*clientRelay); ok {
		l.log = r.Log
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil {
		l.level = info.LogLevel
	}
	return l
}

// progress is the pipeline's progress callback: the listening request's.
func (p *parkedCall) progress(pr upstreams.Progress) {
	if l := p.listener.Load(); l != nil && l.progress != nil {
		l.progress(pr)
	}
}

// listen makes l the request p's notifications go to, until stop.
func (p *parkedCall) listen(l *callListener) (stop func()) {
	p.listener.Store(l)
	return func() { p.listener.CompareAndSwap(l, nil) }
}

// inputRound is the requests of one round, by the key the client answers
// under.
type inputRound map[string]*inputAsk

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

	givenMu sync.Mutex
	given   mcp.InputResponses // the answers the call came with, each used once
}

func (r *parkedRelay) Session() string { return r.session }

// Request asks one request, as a round of one under a key of the
// gateway's (a 2025-era upstream asks one at a time).
func (r *parkedRelay) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	key := "q" + newToken()[9:17]
	answers, err := r.RequestInputs(ctx, map[string]upstreams.InputRequest{key: {Method: method, Params: params}})
	if err != nil {
		return nil, err
	}
	return answers[key], nil
}

// RequestInputs parks the call with requests as one round, and waits for
// the client's answers, at most as long as the call lasts (its deadline
// ends it) and as the asking request's ctx allows.
func (r *parkedRelay) RequestInputs(ctx context.Context, requests map[string]upstreams.InputRequest) (map[string]json.RawMessage, error) {
	pipeline.NoteInteraction(r.ctx)
	round := make(inputRound, len(requests))
	for key, req := range requests {
		if refused := r.caps.refusal(req.Method, req.Params); refused != nil {
			return nil, refused
		}
		params, err := sanitize.JSON(req.Params)
		if err != nil {
			return nil, &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "params are not valid JSON"}
		}
		round[key] = &inputAsk{method: req.Method, params: params, answer: make(chan inputAnswer, 1)}
	}
	if answers, ok, err := r.answerGiven(round); ok || err != nil {
		return answers, err
	}
	select {
	case r.call.asks <- round:
	case <-r.call.finished:
		return nil, errCallEnded
	case <-ctx.Done():
		return nil, errCallEnded
	}
	answers := make(map[string]json.RawMessage, len(round))
	for key, ask := range round {
		select {
		case a := <-ask.answer:
			if a.err != nil {
				return nil, a.err
			}
			answers[key] = a.result
		case <-r.call.finished:
			return nil, errCallEnded
		case <-ctx.Done():
			return nil, errCallEnded
		}
	}
	return answers, nil
}

// answerGiven answers round from the inputResponses the call came with,
// when they hold every key of it; ok is false when they do not (the call
// then parks for the whole round). Each key answers once: an upstream that
// asks it again (the answer did not satisfy it) asks the client. Other
// keys are left unread.
func (r *parkedRelay) answerGiven(round inputRound) (answers map[string]json.RawMessage, ok bool, err error) {
	r.givenMu.Lock()
	defer r.givenMu.Unlock()
	if len(r.given) == 0 {
		return nil, false, nil
	}
	for key := range round {
		if _, has := r.given[key]; !has {
			return nil, false, nil
		}
	}
	answers = make(map[string]json.RawMessage, len(round))
	for key := range round {
		raw, err := json.Marshal(r.given[key])
		delete(r.given, key)
		if err != nil {
			return nil, false, err
		}
		answers[key] = raw
	}
	return answers, true, nil
}

// Log passes a log message to the client request listening, at its level;
// with none listening (between rounds) it is dropped.
func (r *parkedRelay) Log(params json.RawMessage) {
	if l := r.call.listener.Load(); l != nil && l.log != nil {
		l.log(params)
	}
}

// LogLevel is the level the listening request asked for, which a
// 2026-07-28 upstream is asked for in turn (upstreams.LogLeveler); ""
// when none listens or it asked for none.
func (r *parkedRelay) LogLevel() string {
	if l := r.call.listener.Load(); l != nil {
		return string(l.level)
	}
	return ""
}

// newToken is an unguessable requestState.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "tg-input-" + hex.EncodeToString(b)
}

// handleModern runs a 2026-07-28 client's tools/call: a new call, or the
// resumption of a parked one (requestState set).
func (s *Server) handleModern(ctx context.Context, req mcp.CallToolRequest, call Call, caps clientCaps) (*mcp.CallToolResult, error) {
	if token := req.Params.RequestState; token != "" {
		return s.resume(ctx, token, call, req.Params.InputResponses)
	}
	listener := listenerOf(ctx, call)
	// The pipeline outlives this request if the upstream asks for input:
	// it runs on a context of its own, ended by the call's deadline (in
	// execute), or by cancel when the client leaves while it runs.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &parkedCall{principal: call.Subject.Principal, tool: call.Name, finished: make(chan struct{}), cancel: cancel,
		asks: make(chan inputRound), done: make(chan *mcp.CallToolResult, 1)}
	relay := &parkedRelay{call: p, ctx: runCtx, session: relaySession(ctx), caps: caps, given: maps.Clone(req.Params.InputResponses)}
	if call.Progress != nil {
		call.Progress = p.progress // the listening request's, round by round
	}
	stop := p.listen(listener)
	if !s.parked.start(p) {
		stop()
		cancel()
		return pipeline.FailureResult(&envelope.Error{Code: envelope.UpstreamUnavailable,
			Message: "the gateway is shutting down; the call did not run"}, false, false), nil
	}
	go func() {
		defer cancel()
		res := s.opts.Calls.Handle(upstreams.WithRelay(runCtx, relay), call)
		s.parked.forget(p) // first: whoever gets the answer, or sees finished (Shutdown), finds the call no longer running
		p.done <- res
		close(p.finished)
	}()
	defer stop()
	return s.await(ctx, p), nil
}

// await waits for the parked call's answer, or for the next round of
// requests it makes of the client: then the call is parked under a new
// requestState and the client gets input_required.
func (s *Server) await(ctx context.Context, p *parkedCall) *mcp.CallToolResult {
	select {
	case res := <-p.done:
		return res
	case round := <-p.asks:
		if res, ended := p.result(); ended {
			// Both were ready: the round cannot change an answer that is
			// already made (an upstream may ask during a call for its own
			// reasons, as server-everything asks for roots), so the client
			// gets the answer, not a question that no longer matters.
			refuse(round, errCallEnded)
			return res
		}
		token := newToken()
		p.pending = round
		if err := s.parked.put(token, p); err != nil {
			p.pending = nil
			refuse(round, err)
			return s.await(ctx, p) // the call goes on without the answers: its next round, or its result
		}
		return inputRequired(round, token)
	case <-ctx.Done():
		if res, ended := p.result(); ended {
			return res
		}
		// The client left before it learnt the token: nobody can resume
		// the call. Cancel it (the upstream is told, like any abandoned
		// call); whether the tool ran is unknown.
		s.parked.cancel(p)
		return pipeline.FailureResult(&envelope.Error{Code: envelope.UpstreamError,
			Message: "the client request ended while the call was running; its outcome is unknown"}, false, false)
	}
}

// errCallEnded answers an upstream's request that its call outlived: the
// call's answer was made before the client answered.
var errCallEnded = &upstreams.RelayError{Code: mcp.INTERNAL_ERROR, Message: "the call ended before the client answered"}

// result is the pipeline's answer when it has one (ended), without
// waiting.
func (p *parkedCall) result() (res *mcp.CallToolResult, ended bool) {
	select {
	case res = <-p.done:
		return res, true
	default:
		return nil, false
	}
}

// refuse answers every request of round with err.
func refuse(round inputRound, err error) {
	for _, ask := range round {
		ask.answer <- inputAnswer{err: err}
	}
}

// errStaleState answers a requestState that names no call of this tool
// waiting for this caller's input.
var errStaleState = errors.New("requestState does not name a call of this tool waiting for this caller's input (it may have ended, or been answered already)")

// refuseStaleState answers, before mcp-go handles it, a tools/call whose
// requestState names no call of its tool waiting for its caller: a JSON-RPC
// error (-32600, which a 2026-07-28 request carries as HTTP 400), not a
// tool result. resume checks again (a concurrent resume may take the call
// in between): that rare case is answered as a handler error (-32603). A
// 2026-07-28 tools/call whose inputResponses are not an object of results
// is refused the same way (checkInputResponses), with or without a
// requestState.
func (s *Server) refuseStaleState(ctx context.Context, _ any, message any) error {
	// No byte-level prefilter: encoding/json matches member names without
	// regard to case and decodes escapes, so "RequestState" or
	// "request\u0053tate" reach mcp-go as the same member.
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name           string          `json:"name"`
			Arguments      json.RawMessage `json:"arguments"`
			RequestState   string          `json:"requestState"`
			InputResponses json.RawMessage `json:"inputResponses"`
			Meta           *mcp.Meta       `json:"_meta"`
		} `json:"params"`
	}
	// mcp-go reads the request's era after this hook: read it here the way
	// it will (a legacy request's requestState means nothing, and is left
	// alone).
	if json.Unmarshal(raw, &m) != nil || m.Method != string(mcp.MethodToolsCall) ||
		m.Params.Meta == nil || !mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion()) {
		return nil
	}
	if err := checkInputResponses(m.Params.InputResponses); err != nil {
		return err
	}
	if m.Params.RequestState == "" {
		return nil
	}
	if !s.parked.waitsFor(m.Params.RequestState, SubjectFrom(ctx).Principal, parkedName(m.Params.Name, m.Params.Arguments)) {
		return errStaleState
	}
	return nil
}

// parkedName is the tool a call is parked under: the one it names, or, for
// the discovery call meta-tool, the one its arguments name (the chain runs
// and parks that one, see unwrapDiscoveryCall). This check only lets a
// resume through to resume, which finds the call by the unwrapped call
// itself (its toolset decides whether it is unwrapped at all).
func parkedName(name string, args json.RawMessage) string {
	if name == discovery.CallTool {
		if inner, _, bad := discovery.ParseCall(args); bad == nil {
			return inner
		}
	}
	return name
}

// checkInputResponses refuses inputResponses that are present but not an
// object of results (each answers one input request: an elicitation,
// sampling or roots result, all objects), such as null or a number: a
// protocol error, answered as a JSON-RPC error before the call runs, as the
// spec recommends. Running it would park a call for input no answer of
// this shape can give, and an identical call would wait for that one
// (duplicate suppression joins it) until its deadline.
func checkInputResponses(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var answers map[string]json.RawMessage
	if err := json.Unmarshal(raw, &answers); err != nil || answers == nil {
		return errors.New("inputResponses must be an object mapping each input request's key to its result")
	}
	for key, answer := range answers {
		if answer = bytes.TrimSpace(answer); len(answer) == 0 || answer[0] != '{' {
			return fmt.Errorf("inputResponses %q is not a result object", key)
		}
	}
	return nil
}

// resume hands the client's answers to a parked call and waits again.
func (s *Server) resume(ctx context.Context, token string, call Call, answers mcp.InputResponses) (*mcp.CallToolResult, error) {
	p := s.parked.takeFor(token, call.Subject.Principal, call.Name) // another caller's is left for its owner
	if p == nil {
		return nil, errStaleState
	}
	// Before the answers: what the call sends once it has them belongs to
	// this request.
	defer p.listen(listenerOf(ctx, call))()
	for key, ask := range p.pending {
		answer, ok := answers[key]
		if !ok {
			ask.answer <- inputAnswer{err: &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "the client did not answer " + ask.method}}
		} else if raw, err := json.Marshal(answer); err != nil {
			ask.answer <- inputAnswer{err: err}
		} else {
			ask.answer <- inputAnswer{result: raw}
		}
	}
	p.pending = nil
	return s.await(ctx, p), nil
}

// inputRequired is the result asking the client for a round's inputs,
// under their keys.
func inputRequired(round inputRound, token string) *mcp.CallToolResult {
	requests := make(mcp.InputRequests, len(round))
	for key, ask := range round {
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
		requests[key] = in
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	res.ResultType = mcp.ResultTypeInputRequired
	res.InputRequests = requests
	res.RequestState = token
	return res
}

// start records p as running, unless Shutdown began (false).
func (c *parkedCalls) start(p *parkedCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.live == nil {
		c.live = map[*parkedCall]struct{}{}
	}
	c.live[p] = struct{}{}
	return true
}

// shutdown cancels every running call (a parked one ends as when its
// deadline passes: the upstream is told, and the outcome recorded) and
// waits for their pipelines to return, at most until ctx ends. No call
// starts after it began.
func (c *parkedCalls) shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	running := make([]*parkedCall, 0, len(c.live))
	cancels := make([]context.CancelFunc, 0, len(c.live))
	for p := range c.live {
		running = append(running, p)
		cancels = append(cancels, p.cancel)
	}
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	for _, p := range running {
		select {
		case <-p.finished:
		case <-ctx.Done():
			return fmt.Errorf("%d 2026-07-28 calls still running: %w", c.running(), ctx.Err())
		}
	}
	return nil
}

// cancel ends p's pipeline, unless it has ended.
func (c *parkedCalls) cancel(p *parkedCall) {
	c.mu.Lock()
	cancel := p.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// running is how many calls have not ended.
func (c *parkedCalls) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

// put parks p under token, unless its principal has
// maxParkedPerPrincipal calls parked already (errTooManyParked) or its
// pipeline ended since await took the round (errCallEnded: its answer is
// on its way to await).
func (c *parkedCalls) put(token string, p *parkedCall) *upstreams.RelayError {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.ended != 0 {
		return errCallEnded
	}
	if c.byPrincipal[p.principal] >= maxParkedPerPrincipal {
		return errTooManyParked
	}
	if c.calls == nil {
		c.calls, c.byPrincipal = map[string]*parkedCall{}, map[string]int{}
	}
	c.calls[token] = p
	c.byPrincipal[p.principal]++
	p.token = token
	// A call whose client never comes back is forgotten once it could no
	// longer be running (its pipeline has ended by its deadline by then);
	// forget restarts the count for the answer it keeps.
	p.expiry = time.AfterFunc(parkedLifetime, func() { c.remove(token) })
	return nil
}

// forget drops p from the running calls once its pipeline has ended. A
// call parked under a token stays parked: its client holds the token and
// comes back with its answers for the call's answer, which p.done keeps.
// That happens when an upstream asks something during a call and answers
// the call without waiting for it (server-everything asks for roots on its
// own, during whichever call is in flight), or when the call's deadline
// passed while its client was away. Dropping the token instead would answer
// the client "requestState names no call", and a client told that cannot
// know whether the tool ran: it may run it again. The answer is kept for
// parkedLifetime from now.
//
// An ended call holds no upstream slot, so it leaves the count
// maxParkedPerPrincipal bounds (a client that abandons questions is not
// refused new ones while their answers are kept) for a count of its own
// with the same bound: past it, the principal's oldest ended call is
// forgotten (its client is the likeliest to have gone). What the call held
// for its first request (its context, through cancel) is let go here; its
// pending round is the resuming handler's.
func (c *parkedCalls) forget(p *parkedCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.live, p)
	p.cancel = nil
	c.endings++
	parked := p.token != "" && c.calls[p.token] == p
	if parked {
		c.uncount(p) // from the running calls' count: ended is still 0
	}
	p.ended = c.endings
	if !parked {
		return
	}
	if c.endedBy == nil {
		c.endedBy = map[string]int{}
	}
	if c.endedBy[p.principal] >= maxParkedPerPrincipal {
		c.dropOldestEnded(p.principal)
	}
	c.endedBy[p.principal]++
	p.expiry.Reset(parkedLifetime)
}

// dropOldestEnded forgets principal's call that ended first; c.mu is held.
// It scans every parked call: it runs only for a principal past its bound
// of ended calls, and c.calls holds at most 64 per principal.
func (c *parkedCalls) dropOldestEnded(principal string) {
	oldest := ""
	var first uint64
	for token, p := range c.calls {
		if p.principal == principal && p.ended != 0 && (oldest == "" || p.ended < first) {
			oldest, first = token, p.ended
		}
	}
	if oldest != "" {
		c.drop(oldest)
	}
}

// drop unparks the call under token; c.mu is held.
func (c *parkedCalls) drop(token string) {
	p := c.calls[token]
	delete(c.calls, token)
	c.uncount(p)
	if p.expiry != nil {
		p.expiry.Stop()
	}
}

// uncount takes parked p out of its principal's count; c.mu is held.
func (c *parkedCalls) uncount(p *parkedCall) {
	count := c.byPrincipal
	if p.ended != 0 {
		count = c.endedBy
	}
	if count[p.principal]--; count[p.principal] <= 0 {
		delete(count, p.principal)
	}
}

// waitsFor reports whether token names a call of tool parked for principal.
func (c *parkedCalls) waitsFor(token, principal, tool string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[token]
	return p != nil && p.principal == principal && p.tool == tool
}

func (c *parkedCalls) take(token string) *parkedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[token]
	if p != nil {
		c.drop(token)
	}
	return p
}

// takeFor takes the call parked under token when it is principal's call
// of tool, and leaves any other where it is (nil).
func (c *parkedCalls) takeFor(token, principal, tool string) *parkedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[token]
	if p == nil || p.principal != principal || p.tool != tool {
		return nil
	}
	c.drop(token)
	return p
}

func (c *parkedCalls) remove(token string) { c.take(token) }

// parkedLifetime bounds how long a parked call is remembered.
const parkedLifetime = 10 * time.Minute
