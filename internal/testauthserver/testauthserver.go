// Package testauthserver is a small OAuth 2.1 authorization server for the tests of auth mode oauth:
// authorization code with PKCE S256 (verified), RFC 8707 resource (the token's audience), RFC 7591
// dynamic registration, refresh tokens rotated on every use, revocation, introspection (RFC 7662), and a
// login page a test fills in as a browser would. Access tokens are HS256 JWTs an upstream in the test
// process verifies with Verify, and one in a process of its own (StartUpstreamProcess) by introspection.
//
// It is written here rather than taken from zitadel/oidc (whose provider serves the client-credentials
// and token-exchange tests, upstreams/credentials/credentialstest) because that provider has no
// dynamic registration and ignores the resource parameter, so its tokens cannot be bound to one
// upstream, and both are what these tests are about. It checks what a strict server checks and
// counts what the tests assert on; it is no server for anything else.
package testauthserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Server is the running authorization server.
type Server struct {
	Issuer string
	key    []byte

	mu       sync.Mutex
	clients  map[string]*client
	requests map[string]*grant // pending authorization requests, by id
	codes    map[string]*grant
	refresh  map[string]*grant
	lifetime time.Duration
	counts   map[string]int // "register", "authorize", "authorization_code", "refresh_token", "pkce_failed", ...
	noDCR    bool
	cutoff   map[string]int64 // per subject: access tokens issued before (unix ns) are no longer taken
}

type client struct {
	id, secret, method string
	redirects          []string
}

// grant is what an authorization request, a code or a refresh token stands for.
type grant struct {
	clientID, redirect, challenge, resource, scope, state, subject string
	issued                                                         time.Time
}

// Start runs the server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Issuer: "http://" + ln.Addr().String(), key: make([]byte, 32), clients: map[string]*client{},
		requests: map[string]*grant{}, codes: map[string]*grant{}, refresh: map[string]*grant{}, lifetime: time.Hour,
		counts: map[string]int{}, cutoff: map[string]int64{}}
	_, _ = rand.Read(s.key)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("POST /register", s.register)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /introspect", s.introspect)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

// AddClient registers a client beforehand (method client_secret_basic, or none without a secret) with
// its redirect URIs.
func (s *Server) AddClient(id, secret string, redirects ...string) {
	method := "client_secret_basic"
	if secret == "" {
		method = "none"
	}
	s.mu.Lock()
	s.clients[id] = &client{id: id, secret: secret, method: method, redirects: redirects}
	s.mu.Unlock()
}

// SetLifetime is the life of the access tokens issued from now on.
func (s *Server) SetLifetime(d time.Duration) {
	s.mu.Lock()
	s.lifetime = d
	s.mu.Unlock()
}

// DisableRegistration stops advertising and serving dynamic registration.
func (s *Server) DisableRegistration() {
	s.mu.Lock()
	s.noDCR = true
	s.mu.Unlock()
}

// Count is how many times event happened: "register", "authorize", "login", "pkce_failed",
// "authorization_code" and "refresh_token" (token requests granted), "invalid_grant" (refused).
func (s *Server) Count(event string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[event]
}

// Revoke invalidates every refresh token of subject.
func (s *Server) Revoke(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for rt, g := range s.refresh {
		if g.subject == subject {
			delete(s.refresh, rt)
		}
	}
}

// RevokeAccess makes every access token issued to subject so far refused by Verify (as an upstream
// that introspects would), so the next request must carry a refreshed one.
func (s *Server) RevokeAccess(subject string) {
	s.mu.Lock()
	s.cutoff[subject] = time.Now().UnixNano()
	s.mu.Unlock()
}

type claims struct {
	jwt.RegisteredClaims
	IssuedNanos int64 `json:"iat_ns"`
}

// Verify checks an access token (signature, expiry at now, issuer, not revoked) and that audience is
// its audience; it returns the token's subject.
func (s *Server) Verify(token, audience string) (string, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(s.Issuer), jwt.WithAudience(audience), jwt.WithExpirationRequired())
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	cut := s.cutoff[c.Subject]
	s.mu.Unlock()
	if c.IssuedNanos <= cut {
		return "", errors.New("token revoked")
	}
	return c.Subject, nil
}

// introspect is RFC 7662 for an upstream in another process: active, with the token's subject and
// audience, when Verify would take it for that audience.
func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.key, nil }, jwt.WithValidMethods([]string{"HS256"}))
	if err != nil || len(c.Audience) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	sub, err := s.Verify(token, c.Audience[0])
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"active": true, "sub": sub, "aud": c.Audience[0]})
}

func (s *Server) count(event string) {
	s.mu.Lock()
	s.counts[event]++
	s.mu.Unlock()
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	noDCR := s.noDCR
	s.mu.Unlock()
	m := map[string]any{"issuer": s.Issuer, "authorization_endpoint": s.Issuer + "/authorize", "token_endpoint": s.Issuer + "/token",
		"response_types_supported": []string{"code"}, "grant_types_supported": []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"}}
	if !noDCR {
		m["registration_endpoint"] = s.Issuer + "/register"
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		Method       string   `json:"token_endpoint_auth_method"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	c := &client{id: "dyn-" + random(8), secret: random(24), method: "client_secret_basic", redirects: req.RedirectURIs}
	if req.Method == "none" {
		c.secret, c.method = "", "none"
	}
	s.mu.Lock()
	if s.noDCR {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	s.clients[c.id] = c
	s.counts["register"]++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": c.id, "client_secret": c.secret,
		"token_endpoint_auth_method": c.method, "redirect_uris": c.redirects})
}

// authorize checks the request (a known client, its redirect URI, PKCE S256, a resource) and shows
// the login page.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[q.Get("client_id")]
	switch {
	case c == nil || !contains(c.redirects, q.Get("redirect_uri")):
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "response_type code with PKCE S256 is required", http.StatusBadRequest)
		return
	case q.Get("resource") == "":
		http.Error(w, "resource is required", http.StatusBadRequest)
		return
	}
	id := random(16)
	s.requests[id] = &grant{clientID: c.id, redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope"), state: q.Get("state")}
	s.counts["authorize"]++
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = loginPage.Execute(w, id)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html><title>Sign in</title>
<form method="post" action="/login"><input type="hidden" name="request" value="{{.}}">
<input name="username"><button type="submit">Sign in and allow</button></form>`))

// login signs the user in (any name) and sends the browser back with a code.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	g := s.requests[r.PostFormValue("request")]
	delete(s.requests, r.PostFormValue("request"))
	user := r.PostFormValue("username")
	if g == nil || user == "" {
		s.mu.Unlock()
		http.Error(w, "unknown request", http.StatusBadRequest)
		return
	}
	g.subject, g.issued = user, time.Now()
	code := random(16)
	s.codes[code] = g
	s.counts["login"]++
	s.mu.Unlock()
	to, _ := url.Parse(g.redirect)
	q := to.Query()
	q.Set("code", code)
	q.Set("state", g.state)
	to.RawQuery = q.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.authenticate(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var g *grant
	var err error
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, err = s.codeGrant(r.PostForm, c)
	case "refresh_token":
		g, err = s.refreshGrant(r.PostForm, c)
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if err != nil {
		s.counts["invalid_grant"]++
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}
	s.counts[r.PostForm.Get("grant_type")]++
	writeJSON(w, http.StatusOK, s.issue(g))
}

// authenticate is the client the token request authenticated as, by its registered method.
func (s *Server) authenticate(r *http.Request) (*client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c := s.clients[id]
	if c == nil {
		return nil, false
	}
	switch c.method {
	case "none":
		return c, !basic && secret == ""
	case "client_secret_post":
		return c, !basic && secret == c.secret
	}
	return c, basic && secret == c.secret
}

var errGrant = errors.New("invalid_grant")

func (s *Server) codeGrant(f url.Values, c *client) (*grant, error) {
	g := s.codes[f.Get("code")]
	delete(s.codes, f.Get("code")) // single use
	switch {
	case g == nil || g.clientID != c.id || g.redirect != f.Get("redirect_uri"):
		return nil, errGrant
	case s256(f.Get("code_verifier")) != g.challenge:
		s.counts["pkce_failed"]++
		return nil, errGrant
	case f.Get("resource") != "" && f.Get("resource") != g.resource:
		return nil, errGrant
	}
	return g, nil
}

// refreshGrant takes a refresh token once: the answer carries its successor (rotation).
func (s *Server) refreshGrant(f url.Values, c *client) (*grant, error) {
	g := s.refresh[f.Get("refresh_token")]
	delete(s.refresh, f.Get("refresh_token"))
	if g == nil || g.clientID != c.id || (f.Get("resource") != "" && f.Get("resource") != g.resource) {
		return nil, errGrant
	}
	return g, nil
}

func (s *Server) issue(g *grant) map[string]any {
	now := time.Now()
	claims := jwt.MapClaims{"iss": s.Issuer, "sub": g.subject, "aud": g.resource, "iat": now.Unix(),
		"exp": now.Add(s.lifetime).Unix(), "client_id": g.clientID, "jti": random(8), "iat_ns": now.UnixNano()}
	if g.scope != "" {
		claims["scope"] = g.scope
	}
	at, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	rt := random(24)
	s.refresh[rt] = g
	return map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(s.lifetime.Seconds()),
		"refresh_token": rt, "scope": g.scope}
}

// Issue is an access token for subject with resource as its audience, as if issued to a client
// "operator": for a test that configures it as a static credential.
func (s *Server) Issue(subject, resource string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issue(&grant{clientID: "operator", subject: subject, resource: resource})["access_token"].(string)
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// String names the server for test messages.
func (s *Server) String() string { return fmt.Sprintf("test authorization server at %s", s.Issuer) }

// LoginRequest is the hidden request id on a login page body, for a test acting as the browser.
func LoginRequest(page string) (string, bool) {
	const marker = `name="request" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		return "", false
	}
	rest := page[i+len(marker):]
	j := strings.IndexByte(rest, '"')
	return rest[:j], j > 0
}
