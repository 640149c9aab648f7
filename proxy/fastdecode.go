package proxy

import (
	"encoding/json"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/tracing"
)

// The fast path's contract is an allow-list: it takes a tools/call made
// only of the members below, each of the shape given, and hands anything
// else to mcp-go, which knows the whole protocol. A member not listed (a
// result beside the method, a task, a field a later revision of MCP adds)
// is never dropped silently: the request goes to mcp-go as it is. Every
// member listed is one the fast path handles exactly as mcp-go's handler
// does (FuzzFastPathMatchesMCPGo holds it to that):
//
//	jsonrpc                "2.0"
//	id                     an id mcp-go writes back with the client's bytes (plainID)
//	method                 "tools/call"
//	params.name            a string of printable ASCII without escapes
//	params.arguments       any JSON value whose numbers a float64 holds (optional)
//	params._meta           an object of the members below, each optional
//	  traceparent          a plain string: W3C trace context, read by the chain's tracing
//	  tracestate           a plain string: the same
//	  io.toolgate/idempotency-key  a plain string: duplicate suppression's key
//	  progressToken        a plain string, or an integer of up to 15 digits
//	                       without a leading zero (not -0): mcp-go decodes a
//	                       number into a float64, which holds those exactly and
//	                       writes them back as the same digits; a null, a
//	                       fraction, an exponent, a longer integer go to mcp-go
//
// A call with a progress token is taken so that its notifications/progress
// go on the call's own response, before the answer (callSession). Through
// mcp-go's handler, with the client's GET stream open, the GET stream's
// pump drains some of them from the session's channel: they arrive after
// the answer, and the client drops them (issue 17).
//
// Each member at most once (encoding/json takes the last of repeated
// members, and matches names without regard to case: both go to mcp-go),
// names and plain strings without escapes or bytes outside printable
// ASCII (their bytes are their value), the body one valid JSON object.
var (
	requestMembers = [...]string{"jsonrpc", "id", "method", "params"}
	paramsMembers  = [...]string{"name", "arguments", "_meta"}
	metaMembers    = [...]string{tracing.MetaTraceparent, tracing.MetaTracestate, dedup.MetaKey, metaProgressToken}
)

// metaProgressToken is the one member of _meta mcp-go decodes into a field
// of its own (mcp.Meta.ProgressToken) rather than into AdditionalFields.
const metaProgressToken = "progressToken"

// fastRequest is a tools/call the fast path takes, decoded once.
type fastRequest struct {
	ID   json.RawMessage // in the body
	Name string
	Args json.RawMessage // in the body; nil when absent
	Meta *mcp.Meta       // nil when absent; only allowed members: strings, and a progress token
	// modern is set for a 2026-07-28 call (decodeModern), nil for a 2025
	// one.
	modern *modernRequest
}

// params are the request's params as mcp-go's handler gets them.
func (r *fastRequest) params() mcp.CallToolParams {
	return mcp.CallToolParams{Name: r.Name, RawArguments: r.Args, Meta: r.Meta}
}

// decodeFast decodes a body the allow-list accepts, and reports false for
// any other. It is the fast path's only decoding of a call it takes.
//
// encoding/json took 5 µs and 14 allocations for a 110-byte body (its
// scanner, its state and reflection): 4% of the gateway's CPU per call.
// This takes one allocation (the tool's name), and a few more for _meta.
func decodeFast(body []byte) (fastRequest, bool) {
	var req fastRequest
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
			ok = decodeParams(&c, &req)
		}
		if more, ok = c.After(ok); !ok {
			return fastRequest{}, false
		}
	}
	if seen != 1<<len(requestMembers)-1 || !c.AtEnd() || !json.Valid(body) {
		return fastRequest{}, false
	}
	return req, true
}

// decodeParams decodes params into req.
func decodeParams(c *jsonscan.Cursor, req *fastRequest) bool {
	seen := 0
	for more := c.Open(); more; {
		var ok bool
		switch c.Member(&seen, paramsMembers[:]...) {
		case 1:
			ok = c.KnownString(&req.Name, "")
		case 2:
			req.Args = c.Value()
			ok = req.Args != nil && !c.BigNumber() // mcp-go decodes the arguments into an interface too
		case 4:
			req.Meta, ok = decodeMeta(c)
		}
		if more, ok = c.After(ok); !ok {
			return false
		}
	}
	return seen&1 != 0 && !c.Failed()
}

// decodeMeta decodes _meta as mcp-go does (mcp.Meta.UnmarshalJSON: the
// members in AdditionalFields), for the allowed members.
func decodeMeta(c *jsonscan.Cursor) (*mcp.Meta, bool) {
	meta := &mcp.Meta{}
	seen := 0
	for more := c.Open(); more; {
		bit := c.Member(&seen, metaMembers[:]...)
		var ok bool
		switch name := metaMembers[memberIndex(bit)]; {
		case bit == 0:
		case name == metaProgressToken:
			meta.ProgressToken, ok = progressToken(c.Value())
		default:
			var value string
			if ok = c.KnownString(&value, ""); ok {
				if meta.AdditionalFields == nil {
					meta.AdditionalFields = make(map[string]any, len(metaMembers))
				}
				meta.AdditionalFields[name] = value
			}
		}
		if more, ok = c.After(ok); !ok {
			return nil, false
		}
	}
	if c.Failed() {
		return nil, false
	}
	if meta.AdditionalFields == nil {
		meta.AdditionalFields = map[string]any{} // as mcp-go decodes {}
	}
	return meta, true
}

// progressToken decodes a progress token as mcp-go does (into an
// interface: a string, or a float64 for a number), for the tokens whose
// value is certain from their bytes: a string of printable ASCII without
// escapes, and the integers plainID takes (up to 15 digits, which a
// float64 holds exactly). Anything else is refused (nil, false), null
// included: mcp-go reads it as no token at all.
func progressToken(raw []byte) (mcp.ProgressToken, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		s := raw[1 : len(raw)-1]
		for _, c := range s {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				return nil, false
			}
		}
		return string(s), true
	}
	if len(raw) == 0 || raw[0] == '"' || !plainID(raw) {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}

// memberIndex is the index of a member's bit.
func memberIndex(bit int) int {
	i := 0
	for bit > 1 {
		bit >>= 1
		i++
	}
	return i
}

// sideMessage is what the fast path reads of a message it does not take
// as a call: whether it is a request or notification mcp-go notes as the
// session's activity, the call a notifications/cancelled names, and
// whether it is a client's answer to a request of toolgate's own
// (clientAsks.answer).
type sideMessage struct {
	Method string `json:"method"`
	Params *struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}
