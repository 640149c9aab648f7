package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/credentials/credentialstest"
)

// protectedUpstream is a Streamable HTTP MCP server that accepts only bearer tokens whose audience is
// its own (orders-api), answers whoami with the token's subject, and records every Authorization.
type protectedUpstream struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func startProtectedUpstream(t *testing.T) *protectedUpstream {
	t.Helper()
	type subKey struct{}
	s := server.NewMCPServer("orders", "1.0.0")
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sub, _ := ctx.Value(subKey{}).(string)
		return mcp.NewToolResultText(sub), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		sub, _ := credentialstest.Claims(t, tok)["sub"].(string)
		return context.WithValue(ctx, subKey{}, sub)
	}))
	u := &protectedUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		u.mu.Lock()
		u.seen = append(u.seen, a)
		u.mu.Unlock()
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok || strings.Count(tok, ".") != 2 || !slices.Contains(credentialstest.Audiences(credentialstest.Claims(t, tok)), "orders-api") {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "a token for orders-api is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		_ = h.Shutdown(context.Background())
		srv.Close()
	})
	u.url = srv.URL + "/mcp"
	return u
}

func (u *protectedUpstream) authorizations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

const (
	carolKey   = "tg_test_carol"
	gwResource = "http://gw.test/mcp"
)

// writeCredentialsGateway is a gateway with JWT callers (the test authorization server's), an API key
// for carol, the stdio upstream echoes and the protected upstream orders behind auth mode mode
// (token_exchange or client_credentials).
func writeCredentialsGateway(t *testing.T, as *credentialstest.AuthServer, orders string, mode credentials.Mode) string {
	t.Helper()
	t.Setenv("TG_TEST_ORDERS_SECRET", credentialstest.GatewaySecret)
	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
audit: {file: %q}
auth:
  resource: %q
  api_keys:
    - {principal: carol, sha256: %q}
  jwt: {issuer: %q, jwks_url: %q}
mcpServers:
  echoes:
    command: %q
    args: ["-name", "echoes"]
    env: {%s: "1", GORACE: "atexit_sleep_ms=0"}
  orders:
    url: %q
    egress: {allow: [loopback]}   # the test upstream listens on loopback
    retry_safe: true   # whoami reads: no duplicate suppression replaying an earlier caller's answer
    auth:
      mode: %s
      token_url: %q
      client_id: %s
      client_secret: ${TG_TEST_ORDERS_SECRET}
      audience: orders-api
      resource: %q
      scopes: [orders:read]
`, filepath.Join(dir, "audit.jsonl"), gwResource, authn.HashKey(carolKey), as.Issuer(), as.JWKSURL(), self, upstreamRole,
		orders, mode, as.TokenURL(), credentialstest.GatewayID, orders)
	for name, content := range map[string]string{
		"model.conf":    string(model),
		"policy.csv":    "p, caller, echoes/*, call, allow\np, caller, orders/*, call, allow\ng, alice, caller\ng, bob, caller\ng, carol, caller\n",
		"toolgate.yaml": cfg,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "toolgate.yaml")
}

// offsetClock is the real clock moved forward by advance: the credential sources' clock, so that a
// test passes their failure holdoff without sleeping through it.
type offsetClock struct{ ahead atomic.Int64 }

func (c *offsetClock) now() time.Time           { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *offsetClock) advance(by time.Duration) { c.ahead.Add(int64(by)) }

type envelopeAnswer struct {
	OK        bool   `json:"ok"`
	Data      any    `json:"data"`
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// callAs calls tool through the gateway with bearer as the caller's credential.
func callAs(t *testing.T, ctx context.Context, gw *Gateway, bearer, tool string) envelopeAnswer {
	t.Helper()
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + bearer}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION}}); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{}
	if tool == "echoes__echo" {
		args["said"] = "hi"
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	var env envelopeAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s answered %s", tool, raw)
	}
	return env
}

// TestTokenExchangeThroughTheGateway: through a real MCP client and the whole gateway, two JWT
// callers reach a token_exchange upstream as themselves (the upstream, which takes only tokens with
// its own audience, answers with each one's subject), the upstream never sees an inbound JWT, an
// API-key caller is refused with tool_not_allowed before anything is sent, and with the authorization
// server down a caller gets upstream_unavailable while the other upstream serves on and the breaker
// stays closed; no token or secret reaches the log or the audit trail.
func TestTokenExchangeThroughTheGateway(t *testing.T) {
	as := credentialstest.Start(t)
	orders := startProtectedUpstream(t)
	logs := &testkit.LogBuffer{}
	path := writeCredentialsGateway(t, as, orders.url, credentials.TokenExchange)
	clock := &offsetClock{}
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil)), CredentialClock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	alice, bob := as.UserToken("alice", gwResource), as.UserToken("bob", gwResource)

	for _, who := range []struct{ name, jwt string }{{"alice", alice}, {"bob", bob}, {"alice", alice}} {
		env := callAs(t, ctx, gw, who.jwt, "orders__whoami")
		if !env.OK || env.Data != who.name {
			t.Fatalf("%s called orders__whoami: %+v; want the upstream to see %s", who.name, env, who.name)
		}
	}
	if n := as.Grants(credentials.GrantTypeTokenExchange); n != 2 {
		t.Errorf("%d token exchanges for two callers (alice twice), want 2", n)
	}
	for _, a := range orders.authorizations() {
		if tok := strings.TrimPrefix(a, "Bearer "); tok == alice || tok == bob {
			t.Fatal("the upstream saw a caller's inbound JWT")
		}
	}

	// An API-key caller: refused, nothing sent anywhere.
	seen, asked := len(orders.authorizations()), as.Count()
	env := callAs(t, ctx, gw, carolKey, "orders__whoami")
	if env.OK || env.ErrorCode != "tool_not_allowed" || env.Retryable || !strings.Contains(env.Message, "JWT") {
		t.Errorf("an API-key caller got %+v, want tool_not_allowed naming the JWT it lacks", env)
	}
	if len(orders.authorizations()) != seen || as.Count() != asked {
		t.Error("the refused call reached the upstream or the authorization server")
	}

	// The authorization server down: a caller whose token is not cached gets upstream_unavailable,
	// retryable, as often as it tries; echoes serves on.
	alice2 := as.UserToken("alice", gwResource) // a new JWT for alice: a new cache key
	as.SetDown(true)
	for range 7 { // more than the breaker's 5 failures
		env := callAs(t, ctx, gw, alice2, "orders__whoami")
		if env.OK || env.ErrorCode != "upstream_unavailable" || !env.Retryable {
			t.Fatalf("with the authorization server down: %+v, want upstream_unavailable, retryable", env)
		}
	}
	if env := callAs(t, ctx, gw, alice, "echoes__echo"); !env.OK {
		t.Errorf("echoes stopped serving while the authorization server was down: %+v", env)
	}
	if env := callAs(t, ctx, gw, bob, "orders__whoami"); !env.OK || env.Data != "bob" {
		t.Errorf("bob's cached exchanged token should still serve: %+v", env)
	}
	as.SetDown(false)
	clock.advance(1100 * time.Millisecond) // past the second the credential source holds a failure back
	if env := callAs(t, ctx, gw, alice2, "orders__whoami"); !env.OK || env.Data != "alice" {
		t.Errorf("after the authorization server came back (the breaker must not have opened): %+v", env)
	}

	gw.Close()
	logged := logs.String()
	if !strings.Contains(logged, "could not get a token for the upstream") {
		t.Error("no log line for the failed token request")
	}
	audit, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "audit.jsonl"))
	secrets := []string{alice, bob, alice2, credentialstest.GatewaySecret, carolKey}
	for _, a := range orders.authorizations() {
		if tok := strings.TrimPrefix(a, "Bearer "); tok != "" {
			secrets = append(secrets, tok)
		}
	}
	for _, s := range secrets {
		sig := s[strings.LastIndex(s, ".")+1:]
		if strings.Contains(logged, sig) || strings.Contains(string(audit), sig) {
			t.Errorf("a token or secret is in the log or the audit trail (%.8s...)", sig)
		}
	}
}

// TestClientCredentialsThroughTheGateway: through a real MCP client and the whole gateway, a
// client_credentials upstream sees the gateway's own service identity whoever calls (two JWT callers
// and an API-key caller alike), never a caller's JWT, on one token request for the connection and
// every call; no token or secret reaches the log or the audit trail.
func TestClientCredentialsThroughTheGateway(t *testing.T) {
	as := credentialstest.Start(t)
	orders := startProtectedUpstream(t)
	logs := &testkit.LogBuffer{}
	path := writeCredentialsGateway(t, as, orders.url, credentials.ClientCredentials)
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	alice, bob := as.UserToken("alice", gwResource), as.UserToken("bob", gwResource)

	for _, who := range []struct{ name, bearer string }{{"alice", alice}, {"bob", bob}, {"carol", carolKey}, {"alice", alice}} {
		env := callAs(t, ctx, gw, who.bearer, "orders__whoami")
		if !env.OK || env.Data != credentialstest.GatewayID {
			t.Fatalf("%s called orders__whoami: %+v; want the upstream to see the gateway's client %s", who.name, env, credentialstest.GatewayID)
		}
	}
	const minted = 2 // alice's and bob's JWTs are client-credentials tokens of their own clients
	if n := as.Grants("client_credentials") - minted; n != 1 {
		t.Errorf("the gateway made %d client_credentials requests for the connection and four calls, want 1", n)
	}
	if n := as.Grants(credentials.GrantTypeTokenExchange); n != 0 {
		t.Errorf("%d token exchanges for a client_credentials upstream, want 0", n)
	}
	authorizations := orders.authorizations()
	if len(authorizations) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, a := range authorizations {
		if tok := strings.TrimPrefix(a, "Bearer "); tok == alice || tok == bob || tok == carolKey {
			t.Fatal("the upstream saw a caller's own credential")
		}
	}

	gw.Close()
	logged := logs.String()
	audit, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "audit.jsonl"))
	if !strings.Contains(string(audit), "orders__whoami") && !strings.Contains(string(audit), "orders/whoami") {
		t.Error("the calls are not in the audit trail: the secret check below would prove nothing")
	}
	secrets := []string{alice, bob, credentialstest.GatewaySecret, carolKey}
	for _, a := range authorizations {
		if tok := strings.TrimPrefix(a, "Bearer "); tok != "" {
			secrets = append(secrets, tok)
		}
	}
	for _, s := range secrets {
		sig := s[strings.LastIndex(s, ".")+1:]
		if strings.Contains(logged, sig) || strings.Contains(string(audit), sig) {
			t.Errorf("a token or secret is in the log or the audit trail (%.8s...)", sig)
		}
	}
}
