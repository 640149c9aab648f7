package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// ProtocolRefusal is an upstream's protocol-level refusal of a tools/call
// that the transport relays to its client as the same JSON-RPC error
// rather than as a tool_failed result: in 2026-07-28, -32021 (the request
// did not declare a client capability the tool needs), which the client
// must see as that error (docs/design.md, "Failure semantics"). Only
// what the client may see is kept: the code, the message sanitised, and
// data.requiredCapabilities re-encoded as a ClientCapabilities object.
type ProtocolRefusal struct {
	Code                 int
	Message              string
	RequiredCapabilities *mcp.ClientCapabilities // nil: the upstream named none
}

// refusalOf is the ProtocolRefusal err carries, or nil: an upstream's
// JSON-RPC answer -32021 to the call.
func refusalOf(err error) *ProtocolRefusal {
	var ce *upstreams.CallError
	if !errors.As(err, &ce) || ce.RPC == nil || ce.RPC.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
		return nil
	}
	r := &ProtocolRefusal{Code: ce.RPC.Code, Message: sanitize.Clip(sanitize.Text(ce.RPC.Message), maxToolMessage)}
	if r.Message == "" {
		r.Message = "the request did not declare a client capability the tool requires"
	}
	var data struct {
		RequiredCapabilities *mcp.ClientCapabilities `json:"requiredCapabilities"`
	}
	if raw, err := json.Marshal(ce.RPC.Data); err == nil && json.Unmarshal(raw, &data) == nil {
		r.RequiredCapabilities = data.RequiredCapabilities
	}
	return r
}

// RefusalSlot is where the execute link notes a ProtocolRefusal for the
// transport to answer with. A transport that can relay one (Streamable
// HTTP, for a 2026-07-28 request) puts one on the request's context
// (WithRefusalSlot); elsewhere the call fails as tool_failed, as before.
// It is safe for concurrent use.
type RefusalSlot struct {
	mu      sync.Mutex
	refusal *ProtocolRefusal
}

type refusalSlotKey struct{}

// WithRefusalSlot is ctx carrying a fresh RefusalSlot, which the caller
// reads once the request is answered.
func WithRefusalSlot(ctx context.Context) (context.Context, *RefusalSlot) {
	s := &RefusalSlot{}
	return context.WithValue(ctx, refusalSlotKey{}, s), s
}

// NoteProtocolRefusal records r on ctx's RefusalSlot, if it has one. A
// later note replaces an earlier one.
func NoteProtocolRefusal(ctx context.Context, r *ProtocolRefusal) {
	s, _ := ctx.Value(refusalSlotKey{}).(*RefusalSlot)
	if s == nil {
		return
	}
	s.mu.Lock()
	s.refusal = r
	s.mu.Unlock()
}

// Refusal is the refusal noted, or nil.
func (s *RefusalSlot) Refusal() *ProtocolRefusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusal
}
