// Package listenstream works around a way mcp-go's Streamable HTTP server
// (v1.2.1, with an event store, as toolgate and its conformance upstream
// run it) loses a server-to-client request.
//
// A 2025-era client receives the server's sampling and roots requests
// only on its listening stream, the GET it opens after initialize (mcp-go
// sends elicitation on the call's POST stream when it can). mcp-go records
// such a request and writes it to whichever GET is attached at that
// instant; one that finds none attached is kept only for a client that
// resumes with Last-Event-ID, which a fresh client never does. Two windows
// lose a request that way:
//
//   - the call comes before the client's first GET (mcp-go's client opens
//     it asynchronously after initialize): the request waits in the
//     session's queue, and the GET that arrives starts mcp-go's pump a few
//     instructions before it attaches itself, so the pump can write the
//     request to no one (about one fresh session in sixty in toolgate's
//     end-to-end test on a busy machine);
//   - the client has no GET open at all, or is between two GETs.
//
// So a request is sent only while one of the session's GETs has answered
// 200 (mcp-go attaches a GET before it writes the header): Streams counts
// them, Track wraps mcp-go's handler, and Await waits for one, bounded. A
// GET that resumes a POST's stream (Last-Event-ID) is not counted: the
// event store mcp-go is given must be wrapped by Resumable for Track to
// tell (resume.go).
// TestSamplingWithoutListeningStreamIsLost reproduces mcp-go's loss
// deterministically; when it fails, mcp-go delivers such requests and this
// package can go.
package listenstream

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Grace bounds how long a request waits for the client's listening
// stream. mcp-go's and the TypeScript SDK's clients open it within
// milliseconds of initialize; a client that has not opened one in 5 s is
// not going to.
const Grace = 5 * time.Second

// Streams counts each session's open GET streams. The zero value is
// ready; it is safe for concurrent use.
type Streams struct {
	mu   sync.Mutex
	open map[string]int
	wake chan struct{} // closed (and dropped) on every change
}

func (l *Streams) change(id string, delta int) {
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

// Await reports whether session id has a listening stream open, waiting
// for one up to grace or until ctx ends.
func (l *Streams) Await(ctx context.Context, id string, grace time.Duration) bool {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		open, wake := l.state(id)
		if open > 0 {
			return true
		}
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// AwaitClosed waits until session id has no listening stream open, or ctx
// ends.
func (l *Streams) AwaitClosed(ctx context.Context, id string) bool {
	for {
		open, wake := l.state(id)
		if open == 0 {
			return true
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

// state is how many streams id has open, and a channel closed on the next
// change.
func (l *Streams) state(id string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.open[id], l.wake
}

// Track counts the listening streams next serves: from the moment a GET
// answers 200 until its handler returns. A GET with Last-Event-ID counts
// only when it resumes the listening stream, which only the ids of a
// store wrapped by Resumable tell (see resume.go). It marks the context of
// every POST, for Resumable.
func (l *Streams) Track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), postKey{}, true)))
			return
		}
		id := r.Header.Get(server.HeaderKeySessionID)
		if r.Method != http.MethodGet || id == "" || !resumesListening(r.Header.Get("Last-Event-ID")) {
			next.ServeHTTP(w, r)
			return
		}
		lw := &writer{ResponseWriter: w, opened: func() { l.change(id, 1) }}
		defer func() {
			if lw.open {
				l.change(id, -1)
			}
		}()
		next.ServeHTTP(lw, r)
	})
}

// writer notes the 200 of a GET stream. It passes Flush on, and Unwrap
// lets http.ResponseController reach the connection (mcp-go sets write
// deadlines through it).
type writer struct {
	http.ResponseWriter
	opened func()
	open   bool
}

func (w *writer) WriteHeader(code int) {
	if code == http.StatusOK && !w.open {
		w.open = true
		w.opened()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamsKey carries a *Streams in a request's context.
type streamsKey struct{}

// With puts l in ctx, for a tool handler that asks the client through
// mcp-go (see AwaitFrom).
func With(ctx context.Context, l *Streams) context.Context {
	return context.WithValue(ctx, streamsKey{}, l)
}

// AwaitFrom is Await on the Streams in ctx; with none (stdio, or a
// request mcp-go did not take over HTTP), it reports true at once.
func AwaitFrom(ctx context.Context, id string, grace time.Duration) bool {
	l, _ := ctx.Value(streamsKey{}).(*Streams)
	if l == nil {
		return true
	}
	return l.Await(ctx, id, grace)
}
