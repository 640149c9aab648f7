package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// keyedUpstream is a Streamable HTTP MCP server that takes only the API keys it knows, in X-Api-Key:
// each user's own and the gateway's service key. whoami answers whose key the request carried; every
// key seen is recorded. An unknown or missing key is refused with 401, as a hosted MCP server does.
type keyedUpstream struct {
	url  string
	mu   sync.Mutex
	seen []string
}

var upstreamKeys = map[string]string{
	"alice-upstream-key-7f3a": "alice",
	"bob-upstream-key-91c2":   "bob",
	"service-key-55d0":        "toolgate-service",
}

func startKeyedUpstream(t *testing.T) *keyedUpstream {
	t.Helper()
	type whoKey struct{}
	s := server.NewMCPServer("orders", "1.0.0")
	s.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		who, _ := ctx.Value(whoKey{}).(string)
		return mcp.NewToolResultText(who), nil
	})
	h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, whoKey{}, upstreamKeys[r.Header.Get("X-Api-Key")])
	}))
	u := &keyedUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		u.mu.Lock()
		u.seen = append(u.seen, key)
		u.mu.Unlock()
		if _, ok := upstreamKeys[key]; !ok || r.Header.Get("Authorization") != "" {
			http.Error(w, "a known X-Api-Key is required", http.StatusUnauthorized)
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

func (u *keyedUpstream) keysSeen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// The callers' API keys to the gateway.
var perUserCallers = map[string]string{"alice": "tg_test_alice_pu", "bob": "tg_test_bob_pu", "carol": "tg_test_carol_pu", "dave": "tg_test_dave_pu"}

const perUserAdminKey = "tg_test_admin_pu"

// writePerUserGateway is a gateway whose upstream orders takes each caller's own key (auth mode
// per_user, in X-Api-Key) and the service key for the gateway's own requests; the vault key comes from
// the environment.
func writePerUserGateway(t *testing.T, orders string) string {
	t.Helper()
	key, err := vault.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TG_TEST_VAULT_KEY", key)
	return writePerUserGatewayWith(t, orders, "")
}

// writePerUserGatewayWith is writePerUserGateway's config with extra appended, the vault key already
// in TG_TEST_VAULT_KEY.
func writePerUserGatewayWith(t *testing.T, orders, extra string) string {
	t.Helper()
	t.Setenv("TG_TEST_ORDERS_SERVICE_KEY", "service-key-55d0")
	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	var keys strings.Builder
	for _, p := range []string{"alice", "bob", "carol", "dave"} {
		fmt.Fprintf(&keys, "    - {principal: %s, sha256: %q}\n", p, authn.HashKey(perUserCallers[p]))
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", key_sha256: %q}
audit: {file: %q}
credentials: {key_env: TG_TEST_VAULT_KEY}
auth:
  api_keys:
%smcpServers:
  orders:
    url: %q
    retry_safe: true   # whoami reads: no duplicate suppression replaying an earlier caller's answer
    egress: {allow: [loopback]}   # the test upstream listens on loopback
    auth:
      mode: per_user
      header: X-Api-Key
      format: "{secret}"
      service_secret: ${TG_TEST_ORDERS_SERVICE_KEY}
%s`, authn.HashKey(perUserAdminKey), filepath.Join(dir, "audit.jsonl"), keys.String(), orders, extra)
	for name, content := range map[string]string{
		"model.conf":    string(model),
		"policy.csv":    "p, caller, orders/*, call, allow\ng, alice, caller\ng, bob, caller\ng, carol, caller\ng, dave, caller\n",
		"toolgate.yaml": cfg,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "toolgate.yaml")
}

// adminDo sends one admin API request and returns the status and body.
func adminDo(t *testing.T, gw *Gateway, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+gw.AdminAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+perUserAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// toolsOf lists the tools the caller sees.
func toolsOf(t *testing.T, ctx context.Context, gw *Gateway, bearer string) []string {
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
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestPerUserThroughTheGateway: through a real MCP client and the whole gateway, two callers reach a
// per_user upstream with their own secrets (the upstream answers whose key it saw), set through the
// admin API and straight in the vault; a caller with none sees the tool listed and gets
// authorization_required naming how to get one, before anything is sent; a caller whose stored secret
// the upstream refuses gets authorization_required too, and the breaker stays closed for the others;
// a revoke through the admin API holds at the next call; the gateway's own requests carry the service
// key; and no secret is in the log, the audit trail, /metrics or the vault file in clear.
func TestPerUserThroughTheGateway(t *testing.T) {
	orders := startKeyedUpstream(t)
	logs := &testkit.LogBuffer{}
	path := writePerUserGateway(t, orders.url)
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

	// alice's key through the admin API, bob's straight into the vault, carol's a key the upstream refuses.
	if status, body := adminDo(t, gw, http.MethodPut, "/v1/credentials/orders/alice", vault.SetRequest{Secret: "alice-upstream-key-7f3a"}); status != http.StatusOK ||
		!strings.Contains(body, `"source":"operator"`) || strings.Contains(body, "7f3a") {
		t.Fatalf("PUT alice: %d %s", status, body)
	}
	for p, secret := range map[string]string{"bob": "bob-upstream-key-91c2", "carol": "carol-revoked-key-0000"} {
		if err := gw.Vault().Put(ctx, vault.Entry{Key: vault.Key{Principal: p, Upstream: "orders", Kind: vault.Secret}, Source: "user"}, []byte(secret)); err != nil {
			t.Fatal(err)
		}
	}
	for _, who := range []string{"alice", "bob", "alice"} {
		if env := callAs(t, ctx, gw, perUserCallers[who], "orders__whoami"); !env.OK || env.Data != who {
			t.Fatalf("%s called orders__whoami: %+v; want the upstream to see their key", who, env)
		}
	}

	// dave has none: the tool is listed, the call answers authorization_required, nothing is sent.
	if tools := toolsOf(t, ctx, gw, perUserCallers["dave"]); !slices.Contains(tools, "orders__whoami") {
		t.Errorf("dave sees %v; the tools of an upstream he has not connected must stay listed", tools)
	}
	seen := len(orders.keysSeen())
	env := callAs(t, ctx, gw, perUserCallers["dave"], "orders__whoami")
	if env.OK || env.ErrorCode != "authorization_required" || !env.Retryable ||
		env.Message != `server "orders" acts as you, and holds no secret of yours yet; ask an operator to set it (toolgate credentials set), then repeat the call` {
		t.Errorf("dave: %+v, want authorization_required asking for an operator", env)
	}
	for _, k := range orders.keysSeen()[seen:] {
		if k != "service-key-55d0" { // only the session's own requests, never one for dave's call
			t.Errorf("dave's call reached the upstream with %q", k)
		}
	}

	// carol's key is refused upstream: authorization_required, as often as she tries, and the breaker
	// (5 failures) stays closed for alice.
	for range 7 {
		env := callAs(t, ctx, gw, perUserCallers["carol"], "orders__whoami")
		if env.OK || env.ErrorCode != "authorization_required" || !strings.Contains(env.Message, "refused the secret stored for you") {
			t.Fatalf("carol: %+v, want authorization_required saying her secret was refused", env)
		}
	}
	if env := callAs(t, ctx, gw, perUserCallers["alice"], "orders__whoami"); !env.OK || env.Data != "alice" {
		t.Fatalf("alice after carol's refusals: %+v (the breaker must not open for one user's stale key)", env)
	}

	// The listing and the revoke.
	status, body := adminDo(t, gw, http.MethodGet, "/v1/credentials?upstream=orders", nil)
	var list vault.ListResponse
	if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil || len(list.Credentials) != 3 ||
		list.Credentials[0].Principal != "alice" || list.Credentials[1].Source != "user" {
		t.Fatalf("GET /v1/credentials: %d %s", status, body)
	}
	if status, body := adminDo(t, gw, http.MethodDelete, "/v1/credentials/orders/alice", nil); status != http.StatusOK || !strings.Contains(body, `"revoked":[{"principal":"alice"`) {
		t.Fatalf("DELETE alice: %d %s", status, body)
	}
	if env := callAs(t, ctx, gw, perUserCallers["alice"], "orders__whoami"); env.ErrorCode != "authorization_required" {
		t.Errorf("alice after the revoke: %+v, want authorization_required", env)
	}
	if env := callAs(t, ctx, gw, perUserCallers["bob"], "orders__whoami"); !env.OK || env.Data != "bob" {
		t.Errorf("bob after alice's revoke: %+v", env)
	}
	if status, _ := adminDo(t, gw, http.MethodDelete, "/v1/credentials/orders/alice", nil); status != http.StatusNotFound {
		t.Errorf("a second revoke: %d, want 404", status)
	}
	if status, body := adminDo(t, gw, http.MethodPut, "/v1/credentials/nope/alice", vault.SetRequest{Secret: "x"}); status != http.StatusNotFound {
		t.Errorf("PUT for an unknown upstream: %d %s", status, body)
	}
	if status, body := adminDo(t, gw, http.MethodPut, "/v1/credentials/orders/alice", map[string]string{"secret": "a\nb"}); status != http.StatusBadRequest ||
		!strings.Contains(body, "control character") {
		t.Errorf("PUT with a newline: %d %s", status, body)
	}

	// The gateway's own requests (initialize, listing) carried the service key and nothing else.
	keys := map[string]bool{}
	for _, k := range orders.keysSeen() {
		keys[k] = true
	}
	if !keys["service-key-55d0"] || !keys["alice-upstream-key-7f3a"] || !keys["bob-upstream-key-91c2"] || keys[""] {
		t.Errorf("the upstream saw keys %v; want the service key, alice's, bob's and never none", keys)
	}

	_, metrics := adminDo(t, gw, http.MethodGet, "/metrics", nil)
	gw.Close()
	vaultFile, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "toolgate.credentials.json"))
	audit, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "audit.jsonl"))
	for _, want := range []string{`"kind":"credential","principal":"alice","decision":"applied","details":{"action":"set","credential_kind":"secret","remote":"127.0.0.1:`,
		`"kind":"credential","principal":"alice","decision":"applied","details":{"action":"revoke","credential_kind":"secret","remote":"127.0.0.1:`} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("the audit trail has no record %s...", want)
		}
	}
	if !strings.Contains(string(vaultFile), `"principal": "bob"`) || len(audit) == 0 || !strings.Contains(metrics, "toolgate_") {
		t.Fatal("the vault file, the audit trail or the metrics are missing: the check below would prove nothing")
	}
	for _, secret := range []string{"alice-upstream-key-7f3a", "bob-upstream-key-91c2", "carol-revoked-key-0000", "service-key-55d0", os.Getenv("TG_TEST_VAULT_KEY")} {
		for where, text := range map[string]string{"log": logs.String(), "audit trail": string(audit), "metrics": metrics, "vault file": string(vaultFile)} {
			if strings.Contains(text, secret) {
				t.Errorf("a secret (%.6s...) is in the %s", secret, where)
			}
		}
	}
}

// TestPerUserAcrossReplicas: with state.redis, a secret set through one replica's admin API is used by
// another at its next call, and a revoke through the second holds on the first at once: the vault is
// in Redis, sealed, and no credentials file is written.
func TestPerUserAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	orders := startKeyedUpstream(t)
	key, err := vault.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TG_TEST_VAULT_KEY", key)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var gws []*Gateway
	logs := &testkit.LogBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
	}()
	for range 2 {
		path := writePerUserGatewayWith(t, orders.url, fmt.Sprintf("state: {redis: {url: %q, key_prefix: \"pu:\"}}\n", srv.URL()))
		gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close()
		if err := gw.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), "toolgate.credentials.json")); !os.IsNotExist(err) {
			t.Error("with state.redis a credentials file was written")
		}
		gws = append(gws, gw)
	}
	redistest.WaitFor(t, func() bool { return gws[0].state.Err() == nil && gws[1].state.Err() == nil })
	if status, body := adminDo(t, gws[0], http.MethodPut, "/v1/credentials/orders/alice", vault.SetRequest{Secret: "alice-upstream-key-7f3a"}); status != http.StatusOK {
		t.Fatalf("PUT through replica 1: %d %s", status, body)
	}
	if env := callAs(t, ctx, gws[1], perUserCallers["alice"], "orders__whoami"); !env.OK || env.Data != "alice" {
		t.Fatalf("alice through replica 2: %+v", env)
	}
	if status, body := adminDo(t, gws[1], http.MethodDelete, "/v1/credentials/orders/alice", nil); status != http.StatusOK {
		t.Fatalf("DELETE through replica 2: %d %s", status, body)
	}
	if env := callAs(t, ctx, gws[0], perUserCallers["alice"], "orders__whoami"); env.ErrorCode != "authorization_required" {
		t.Fatalf("alice through replica 1 after the revoke: %+v, want authorization_required", env)
	}

	// Redis down: a call is not sent and answers upstream_unavailable, never authorization_required.
	srv.Kill()
	redistest.WaitFor(t, func() bool { return gws[0].state.Err() != nil })
	if env := callAs(t, ctx, gws[0], perUserCallers["bob"], "orders__whoami"); env.ErrorCode != "upstream_unavailable" || !env.Retryable {
		t.Fatalf("with Redis down: %+v, want upstream_unavailable", env)
	}
}

// TestPerUserWrongKeyStopsStart: a gateway whose key opens none of the stored credentials (the key was
// replaced instead of rotated) does not start, and says which key and what to do.
func TestPerUserWrongKeyStopsStart(t *testing.T) {
	orders := startKeyedUpstream(t)
	path := writePerUserGateway(t, orders.url)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := OpenVault(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Put(context.Background(), vault.Entry{Key: vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}}, []byte("alice-upstream-key-7f3a")); err != nil {
		t.Fatal(err)
	}
	other, _ := vault.NewKey()
	t.Setenv("TG_TEST_VAULT_KEY", other)
	gw, err := New(context.Background(), Options{ConfigPath: path})
	if err == nil {
		gw.Close()
		t.Fatal("the gateway started with a key that opens none of the stored credentials")
	}
	if want := "cannot open the credential store: the configured credentials key opens none of the 1 stored credentials (environment variable TG_TEST_VAULT_KEY)"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("New: %v\nwant the prefix %s", err, want)
	}
}
