package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/jsonwrite"
)

// This file holds everything the fast path (fastCalls) copies from mcp-go:
// its answers must be the ones mcp-go's handler gives, so what mcp-go
// checks and writes privately is restated here, and only here. Each piece
// names what it mirrors, in the version below. The stdio fast path
// (stdioFast) takes the same requests (decodeFast) and writes the same
// answers (encodeAnswer) in place of mcp-go's stdio server
// (server/stdio.go: processMessage, writeResponse), so what is said below
// of hooks and of HandleMessage holds for it too: a hook added around
// tools/call must be added to both fast paths, or make them leave the call
// to mcp-go.
//
// When go.mod moves to another mcp-go version, TestMCPGoMirrorVersion
// fails until someone has read that version's server/streamable_http.go
// (handlePost, writeSSEEvent), server/request_handler.go (HandleMessage,
// the tools/call case), server/server.go (handleToolCall, WithRecovery,
// createResponse), server/session.go
// (SendNotificationToClient), server/http_localhost.go,
// server/streamable_http_modern.go (validateModernRequest),
// server/protocol.go (extractRequestProtocolInfo), server/response.go
// (decorateResponse, validateStandardHeadersForMessage), server/mrtr.go
// (resolveMultiRoundTrip), mcp/types.go (Meta.UnmarshalJSON: the
// progress token) and mcp/tools.go (CallToolParams,
// CallToolResult.MarshalJSON) against this file and fastmodern.go, fixed
// what changed, run FuzzFastPathMatchesMCPGo for a while, and
// updated mirroredMCPGo.
//
// What mcp-go does that the fast path does not copy, because it never
// applies to a call the fast path takes:
//
//   - a body that is not one JSON object, a response (result or error), a
//     notification, a batch: decodeFast's allow-list refuses them (a
//     client's response to a request a fast call sent it is taken, and
//     acknowledged as handleSamplingResponse does, 202 and no body; mcp-go
//     never sent that request, so it has no use for the response);
//   - a 2025-era request whose _meta names a 2026-07-28 protocol version
//     (mcp-go answers it with a header mismatch): decodeFast's allow-list
//     refuses it. A 2026-07-28 request (its header says so) is taken by
//     takeModern, which leaves to mcp-go every request one of mcp-go's
//     checks refuses (validateModernRequest, extractRequestProtocolInfo,
//     the hooks, validateStandardHeadersForMessage), and whose answer
//     mcp-go's decorateResponse changes as decorateModern does;
//   - tasks, multi round-trip fields: not on the allow-list;
//   - hooks: toolgate registers only routeUnknown (callFrom reads its note
//     the same on both paths) and interceptSubscription (for
//     resources/subscribe) around tools/call; no tool filter, input
//     validator or middleware other than WithRecovery (runFast) is set;
//   - tracing spans of mcp-go's own (NewServer sets no tracer);
//   - the session's idle clock (touchSession): private, so mcp-go is sent
//     a ping on a session at least every quarter of its TTL (keepAlive).
const mirroredMCPGo = "v1.2.1"

// jsonContent is handlePost's content type check (mime.ParseMediaType,
// application/json), without parsing the usual exact value.
func jsonContent(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	return err == nil && mediaType == "application/json"
}

// legacyVersion reports a MCP-Protocol-Version header under which
// handlePost serves a session's request the 2025 way: none at all (a
// 2025-03-26 client sends none, and the specification says to assume that
// version), or a version mcp.IsValidProtocolVersion knows
// (rejectUnsupportedProtocolVersion refuses others), not a 2026-07-28 one
// (detectRequestEra; a body that declares 2026-07-28 in _meta without the
// header is outside the fast path's allow-list, so mcp-go refuses it).
// Without the header taken here, such a client's every call went through
// mcp-go's handler: p50 at one caller 0.83-0.90 ms against 0.60-0.64 with
// the header (the echo upstream, this 2-core host).
func legacyVersion(version string) bool {
	return version == "" || (mcp.IsValidProtocolVersion(version) && !mcp.IsModernProtocol(version))
}

// A session the fast path takes is one mcp-go registered (the
// AddOnRegisterSession hook, removed by AddOnUnregisterSession): handlePost
// finds it by its Mcp-Session-Id, its session id manager validates that id
// (it minted it), and its tools/call runs with that session in the
// context, which is what the fast path puts there (callSession).

// dnsRebinding is ServeHTTP's rejectDNSRebinding (a loopback listener
// reached under a Host that is not loopback): such a request goes to
// mcp-go, which refuses it.
func dnsRebinding(r *http.Request) bool {
	if loopbackHost(r.Host) {
		return false // the usual case, decided without the listener's address
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopbackHost(local.String())
}

// loopbackHost is http_localhost.go's isLoopbackHost.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// plainID accepts the ids HandleMessage writes back with the very bytes
// the client sent: it decodes an id into an interface and createResponse
// encodes it again with encoding/json. That leaves a string of printable
// ASCII alone unless it holds a quote, a backslash, or the <, >, & it
// escapes for HTML; a number becomes a float64, which holds an integer of
// up to 15 digits exactly and writes it back as those digits (-0, 1.0 or
// 1e3 would come back otherwise).
func plainID(id json.RawMessage) bool {
	s := string(id)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		for i := 1; i < len(s)-1; i++ {
			if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 {
				return false
			}
		}
		return true
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 15 || (digits[0] == '0' && s != "0") {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// panicError is WithRecovery's error for a handler that panicked, which
// handleToolCall answers with INTERNAL_ERROR (handlerError), minus the
// panic's text: mcp-go appends it (": %v"), the fast path does not send
// it to the client. The chain recovers its links' panics itself, so this
// is only ever the chain's own.
func panicError(tool string) error {
	return fmt.Errorf("panic recovered in %s tool handler", tool)
}

// encodeAnswer is the JSON-RPC response handlePost writes for a tools/call
// (createResponse, or the requestError's JSONRPCError when the handler
// failed), as json.NewEncoder encodes it, without the newline.
func encodeAnswer(id json.RawMessage, res *mcp.CallToolResult, failed error) ([]byte, error) {
	if failed != nil {
		e := fastError{JSONRPC: mcp.JSONRPC_VERSION, ID: id}
		e.Error.Code, e.Error.Message = mcp.INTERNAL_ERROR, failed.Error()
		return json.Marshal(e)
	}
	if buf, ok := appendResponse(nil, id, res); ok { // it sizes the buffer once
		return buf, nil
	}
	return json.Marshal(fastResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: res})
}

// appendResponse writes the response for the results the chain makes
// (content, an envelope as structuredContent, isError, and for a 2026-07-28
// call resultType and _meta) with the bytes mcp-go's encoder gives them:
// CallToolResult.MarshalJSON builds a map, so its keys come sorted, and
// every level is compacted again. Anything else is left to encoding/json
// (ok false). Besides the instructions, it saves memory on large results:
// through the map, a 5 MiB text became ~35 MB of buffers, each level
// copying and growing the one below; here the buffer is sized once.
func appendResponse(buf []byte, id json.RawMessage, res *mcp.CallToolResult) ([]byte, bool) {
	if res == nil || len(res.RawStructuredContent) > 0 || len(res.InputRequests) > 0 || res.RequestState != "" {
		return buf, false
	}
	env, trusted := envelope.RawOf(res.StructuredContent)
	if len(env) == 0 {
		return buf, false
	}
	buf = slices.Grow(buf, 256+len(id)+len(env)+contentSize(res.Content))
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":{`...)
	if res.Meta != nil {
		meta, err := json.Marshal(res.Meta)
		if err != nil {
			return buf, false
		}
		buf = append(append(buf, `"_meta":`...), meta...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			buf = append(buf, ',')
		}
		if text, plain := c.(mcp.TextContent); plain && text.Annotations == nil && text.Meta == nil && text.Type == mcp.ContentTypeText {
			buf = jsonwrite.AppendString(append(buf, `{"type":"text","text":`...), text.Text)
			buf = append(buf, '}')
			continue
		}
		var ok bool
		if buf, ok = appendJSON(buf, c); !ok {
			return buf, false
		}
	}
	buf = append(buf, ']')
	if res.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	if res.ResultType != "" {
		var ok bool
		if buf, ok = appendJSON(append(buf, `,"resultType":`...), res.ResultType); !ok {
			return buf, false
		}
	}
	buf = append(buf, `,"structuredContent":`...)
	if trusted {
		return append(append(buf, env...), "}}"...), true // already as encoding/json writes it
	}
	buf, err := jsonwrite.AppendRaw(buf, env) // as encoding/json writes a RawMessage
	if err != nil {
		return buf, false
	}
	return append(buf, "}}"...), true
}

// appendJSON appends v as encoding/json writes it, encoded straight into
// buf's spare room (json.Encoder appends a newline, cut here).
func appendJSON(buf []byte, v any) ([]byte, bool) {
	w := bytes.NewBuffer(buf)
	if json.NewEncoder(w).Encode(v) != nil {
		return buf, false
	}
	out := w.Bytes()
	return out[:len(out)-1], true
}

// contentSize is about how many bytes the content blocks take encoded
// (exactly, for a text): the room appendResponse reserves, so that a large
// text is not copied at each doubling of the buffer, nor given room it
// will not use (a 5 MiB text and its envelope took a 15 MiB buffer for a
// 10 MiB answer when this was a guess).
func contentSize(content []mcp.Content) int {
	n := 0
	for _, c := range content {
		switch c := c.(type) {
		case mcp.TextContent:
			n += len(`{"type":"text","text":},`) + jsonwrite.StringLen(c.Text)
		case mcp.ImageContent:
			n += len(c.Data) + 128
		default:
			n += 256
		}
	}
	return n
}

// fastResponse is mcp.JSONRPCResponse with the client's id bytes.
type fastResponse struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  *mcp.CallToolResult `json:"result"`
}

// fastError is mcp.JSONRPCError, without data, with the client's id bytes.
type fastError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeJSONAnswer is handlePost's plain answer: application/json, 200, the
// encoded response and the newline json.Encoder ends it with.
func writeJSONAnswer(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(data, '\n'))
}

// startEventStream is handlePost's upgrade of a POST's response to an
// event stream, before its first event.
func startEventStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// appendEvent is writeSSEEvent's event for one encoded message. (With an
// event store, as toolgate has, mcp-go also writes an id line: the fast
// path's streams are not resumable.)
func appendEvent(buf, data []byte) []byte {
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// decorateModern is decorateResponse's result for a 2026-07-28 tools/call:
// resultType "complete" unless the handler set one (input_required), and
// the server's identity in _meta unless it is there. mcp-go writes them on
// the handler's result itself; this writes them on a copy, since duplicate
// suppression may hand one result to several calls.
func (s *Server) decorateModern(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	out := *res
	if out.ResultType == "" {
		out.ResultType = mcp.ResultTypeComplete
	}
	meta := &mcp.Meta{}
	if res.Meta != nil {
		meta.ProgressToken, meta.AdditionalFields = res.Meta.ProgressToken, maps.Clone(res.Meta.AdditionalFields)
	}
	if meta.ServerInfo() == nil {
		meta.SetServerInfo(s.identity)
	}
	out.Meta = meta
	return &out
}
