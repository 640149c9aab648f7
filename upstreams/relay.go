package upstreams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Relay is the client a request to an upstream was made for: where the
// upstream's own requests (sampling/createMessage, elicitation/create,
// roots/list) and its log messages go while that request is in flight.
// The proxy implements it over the client's MCP session.
type Relay interface {
	// Session identifies the client session; relays of one session are
	// interchangeable.
	Session() string
	// Request asks the client and returns its raw result. A *RelayError
	// is passed to the upstream as the JSON-RPC error it carries.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Log delivers one notifications/message. It runs on the transport's
	// read loop and must not block.
	Log(params json.RawMessage)
}

// InputRequest is one request of a 2026-07-28 upstream's input_required.
type InputRequest struct {
	Method string
	Params json.RawMessage
}

// InputBatcher is a Relay that can put a whole round of an upstream's
// input requests to its client at once, under the upstream's keys (a
// 2026-07-28 client answers them all in one retry). A Relay that is not
// asks them one at a time through Request.
type InputBatcher interface {
	RequestInputs(ctx context.Context, requests map[string]InputRequest) (map[string]json.RawMessage, error)
}

// CapabilityDeclarer is a Relay that knows which of sampling, elicitation
// and roots its client declared; Declared's known is false when it does
// not.
type CapabilityDeclarer interface {
	Declared() (caps mcp.ClientCapabilities, known bool)
}

// LogLeveler is a Relay whose client asks for log messages per request (a
// 2026-07-28 client, in its request's _meta): the level it asked for, ""
// for none. A 2026-07-28 upstream is asked for the more verbose of it and
// the level 2025-era clients set (Set.SetLogLevel): such an upstream must
// not send a request any log message it did not ask for.
type LogLeveler interface {
	LogLevel() string
}

// CapabilityDigester is a CapabilityDeclarer that keeps the
// DigestCapabilities of what its client declared, made once, since
// duplicate suppression reads it on every call (CapabilityDigest).
type CapabilityDigester interface {
	DeclaredDigest() (digest string, known bool)
}

// DigestCapabilities is the DeclaredDigest of caps (only sampling,
// elicitation and roots count): the first 16 bytes of the SHA-256 of their
// JSON, in hex (32 characters, which a key's hashing copies without an
// allocation), "" when none is declared.
func DigestCapabilities(caps mcp.ClientCapabilities) string {
	caps = mcp.ClientCapabilities{Sampling: caps.Sampling, Elicitation: caps.Elicitation, Roots: caps.Roots}
	if caps.Sampling == nil && caps.Elicitation == nil && caps.Roots == nil {
		return ""
	}
	b, _ := json.Marshal(caps) // struct fields, always in one order; nothing in them fails to encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// relayedDigest is the digest of what the gateway declares for a client
// whose capabilities are unknown.
var relayedDigest = sync.OnceValue(func() string { return DigestCapabilities(relayedCapabilities()) })

// CapabilityDigest is what a 2026-07-28 upstream is told the client of ctx
// can answer (declaredCapabilities), as DeclaredDigest encodes it. Such an
// upstream may plan its answer by it (a fallback for a client without
// elicitation), so calls that differ in it are not the same call for
// duplicate suppression.
func CapabilityDigest(ctx context.Context) string {
	switch d := relayFrom(ctx).(type) {
	case CapabilityDigester:
		if digest, known := d.DeclaredDigest(); known {
			return digest
		}
	case CapabilityDeclarer:
		if caps, known := d.Declared(); known {
			return DigestCapabilities(caps)
		}
	}
	return relayedDigest()
}

// RelayError is a JSON-RPC error to answer an upstream's request with.
type RelayError struct {
	Code    int
	Message string
}

func (e *RelayError) Error() string { return e.Message }

type relayKey struct{}

// WithRelay returns a context whose upstream requests relay to r.
func WithRelay(ctx context.Context, r Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

func relayFrom(ctx context.Context) Relay {
	r, _ := ctx.Value(relayKey{}).(Relay)
	return r
}

// RelayFrom is the relay ctx's upstream requests and log messages go to
// (WithRelay), or nil.
func RelayFrom(ctx context.Context) Relay { return relayFrom(ctx) }

// relaySet holds the relays of the requests in flight on one connection.
//
// Which client a server-to-client request belongs to is known exactly
// only over Streamable HTTP, where it arrives on the response stream of the
// request that caused it. Over stdio and on HTTP's listening stream nothing
// ties it to a request. A request (sampling, elicitation, roots) then goes
// to the one client request in flight, and is refused when there are
// several (or none): even two calls of one client session are not
// interchangeable, since the answer is part of one call's outcome (it is
// marked interactive, and on the fast path the question travels on that
// call's own response and lives as long as that call). A log line goes to
// the one client session with requests in flight. Sending one client's
// sampling request or log line to another client would leak between
// tenants; refusing only costs the upstream an error it must handle anyway
// (the client may decline too).
type relaySet struct {
	mu sync.Mutex
	m  map[string]Relay // request id key -> relay
}

func (s *relaySet) add(key string, r Relay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]Relay{}
	}
	s.m[key] = r
}

func (s *relaySet) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// only is the relay of the one request in flight with one, or nil.
func (s *relaySet) only() Relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) != 1 {
		return nil
	}
	for _, r := range s.m {
		return r
	}
	return nil
}

// sole is the relay when every request in flight with one belongs to the
// same client session, else nil.
func (s *relaySet) sole() Relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found Relay
	for _, r := range s.m {
		if found != nil && found.Session() != r.Session() {
			return nil
		}
		found = r
	}
	return found
}

// relayedMethods are the server-to-client requests passed on to clients.
var relayedMethods = map[string]bool{
	string(mcp.MethodSamplingCreateMessage): true,
	string(mcp.MethodElicitationCreate):     true,
	string(mcp.MethodListRoots):             true,
}

// onRequest answers a request the upstream sends the gateway. mcp-go runs
// it on a goroutine of its own; ctx is the context of the gateway request
// whose response stream carried it (Streamable HTTP) or the transport's.
func (c *Conn) onRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage(`{}`)}, nil
	}
	if !relayedMethods[req.Method] {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "method not supported by the gateway", nil), nil
	}
	r := relayFrom(ctx)
	if r == nil {
		r = c.relays.only()
	}
	if r == nil {
		c.log.Info("upstream request refused: no single client request in flight to relay it to", "method", req.Method)
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_REQUEST,
			"toolgate relays this request only while exactly one client request is in flight on this server", nil), nil
	}
	params, err := json.Marshal(req.Params)
	if err != nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_PARAMS, "params cannot be encoded", nil), nil
	}
	res, err := r.Request(c.life, req.Method, params)
	if err != nil {
		code, msg := mcp.INTERNAL_ERROR, "the client did not answer"
		if re, ok := err.(*RelayError); ok {
			code, msg = re.Code, re.Message
		}
		return transport.NewJSONRPCErrorResponse(req.ID, code, msg, nil), nil
	}
	return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: res}, nil
}

// relayLog passes a log message on to the client whose request is in
// flight; with none, or several, it is dropped (see relaySet).
func (c *Conn) relayLog(params map[string]any) {
	r := c.relays.sole()
	if r == nil {
		return
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return
	}
	r.Log(raw)
}
