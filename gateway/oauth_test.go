package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testauthserver"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams/credentials/useroauth"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

const (
	aliceOAuthKey = "tg_test_alice_oauth"
	bobOAuthKey   = "tg_test_bob_oauth"
)

// writeOAuthGateway is a gateway with API-key callers alice and bob and two upstreams in auth mode
// oauth at one authorization server: crm and wiki, each taking only tokens issued for itself.
func writeOAuthGateway(t *testing.T, crm, wiki string) string {
	return writeOAuthGatewayWith(t, crm, wiki, "", "{mode: oauth, list_as: alice}")
}

// writeOAuthGatewayWith is writeOAuthGateway with extra top-level config and crm's auth block.
func writeOAuthGatewayWith(t *testing.T, crm, wiki, extra, crmAuth string) string {
	t.Helper()
	t.Setenv("TOOLGATE_CREDENTIALS_KEY", "q1ouvDvb0x2fWw4yCwD5yVn0dE6XwTq0Yl2c9S5vY4M=") // the vault's, for tests only
	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", key_sha256: %q}
audit: {file: %q}
auth:
  api_keys:
    - {principal: alice, sha256: %q}
    - {principal: bob, sha256: %q}
%smcpServers:
  crm:
    url: %q
    retry_safe: true   # whoami reads: no duplicate suppression replaying another caller's answer
    auth: %s
    egress: {allow: [loopback]}   # the test upstream and its authorization server listen on loopback
  wiki:
    url: %q
    retry_safe: true
    auth: {mode: oauth, list_as: alice}
    egress: {allow: [loopback]}
`, authn.HashKey(perUserAdminKey), filepath.Join(dir, "audit.jsonl"), authn.HashKey(aliceOAuthKey), authn.HashKey(bobOAuthKey),
		extra, crm, crmAuth, wiki)
	for name, content := range map[string]string{
		"model.conf":    string(model),
		"policy.csv":    "p, caller, crm/*, call, allow\np, caller, wiki/*, call, allow\ng, alice, caller\ng, bob, caller\n",
		"toolgate.yaml": cfg,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "toolgate.yaml")
}

// waitUp returns a function that waits until server comes up (its tools in the catalog), or fails the
// test at ctx's end. Call it before the server can come up.
func waitUp(t testing.TB, ctx context.Context, gw *Gateway, server string) func() {
	up := make(chan struct{}, 16)
	gw.Upstreams().OnStatusChange(func(s string, isUp bool, _ string) {
		if s == server && isUp {
			up <- struct{}{}
		}
	})
	return func() {
		t.Helper()
		// Only the event: Status says up as soon as the connection is stored, before the catalog
		// lists its tools.
		select {
		case <-up:
		case <-ctx.Done():
			t.Fatalf("%s never came up", server)
		}
	}
}

var linkPattern = regexp.MustCompile(`https?://\S+/connect/\?\S+`)

// TestOAuthUpstreamThroughTheGateway: through a real MCP client and the whole gateway, each principal
// reaches an auth mode oauth upstream as the user who connected it: the upstream is connected once
// its first user has (the link from the admin API), a caller who has not connected gets
// authorization_required with a link, the link's consent flow (a browser, the authorization server's
// login, the callback with PKCE and state checked) stores their token, a replayed callback is refused,
// a token for one upstream never reaches another, an access token the upstream stops taking is
// refreshed on the same call, and a revoked refresh asks again. No token reaches the log or the audit.
func TestOAuthUpstreamThroughTheGateway(t *testing.T) {
	as := testauthserver.Start(t)
	// crm is a process of its own that checks tokens by introspection; wiki, in this one, records who
	// it served.
	crm, wiki := testauthserver.StartUpstreamProcess(t, as), testauthserver.StartUpstream(t, as)
	logs := &testkit.LogBuffer{}
	path := writeOAuthGateway(t, crm.URL, wiki.URL)
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
	crmUp := waitUp(t, ctx, gw, "crm")
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// Nobody has connected crm: its tools are unknown. Alice connects with the link an operator
	// fetches for her; the upstream comes up carrying her token.
	first, err := gw.ConnectLink("alice", "crm")
	if err != nil {
		t.Fatal(err)
	}
	connectAs(t, first, "alice@idp", as)
	crmUp()
	if env := callAs(t, ctx, gw, aliceOAuthKey, "crm__whoami"); !env.OK || env.Data != "alice@idp" {
		t.Fatalf("alice after connecting: %+v", env)
	}

	// Bob has not: authorization_required, retryable, with a link; he follows it and is served as himself.
	env := callAs(t, ctx, gw, bobOAuthKey, "crm__whoami")
	link := linkPattern.FindString(env.Message)
	if env.OK || env.ErrorCode != "authorization_required" || !env.Retryable || link == "" {
		t.Fatalf("bob before connecting: %+v, want authorization_required with a link", env)
	}
	b := connectAs(t, link, "bob@idp", as)
	if env := callAs(t, ctx, gw, bobOAuthKey, "crm__whoami"); !env.OK || env.Data != "bob@idp" {
		t.Fatalf("bob after connecting: %+v", env)
	}
	if env := callAs(t, ctx, gw, aliceOAuthKey, "crm__whoami"); !env.OK || env.Data != "alice@idp" {
		t.Fatalf("alice after bob connected: %+v", env)
	}
	if n, bad := as.Count("authorization_code"), as.Count("pkce_failed"); n != 2 || bad != 0 {
		t.Errorf("code exchanges %d, PKCE failures %d; want 2, 0", n, bad)
	}

	// The callback replayed (its state, its cookie): refused, nothing exchanged.
	if status, _, _ := b.Get(b.Callback, b.CallbackCookies()...); status != http.StatusBadRequest || as.Count("authorization_code") != 2 {
		t.Errorf("a replayed callback answered %d (code exchanges %d), want 400 and none", status, as.Count("authorization_code"))
	}

	// Audience: alice's crm token is refused by wiki, and the gateway never sends it there.
	crmToken := storedToken(t, gw, "alice", "crm")
	if status := presentToken(t, wiki.URL, crmToken.AccessToken); status != http.StatusUnauthorized {
		t.Errorf("wiki took a token issued for crm: HTTP %d", status)
	}
	if len(wiki.Subjects()) != 0 {
		t.Errorf("wiki served requests before anyone connected it: %v", wiki.Subjects())
	}

	// The upstream stops taking bob's access token: the same call refreshes it and is served.
	refreshes := as.Count("refresh_token")
	as.RevokeAccess("bob@idp")
	if env := callAs(t, ctx, gw, bobOAuthKey, "crm__whoami"); !env.OK || env.Data != "bob@idp" {
		t.Errorf("after the upstream refused bob's token: %+v, want a refreshed token to serve", env)
	}
	if as.Count("refresh_token") != refreshes+1 {
		t.Errorf("%d refreshes, want 1", as.Count("refresh_token")-refreshes)
	}

	// Bob's refresh token revoked too: his next call asks him to connect again; alice is unaffected.
	as.Revoke("bob@idp")
	as.RevokeAccess("bob@idp")
	env = callAs(t, ctx, gw, bobOAuthKey, "crm__whoami")
	if env.OK || env.ErrorCode != "authorization_required" || linkPattern.FindString(env.Message) == "" {
		t.Errorf("after bob's refresh was revoked: %+v, want authorization_required with a link", env)
	}
	if env := callAs(t, ctx, gw, aliceOAuthKey, "crm__whoami"); !env.OK || env.Data != "alice@idp" {
		t.Errorf("alice after bob's revocation: %+v", env)
	}

	_, metrics := adminDo(t, gw, http.MethodGet, "/metrics", nil)
	gw.Close()
	if !strings.Contains(metrics, "toolgate_") {
		t.Fatal("no metrics scraped: the check below would prove nothing")
	}
	assertNoSecrets(t, logs.String()+metrics, path, crmToken.AccessToken, crmToken.RefreshToken)
}

// connectAs drives the consent flow at link as user and fails the test unless it ends connected.
func connectAs(t *testing.T, link, user string, as *testauthserver.Server) *testauthserver.Browser {
	t.Helper()
	b := testauthserver.NewBrowser()
	status, page, err := b.Connect(link, user, as)
	if err != nil || status != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Fatalf("consent flow for %s: %d %v\n%s", user, status, err, page)
	}
	return b
}

func storedToken(t *testing.T, gw *Gateway, principal, upstream string) useroauth.Token {
	t.Helper()
	data, _, err := gw.userAuth.vault.Get(context.Background(), vault.Key{Principal: principal, Upstream: upstream, Kind: vault.OAuth})
	if err != nil {
		t.Fatal(err)
	}
	var tok useroauth.Token
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// presentToken sends an initialize to upstream with token; the HTTP status.
func presentToken(t *testing.T, upstream, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, upstream, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// assertNoSecrets fails when a token or a link signature is in the log or the audit trail.
func assertNoSecrets(t *testing.T, logged, configPath string, secrets ...string) {
	t.Helper()
	audit, _ := os.ReadFile(filepath.Join(filepath.Dir(configPath), "audit.jsonl"))
	for _, s := range secrets {
		if s == "" {
			continue
		}
		probe := s[max(0, len(s)-16):]
		if strings.Contains(logged, probe) || strings.Contains(string(audit), probe) {
			t.Errorf("a token is in the log or the audit trail (%.6s...)", probe)
		}
	}
	sig := regexp.MustCompile(`s=[A-Za-z0-9_-]{40,}`)
	if sig.MatchString(logged) || sig.MatchString(string(audit)) || strings.Contains(logged, "/connect/?") {
		t.Error("a connect link is in the log or the audit trail")
	}
}

// urlElicitor is a client user who, asked by URL-mode elicitation, opens the link and connects as
// user: it accepts at once and signs in meanwhile, as a person would in their browser.
type urlElicitor struct {
	t    *testing.T
	as   *testauthserver.Server
	user string
	done chan error
}

func (e *urlElicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != mcp.ElicitationModeURL || req.Params.URL == "" {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	go func() {
		status, page, err := testauthserver.NewBrowser().Connect(req.Params.URL, e.user, e.as)
		if err == nil && (status != http.StatusOK || !strings.Contains(page, "Connected")) {
			err = fmt.Errorf("the consent flow ended %d", status)
		}
		e.done <- err
	}()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// TestOAuthLinkByURLElicitation: a client that declared elicitation in url mode is offered the connect
// link that way; its user connects while the call waits, and the one call succeeds as them. A client
// that did not declare it gets authorization_required with the link, as before.
func TestOAuthLinkByURLElicitation(t *testing.T) {
	as := testauthserver.Start(t)
	crm, wiki := testauthserver.StartUpstream(t, as), testauthserver.StartUpstream(t, as)
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: writeOAuthGateway(t, crm.URL, wiki.URL), Log: slog.New(slog.NewJSONHandler(logs, nil))})
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
	crmUp := waitUp(t, ctx, gw, "crm")
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first, _ := gw.ConnectLink("alice", "crm")
	connectAs(t, first, "alice@idp", as)
	crmUp()

	e := &urlElicitor{t: t, as: as, user: "bob@idp", done: make(chan error, 1)}
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + bobOAuthKey}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c = client.NewClient(c.GetTransport(), client.WithElicitationHandler(e))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-11-25",
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}}}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "crm__whoami"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var env envelopeAnswer
	_ = json.Unmarshal(raw, &env)
	if !env.OK || env.Data != "bob@idp" {
		t.Errorf("bob's call with URL elicitation: %s, want served as bob@idp in the one call", raw)
	}
	select {
	case err := <-e.done:
		if err != nil {
			t.Error(err)
		}
	case <-ctx.Done():
		t.Fatal("the elicited consent flow never ended")
	}
}

// TestOAuthAcrossReplicas: with state.redis and one connect.key, a link one replica made is honoured
// by another, which takes the callback; the token stored there (in Redis, sealed) serves the user's
// calls through the first replica too. The first link comes from the admin API.
func TestOAuthAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	as := testauthserver.Start(t)
	crm, wiki := testauthserver.StartUpstream(t, as), testauthserver.StartUpstream(t, as)
	t.Setenv("TG_TEST_CONNECT_KEY", "a-connect-key-of-more-than-32-characters-0001")
	t.Setenv("TG_TEST_CRM_SECRET", "crm-client-secret-3e8a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &testkit.LogBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
	}()
	var gws []*Gateway
	var ups []func()
	for range 2 {
		extra := fmt.Sprintf("state: {redis: {url: %q, key_prefix: \"oa:\"}}\nconnect: {key: \"${TG_TEST_CONNECT_KEY}\"}\n", srv.URL())
		path := writeOAuthGatewayWith(t, crm.URL, wiki.URL, extra, fmt.Sprintf("{mode: oauth, list_as: alice, issuer: %q, client_id: tg, client_secret: \"${TG_TEST_CRM_SECRET}\"}", as.Issuer))
		gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close()
		ups = append(ups, waitUp(t, ctx, gw, "crm"))
		if err := gw.Start(ctx); err != nil {
			t.Fatal(err)
		}
		gws = append(gws, gw)
	}
	as.AddClient("tg", "crm-client-secret-3e8a", "http://"+gws[0].Addr()+"/connect/callback", "http://"+gws[1].Addr()+"/connect/callback")
	redistest.WaitFor(t, func() bool { return gws[0].state.Err() == nil && gws[1].state.Err() == nil })

	status, body := adminDo(t, gws[0], http.MethodGet, "/v1/connect-link?principal=alice&upstream=crm", nil)
	var link struct{ URL string }
	if err := json.Unmarshal([]byte(body), &link); status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/connect-link: %d %s", status, body)
	}
	onSecond := strings.Replace(link.URL, gws[0].Addr(), gws[1].Addr(), 1) // replica 1's link, opened at replica 2
	connectAs(t, onSecond, "alice@idp", as)
	ups[1]()
	ups[0]() // replica 1 finds alice's token in Redis at its next attempt
	for i, gw := range gws {
		if env := callAs(t, ctx, gw, aliceOAuthKey, "crm__whoami"); !env.OK || env.Data != "alice@idp" {
			t.Errorf("alice through replica %d: %+v", i+1, env)
		}
	}
	if n := as.Count("authorization_code"); n != 1 {
		t.Errorf("%d code exchanges, want 1", n)
	}
}
