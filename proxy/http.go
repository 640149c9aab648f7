package proxy

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Authenticator maps a presented bearer credential to a principal.
type Authenticator interface {
	Principal(bearer string) (string, bool)
}

// HTTPOptions configure the Streamable HTTP endpoint. Zero values are not
// defaults here: the caller passes resolved config values.
type HTTPOptions struct {
	Auth               Authenticator
	AnonymousPrincipal string // non-empty: requests without a credential act as this principal (operator opt-in)
	MaxBodyBytes       int64  // request body cap
	SessionIdleTTL     time.Duration
	AllowedOrigins     []string // accepted besides loopback origins
	Log                *slog.Logger
}

// HTTPEndpoint is the Streamable HTTP endpoint. Shutdown stops its session
// reaper and closes its sessions.
type HTTPEndpoint struct {
	http.Handler
	mcp *server.StreamableHTTPServer
}

// Shutdown ends every session; call it after the http.Server stopped.
func (e *HTTPEndpoint) Shutdown(ctx context.Context) error { return e.mcp.Shutdown(ctx) }

// HTTPHandler serves MCP Streamable HTTP at /mcp. The order of checks is
// deliberate: Origin (DNS rebinding) and authentication come before any
// body is read or any MCP processing happens; the body is capped.
func (s *Server) HTTPHandler(o HTTPOptions) *HTTPEndpoint {
	mcpHTTP := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdleTTL(o.SessionIdleTTL),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return WithPrincipal(ctx, PrincipalFrom(r.Context()))
		}),
		server.WithStreamableHTTPLogger(libraryLogger(o.Log)),
	)
	var h http.Handler = http.MaxBytesHandler(mcpHTTP, o.MaxBodyBytes)
	h = authenticate(h, o)
	h = checkOrigin(h, o.AllowedOrigins)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	return &HTTPEndpoint{Handler: mux, mcp: mcpHTTP}
}

// authenticate resolves the bearer key to a principal or answers 401 with
// WWW-Authenticate, as RFC 6750 and the MCP authorization spec ask.
func authenticate(next http.Handler, o HTTPOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, hasToken := bearer(r)
		var principal string
		switch {
		case hasToken:
			p, ok := o.Auth.Principal(token)
			if !ok {
				unauthorized(w, `Bearer error="invalid_token", error_description="unknown API key"`)
				return
			}
			principal = p
		case o.AnonymousPrincipal != "":
			principal = o.AnonymousPrincipal
		default:
			unauthorized(w, `Bearer realm="toolgate"`)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), principal)))
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", h != ""
	}
	return strings.TrimSpace(token), true
}

func unauthorized(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, "unauthorized: send Authorization: Bearer <api key>", http.StatusUnauthorized)
}

// checkOrigin refuses browser requests from origins other than loopback
// ones and those the operator allowed, so a web page cannot drive the
// gateway through the user's browser (DNS rebinding). mcp-go separately
// checks the Host header on loopback connections.
func checkOrigin(next http.Handler, allowed []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !originAllowed(origin, allowed) {
			http.Error(w, "forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func originAllowed(origin string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimRight(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
