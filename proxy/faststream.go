package proxy

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// callSession is the client's session as a fast call's handlers see it:
// the registered session, except that notifications sent for this call
// (an upstream's log messages and progress) land on the call's own
// channel, to be written on the call's response rather than on whichever
// stream happens to drain the session's (the GET stream's pump, another
// request's forwarder).
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
// once a notification or a request to the client had to be written before
// the answer (the shapes mcp-go writes). Notifications are written by a goroutine of their own,
// started by the first: they arrive on an upstream connection's read loop,
// which a client that stops reading must never stall. After the answer,
// nothing more is written.
type callStream struct {
	w    http.ResponseWriter
	asks *clientAsks // where a request to the client written here waits for its answer

	mu       sync.Mutex
	finished bool
	queue    chan []byte   // events for the writer; nil until the first
	written  chan struct{} // closed once the writer has written them all

	upgraded bool // the writer's until written is closed, then finish's
}

// maxQueuedEvents bounds the events waiting for a client that does not
// read; more are dropped, as mcp-go drops them when a session's
// notification channel (of 100) is full.
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

func (s *callStream) event(v any) { s.send(v) }

// send queues one message to be written, and reports whether it was (not
// after the answer, nor past maxQueuedEvents waiting).
func (s *callStream) send(v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return false
	}
	if s.queue == nil {
		s.queue, s.written = make(chan []byte, maxQueuedEvents), make(chan struct{})
		go s.writeEvents(s.queue, s.written)
	}
	select {
	case s.queue <- data:
		return true
	default: // the client is not reading
		return false
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
		startEventStream(s.w)
		s.upgraded = true
	}
	_, _ = s.w.Write(appendEvent(make([]byte, 0, len(data)+32), data))
	if fl, ok := s.w.(http.Flusher); ok {
		fl.Flush()
	}
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
	writeJSONAnswer(s.w, data)
}
