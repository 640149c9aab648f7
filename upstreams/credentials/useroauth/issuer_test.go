package useroauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials/useroauth"
)

const testVerifier = "verifier-verifier-verifier-verifier-verifier"

// switchableUpstream is an upstream front whose protected-resource metadata names the authorization
// server set last: an upstream (or whoever took it over) moving its users to another server.
func switchableUpstream(t *testing.T) (url string, set func(issuer string)) {
	var mu sync.Mutex
	var current string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		issuer := current
		mu.Unlock()
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": "http://" + r.Host + "/mcp", "authorization_servers": []string{issuer}})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://`+r.Host+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "a token is required", http.StatusUnauthorized)
	}))
	t.Cleanup(front.Close)
	return front.URL, func(issuer string) {
		mu.Lock()
		current = issuer
		mu.Unlock()
	}
}

// rogueServer is an authorization server that serves valid metadata (with registration) and counts
// every request, and the POSTs (registration, token: where a secret, a code or a verifier would go)
// apart.
func rogueServer(t *testing.T) (issuer string, all, posts *atomic.Int32) {
	all, posts = &atomic.Int32{}, &atomic.Int32{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		all.Add(1)
		if r.Method != http.MethodGet {
			posts.Add(1)
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "registration_endpoint": srv.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, all, posts
}

// TestCallbackCodeNeverGoesToAnotherTokenEndpoint: the callback exchanged the code at whatever token
// endpoint discovery named at that moment, so an upstream that switched its authorization server
// between a user's authorization and its callback received the code and the PKCE verifier (and the
// client's secret). The state carries the issuer the request began at; the callback refuses when the
// upstream names another now, before any registration or token request goes there.
func TestCallbackCodeNeverGoesToAnotherTokenEndpoint(t *testing.T) {
	front, setIssuer := switchableUpstream(t)
	h := newHarness(t, func(o *useroauth.Options) { o.Resource, o.URL = o.URL, front+"/mcp" })
	setIssuer(h.as.Issuer)
	var began string
	if _, err := h.src.Begin(context.Background(), "alice", testVerifier, func(issuer string) string { began = issuer; return "state" }); err != nil {
		t.Fatal(err)
	}
	if began != h.as.Issuer {
		t.Fatalf("Begin sealed issuer %q, want %q", began, h.as.Issuer)
	}
	rogue, _, posts := rogueServer(t)
	setIssuer(rogue)
	h.clock.Advance(2 * time.Hour) // discovery is asked again
	err := h.src.Complete(context.Background(), "alice", began, "the-first-servers-code", testVerifier)
	if err == nil || !strings.Contains(err.Error(), "began at another authorization server") {
		t.Errorf("the callback after the upstream switched servers: %v", err)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("%d registration or token requests reached the other server", n)
	}
}

// TestClientSecretNeverGoesToAnUnconfiguredIssuer: with auth.issuer set, an upstream naming any
// other authorization server (before the client was ever used: no first-use pin to lean on) gets
// nothing at all: not even a metadata request reaches the server it names.
func TestClientSecretNeverGoesToAnUnconfiguredIssuer(t *testing.T) {
	front, setIssuer := switchableUpstream(t)
	rogue, all, _ := rogueServer(t)
	setIssuer(rogue)
	h := newHarness(t, func(o *useroauth.Options) {
		o.Resource, o.URL = o.URL, front+"/mcp"
		o.ClientID, o.ClientSecret = "toolgate-crm", "s3cret-value"
		o.Issuer = "https://auth.example.com" // the server the secret belongs to
	})
	_, err := h.src.Begin(context.Background(), "alice", testVerifier, func(string) string { return "state" })
	if err == nil || !strings.Contains(err.Error(), "not the configured auth.issuer") {
		t.Errorf("Begin with the upstream naming another server than auth.issuer: %v", err)
	}
	if n := all.Load(); n != 0 {
		t.Errorf("%d requests reached the server auth.issuer does not name", n)
	}
}
