package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/internal/listenstream"
	"github.com/toolgate/toolgate/proxy/sessionids"
)

// Authenticator turns the credential on a request into a Subject. A
// failure that knows its HTTP answer (status and WWW-Authenticate) writes
// it through Respond; any other error is a plain 401.
type Authenticator interface {
	Authenticate(r *http.Request) (authz.Subject, error)
}

type responder interface{ Respond(w http.ResponseWriter) }

// HTTPOptions configure the Streamable HTTP endpoint. Zero values are not
// defaults here: the caller passes resolved config values.
type HTTPOptions struct {
	Auth           Authenticator
	Metadata       http.Handler // RFC 9728 protected-resource metadata; nil: not served
	MetadataPaths  []string     // where Metadata is served (/.well-known/oauth-protected-resource[/<path>])
	MaxBodyBytes   int64        // request body cap
	SessionIdleTTL time.Duration
	AllowedOrigins []string // accepted besides loopback origins
	// NoFastPath sends every request through mcp-go's handler, including
	// the tools/calls the fast path would answer (see fastCalls).
	NoFastPath bool
	// ScopeChallenge writes the answer to a request whose access token
	// lacks a scope it needs (HTTP 403 with an insufficient_scope
	// challenge, authn.Authenticator.InsufficientScope); nil: such
	// requests get their JSON-RPC answer (an insufficient_scope envelope).
	ScopeChallenge func(w http.ResponseWriter, scopes []string)
	// SharedSessions is where replicas share the sessions clients ended
	// (sessionids/redisstore, with state.redis); nil: the endpoint refuses
	// only the sessions ended through it (see package sessionids).
	SharedSessions sessionids.Shared
	Log            *slog.Logger
}

// HTTPEndpoint is the Streamable HTTP endpoint. Shutdown stops its session
// reaper and closes its sessions.
type HTTPEndpoint struct {
	http.Handler
	mcp      *server.StreamableHTTPServer
	fast     *fastCalls
	sessions *sessionids.Manager
}

// FastCalls is how many tools/calls the fast path answered.
func (e *HTTPEndpoint) FastCalls() uint64 { return e.fast.taken.Load() }

// Sessions is the endpoint's session id manager.
func (e *HTTPEndpoint) Sessions() *sessionids.Manager { return e.sessions }

// Shutdown ends every session; call it after the http.Server stopped.
func (e *HTTPEndpoint) Shutdown(ctx context.Context) error {
	defer e.sessions.Close()
	return e.mcp.Shutdown(ctx)
}

// HTTPHandler serves MCP Streamable HTTP at /mcp. The order of checks is
// deliberate: Origin (DNS rebinding) and authentication come before any
// body is read or any MCP processing happens; the body is capped; a
// request naming a session a client ended is refused (404) before the fast
// path or mcp-go see it (package sessionids).
func (s *Server) HTTPHandler(o HTTPOptions) *HTTPEndpoint {
	sessions := sessionids.New(sessionids.Options{IdleTTL: o.SessionIdleTTL, Shared: o.SharedSessions, Log: o.Log,
		Principal: func(ctx context.Context) string { return SubjectFrom(ctx).Principal }})
	mcpHTTP := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManagerResolver(sessions.Resolver()),
		server.WithSessionIdleTTL(o.SessionIdleTTL),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return withHTTP(s.withHeader(WithSubject(ctx, SubjectFrom(r.Context())), r.Header))
		}),
		server.WithStreamableHTTPLogger(libraryLogger(o.Log)),
		server.WithEventStore(listenstream.Resumable(newEventStore(eventStoreMaxEvents, eventStoreMaxBytes, eventStoreMaxTotal))),
	)
	inner := s.listening.Track(mcpHTTP)
	fast := &fastCalls{srv: s, next: inner, idleTTL: o.SessionIdleTTL, now: time.Now}
	var h http.Handler = fast
	if o.NoFastPath {
		h = inner
	}
	h = answerScopeChallenges(h, o.ScopeChallenge)
	h = relayRefusals(h)
	h = sessions.Guard(h)
	h = limitBody(h, o.MaxBodyBytes)
	h = s.bindSession(h, sessions, o.Log)
	h = authenticate(h, o, s.withHeader)
	h = checkOrigin(h, o.AllowedOrigins)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	if o.Metadata != nil {
		for _, path := range o.MetadataPaths {
			mux.Handle(path, o.Metadata)
		}
	}
	return &HTTPEndpoint{Handler: mux, mcp: mcpHTTP, fast: fast, sessions: sessions}
}

// limitBody answers 413 Request Entity Too Large, with a JSON-RPC error,
// for a body over max bytes, before the fast path or mcp-go read any of it
// (both would answer a cut-off body as a parse error, 400). A declared
// Content-Length over the cap is refused without reading a byte; a body of
// unknown length (chunked) is read up to the cap here, and refused as soon
// as it passes it. A body within a declared length is bounded by it (the
// server stops at Content-Length), and keeps a MaxBytesReader besides.
func limitBody(next http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ContentLength > max:
			tooLarge(w, max)
			return
		case r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody:
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge(w, max)
				return
			}
			r.Body = replayBody(body, err)
		default:
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// tooLarge is the 413 answer: a JSON-RPC error with a null id (the request
// was not read, so its id is unknown) that names the limit.
func tooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close") // the rest of the body is not worth reading
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"request body is over the %d byte limit (listen.max_body_bytes)"}}`+"\n",
		mcp.INVALID_REQUEST, max)
}

// authenticate resolves the credential to a subject or answers 401 with
// WWW-Authenticate (RFC 6750, MCP authorization). Why it failed goes to
// the log, never to the client.
func authenticate(next http.Handler, o HTTPOptions, withHeader func(context.Context, http.Header) context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, err := o.Auth.Authenticate(r)
		if err != nil {
			o.Log.Info("authentication failed", "remote", r.RemoteAddr, "reason", err.Error())
			if resp, ok := err.(responder); ok {
				resp.Respond(w)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// The headers go along for the toolset rules (toolsets.go); the fast
		// path reads them from here.
		next.ServeHTTP(w, r.WithContext(withHeader(WithSubject(r.Context(), subject), r.Header)))
	})
}

// bindSession keeps a session to the principal that opened it: a request
// naming a session another principal opened is answered as one naming an
// unknown session (404). mcp-go checks only that the ID is well formed, so
// without this, a principal holding someone else's session ID could open
// that session's listening stream and receive the requests (sampling,
// elicitation) meant for its client, or end the session. A session this
// replica did not open is left to the session id manager's Guard, which
// refuses another principal's GET or POST when the shared store named the
// session's owner (sessionids, mayUse), and then to mcp-go (a load
// balancer may send it here); a 2026-07-28 request, for which the header
// means nothing, goes on.
//
// A DELETE is judged besides by the session's owner as recorded when it was
// minted, on this replica or in the shared store (sessionids.MayEnd): the
// sessions registered here are not enough, since a GET naming a session
// opened elsewhere, whose owner the store could not tell, registers it here
// for whoever sent it. Another
// principal's DELETE is answered 404 and ends nothing, here or elsewhere;
// the owner's ends the session for every replica; one whose owner cannot be
// told (no replica recorded one, or the store is down) only drops what
// mcp-go holds for it here, as before sessions were shared.
func (s *Server) bindSession(next http.Handler, sessions *sessionids.Manager, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		if id != "" && !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			principal := SubjectFrom(r.Context()).Principal
			if e := s.session(id); e != nil && e.subject.Principal != principal {
				log.Warn("a request named a session another principal opened", "principal", principal,
					"owner", e.subject.Principal, "method", r.Method, "remote", r.RemoteAddr)
				http.Error(w, "Invalid session ID", http.StatusNotFound)
				return
			}
			if r.Method == http.MethodDelete {
				ctx, ending := sessions.MayEnd(r.Context(), id)
				if ending == sessionids.NotOwner {
					log.Warn("a DELETE named a session another principal opened", "principal", principal,
						"remote", r.RemoteAddr)
					http.Error(w, "Invalid session ID", http.StatusNotFound)
					return
				}
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
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
