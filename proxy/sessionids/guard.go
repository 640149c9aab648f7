package sessionids

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Guard answers 404 "Session terminated" to a GET or POST naming a
// terminated session, before next sees it. mcp-go's handler asks Validate
// itself only on the POSTs it handles: it never does on a GET (which would
// open a listening stream for the ended session, or resume one with
// Last-Event-ID), and proxy's fast path answers tools/calls of a session
// this replica registered without asking it. An initialize is let through
// whatever header it carries: mcp-go mints it a new session and ignores the
// header. A DELETE goes to mcp-go, which ends a session any number of
// times (whether it ends it for every replica is MayEnd's verdict, which
// proxy's bindSession asks for before); ids that are not well formed, and
// 2026-07-28 requests (which have no sessions), go on as before. A request
// let through keeps what this replica knows of the session's owner (touch).
// A GET or POST of another principal than the session's owner, when the
// owner is known here (mayUse), is answered 404 as for an unknown session.
func (m *Manager) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		if id == "" || (r.Method != http.MethodGet && r.Method != http.MethodPost) ||
			mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		terminated, err := m.Validate(id)
		if err == nil && !terminated && !m.mayUse(r.Context(), id) {
			m.log.Warn("a request named a session another principal opened", "method", r.Method, "remote", r.RemoteAddr)
			http.Error(w, "Invalid session ID", http.StatusNotFound) // as for an unknown session: nothing is told
			return
		}
		if err != nil || !terminated || (r.Method == http.MethodPost && initializes(r)) {
			if err == nil && !terminated {
				m.touch(id)
			}
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "Session terminated", http.StatusNotFound)
	})
}

// initializes reports whether r's body is an initialize request. The body
// reads the same bytes again afterwards. It runs only for terminated ids.
func initializes(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	var msg struct {
		Method string `json:"method"`
	}
	return err == nil && json.Unmarshal(body, &msg) == nil && msg.Method == string(mcp.MethodInitialize)
}

// errReader ends a replayed body with the error its first reading met (nil:
// io.EOF).
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
