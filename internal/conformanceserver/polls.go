package conformanceserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// SEP-1699 polling. mcp-go can resume a stream from its event store, but a handler has no way to
// end its own POST stream early, nor does mcp-go send the priming event (an event ID with empty
// data, plus a retry field) that lets a client resume a stream which has carried nothing yet. So
// a pollable POST runs the mcp-go handler on a writer of our own; when the tool calls
// closeSSEStream, that writer sends the priming event, ends the HTTP response, and from then on
// captures what mcp-go writes. The client's GET with the priming event's ID receives the capture
// once the call is over.

const (
	pollIDPrefix = "poll-"
	// pollRetry is the reconnection delay announced in the priming event: short, since the answer
	// is usually ready within reconnectWork.
	pollRetry = 100 * time.Millisecond
	// parkTTL bounds how long a call closed for polling may run and wait to be collected.
	parkTTL = 2 * time.Minute
)

type streamCloserKey struct{}

// closeSSEStream ends the SSE stream of the call ctx belongs to, if its transport supports that
// (HTTPHandler, before protocol 2026-07-28), and reports whether it did. The call goes on; its
// answer is held for the client's resume.
func closeSSEStream(ctx context.Context) bool {
	closer, ok := ctx.Value(streamCloserKey{}).(func() bool)
	return ok && closer()
}

func isPollEventID(id string) bool { return strings.HasPrefix(id, pollIDPrefix) }

// parkedCall is a call whose stream was closed: it runs on, writing into out.
type parkedCall struct {
	session string
	out     *detachableWriter
	done    chan struct{} // closed when the handler has returned
	cancel  context.CancelFunc
	expiry  *time.Timer
}

// polls holds the parked calls by the ID of their priming event.
type polls struct {
	mu     sync.Mutex
	calls  map[string]*parkedCall
	closed bool // after close, calls answer on their own stream: nothing would collect them
}

func newPolls() *polls { return &polls{calls: map[string]*parkedCall{}} }

// serve runs one POST through next on a detachable writer and returns when the handler has
// finished or has closed its stream.
func (p *polls) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	out := newDetachableWriter(w)
	// The handler may outlive this ServeHTTP once it closes its stream, so its context must not
	// end with the response; until then it still ends when the client goes away.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), func() {
		if !out.isDetached() {
			cancel()
		}
	})
	call := &parkedCall{session: r.Header.Get(server.HeaderKeySessionID), out: out, done: make(chan struct{}), cancel: cancel}
	var once sync.Once
	parked := false
	ctx = context.WithValue(ctx, streamCloserKey{}, func() bool {
		once.Do(func() { parked = p.park(call) }) // a stream closes once; later calls learn how it went
		return parked
	})
	go func() {
		defer close(call.done)
		defer cancel()
		defer stop()
		next.ServeHTTP(out, r.WithContext(ctx))
	}()
	select {
	case <-call.done:
	case <-out.detached:
	}
}

// park registers call under a fresh event ID and closes its stream with the priming event.
// Registration comes first: the client may resume as soon as the stream ends.
func (p *polls) park(call *parkedCall) bool {
	id := pollIDPrefix + rand.Text()
	call.expiry = time.AfterFunc(parkTTL, func() {
		if p.take(id) != nil {
			call.cancel()
		}
	})
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.calls[id] = call
	}
	p.mu.Unlock()
	if closed || !call.out.detach(id, pollRetry) {
		call.expiry.Stop()
		p.take(id)
		return false
	}
	return true
}

func (p *polls) get(id string) *parkedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

func (p *polls) take(id string) *parkedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	call := p.calls[id]
	delete(p.calls, id)
	return call
}

// resume answers a GET carrying a priming event's ID: it waits for the call to finish and replays
// everything the call wrote after its stream was closed. A client that leaves early may retry.
func (p *polls) resume(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Last-Event-ID")
	call := p.get(id)
	if call == nil || call.session != r.Header.Get(server.HeaderKeySessionID) {
		http.Error(w, "Unknown Last-Event-ID", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush() // a failed flush shows up as a failed write below
	select {
	case <-call.done:
	case <-r.Context().Done():
		return
	}
	if _, err := w.Write(call.out.captured()); err != nil {
		return // the client left: keep the call for its next attempt
	}
	if p.take(id) != nil {
		call.expiry.Stop()
	}
}

// close cancels every parked call and waits (at most until ctx ends) for them to return.
func (p *polls) close(ctx context.Context) {
	p.mu.Lock()
	calls := p.calls
	p.calls, p.closed = map[string]*parkedCall{}, true
	p.mu.Unlock()
	for _, call := range calls {
		call.expiry.Stop()
		call.cancel()
	}
	for _, call := range calls {
		select {
		case <-call.done:
		case <-ctx.Done():
			return
		}
	}
}

// detachableWriter passes a handler's output to the real response until detach; after that the
// real response is over and the output is captured instead. It keeps its own header map so that
// the handler never touches the real one concurrently with detach or after the response ended.
type detachableWriter struct {
	mu       sync.Mutex
	real     http.ResponseWriter
	hdr      http.Header
	started  bool          // the real response status has been written
	gone     bool          // detached: output goes to buf
	detached chan struct{} // closed on detach
	bufType  string        // Content-Type of the captured output
	buf      bytes.Buffer
}

func newDetachableWriter(w http.ResponseWriter) *detachableWriter {
	return &detachableWriter{real: w, hdr: http.Header{}, detached: make(chan struct{})}
}

func (d *detachableWriter) Header() http.Header { return d.hdr }

func (d *detachableWriter) WriteHeader(code int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeHeaderLocked(code)
}

func (d *detachableWriter) writeHeaderLocked(code int) {
	switch {
	case d.gone:
		if d.bufType == "" {
			d.bufType = d.hdr.Get("Content-Type")
		}
	case !d.started:
		maps.Copy(d.real.Header(), d.hdr)
		d.real.WriteHeader(code)
		d.started = true
	}
}

func (d *detachableWriter) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeHeaderLocked(http.StatusOK) // no-op once a status was written
	if d.gone {
		return d.buf.Write(p)
	}
	return d.real.Write(p)
}

// Flush makes the writer an http.Flusher, without which mcp-go would not stream at all.
func (d *detachableWriter) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started && !d.gone {
		_ = http.NewResponseController(d.real).Flush() // the next write reports a dead client
	}
}

func (d *detachableWriter) isDetached() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gone
}

// detach ends the real response with a priming event carrying eventID. It refuses once the
// response has started (mcp-go already streams or answered): the priming event must come first.
func (d *detachableWriter) detach(eventID string, retry time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return false
	}
	h := d.real.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	d.real.WriteHeader(http.StatusOK)
	// A write error means the client is gone already; it can still resume, so detach regardless.
	_, _ = fmt.Fprintf(d.real, "id: %s\nretry: %d\ndata: \n\n", eventID, retry.Milliseconds())
	_ = http.NewResponseController(d.real).Flush()
	d.started, d.gone = true, true
	close(d.detached)
	return true
}

// captured returns the output written after detach as SSE: mcp-go's own events verbatim, or a
// plain JSON answer wrapped into one event.
func (d *detachableWriter) captured() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if mt, _, _ := mime.ParseMediaType(d.bufType); mt == "text/event-stream" {
		return bytes.Clone(d.buf.Bytes())
	}
	body := strings.TrimSpace(d.buf.String())
	if body == "" {
		return nil
	}
	return []byte("data: " + strings.ReplaceAll(body, "\n", "\ndata: ") + "\n\n")
}
