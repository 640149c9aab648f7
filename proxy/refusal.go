package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pipeline"
)

// relayRefusals answers a 2026-07-28 tools/call that its upstream refused
// at the protocol level (pipeline.ProtocolRefusal: -32021, a client
// capability the tool needs was not declared) as that era prescribes: HTTP
// 400 with the same JSON-RPC error (code, message sanitised,
// data.requiredCapabilities), not a 200 carrying a tool_failed result. As
// answerScopeChallenges, it puts a slot on the request's context, which the
// execute link fills, and decides at the response's first write: a JSON
// answer with status 200 and a refusal noted is held, and replaced by the
// error under the answer's own id once the handler returns. It works the
// same for the fast path and mcp-go's handler. A response already started
// as an event stream (progress sent before the refusal) cannot change: it
// carries the tool_failed envelope, as stdio and 2025-era requests do.
func relayRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, slot := pipeline.WithRefusalSlot(r.Context())
		rw := &refusalWriter{ResponseWriter: w, slot: slot}
		next.ServeHTTP(rw, r.WithContext(ctx))
		rw.finish()
	})
}

// refusalWriter holds a JSON answer back when a refusal was noted.
type refusalWriter struct {
	http.ResponseWriter
	slot    *pipeline.RefusalSlot
	decided bool // the first write happened
	held    bool // and it is held: finish writes the refusal instead
	status  int
	body    bytes.Buffer
}

func (w *refusalWriter) WriteHeader(status int) {
	if w.start(status) {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	if !w.start(http.StatusOK) {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush streams what the handler wrote; nothing while the answer is held.
func (w *refusalWriter) Flush() {
	if !w.start(http.StatusOK) {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// start decides, at the response's first write, whether it is held. It
// reports whether the handler's writes go through.
func (w *refusalWriter) start(status int) bool {
	if !w.decided {
		w.decided, w.status = true, status
		w.held = status == http.StatusOK && w.slot.Refusal() != nil && jsonContent(w.Header().Get("Content-Type"))
	}
	return !w.held
}

// finish writes the held answer: the refusal under the answer's id with
// status 400, or, when the answer names no id (not a JSON-RPC response),
// the answer as it was.
func (w *refusalWriter) finish() {
	if !w.held {
		return
	}
	var answer struct {
		ID json.RawMessage `json:"id"`
	}
	data, err := []byte(nil), json.Unmarshal(w.body.Bytes(), &answer)
	if err == nil && len(answer.ID) > 0 {
		data, err = json.Marshal(refusalAnswer(answer.ID, w.slot.Refusal()))
	}
	if err != nil || len(answer.ID) == 0 {
		w.ResponseWriter.WriteHeader(w.status)
		_, _ = w.ResponseWriter.Write(w.body.Bytes())
		return
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(http.StatusBadRequest)
	_, _ = w.ResponseWriter.Write(append(data, '\n'))
}

// refusalError is the JSON-RPC error response relaying r.
type refusalError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int          `json:"code"`
		Message string       `json:"message"`
		Data    *refusalData `json:"data"`
	} `json:"error"`
}

type refusalData struct {
	RequiredCapabilities *mcp.ClientCapabilities `json:"requiredCapabilities"`
}

func refusalAnswer(id json.RawMessage, r *pipeline.ProtocolRefusal) refusalError {
	e := refusalError{JSONRPC: mcp.JSONRPC_VERSION, ID: id}
	e.Error.Code, e.Error.Message = r.Code, r.Message
	// The schema requires data.requiredCapabilities: an upstream that named
	// none gets an empty ClientCapabilities object rather than none.
	caps := r.RequiredCapabilities
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	e.Error.Data = &refusalData{RequiredCapabilities: caps}
	return e
}
