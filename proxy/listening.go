package proxy

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/upstreams"
)

// A Streamable HTTP client of a 2025 era receives the server's sampling
// and roots requests only on its listening stream (the GET it opens after
// initialize): mcp-go sends them nowhere else (elicitation goes on the
// POST stream of the call). mcp-go, with the event store toolgate uses,
// records such a request and writes it to whichever GET is attached at
// that instant; one that finds no GET attached is kept only for a client
// that resumes with Last-Event-ID, which a fresh client never does. Two
// windows lose a request that way:
//
//   - the call comes before the client's first GET (mcp-go's client opens
//     it asynchronously after initialize): the request waits in the
//     session's queue, and the GET that arrives starts mcp-go's pump a few
//     instructions before it attaches itself, so the pump can write the
//     request to no one (about one fresh session in sixty in our
//     end-to-end test on a busy machine);
//   - the client has no GET open at all, or between two GETs: the request
//     is written to no one, and the call waits to its deadline.
//
// So the gateway asks a session's client only while one of its GETs has
// answered 200 (mcp-go attaches before it writes the header), and waits
// for one up to listenGrace; past that, the upstream gets an error at
// once, rather than the caller a timeout.
// TestFreshSessionSamplingBeforeListeningStream keeps the first window
// reproducible against mcp-go itself.

// listenGrace bounds how long a request for a client waits for its
// listening stream. mcp-go's and the TypeScript SDK's clients open it
// within milliseconds of initialize; a client that has not opened one in
// 5 s is not going to.
const listenGrace = 5 * time.Second

// listenStreams counts each session's GET streams that are open.
type listenStreams struct {
	mu   sync.Mutex
	open map[string]int
	wake chan struct{} // closed (and dropped) on every change
}

func (l *listenStreams) change(id string, delta int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[string]int{}
	}
	if l.open[id] += delta; l.open[id] <= 0 {
		delete(l.open, id)
	}
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// await reports whether session id has a listening stream open, waiting
// for one up to grace or until ctx ends.
func (l *listenStreams) await(ctx context.Context, id string, grace time.Duration) bool {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if l.open[id] > 0 {
			l.mu.Unlock()
			return true
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// track counts the GET streams next serves: from the moment one answers
// 200 until its handler returns.
func (l *listenStreams) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		if r.Method != http.MethodGet || id == "" {
			next.ServeHTTP(w, r)
			return
		}
		lw := &listenWriter{ResponseWriter: w, opened: func() { l.change(id, 1) }}
		defer func() {
			if lw.open {
				l.change(id, -1)
			}
		}()
		next.ServeHTTP(lw, r)
	})
}

// listenWriter notes the 200 of a GET stream. It passes Flush on, and
// Unwrap lets http.ResponseController reach the connection (mcp-go sets
// write deadlines through it).
type listenWriter struct {
	http.ResponseWriter
	opened func()
	open   bool
}

func (w *listenWriter) WriteHeader(code int) {
	if code == http.StatusOK && !w.open {
		w.open = true
		w.opened()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *listenWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *listenWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// viaHTTPKey marks the context of a request that came over Streamable
// HTTP (mcp-go's own marker is unexported).
type viaHTTPKey struct{}

func withHTTP(ctx context.Context) context.Context { return context.WithValue(ctx, viaHTTPKey{}, true) }

func viaHTTP(ctx context.Context) bool { v, _ := ctx.Value(viaHTTPKey{}).(bool); return v }

// awaitListener is nil when method may be sent to the client of the
// relay now, or the error for the upstream when its listening stream did
// not open in time. Only a 2025-era HTTP session needs one, and only for
// sampling and roots.
func (r *clientRelay) awaitListener(method string) *upstreams.RelayError {
	if r.listening == nil || (method != string(mcp.MethodSamplingCreateMessage) && method != string(mcp.MethodListRoots)) {
		return nil
	}
	if r.listening.await(r.ctx, r.session, listenGrace) {
		return nil
	}
	return &upstreams.RelayError{Code: mcp.INTERNAL_ERROR,
		Message: "the client has no listening stream (HTTP GET) open to receive " + method}
}
