package testupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// markerPrefix is what both markers start with: a cheap pre-check before any JSON parsing.
var markerPrefix = []byte("__TESTUPSTREAM_")

// crafted returns the replacement response for a marker, or nil for an unknown one. prefix is what
// the line started with before the JSON ("data: " on an event stream); it starts every line of the
// replacement.
func crafted(marker string, id json.RawMessage, prefix []byte) []byte {
	if params, ok := strings.CutPrefix(marker, OrderedProgressMarker+" "); ok {
		return orderedProgress(params, id, prefix)
	}
	var result string
	switch marker {
	case GarbageMarker:
		result = `{"content":42}`
	case UnknownContentMarker:
		result = `{"content":[{"type":"hologram","data":"x"}]}`
	case WrongIDMarker:
		result = `{"content":[{"type":"text","text":"an answer under the wrong id"}]}`
		id = wrongID(id)
	case NoiseMarker:
		result = `{"content":[{"type":"text","text":"` + NoiseAnswer + `"}]}`
	case SplitMarker:
		// A raw newline inside the text: the line ends there, neither part is JSON.
		result = `{"content":[{"type":"text","text":"` + SplitAnswer[:SplitAt] + "\n" + SplitAnswer[SplitAt:] + `"}]}`
	default:
		return nil
	}
	out := make([]byte, 0, 128+len(id))
	if marker == NoiseMarker {
		out = append(out, prefix...)
		out = append(out, NoiseLine+"\n"...)
		if len(prefix) > 0 {
			out = append(out, '\n') // end the event
		}
	}
	out = append(out, prefix...)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	out = append(out, '}')
	return out
}

// orderedProgress is the replacement for OrderedProgressMarker: params is "<steps> <token JSON>".
// Each notification is a line of its own (an event of its own on an event stream), then the
// answer, "done <steps> steps". Over HTTP it is only well formed on an event stream.
func orderedProgress(params string, id json.RawMessage, prefix []byte) []byte {
	stepsText, token, ok := strings.Cut(params, " ")
	steps, err := strconv.Atoi(stepsText)
	if !ok || err != nil || !json.Valid([]byte(token)) {
		return nil
	}
	var out []byte
	for i := 1; i <= steps; i++ {
		out = append(out, prefix...)
		out = fmt.Appendf(out, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":%d,"message":"step %d of %d"}}`+"\n",
			token, i, steps, i, steps)
		if len(prefix) > 0 {
			out = append(out, '\n') // end the event
		}
	}
	out = append(out, prefix...)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	return fmt.Appendf(out, `,"result":{"content":[{"type":"text","text":"done %d steps"}]}}`, steps)
}

// wrongID is an id no client would have used for the request: a string gets a suffix, a number a
// large offset.
func wrongID(id json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(id, &s) == nil {
		b, _ := json.Marshal(s + "-wrong")
		return b
	}
	var n int64
	if json.Unmarshal(id, &n) == nil {
		return json.RawMessage(strconv.FormatInt(n+1000003, 10))
	}
	return json.RawMessage(`"wrong"`)
}

// markerAnswer reports whether line is a JSON-RPC response (bare, or as an SSE "data:" line) whose
// result content is exactly one text block, and returns the text, the id and the prefix before the
// JSON. Only such a text can be a marker, so that echoing a marker as an argument does not trigger it.
func markerAnswer(line []byte) (prefix []byte, id json.RawMessage, text string, ok bool) {
	if !bytes.Contains(line, markerPrefix) {
		return nil, nil, "", false
	}
	body := line
	if rest, isData := bytes.CutPrefix(line, []byte("data:")); isData {
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
		return nil, nil, "", false
	}
	return prefix, msg.ID, msg.Result.Content[0].Text, true
}

// rewriteLine returns the replacement of one output line (without its line ending), or nil to keep
// it (streamed answers, drip and endless, are not replaced here: see streamLine).
func rewriteLine(line []byte) []byte {
	prefix, id, text, ok := markerAnswer(line)
	if !ok {
		return nil
	}
	repl := crafted(text, id, prefix)
	if repl == nil {
		return nil
	}
	return repl
}

// streamLine returns the streamed answer that replaces one output line, or nil.
func streamLine(line []byte) *streamer {
	prefix, id, text, ok := markerAnswer(line)
	if !ok {
		return nil
	}
	return parseStreamer(prefix, id, text)
}

// lineRewriter passes newline-terminated output through to w, replacing marker responses (see
// rewriteLine and streamLine). Output without a marker is passed on in the same Write calls; a partial
// line is held until its newline arrives or flushPartial is called. afterLine, when set, sees every
// complete line once it is written. Safe for concurrent use; a streamed answer holds the lock while
// it is written (for endless: until the reader goes away).
type lineRewriter struct {
	mu        sync.Mutex
	w         io.Writer
	buf       []byte
	afterLine func(line []byte, w io.Writer)
}

func newLineRewriter(w io.Writer) *lineRewriter { return &lineRewriter{w: w} }

func (l *lineRewriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 && len(p) > 0 && p[len(p)-1] == '\n' && !bytes.Contains(p, markerPrefix) {
		// fast path: whole lines, nothing to replace (e.g. a 10 MiB big result)
		if _, err := l.w.Write(p); err != nil {
			return 0, err
		}
		l.seen(p)
		return len(p), nil
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
		end := line[len(content):] // keep the original line ending
		if repl := rewriteLine(content); repl != nil {
			out = append(out, repl...)
			out = append(out, end...)
		} else if st := streamLine(content); st != nil {
			if err := l.writeOut(out); err != nil {
				return 0, err
			}
			out = nil
			if err := st.write(l.w, end); err != nil {
				return 0, err
			}
		} else {
			out = append(out, line...)
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	if err := l.writeOut(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l *lineRewriter) writeOut(out []byte) error {
	if len(out) == 0 {
		return nil
	}
	if _, err := l.w.Write(out); err != nil {
		return err
	}
	l.seen(out)
	return nil
}

// seen hands each complete line of written output to afterLine.
func (l *lineRewriter) seen(out []byte) {
	if l.afterLine == nil {
		return
	}
	for len(out) > 0 {
		i := bytes.IndexByte(out, '\n')
		if i < 0 {
			return
		}
		l.afterLine(out[:i], l.w)
		out = out[i+1:]
	}
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

// rewriting wraps h so that marker responses in its bodies are replaced; afterLine (may be nil) sees
// every line written.
func rewriting(h http.Handler, afterLine func([]byte, io.Writer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &rewritingResponseWriter{ResponseWriter: w}
		rw.lines = newLineRewriter(w)
		rw.lines.afterLine = afterLine
		defer func() { _ = rw.lines.flushPartial() }()
		h.ServeHTTP(rw, r)
	})
}
