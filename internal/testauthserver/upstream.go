package testauthserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Upstream is a protected MCP server (Streamable HTTP at /mcp) that takes only access tokens as
// issues for its own URL (their audience): anything else answers 401 with a WWW-Authenticate
// challenge naming its protected-resource metadata, which it serves. Its tool whoami answers the
// token's subject; it records the subject of every request it served.
type Upstream struct {
	URL string

	mu       sync.Mutex
	subjects []string
	refused  int
}

// StartUpstream serves an Upstream whose authorization server is as, until the test ends.
func StartUpstream(t testing.TB, as *Server) *Upstream {
	t.Helper()
	u, h, handler := newUpstream(as.Issuer, as.Verify)
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		_ = h.Shutdown(context.Background())
		srv.Close()
	})
	u.URL = srv.URL + "/mcp"
	return u
}

// newUpstream is an Upstream whose tokens verify checks, and its handlers.
func newUpstream(issuer string, verify func(token, audience string) (string, error)) (*Upstream, *server.StreamableHTTPServer, http.Handler) {
	type subKey struct{}
	s := server.NewMCPServer("protected", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("whoami", mcp.WithReadOnlyHintAnnotation(true)), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sub, _ := ctx.Value(subKey{}).(string)
		return mcp.NewToolResultText(sub), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		sub, _ := verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), resourceOf(r))
		return context.WithValue(ctx, subKey{}, sub)
	}))
	u := &Upstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": resourceOf(r), "authorization_servers": []string{issuer}})
	})
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sub, err := verify(tok, resourceOf(r))
		if err != nil {
			u.mu.Lock()
			u.refused++
			u.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "a token for this server is required", http.StatusUnauthorized)
			return
		}
		u.mu.Lock()
		u.subjects = append(u.subjects, sub)
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	return u, h, mux
}

// resourceOf is the server's own resource identifier: its /mcp URL.
func resourceOf(r *http.Request) string { return "http://" + r.Host + "/mcp" }

// Subjects are the subjects of the requests served, in order.
func (u *Upstream) Subjects() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.subjects)
}

// Refused is the number of requests refused for want of a good token.
func (u *Upstream) Refused() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.refused
}
