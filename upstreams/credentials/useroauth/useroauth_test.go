package useroauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/internal/testauthserver"
	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/credentials/connect"
	"github.com/toolgate/toolgate/upstreams/credentials/useroauth"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/egress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the sources' time, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type principalKey struct{}

func as(principal string) context.Context {
	return context.WithValue(context.Background(), principalKey{}, principal)
}

// harness is one upstream in auth mode oauth, its authorization server, the connect pages on a
// listener of their own and the vault, all real.
type harness struct {
	as       *testauthserver.Server
	upstream *testauthserver.Upstream
	src      *useroauth.Source
	links    *connect.Links
	vault    *vault.Memory
	clock    *clock
}

func newHarness(t testing.TB, mod func(*useroauth.Options)) *harness {
	t.Helper()
	h := &harness{as: testauthserver.Start(t), vault: &vault.Memory{}, clock: &clock{t: time.Now()}}
	h.upstream = testauthserver.StartUpstream(t, h.as)
	flows := map[string]connect.Flow{}
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.links.Handler().ServeHTTP(w, r) }))
	t.Cleanup(pages.Close)
	o := useroauth.Options{Server: "crm", URL: h.upstream.URL, RedirectURL: func() string { return connect.RedirectURL(pages.URL) }, Vault: h.vault,
		Caller: func(ctx context.Context) (string, bool) {
			p, ok := ctx.Value(principalKey{}).(string)
			return p, ok
		},
		ConnectURL: func(p, u string) string { return h.links.URL(p, u) },
		ListAs:     "lister",
		Now:        h.clock.Now,
		Egress:     egress.Options{Allow: []egress.Class{egress.Loopback}}, // the servers listen on loopback
	}
	if mod != nil {
		mod(&o)
	}
	src, err := useroauth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.src = src
	flows["crm"] = src
	if h.links, err = connect.New(connect.Options{BaseURL: pages.URL, OAuth: flows}); err != nil {
		t.Fatal(err)
	}
	return h
}

// connect drives the consent flow for principal as user, through the pages and the authorization
// server, and fails the test unless it ends on the "Connected" page.
func (h *harness) connect(t *testing.T, principal, user string) *testauthserver.Browser {
	t.Helper()
	_, err := h.src.Authorization(as(principal))
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) || ar.ConnectURL == "" {
		t.Fatalf("an unconnected caller got %v, want an AuthorizationRequiredError with a URL", err)
	}
	b := testauthserver.NewBrowser()
	status, page, err := b.Connect(ar.ConnectURL, user, h.as)
	if err != nil || status != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Fatalf("consent flow: %d %v\n%s", status, err, page)
	}
	return b
}

// whoami is the subject the upstream sees for principal's token (a raw initialize: the upstream
// verifies the token before it reads anything).
func (h *harness) whoami(t *testing.T, principal string) (int, string) {
	t.Helper()
	auth, err := h.src.Authorization(as(principal))
	if err != nil {
		t.Fatalf("%s: %v", principal, err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.upstream.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	subs := h.upstream.Subjects()
	if resp.StatusCode != http.StatusOK || len(subs) == 0 {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, subs[len(subs)-1]
}

func (h *harness) stored(t *testing.T, principal string) useroauth.Token {
	t.Helper()
	data, _, err := h.vault.Get(context.Background(), vault.Key{Principal: principal, Upstream: "crm", Kind: vault.OAuth})
	if err != nil {
		t.Fatalf("no token stored for %s: %v", principal, err)
	}
	var tok useroauth.Token
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestConsentFlowStoresEachUsersToken: discovery from the upstream's 401, dynamic registration (once,
// kept in the vault), the authorization request with PKCE S256 and the upstream as resource, the
// code exchange the server checks the verifier of; each principal then reaches the upstream as the
// user who signed in, with a token whose audience is the upstream.
func TestConsentFlowStoresEachUsersToken(t *testing.T) {
	h := newHarness(t, nil)
	h.connect(t, "alice", "alice@example.com")
	h.connect(t, "bob", "bob@example.com")
	for p, want := range map[string]string{"alice": "alice@example.com", "bob": "bob@example.com"} {
		if status, sub := h.whoami(t, p); status != http.StatusOK || sub != want {
			t.Errorf("%s reached the upstream as %q (HTTP %d), want %q", p, sub, status, want)
		}
	}
	if n := h.as.Count("register"); n != 1 {
		t.Errorf("%d dynamic registrations for two users, want 1 (kept in the vault)", n)
	}
	if _, _, err := h.vault.Get(context.Background(), vault.Key{Upstream: "crm", Kind: vault.Registration}); err != nil {
		t.Errorf("the registration is not in the vault: %v", err)
	}
	if n, bad := h.as.Count("authorization_code"), h.as.Count("pkce_failed"); n != 2 || bad != 0 {
		t.Errorf("code exchanges %d (PKCE failures %d), want 2 (0)", n, bad)
	}
	if tok := h.stored(t, "alice"); tok.Resource != h.upstream.URL || tok.RefreshToken == "" {
		t.Errorf("alice's stored token: resource %q, refresh token present %v", tok.Resource, tok.RefreshToken != "")
	}
}

// TestCallbackStateIsCheckedAndTakenOnce: a replayed callback (same state, same cookie), a callback
// from a browser that did not start the request, and a forged state are refused before any code is
// exchanged.
func TestCallbackStateIsCheckedAndTakenOnce(t *testing.T) {
	h := newHarness(t, nil)
	b := h.connect(t, "alice", "alice@example.com")
	exchanges := h.as.Count("authorization_code")
	if status, page, _ := b.Get(b.Callback, b.CallbackCookies()...); status != http.StatusBadRequest || !strings.Contains(page, "already completed") {
		t.Errorf("a replayed callback answered %d, want 400 naming the reason:\n%s", status, page)
	}
	if status, _, _ := testauthserver.NewBrowser().Get(b.Callback); status != http.StatusBadRequest {
		t.Errorf("a callback from another browser answered %d, want 400", status)
	}
	forged := strings.Replace(b.Callback, "state=", "state=A", 1)
	if status, _, _ := b.Get(forged, b.CallbackCookies()...); status != http.StatusBadRequest {
		t.Errorf("a forged state answered %d, want 400", status)
	}
	if n := h.as.Count("authorization_code"); n != exchanges {
		t.Errorf("%d code exchanges after refused callbacks, want none", n-exchanges)
	}
}

// TestRefreshOnExpiryOnceAndRotated: an expired token is refreshed by one request however many
// callers wait for it, the rotated refresh token is stored, and the new access token is accepted.
func TestRefreshOnExpiryOnceAndRotated(t *testing.T) {
	h := newHarness(t, nil)
	h.connect(t, "alice", "alice@example.com")
	before := h.stored(t, "alice")
	h.clock.Advance(2 * time.Hour) // the server's tokens live an hour
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			if _, err := h.src.Authorization(as("alice")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := h.as.Count("refresh_token"); n != 1 {
		t.Errorf("%d refreshes for 20 concurrent callers, want 1", n)
	}
	after := h.stored(t, "alice")
	if after.RefreshToken == before.RefreshToken || after.AccessToken == before.AccessToken {
		t.Error("the rotated tokens were not stored")
	}
	if status, sub := h.whoami(t, "alice"); status != http.StatusOK || sub != "alice@example.com" {
		t.Errorf("after the refresh: HTTP %d as %q", status, sub)
	}
}

// TestRevokedRefreshAsksAgain: a refresh the server refuses (invalid_grant) deletes the token and
// the caller is asked to connect again; connecting again serves.
func TestRevokedRefreshAsksAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.connect(t, "alice", "alice@example.com")
	h.as.Revoke("alice@example.com")
	h.clock.Advance(2 * time.Hour)
	_, err := h.src.Authorization(as("alice"))
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("after a revoked refresh: %v, want AuthorizationRequiredError", err)
	}
	if _, _, err := h.vault.Get(context.Background(), vault.Key{Principal: "alice", Upstream: "crm", Kind: vault.OAuth}); !errors.Is(err, vault.ErrNotFound) {
		t.Errorf("the refused token is still stored: %v", err)
	}
	h.connect(t, "alice", "alice@example.com")
	if status, _ := h.whoami(t, "alice"); status != http.StatusOK {
		t.Errorf("after connecting again: HTTP %d", status)
	}
}

// TestRejectedTokenIsRefreshed: a token the upstream refused (401) is not sent again: the next
// request refreshes it.
func TestRejectedTokenIsRefreshed(t *testing.T) {
	h := newHarness(t, nil)
	h.connect(t, "alice", "alice@example.com")
	first, err := h.src.Authorization(as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	h.src.Rejected(as("alice"), first)
	second, err := h.src.Authorization(as("alice"))
	if err != nil || second == first || h.as.Count("refresh_token") != 1 {
		t.Errorf("after a 401: same token %v, err %v, refreshes %d; want a refreshed token", second == first, err, h.as.Count("refresh_token"))
	}
}

// TestPreregisteredClient: with a configured client id and secret nothing is registered, and the
// token endpoint gets client_secret_basic.
func TestPreregisteredClient(t *testing.T) {
	var h *harness
	h = newHarness(t, func(o *useroauth.Options) { o.ClientID, o.ClientSecret = "toolgate-crm", "s3cret-value" })
	h.as.AddClient("toolgate-crm", "s3cret-value", h.srcRedirect(t))
	h.as.DisableRegistration()
	h.connect(t, "alice", "alice@example.com")
	if n := h.as.Count("register"); n != 0 {
		t.Errorf("%d registrations with a configured client, want 0", n)
	}
	if status, _ := h.whoami(t, "alice"); status != http.StatusOK {
		t.Errorf("HTTP %d", status)
	}
}

func (h *harness) srcRedirect(t *testing.T) string {
	t.Helper()
	u := h.links.URL("x", "crm")
	return u[:strings.Index(u, connect.Prefix)] + connect.Prefix + "callback"
}

// TestLowPrivilegePrincipalCannotBecomeTheLister: the gateway's own requests (initialize, listing,
// the listening stream) used to carry the token of whichever connected principal sorted first by
// name, so what that user saw upstream was listed to everyone, and a low-privilege principal named
// "aaa" became the lister by connecting. Now they carry ListAs's token only: an "aaa" who connected
// changes nothing, and until ListAs connects the requests are not sent (the error names ListAs and
// carries no link, since it goes to the log).
func TestLowPrivilegePrincipalCannotBecomeTheLister(t *testing.T) {
	h := newHarness(t, func(o *useroauth.Options) { o.ListAs = "zoe" })
	h.connect(t, "aaa", "aaa@example.com")
	auth, err := h.src.Authorization(context.Background())
	if err == nil || !strings.Contains(err.Error(), `list_as principal "zoe" has not connected`) || strings.Contains(err.Error(), "/connect/") {
		t.Fatalf("the gateway's own request with only aaa connected: %q, %v; want zoe's absence named, without a link", auth, err)
	}
	h.connect(t, "zoe", "zoe@example.com")
	auth, err = h.src.Authorization(context.Background())
	zoes, _ := h.src.Authorization(as("zoe"))
	aaas, _ := h.src.Authorization(as("aaa"))
	if err != nil || auth != zoes || auth == aaas {
		t.Errorf("the gateway's own request should carry zoe's token, never aaa's: %v", err)
	}
}

// TestListAsIsRequired: a source without ListAs is refused when built, not left to pick a user.
func TestListAsIsRequired(t *testing.T) {
	_, err := useroauth.New(useroauth.Options{Server: "crm", URL: "https://crm.example.com/mcp", Vault: &vault.Memory{},
		RedirectURL: func() string { return "https://tg.example.com/connect/callback" },
		Caller:      func(context.Context) (string, bool) { return "", false }})
	if err == nil || !strings.Contains(err.Error(), "ListAs is required") {
		t.Errorf("New without ListAs: %v", err)
	}
}

// TestEgressGuardCoversDiscovery: without egress.allow, an upstream and authorization server on
// loopback are not reached for discovery either (the guard refuses the address, nobody is sent
// anywhere).
func TestEgressGuardCoversDiscovery(t *testing.T) {
	h := newHarness(t, func(o *useroauth.Options) { o.Egress = egress.Options{} })
	_, err := h.src.Begin(context.Background(), "alice", "verifier-verifier-verifier-verifier-verifier", func(string) string { return "state" })
	if _, refused := egress.IsRefused(err); !refused {
		t.Errorf("discovery toward loopback without egress.allow: %v, want the guard's refusal", err)
	}
	if h.as.Count("authorize") != 0 {
		t.Error("the authorization server was reached")
	}
}

// TestRefreshTokenNeverGoesToAnotherAuthorizationServer: the upstream names its authorization server
// in its protected-resource metadata, which it can change at any time. When it named another one,
// every connected user's refresh token (issued by the first) was sent to the new one's token endpoint
// at their next refresh: an upstream, or whoever took it over, collected refresh tokens of an
// authorization server it does not run. A token is refreshed only where it was issued; and since the
// gateway registered at the first server, the move is refused altogether until the operator accepts
// it with auth.issuer (a configured issuer's move then asks the user to connect again).
func TestRefreshTokenNeverGoesToAnotherAuthorizationServer(t *testing.T) {
	evil := testauthserver.Start(t)
	var mu sync.Mutex
	var real, current string // the upstream's MCP URL, and the authorization server it names now
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
	h := newHarness(t, func(o *useroauth.Options) {
		real = o.URL
		o.URL, o.Resource = front.URL+"/mcp", real // discovery through the front; tokens for the real upstream
	})
	mu.Lock()
	current = h.as.Issuer
	mu.Unlock()
	h.connect(t, "alice", "alice@example.com")
	issued := h.stored(t, "alice")

	mu.Lock()
	current = evil.Issuer // the upstream now names another authorization server
	mu.Unlock()
	h.clock.Advance(2 * time.Hour) // past the token's hour and discovery's
	// The gateway registered at the first server: the move itself is refused until the operator
	// accepts it (auth.issuer), so alice is not even sent to connect there.
	if _, err := h.src.Authorization(as("alice")); err == nil || !strings.Contains(err.Error(), "than the one the gateway registered at") {
		t.Errorf("alice after the switch: %v, want the move refused", err)
	}
	if n := evil.Count("refresh_token") + evil.Count("invalid_grant") + evil.Count("register"); n != 0 {
		t.Fatalf("the other authorization server got %d refresh requests: alice's refresh token %q went to it", n, issued.RefreshToken[:4]+"…")
	}
	if n := h.as.Count("refresh_token"); n != 0 {
		t.Errorf("%d refreshes at the first server, which the upstream no longer names", n)
	}
}

// BenchmarkCachedUserToken is what auth mode oauth adds to a call whose caller's token is in memory
// and not due: a map lookup under a lock (a static header adds nothing).
func BenchmarkCachedUserToken(b *testing.B) {
	h := newHarness(b, nil)
	if _, _, err := connectB(h, "alice"); err != nil {
		b.Fatal(err)
	}
	ctx := as("alice")
	if _, err := h.src.Authorization(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.src.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdRefresh is a call whose caller's token is due: one refresh at the in-process
// authorization server (loopback HTTP, a JWT signed per refresh) and the rotated tokens stored.
func BenchmarkColdRefresh(b *testing.B) {
	h := newHarness(b, nil)
	if _, _, err := connectB(h, "alice"); err != nil {
		b.Fatal(err)
	}
	ctx := as("alice")
	for b.Loop() {
		h.clock.Advance(2 * time.Hour) // every token issued so far is due
		if _, err := h.src.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// connectB drives the consent flow for principal (benchmarks have no *testing.T to fail).
func connectB(h *harness, principal string) (int, string, error) {
	_, err := h.src.Authorization(as(principal))
	var ar *credentials.AuthorizationRequiredError
	if !errors.As(err, &ar) {
		return 0, "", err
	}
	return testauthserver.NewBrowser().Connect(ar.ConnectURL, principal+"@idp", h.as)
}

// TestConfiguredClientSecretStaysWithItsServer: a configured client with a secret is pinned, on first
// use, to the authorization server it was used with; when the upstream later names another, the user's
// authorization request is refused before anything (the secret above all) goes there.
func TestConfiguredClientSecretStaysWithItsServer(t *testing.T) {
	other := testauthserver.Start(t)
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
	h := newHarness(t, func(o *useroauth.Options) {
		o.Resource = o.URL
		o.URL = front.URL + "/mcp"
		o.ClientID, o.ClientSecret = "toolgate-crm", "s3cret-value"
	})
	h.as.AddClient("toolgate-crm", "s3cret-value", h.srcRedirect(t))
	mu.Lock()
	current = h.as.Issuer
	mu.Unlock()
	h.connect(t, "alice", "alice@example.com")

	mu.Lock()
	current = other.Issuer
	mu.Unlock()
	h.clock.Advance(2 * time.Hour) // discovery is asked again
	if _, err := h.src.Begin(context.Background(), "bob", "verifier-verifier-verifier-verifier-verifier", func(string) string { return "state" }); err == nil ||
		!strings.Contains(err.Error(), "client secret is not sent there") {
		t.Errorf("Begin after the upstream named another server: %v", err)
	}
	if n := other.Count("authorize") + other.Count("authorization_code") + other.Count("invalid_grant"); n != 0 {
		t.Errorf("the other server was used %d times", n)
	}
}
