package targets

// The lean load client (lean_wire.go, lean_http.go, lean_stdio.go).
//
// Why it exists: on the 2-core machine the harness runs on, the load
// client, the gateway and the upstream share the CPU, so every microsecond
// the client spends is taken from what is being measured. mcp-go's client
// spends about 86 µs of CPU per call over Streamable HTTP and 30 µs over
// stdio (several JSON round trips through maps, a goroutine per SSE
// stream), more than some gateways do. The lean client speaks the same
// protocol as a real MCP session (initialize, notifications/initialized,
// tools/call, DELETE at the end) but writes each request by appending
// bytes and decodes each answer once into a small struct.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// reply is the one decode of a JSON-RPC message the lean client reads: the
// answer to one of its requests, or a server's request or notification
// (Method set), whose params it never needs.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		ProtocolVersion string `json:"protocolVersion"` // initialize
		Content         []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"` // tools/call
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// request reports whether the message is a server's request (it wants an
// answer); a notification has a method and no id.
func (r *reply) request() bool { return r.Method != "" && hasID(r.ID) }

// hasID reports whether a message carries an id: absent and null are none.
func hasID(id json.RawMessage) bool { return len(id) > 0 && string(id) != "null" }

// parseID reads an integer id, the only kind the lean client sends.
func parseID(id json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil
}

// initializeBody is the handshake's request; clientInfo and the empty
// capabilities are what the mcp-go client sessions send too, so a gateway's
// fast path treats both clients' calls alike.
func initializeBody(id int64) []byte {
	b := append([]byte(nil), `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"initialize","params":{"protocolVersion":"`+protocolVersion+
		`","capabilities":{},"clientInfo":{"name":"toolgate-loadbench","version":"1"}}}`...)
	return b
}

// initializedBody is the notification that ends the handshake.
const initializedBody = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// message is the measured call's argument: unique per call (see load.Session).
func message(seq int64) string { return "ping " + strconv.FormatInt(seq, 10) }

// appendCall appends the tools/call request for tool (already a JSON
// string) with {"message": msg}; msg needs no escaping (see message).
func appendCall(b []byte, id int64, tool []byte, msg string) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"tools/call","params":{"name":`...)
	b = append(b, tool...)
	b = append(b, `,"arguments":{"message":"`...)
	b = append(b, msg...)
	return append(b, `"}}}`...)
}

// toolJSON is a tool name as a JSON string, encoded once per session.
func toolJSON(tool string) []byte {
	b, _ := json.Marshal(tool) // a string always encodes
	return b
}

// checkCall is what the mcp-go session's Call checks too: the answer is to
// this request, not a JSON-RPC error, not a tool error, and carries the
// message back.
func checkCall(r *reply, id int64, msg string) error {
	if err := checkAnswer(r, id); err != nil {
		return err
	}
	text := replyText(r)
	if r.Result.IsError {
		return fmt.Errorf("tool error: %.200s", text)
	}
	if !strings.Contains(text, msg) {
		return fmt.Errorf("answer %.200q lacks %q", text, msg)
	}
	return nil
}

// checkAnswer wants r to be the successful answer to request id.
func checkAnswer(r *reply, id int64) error {
	if got, ok := parseID(r.ID); !ok || got != id {
		return fmt.Errorf("answer to request %.40s, want %d", r.ID, id)
	}
	if r.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %.200s", r.Error.Code, r.Error.Message)
	}
	if r.Result == nil {
		return fmt.Errorf("answer to request %d has no result", id)
	}
	return nil
}

// checkInitialize wants the version every session asks for: a session in
// another one would measure the gateways in another mode.
func checkInitialize(r *reply, id int64) error {
	if err := checkAnswer(r, id); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if v := r.Result.ProtocolVersion; v != protocolVersion {
		return fmt.Errorf("initialize: the server chose protocol %q, want %q", v, protocolVersion)
	}
	return nil
}

// replyText joins the answer's text contents, as the mcp-go session's does.
func replyText(r *reply) string {
	c := r.Result.Content
	if len(c) == 1 && c[0].Type == "text" {
		return c[0].Text
	}
	var b strings.Builder
	for _, part := range c {
		if part.Type == "text" {
			b.WriteString(part.Text)
		}
	}
	return b.String()
}
