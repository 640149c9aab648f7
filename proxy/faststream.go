package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// callSession is the client's session as a fast call's handlers see it:
// the registered session, except that notifications sent for this call
// (an upstream's log messages) land on the call's own channel, to be
// written on the call's response rather than on whichever stream happens
// to drain the session's.
type callSession struct {
	server.ClientSession
	notes chan mcp.JSONRPCNotification
}

func (c *callSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return c.notes }

// GetLogLevel and SetLogLevel are the session's: mcp-go filters log
// messages by them.
func (c *callSession) GetLogLevel() mcp.LoggingLevel {
	if l, ok := c.ClientSession.(server.SessionWithLogging); ok {
		return l.GetLogLevel()
	}
	return mcp.LoggingLevelError
}

func (c *callSession) SetLogLevel(level mcp.LoggingLevel) {
	if l, ok := c.ClientSession.(server.SessionWithLogging); ok {
		l.SetLogLevel(level)
	}
}

// callStream is a fast call's response: plain JSON, or an event stream
// once a notification had to be written before the answer (the shapes
// mcp-go writes). Notifications are written by a goroutine of their own,
// started by the first: they arrive on an upstream connection's read loop,
// which a client that stops reading must never stall. After the answer,
// nothing more is written.
type callStream struct {
	w http.ResponseWriter

	mu       sync.Mutex
	finished bool
	queue    chan []byte   // events for the writer; nil until the first
	written  chan struct{} // closed once the writer has written them all

	upgraded bool // the writer's until written is closed, then finish's
}

// maxQueuedEvents bounds the events waiting for a client that does not
// read; more are dropped, as mcp-go drops them when a session's
// notification channel is full.
const maxQueuedEvents = 64

// notify queues the notifications waiting on notes.
func (s *callStream) notify(notes <-chan mcp.JSONRPCNotification) {
	for {
		select {
		case n := <-notes:
			s.event(n)
		default:
			return
		}
	}
}

func (s *callStream) event(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	if s.queue == nil {
		s.queue, s.written = make(chan []byte, maxQueuedEvents), make(chan struct{})
		go s.writeEvents(s.queue, s.written)
	}
	select {
	case s.queue <- data:
	default: // the client is not reading
	}
}

func (s *callStream) writeEvents(queue <-chan []byte, written chan<- struct{}) {
	defer close(written)
	for data := range queue {
		s.writeEvent(data)
	}
}

// stop ends the notifications and waits until those queued are written.
// It is idempotent; afterwards finish's goroutine is the only writer.
func (s *callStream) stop() {
	s.mu.Lock()
	queue, written := s.queue, s.written
	already := s.finished
	s.finished = true
	s.mu.Unlock()
	if queue != nil && !already {
		close(queue)
	}
	if written != nil {
		<-written
	}
}

// writeEvent writes one SSE event, upgrading the response first.
func (s *callStream) writeEvent(data []byte) {
	if !s.upgraded {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		h.Set("Cache-Control", "no-cache")
		s.w.WriteHeader(http.StatusOK)
		s.upgraded = true
	}
	buf := make([]byte, 0, len(data)+32)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, _ = s.w.Write(buf)
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// encodeAnswer is the JSON-RPC response as mcp-go encodes it.
func encodeAnswer(id json.RawMessage, res *mcp.CallToolResult, failed error) ([]byte, error) {
	if failed != nil {
		e := fastError{JSONRPC: mcp.JSONRPC_VERSION, ID: id}
		e.Error.Code, e.Error.Message = mcp.INTERNAL_ERROR, failed.Error()
		return json.Marshal(e)
	}
	if buf, ok := appendResponse(make([]byte, 0, 512), id, res); ok {
		return buf, nil
	}
	return json.Marshal(fastResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: res})
}

// appendResponse writes the response for the results the pipeline makes
// (content, an envelope as structuredContent, isError) with the bytes
// mcp-go's encoder gives them: CallToolResult.MarshalJSON builds a map, so
// its keys come sorted, and every level is compacted again. Anything else
// is left to encoding/json (ok false).
func appendResponse(buf []byte, id json.RawMessage, res *mcp.CallToolResult) ([]byte, bool) {
	if res == nil || res.Meta != nil || res.ResultType != "" || len(res.RawStructuredContent) > 0 ||
		len(res.InputRequests) > 0 || res.RequestState != "" {
		return buf, false
	}
	envelope, isRaw := res.StructuredContent.(json.RawMessage)
	var compact bytes.Buffer
	if !isRaw || json.Compact(&compact, envelope) != nil {
		return buf, false
	}
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":{"content":[`...)
	for i, c := range res.Content {
		block, err := json.Marshal(c)
		if err != nil {
			return buf, false
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, block...)
	}
	buf = append(buf, ']')
	if res.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	buf = append(buf, `,"structuredContent":`...)
	escaped := bytes.NewBuffer(buf)
	json.HTMLEscape(escaped, compact.Bytes()) // as encoding/json compacts a RawMessage
	return append(escaped.Bytes(), "}}"...), true
}

// fastResponse is mcp-go's JSON-RPC response with the client's id bytes.
type fastResponse struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  *mcp.CallToolResult `json:"result"`
}

type fastError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// finish writes the answer (a JSON-RPC error when the call panicked),
// after the notifications written before it.
func (s *callStream) finish(id json.RawMessage, res *mcp.CallToolResult, failed error) {
	data, err := encodeAnswer(id, res, failed)
	s.stop()
	if err != nil {
		http.Error(s.w, "the answer could not be encoded", http.StatusInternalServerError)
		return
	}
	if s.upgraded {
		s.writeEvent(data)
		return
	}
	s.w.Header().Set("Content-Type", "application/json")
	s.w.WriteHeader(http.StatusOK)
	_, _ = s.w.Write(append(data, '\n'))
}
