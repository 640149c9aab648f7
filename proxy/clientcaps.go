package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/upstreams"
)

// toolgate declares sampling, elicitation and roots to every upstream,
// because some of its clients can answer them. Which client is asked is
// decided per call: the one whose call is running. A client that did not
// declare a capability must never be sent its request (MCP: "servers
// MUST NOT send requests for capabilities the client did not declare"),
// so the gateway answers the upstream itself, with the JSON-RPC error a
// client without the method would give (-32601).
//
// What a client declared comes from its initialize request (2025 eras,
// kept per session) or from the _meta of each request (2026-07-28, which
// has no session).

// clientCaps is which server-to-client requests a client said it answers.
type clientCaps struct {
	known                        bool // false: nothing was seen; ask, and let the client answer
	sampling, elicitation, roots bool
	// declared is the three as the client declared them (with their
	// sub-capabilities, such as elicitation's modes), to declare to a
	// 2026-07-28 upstream on its behalf.
	declared mcp.ClientCapabilities
	// digest is declared's upstreams.DigestCapabilities, made once per
	// session (duplicate suppression reads it on every call).
	digest string
}

func capsOf(c mcp.ClientCapabilities) clientCaps {
	declared := mcp.ClientCapabilities{Sampling: c.Sampling, Elicitation: c.Elicitation, Roots: c.Roots}
	return clientCaps{known: true, sampling: c.Sampling != nil, elicitation: c.Elicitation != nil, roots: c.Roots != nil,
		declared: declared, digest: upstreams.DigestCapabilities(declared)}
}

// refusal is the answer for the upstream when the client declared that it
// cannot take method with params, or nil when it may be asked. Besides the
// capability itself, the sub-capabilities MCP makes a must: elicitation in
// url mode needs elicitation.url (a bare "elicitation": {} is form mode
// only), and sampling with tools needs sampling.tools.
func (c clientCaps) refusal(method string, params json.RawMessage) *upstreams.RelayError {
	if refused := c.capabilityRefusal(method); refused != nil || !c.known {
		return refused
	}
	var p struct {
		Mode       string          `json:"mode"`
		Tools      json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage `json:"toolChoice"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return nil // the relay refuses params that are not JSON itself
	}
	switch {
	case method == string(mcp.MethodElicitationCreate) && p.Mode == "url" && (c.declared.Elicitation == nil || c.declared.Elicitation.URL == nil):
		return &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "the client did not declare elicitation in url mode"}
	case method == string(mcp.MethodElicitationCreate) && p.Mode != "url" && c.declared.Elicitation != nil &&
		c.declared.Elicitation.Form == nil && c.declared.Elicitation.URL != nil:
		return &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "the client declared elicitation in url mode only"}
	case method == string(mcp.MethodSamplingCreateMessage) && (len(p.Tools) > 0 || len(p.ToolChoice) > 0) &&
		(c.declared.Sampling == nil || c.declared.Sampling.Tools == nil):
		return &upstreams.RelayError{Code: mcp.INVALID_PARAMS, Message: "the client did not declare sampling with tools"}
	}
	return nil
}

// capabilityRefusal is refusal for the capability alone.
func (c clientCaps) capabilityRefusal(method string) *upstreams.RelayError {
	if !c.known {
		return nil
	}
	var declared bool
	var name string
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		declared, name = c.sampling, "sampling"
	case string(mcp.MethodElicitationCreate):
		declared, name = c.elicitation, "elicitation"
	case string(mcp.MethodListRoots):
		declared, name = c.roots, "roots"
	default:
		return nil
	}
	if declared {
		return nil
	}
	return &upstreams.RelayError{Code: mcp.METHOD_NOT_FOUND,
		Message: "the client did not declare the " + name + " capability, so it cannot be asked " + method}
}

// Declared implements upstreams.CapabilityDeclarer for the relays.
func (r *clientRelay) Declared() (mcp.ClientCapabilities, bool) { return r.caps.declared, r.caps.known }

func (r *parkedRelay) Declared() (mcp.ClientCapabilities, bool) { return r.caps.declared, r.caps.known }

func (r *clientRelay) DeclaredDigest() (string, bool) { return r.caps.digest, r.caps.known }

func (r *parkedRelay) DeclaredDigest() (string, bool) { return r.caps.digest, r.caps.known }

// callerCaps is what the client of the request in ctx declared: a
// 2026-07-28 request's own _meta, or its session's initialize.
func (s *Server) callerCaps(ctx context.Context, meta *mcp.Meta) clientCaps {
	if server.IsModernRequest(ctx) {
		if c := meta.ClientCapabilities(); c != nil {
			return capsOf(*c)
		}
		return clientCaps{}
	}
	if e := s.session(sessionID(ctx)); e != nil {
		if c := e.caps.Load(); c != nil {
			return *c
		}
	}
	return clientCaps{}
}

// noteInitialize keeps what a client declared at initialize (its
// capabilities, and its clientInfo name for the toolset rules). mcp-go
// registers an HTTP session just after initialize (the caps wait in
// pending until then), but a stdio session, or an HTTP session whose GET
// stream arrived first, is registered before it: then they go straight to
// the entry.
func (s *Server) noteInitialize(id string, caps mcp.ClientCapabilities, client string) {
	c := capsOf(caps)
	if e := s.session(id); e != nil {
		e.caps.Store(&c)
		e.client.Store(&client)
		return
	}
	s.declared.put(id, c, client, time.Now())
}

// pendingCaps remembers, from initialize until mcp-go registers the
// session just after it, what each session's client declared. A session
// mcp-go never registers (its client left during initialize) is forgotten
// after a minute; when more than maxPending wait, a new one is not
// remembered, which only leaves its capabilities unknown (no fast path,
// and its requests are passed on as before).
type pendingCaps struct {
	mu      sync.Mutex
	pending map[string]pendingCap
}

type pendingCap struct {
	caps   clientCaps
	client string // the clientInfo name
	at     time.Time
}

const maxPending = 4096

func (n *pendingCaps) put(id string, caps clientCaps, client string, now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending == nil {
		n.pending = map[string]pendingCap{}
	}
	if len(n.pending) >= maxPending {
		for k, p := range n.pending {
			if now.Sub(p.at) > time.Minute {
				delete(n.pending, k)
			}
		}
	}
	if len(n.pending) < maxPending {
		n.pending[id] = pendingCap{caps, client, now}
	}
}

// take returns what the client of session id declared, and forgets it;
// ok is false when that is unknown.
func (n *pendingCaps) take(id string) (p pendingCap, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok = n.pending[id]
	delete(n.pending, id)
	return p, ok
}
