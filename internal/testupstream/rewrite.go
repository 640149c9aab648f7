package testupstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// markerPrefix is what both markers start with: a cheap pre-check before any JSON parsing.
var markerPrefix = []byte("__TESTUPSTREAM_")

// crafted returns the replacement response for a marker, or nil for an unknown one.
func crafted(marker string, id json.RawMessage) []byte {
	var result string
	switch marker {
	case GarbageMarker:
		result = `{"content":42}`
	case UnknownContentMarker:
		result = `{"content":[{"type":"hologram","data":"x"}]}`
	default:
		return nil
	}
	out := make([]byte, 0, 64+len(id))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	out = append(out, '}')
	return out
}

// rewriteLine returns the replacement of one output line (without its line ending), or nil to keep
// it. A line is replaced only when it is a JSON-RPC response (bare, or as an SSE "data:" line) whose
// result content is exactly one text block holding a marker, so that echoing a marker as an
// argument does not trigger it.
func rewriteLine(line []byte) []byte {
	if !bytes.Contains(line, markerPrefix) {
		return nil
	}
	prefix, body := []byte(nil), line
	if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		n := len("data:")
		if len(rest) > 0 && rest[0] == ' ' {
			n++
		}
		prefix, body = line[:n], line[n:]
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Result == nil || len(msg.ID) == 0 ||
		len(msg.Result.Content) != 1 || msg.Result.Content[0].Type != "text" {
		return nil
	}
	repl := crafted(msg.Result.Content[0].Text, msg.ID)
	if repl == nil {
		return nil
	}
	return append(append([]byte(nil), prefix...), repl...)
}

// lineRewriter passes newline-terminated output through to w, replacing marker responses (see
// rewriteLine). Output without a marker is passed on in the same Write calls; a partial line is
// held until its newline arrives or flushPartial is called. Safe for concurrent use.
type lineRewriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func newLineRewriter(w io.Writer) *lineRewriter { return &lineRewriter{w: w} }

func (l *lineRewriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 && len(p) > 0 && p[len(p)-1] == '\n' && !bytes.Contains(p, markerPrefix) {
		return l.w.Write(p) // fast path: whole lines, nothing to replace (e.g. a 10 MiB big result)
	}
	l.buf = append(l.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i+1]
		content := bytes.TrimRight(line[:i], "\r")
		if repl := rewriteLine(content); repl != nil {
			out = append(out, repl...)
			out = append(out, line[len(content):]...) // keep the original line ending
		} else {
			out = append(out, line...)
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flushPartial writes out a held partial line unchanged.
func (l *lineRewriter) flushPartial() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = nil
	return err
}

// rewritingResponseWriter runs an HTTP response body through a lineRewriter. Both mcp-go HTTP
// servers write each message as whole lines in one Write (json.Encoder's "...\n" for
// application/json, "event: message\ndata: ...\n\n" for event streams), so streaming still works.
type rewritingResponseWriter struct {
	http.ResponseWriter
	lines *lineRewriter
}

func (w *rewritingResponseWriter) Write(p []byte) (int, error) { return w.lines.Write(p) }

func (w *rewritingResponseWriter) WriteHeader(code int) {
	w.Header().Del("Content-Length") // a replacement changes the length
	w.ResponseWriter.WriteHeader(code)
}

func (w *rewritingResponseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *rewritingResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// rewriting wraps h so that marker responses in its bodies are replaced.
func rewriting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &rewritingResponseWriter{ResponseWriter: w}
		rw.lines = newLineRewriter(w)
		defer func() { _ = rw.lines.flushPartial() }()
		h.ServeHTTP(rw, r)
	})
}
