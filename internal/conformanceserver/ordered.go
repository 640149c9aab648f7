package conformanceserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The suite's reference server writes a tool's notifications on the stream of the request they
// belong to, each before the next and all before the answer, with no pause (the TypeScript SDK's
// `await sendNotification`). mcp-go does neither: it queues a handler's notifications on the
// session's one channel, which a 2025-era client's GET stream drains as well as the call's POST
// (mcp-go trap 11 in docs/design.md), and writes them from another goroutine than the answer, so the
// last one can follow the answer or be lost (trap 5). A client of the reference server gets them
// all on the call's stream before its answer; a gateway in front of this server must deliver that,
// and a server that only gets them there by luck or by pausing would hide a gateway that does not.
// So the notifying tools write their notifications themselves, through a notifier the transport
// puts in the call's context: on the POST's own event stream (HTTP) or on stdout (stdio), in order,
// before the handler returns and mcp-go writes the answer.

type notifierKey struct{}

// notifier writes one JSON-RPC message to the client on the stream of the request in flight.
type notifier func(msg []byte) error

func withNotifier(ctx context.Context, n notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

// notify sends a notification to the client on the call's own stream before the call's answer.
// Without a notifier in ctx (in-process, or an HTTP host other than HTTPHandler) it falls back to
// mcp-go's session channel, with the ordering mcp-go gives.
func notify(ctx context.Context, s *server.MCPServer, method string, params map[string]any) error {
	n, ok := ctx.Value(notifierKey{}).(notifier)
	if !ok {
		return s.SendNotificationToClient(ctx, method, params)
	}
	if server.ClientSessionFromContext(ctx) == nil {
		return server.ErrNotificationNotInitialized
	}
	msg, err := json.Marshal(mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
	if err != nil {
		return err
	}
	return n(msg)
}

// logLevelAllows reports whether a log message at level goes to the client, by the level the
// client set with logging/setLevel or, from 2026-07-28, asked for in the request (none: no logs).
// It is the filter of mcp-go's SendLogMessageToClient, which notify does not go through.
func logLevelAllows(ctx context.Context, level mcp.LoggingLevel) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.LogLevel != "" && level.ShouldSendTo(info.LogLevel)
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); ok {
		return level.ShouldSendTo(s.GetLogLevel())
	}
	return true
}

// lockedWriter serialises whole-message writes to stdout: mcp-go's stdio server writes each
// message in one Write, and a tool's notifications go through the same lock.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stdioNotifier writes a message as a line of stdout.
func (l *lockedWriter) notify(msg []byte) error {
	_, err := l.Write(append(msg, '\n'))
	return err
}

// orderedPOSTs gives each POST's handler a notifier that writes on that POST's own response.
func orderedPOSTs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		sw := &streamWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(withNotifier(r.Context(), sw.notify)))
	})
}

// errAnswered: the response was already sent as plain JSON, so nothing can precede the answer.
var errAnswered = errors.New("the response is already written as application/json")

// streamWriter is a POST's response on which a tool may write notifications: the first one turns
// the response into an event stream, and an application/json answer mcp-go writes after it (it
// cannot know) becomes the stream's last event.
type streamWriter struct {
	http.ResponseWriter
	mu        sync.Mutex
	started   bool // the status line is written
	stream    bool // the response is an event stream
	converted bool // notify started the stream: JSON that mcp-go writes is wrapped into events
}

func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked(code)
}

func (w *streamWriter) startLocked(code int) {
	if w.started {
		return
	}
	w.started = true
	w.stream = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked(http.StatusOK)
	if w.converted && len(p) > 0 && (p[0] == '{' || p[0] == '[') {
		if _, err := w.ResponseWriter.Write(messageEvent(bytes.TrimSpace(p))); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *streamWriter) notify(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.startLocked(http.StatusOK)
		w.converted = true
	}
	if !w.stream {
		return errAnswered
	}
	if _, err := w.ResponseWriter.Write(messageEvent(msg)); err != nil {
		return err
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush makes the writer an http.Flusher, without which mcp-go would not stream at all.
func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// messageEvent is msg (one line of JSON) as an event of mcp-go's shape.
func messageEvent(msg []byte) []byte {
	out := make([]byte, 0, len(msg)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	return append(out, "\n\n"...)
}
