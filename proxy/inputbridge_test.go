package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/upstreams"
)

// A parked call resumes only for its own principal and tool: a requestState
// that leaked to another caller is useless to it, and refused as an error,
// not answered as a tool result.
func TestParkedCallResumesOnlyForItsOwner(t *testing.T) {
	s := &Server{}
	p := &parkedCall{principal: "alice", tool: "srv__t", asks: make(chan inputRound), finished: make(chan struct{}), cancel: func() {},
		done: make(chan *mcp.CallToolResult, 1)}
	ask := &inputAsk{method: "elicitation/create", answer: make(chan inputAnswer, 1)}
	p.pending = inputRound{"q1": ask}
	s.parked.put("tok", p)

	for _, c := range []Call{
		{Subject: authz.Subject{Principal: "mallory"}, Name: "srv__t"},
		{Subject: authz.Subject{Principal: "alice"}, Name: "srv__other"},
	} {
		if res, err := s.resume(context.Background(), "tok", c, nil); !errors.Is(err, errStaleState) || res != nil {
			t.Errorf("%s resuming %s: %v %v, want errStaleState", c.Subject.Principal, c.Name, res, err)
		}
	}
	if len(ask.answer) != 0 {
		t.Fatal("a stranger's resume answered the parked call")
	}
	// The owner answers; the call then finishes.
	p.done <- &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("done")}}
	answers := mcp.InputResponses{}
	if err := json.Unmarshal([]byte(`{"q1":{"action":"accept"}}`), &answers); err != nil {
		t.Fatal(err)
	}
	res, err := s.resume(context.Background(), "tok", Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}, answers)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ask.answer; string(got.result) != `{"action":"accept"}` || got.err != nil {
		t.Errorf("the upstream got %s %v", got.result, got.err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "done" {
		t.Errorf("resumed call answered %+v", res)
	}
	if s.parked.take("tok") != nil {
		t.Error("a finished call is still parked")
	}
}

// An upstream's round of several input requests reaches the client whole,
// under the upstream's keys, and each further round gets a new
// requestState: the old one resumes nothing (issue 17, item 5).
func TestInputRoundsKeepTheUpstreamsKeys(t *testing.T) {
	s := &Server{}
	alice := Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &parkedCall{principal: "alice", tool: "srv__t", asks: make(chan inputRound), finished: make(chan struct{}), cancel: cancel,
		done: make(chan *mcp.CallToolResult, 1)}
	relay := &parkedRelay{call: p, ctx: runCtx, caps: capsOf(mcp.ClientCapabilities{
		Sampling: &mcp.SamplingCapability{}, Elicitation: &mcp.ElicitationCapability{}})}
	upstream := make(chan map[string]json.RawMessage, 2)
	go func() {
		first, err := relay.RequestInputs(runCtx, map[string]upstreams.InputRequest{
			"user_name": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"name?"}`)},
			"email":     {Method: "elicitation/create", Params: json.RawMessage(`{"message":"email?"}`)},
			"summary":   {Method: "sampling/createMessage", Params: json.RawMessage(`{"messages":[],"maxTokens":5}`)},
		})
		if err != nil {
			t.Error(err)
		}
		upstream <- first
		second, err := relay.RequestInputs(runCtx, map[string]upstreams.InputRequest{
			"confirm": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"sure?"}`)}})
		if err != nil {
			t.Error(err)
		}
		upstream <- second
		p.done <- &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("done")}}
	}()

	res := s.await(context.Background(), p)
	if res.ResultType != mcp.ResultTypeInputRequired || len(res.InputRequests) != 3 {
		t.Fatalf("first round: %+v, want the three requests at once", res)
	}
	for _, key := range []string{"user_name", "email", "summary"} {
		if _, ok := res.InputRequests[key]; !ok {
			t.Errorf("the upstream's key %q is missing: %v", key, res.InputRequests)
		}
	}
	state1 := res.RequestState
	var answers mcp.InputResponses
	if err := json.Unmarshal([]byte(`{"user_name":{"action":"accept","content":{"v":"a"}},"email":{"action":"decline"},`+
		`"summary":{"role":"assistant","content":{"type":"text","text":"s"},"model":"m"}}`), &answers); err != nil {
		t.Fatal(err)
	}
	res, err := s.resume(context.Background(), state1, alice, answers)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-upstream; len(got) != 3 || !strings.Contains(string(got["email"]), "decline") {
		t.Errorf("the upstream got %s", got)
	}
	if res.ResultType != mcp.ResultTypeInputRequired || res.RequestState == state1 || len(res.InputRequests) != 1 {
		t.Fatalf("second round: %+v, want one request under a new requestState", res)
	}
	if _, err := s.resume(context.Background(), state1, alice, answers); !errors.Is(err, errStaleState) {
		t.Fatalf("the first round's requestState again: %v, want errStaleState", err)
	}
	if err := json.Unmarshal([]byte(`{"confirm":{"action":"accept"}}`), &answers); err != nil {
		t.Fatal(err)
	}
	res, err = s.resume(context.Background(), res.RequestState, alice, answers)
	if err != nil {
		t.Fatal(err)
	}
	<-upstream
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "done" {
		t.Errorf("final answer %+v", res)
	}
}

// Requests without a session (2026-07-28) are each a client of their own
// for relaying: two tenants' requests never share a relay session.
func TestRelaySessionIsUniqueWithoutASession(t *testing.T) {
	a, b := relaySession(context.Background()), relaySession(context.Background())
	if a == "" || a == b {
		t.Errorf("sessionless requests got relay sessions %q and %q", a, b)
	}
}

// A parked call whose pipeline ended (its deadline passed while its client
// was away, or the upstream answered without waiting for the question it
// asked) stays parked under its token, with its answer, until its client
// comes back for it; forget only takes it out of the running calls. It no
// longer counts against its principal's cap of calls holding upstream
// slots, but ended calls have a cap of their own: past it, the principal's
// oldest ended call is dropped, never the one whose client was just handed
// its token. A call that ended is never parked again.
func TestFinishedParkedCallKeepsItsToken(t *testing.T) {
	var c parkedCalls
	ended := &parkedCall{principal: "alice", tool: "t"}
	c.start(ended)
	if err := c.put("ended", ended); err != nil {
		t.Fatal(err)
	}
	c.forget(ended)
	if !c.waitsFor("ended", "alice", "t") || c.running() != 0 {
		t.Fatalf("after forget: parked %v, running %d; want parked, not running",
			c.waitsFor("ended", "alice", "t"), c.running())
	}
	if c.byPrincipal["alice"] != 0 || c.endedBy["alice"] != 1 {
		t.Errorf("alice counts %d running, %d ended; want 0 and 1", c.byPrincipal["alice"], c.endedBy["alice"])
	}
	if err := c.put("again", ended); !errors.Is(err, errCallEnded) {
		t.Errorf("parking an ended call again: %v, want errCallEnded", err)
	}
	if c.take("ended") != ended || c.waitsFor("ended", "alice", "t") || len(c.endedBy) != 0 {
		t.Error("the client's resume did not take the ended call, or its count")
	}

	for i := range maxParkedPerPrincipal + 2 {
		p := &parkedCall{principal: "alice", tool: "t"}
		if err := c.put(fmt.Sprint("tok", i), p); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		c.forget(p)
	}
	for i := range maxParkedPerPrincipal + 2 {
		if kept := c.waitsFor(fmt.Sprint("tok", i), "alice", "t"); kept != (i >= 2) {
			t.Errorf("ended call %d kept: %v, want only the two oldest dropped", i, kept)
		}
	}
	if c.byPrincipal["alice"] != 0 || c.endedBy["alice"] != maxParkedPerPrincipal {
		t.Errorf("alice counts %d running, %d ended; want 0 and %d", c.byPrincipal["alice"], c.endedBy["alice"], maxParkedPerPrincipal)
	}
}

// An ended call's answer is kept parkedLifetime after the call ended, not
// after it was parked: a call that ran nine minutes before its upstream
// answered still gives its client the answer nine minutes later. A call
// whose client never comes back is then forgotten.
func TestEndedCallIsKeptFromItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c parkedCalls
		p := &parkedCall{principal: "alice", tool: "t"}
		c.start(p)
		if err := c.put("tok", p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(parkedLifetime - time.Minute) // fake time: the call runs, parked
		c.forget(p)
		time.Sleep(parkedLifetime - time.Minute)
		synctest.Wait()
		if !c.waitsFor("tok", "alice", "t") {
			t.Fatal("the answer was dropped before parkedLifetime passed since the call ended")
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait() // the expiry's callback has run
		if c.waitsFor("tok", "alice", "t") || len(c.endedBy) != 0 {
			t.Error("an answer nobody came for is kept past parkedLifetime")
		}
	})
}

var rootsCaps = capsOf(mcp.ClientCapabilities{Roots: &struct {
	ListChanged bool `json:"listChanged,omitempty"`
}{}})

// An upstream may ask during a call for reasons of its own and answer the
// call without waiting for the client: server-everything asks for roots
// during whichever call is in flight. The client that was handed the
// question gets the call's answer when it comes back with its own, not
// "requestState names no call", which leaves it not knowing whether the
// tool ran (CI caught this as TestServerRequestsRelayedToCaller/2026-07-28
// failing about once in a few hundred runs).
func TestAnswerOutlivesAMootQuestion(t *testing.T) {
	s := &Server{}
	alice := Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}
	res := mootCall(t, s)
	answers := mcp.InputResponses{}
	for key := range res.InputRequests {
		if err := json.Unmarshal([]byte(`{"`+key+`":{"roots":[]}}`), &answers); err != nil {
			t.Fatal(err)
		}
	}
	token := res.RequestState
	if err := s.refuseStaleState(WithSubject(context.Background(), alice.Subject), 2,
		json.RawMessage(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"srv__t","requestState":"`+token+
			`","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)); err != nil {
		t.Fatalf("the resume is refused before it runs: %v", err)
	}
	res, err := s.resume(context.Background(), token, alice, answers)
	if err != nil {
		t.Fatalf("resuming the ended call: %v", err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "done" {
		t.Errorf("resumed call answered %+v, want the call's answer", res)
	}
	if s.parked.waitsFor(token, "alice", alice.Name) {
		t.Error("the answered call is still parked")
	}
}

// mootCall parks a call of alice's on a roots question its upstream
// answers without waiting for, then lets the call end: the client holds
// the returned input_required, the call's answer is "done".
func mootCall(t *testing.T, s *Server) *mcp.CallToolResult {
	t.Helper()
	release, asked := make(chan struct{}), make(chan error, 1)
	s.opts.Calls = callsFunc(func(ctx context.Context, _ Call) *mcp.CallToolResult {
		relay := callRelay(t, ctx)
		go func() {
			_, err := relay.Request(ctx, "roots/list", json.RawMessage(`{}`))
			asked <- err
		}()
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("done")}}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "srv__t"
	res, err := s.handleModern(context.Background(), req, Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}, rootsCaps)
	if err != nil || res.ResultType != mcp.ResultTypeInputRequired || len(res.InputRequests) != 1 {
		t.Fatalf("first round: %+v %v, want input_required for roots", res, err)
	}
	close(release)
	if err := <-asked; !errors.Is(err, errCallEnded) { // the pipeline has ended
		t.Fatalf("the upstream's question got %v, want errCallEnded", err)
	}
	return res
}

// A principal whose client abandoned maxParkedPerPrincipal questions of
// calls that then ended still gets the answer of the next such call: the
// oldest abandoned answer makes room, not the one just handed out. And a
// resume whose client has gone by the time it waits still prefers the
// answer it finds to "outcome unknown".
func TestEndedCallsPastTheCapDropTheOldest(t *testing.T) {
	s := &Server{}
	var abandoned []string
	for range maxParkedPerPrincipal {
		abandoned = append(abandoned, mootCall(t, s).RequestState)
	}
	res := mootCall(t, s)
	alice := Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := s.resume(gone, res.RequestState, alice, nil)
	if err != nil {
		t.Fatalf("resuming the round it was handed: %v", err)
	}
	if tc, ok := got.Content[0].(mcp.TextContent); !ok || tc.Text != "done" {
		t.Errorf("resumed call answered %+v, want the call's answer", got)
	}
	if s.parked.waitsFor(abandoned[0], "alice", alice.Name) || !s.parked.waitsFor(abandoned[1], "alice", alice.Name) {
		t.Error("the oldest abandoned answer was not the one dropped")
	}
}

// When the pipeline has answered and a question of the upstream's waits
// too, await gives the client the answer and refuses the question: it can
// no longer change the outcome. (Go's select picks among ready cases at
// random, so each round here takes either branch about half the time.)
func TestAwaitPrefersTheAnswerToAQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Server{}
		for round := range 20 {
			p := &parkedCall{principal: "alice", tool: "srv__t", asks: make(chan inputRound), finished: make(chan struct{}),
				done: make(chan *mcp.CallToolResult, 1), cancel: func() {}}
			ask := &inputAsk{method: "roots/list", answer: make(chan inputAnswer, 1)}
			go func() {
				select {
				case p.asks <- inputRound{"q": ask}:
				case <-p.finished:
				}
			}()
			p.done <- &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("done")}}
			synctest.Wait() // the question waits to be taken
			res := s.await(context.Background(), p)
			close(p.finished)
			if res.ResultType == mcp.ResultTypeInputRequired {
				t.Fatalf("round %d: the client was asked a question of a call that had answered", round)
			}
			if tc, ok := res.Content[0].(mcp.TextContent); !ok || tc.Text != "done" {
				t.Fatalf("round %d: answered %+v", round, res)
			}
			select {
			case a := <-ask.answer:
				if !errors.Is(a.err, errCallEnded) {
					t.Fatalf("round %d: the upstream's question got %+v, want errCallEnded", round, a)
				}
			default: // await took the answer first; the question was never taken
			}
		}
		if len(s.parked.calls) != 0 {
			t.Errorf("%d calls parked, want none", len(s.parked.calls))
		}
	})
}

// callsFunc is a chain that is a function.
type callsFunc func(ctx context.Context, call Call) *mcp.CallToolResult

func (f callsFunc) Handle(ctx context.Context, call Call) *mcp.CallToolResult { return f(ctx, call) }

// callRelay is the relay of the 2026-07-28 call whose pipeline runs with
// ctx, as an upstream connection finds it. (Not "the one call s runs": a
// call that has answered leaves s's running set a moment after its
// client got the answer, so the next call can find two there.)
func callRelay(t *testing.T, ctx context.Context) *parkedRelay {
	r, ok := upstreams.RelayFrom(ctx).(*parkedRelay)
	if !ok {
		t.Errorf("the call's relay is %T, want *parkedRelay", upstreams.RelayFrom(ctx))
	}
	return r
}

var elicitingCaps = capsOf(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})

// askName is an upstream that asks its client for user_name (its own key)
// and greets whatever the answer holds.
func askName(t *testing.T, ended chan<- error) callsFunc {
	return func(ctx context.Context, _ Call) *mcp.CallToolResult {
		answers, err := callRelay(t, ctx).RequestInputs(ctx, map[string]upstreams.InputRequest{
			"user_name": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"What is your name?"}`)}})
		if ended != nil {
			ended <- ctx.Err()
		}
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent(err.Error())}}
		}
		got, _ := json.Marshal(answers)
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(got))}}
	}
}

// Shutdown (gateway.Close) ends a call parked for input its client never
// gives: its pipeline's context is cancelled and Shutdown returns once the
// pipeline has, rather than leaving it to its deadline (issue 17: goleak,
// and the conformance test's wait). A call after Shutdown does not run.
func TestShutdownEndsParkedCalls(t *testing.T) {
	ended := make(chan error, 1)
	s := &Server{opts: Options{Calls: askName(t, ended)}}
	alice := Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}
	req := mcp.CallToolRequest{}
	req.Params.Name = alice.Name
	res, err := s.handleModern(context.Background(), req, alice, elicitingCaps)
	if err != nil || res.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("first round: %+v %v, want input_required", res, err)
	}
	if !s.parked.waitsFor(res.RequestState, "alice", alice.Name) {
		t.Fatal("the call is not parked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the pipeline's context ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Shutdown returned before the parked call's pipeline ended")
	}
	if s.parked.running() != 0 {
		t.Error("the ended call is still running")
	}
	// A client that comes back (a request already in flight when Shutdown
	// began) learns how the call ended.
	if res, err := s.resume(context.Background(), res.RequestState, alice, nil); err != nil || !res.IsError {
		t.Errorf("resuming the ended call: %+v %v, want its failure", res, err)
	}
	res, err = s.handleModern(context.Background(), req, alice, elicitingCaps)
	if err != nil || !res.IsError || len(ended) != 0 {
		t.Errorf("a call after Shutdown: %+v %v, want a failure without running", res, err)
	}
}

// A new call that comes with inputResponses (a client of a stateless
// server may answer before it is asked: the alpha suite's
// input-required-result-ignore-extra-params) is answered from them: the
// upstream's own key answers its request, keys it never asked for are
// ignored, and the client gets the complete result, not input_required
// (issue 17). Answers without the upstream's key park the call as before.
func TestGivenInputResponsesAnswerTheUpstream(t *testing.T) {
	s := &Server{opts: Options{Calls: askName(t, nil)}}
	defer func() { // ends the call parked below
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	alice := Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}
	req := mcp.CallToolRequest{}
	req.Params.Name = alice.Name
	if err := json.Unmarshal([]byte(`{"user_name":{"action":"accept","content":{"name":"Alice"}},`+
		`"unknown_extra_key":{"action":"accept","content":{"foo":"bar"}},"another_unexpected":{"action":"accept","content":{"baz":123}}}`),
		&req.Params.InputResponses); err != nil {
		t.Fatal(err)
	}
	res, err := s.handleModern(context.Background(), req, alice, elicitingCaps)
	if err != nil || res.ResultType == mcp.ResultTypeInputRequired || res.IsError || len(res.Content) != 1 {
		t.Fatalf("with user_name and extra keys: %+v %v, want the complete result", res, err)
	}
	if got := res.Content[0].(mcp.TextContent).Text; got != `{"user_name":{"action":"accept","content":{"name":"Alice"}}}` {
		t.Errorf("the upstream got %s, want its own key alone", got)
	}

	req.Params.InputResponses = nil
	if err := json.Unmarshal([]byte(`{"wrong_key":{"action":"accept","content":{"data":"wrong"}}}`), &req.Params.InputResponses); err != nil {
		t.Fatal(err)
	}
	res, err = s.handleModern(context.Background(), req, alice, elicitingCaps)
	if err != nil || res.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("with a wrong key only: %+v %v, want input_required", res, err)
	}
	if _, ok := res.InputRequests["user_name"]; !ok || len(res.InputRequests) != 1 {
		t.Errorf("input requests %v, want user_name", res.InputRequests)
	}
}

// A 2026-07-28 tools/call whose inputResponses are not an object of result
// objects (the alpha suite's input-required-result-validate-input: a number
// for user_name, then null) is a JSON-RPC error before the call runs,
// whether or not it names a requestState; it used to run, park, and make
// the next identical call wait out its deadline (issue 17). Well-formed
// answers, extra keys included, and a legacy request's fields are left to
// the handler.
func TestMalformedInputResponsesAreRefused(t *testing.T) {
	s := &Server{}
	message := func(params string) json.RawMessage {
		return json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"srv__t","arguments":{},` + params +
			`"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28"}}}`)
	}
	for _, params := range []string{
		`"inputResponses":{"user_name":12345},`,
		`"inputResponses":null,`,
		`"inputResponses":[],`,
		`"inputResponses":{"user_name":{"action":"accept"},"x":"text"},`,
		`"inputResponses":{"user_name":12345},"requestState":"tg-input-unknown",`,
	} {
		if err := s.refuseStaleState(context.Background(), 1, message(params)); err == nil || errors.Is(err, errStaleState) {
			t.Errorf("%s: %v, want the malformed inputResponses refused", params, err)
		}
	}
	for _, params := range []string{
		``,
		`"inputResponses":{},`,
		`"inputResponses":{"user_name":{"action":"accept","content":{"name":"Alice"}},"unknown_extra_key":{"action":"accept"}},`,
	} {
		if err := s.refuseStaleState(context.Background(), 1, message(params)); err != nil {
			t.Errorf("%s: refused (%v)", params, err)
		}
	}
	legacy := json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"srv__t","inputResponses":null}}`)
	if err := s.refuseStaleState(context.Background(), 1, legacy); err != nil {
		t.Errorf("a legacy request: %v", err)
	}
}

// One principal has at most maxParkedPerPrincipal calls waiting for its
// input: past it, the upstream's request is answered with an error and the
// call goes on to its result, instead of parking (and holding an upstream
// slot) until its deadline. Other principals are not affected, and a slot
// frees as a parked call is resumed.
func TestParkedCallsAreCappedPerPrincipal(t *testing.T) {
	s := &Server{}
	newCall := func(principal string) (*parkedCall, *parkedRelay, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		p := &parkedCall{principal: principal, tool: "srv__t", asks: make(chan inputRound), finished: make(chan struct{}),
			cancel: cancel, done: make(chan *mcp.CallToolResult, 1)}
		return p, &parkedRelay{call: p, ctx: ctx, caps: capsOf(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})}, cancel
	}
	ask := func(p *parkedCall, relay *parkedRelay) chan error {
		asked := make(chan error, 1)
		go func() {
			_, err := relay.RequestInputs(relay.ctx, map[string]upstreams.InputRequest{
				"q": {Method: "elicitation/create", Params: json.RawMessage(`{"message":"?"}`)}})
			asked <- err
			p.done <- &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("went on")}}
		}()
		return asked
	}
	var tokens []string
	for range maxParkedPerPrincipal {
		p, relay, cancel := newCall("alice")
		defer cancel()
		ask(p, relay)
		res := s.await(context.Background(), p)
		if res.ResultType != mcp.ResultTypeInputRequired {
			t.Fatalf("call %d of alice's was not parked: %+v", len(tokens)+1, res)
		}
		tokens = append(tokens, res.RequestState)
	}

	p, relay, cancel := newCall("alice")
	defer cancel()
	asked := ask(p, relay)
	res := s.await(context.Background(), p)
	if res.ResultType == mcp.ResultTypeInputRequired {
		t.Fatalf("a call past alice's cap was parked: %+v", res)
	}
	if err := <-asked; !errors.Is(err, errTooManyParked) {
		t.Fatalf("the upstream's request past the cap got %v, want errTooManyParked", err)
	}

	bob, bobRelay, cancelBob := newCall("bob")
	defer cancelBob()
	ask(bob, bobRelay)
	if res := s.await(context.Background(), bob); res.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("bob's call was refused for alice's: %+v", res)
	}

	if s.parked.take(tokens[0]) == nil {
		t.Fatal("alice's first call is not parked")
	}
	again, againRelay, cancelAgain := newCall("alice")
	defer cancelAgain()
	ask(again, againRelay)
	if res := s.await(context.Background(), again); res.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("a slot did not free when alice's call was taken: %+v", res)
	}
}

// A discovery client's call (toolgate__call_tool naming srv__t) is parked
// under the tool it names, as the chain ran it: its resume, which names the
// meta-tool again, must pass the stale-state check as the parked call's own,
// else a discovery client could never answer an upstream's input request.
// The check still refuses another principal, or another inner tool.
func TestDiscoveryCallResumesThroughTheMetaTool(t *testing.T) {
	s := &Server{}
	p := &parkedCall{principal: "alice", tool: "srv__t", asks: make(chan inputRound), finished: make(chan struct{}), cancel: func() {},
		done: make(chan *mcp.CallToolResult, 1)}
	s.parked.put("tok", p)
	resume := func(inner string) json.RawMessage {
		return json.RawMessage(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"toolgate__call_tool",` +
			`"arguments":{"name":"` + inner + `","arguments":{}},"requestState":"tok","inputResponses":{},` +
			`"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28"}}}`)
	}
	alice := WithSubject(context.Background(), authz.Subject{Principal: "alice"})
	if err := s.refuseStaleState(alice, 2, resume("srv__t")); err != nil {
		t.Fatalf("alice resuming her discovery call: %v", err)
	}
	mallory := WithSubject(context.Background(), authz.Subject{Principal: "mallory"})
	if err := s.refuseStaleState(mallory, 2, resume("srv__t")); !errors.Is(err, errStaleState) {
		t.Errorf("mallory resuming alice's call: %v, want errStaleState", err)
	}
	if err := s.refuseStaleState(alice, 2, resume("srv__other")); !errors.Is(err, errStaleState) {
		t.Errorf("resuming it as another tool: %v, want errStaleState", err)
	}
}
