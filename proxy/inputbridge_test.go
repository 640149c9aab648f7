package proxy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
)

// A parked call resumes only for its own principal and tool: a requestState
// that leaked to another caller is useless to it.
func TestParkedCallResumesOnlyForItsOwner(t *testing.T) {
	s := &Server{}
	p := &parkedCall{principal: "alice", tool: "srv__t", asks: make(chan *inputAsk), finished: make(chan struct{}), cancel: func() {},
		done: make(chan *mcp.CallToolResult, 1), pending: map[string]*inputAsk{}}
	ask := &inputAsk{method: "elicitation/create", answer: make(chan inputAnswer, 1)}
	p.pending["q1"] = ask
	s.parked.put("tok", p)

	for _, c := range []Call{
		{Subject: authz.Subject{Principal: "mallory"}, Name: "srv__t"},
		{Subject: authz.Subject{Principal: "alice"}, Name: "srv__other"},
	} {
		res := s.resume(context.Background(), "tok", c, nil)
		var env map[string]any
		_ = json.Unmarshal(res.StructuredContent.(json.RawMessage), &env)
		if env["error_code"] != "invalid_arguments" {
			t.Errorf("%s resuming %s: %v, want invalid_arguments", c.Subject.Principal, c.Name, env)
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
	res := s.resume(context.Background(), "tok", Call{Subject: authz.Subject{Principal: "alice"}, Name: "srv__t"}, answers)
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

// Requests without a session (2026-07-28) are each a client of their own
// for relaying: two tenants' requests never share a relay session.
func TestRelaySessionIsUniqueWithoutASession(t *testing.T) {
	a, b := relaySession(context.Background()), relaySession(context.Background())
	if a == "" || a == b {
		t.Errorf("sessionless requests got relay sessions %q and %q", a, b)
	}
}
