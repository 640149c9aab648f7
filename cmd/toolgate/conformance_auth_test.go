package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/gateway"
)

// The suite's client auth/* scenarios run a protected mock server and its authorization server; the
// client under test is toolgate with the mock as its one upstream in auth mode oauth. The driver
// plays the user: it fetches the connect link for the principal, opens it in a "browser" (an HTTP
// client with cookies that follows redirects, as the mock authorization server signs in and consents
// by itself), waits for the upstream to come up with that user's token, then lists and calls its
// tools through toolgate with mcp-go's client. Scenarios toolgate does not pass are listed with a
// reason in testdata/conformance/client-auth.txt; a stale entry fails.
var conformanceAuthScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3", "auth/basic-cimd",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
	"auth/scope-step-up", "auth/scope-retry-limit", "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none", "auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
	"auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch", "auth/offline-access-scope",
	"auth/offline-access-not-supported", "auth/client-credentials-jwt", "auth/client-credentials-basic",
	"auth/cross-app-access-complete-flow",
}

func TestConformanceClientAuthScenarios(t *testing.T) {
	node, cli := suiteCLI(t)
	model, _ := filepath.Abs("../../model.conf")
	expected := expectedFailures(t, "testdata/conformance/client-auth.txt")
	command := fmt.Sprintf("env %s=conformance-auth-client TOOLGATE_TEST_MODEL=%s GORACE=atexit_sleep_ms=0 %s", execRole, model, self(t))
	var table strings.Builder
	passed := 0
	for _, scenario := range conformanceAuthScenarios {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, cli, "client", "--command", command, "--scenario", scenario)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		cancel()
		ok := err == nil && clientPassed.Match(out)
		if ok {
			passed++
		}
		fmt.Fprintf(&table, "%-45s %s\n", scenario, mark(ok))
		reason, listed := expected[scenario]
		switch {
		case !ok && !listed:
			t.Errorf("client scenario %s failed through toolgate:\n%s", scenario, out)
		case ok && listed:
			t.Errorf("stale expected failure %s (%s): it passes", scenario, reason)
		}
	}
	t.Logf("\nclient auth scenarios through toolgate's upstream side (%d of %d pass):\n%s", passed, len(conformanceAuthScenarios), table.String())
}

// conformanceBase is the gateway's public URL in the auth scenarios: basic-cimd expects the client id
// https://conformance-test.local/client-metadata.json, and a metadata document is served under the
// gateway's base URL. The driver's browser reaches that name at the gateway's listener.
const conformanceBase = "https://conformance-test.local"

// conformanceContext is what a scenario gives its client in MCP_CONFORMANCE_CONTEXT.
type conformanceContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// conformanceAuthClientMain is the client under test for an auth scenario: toolgate, on a TLS
// listener of its own (a Client ID Metadata Document's URL must be https), in front of the mock
// server at the last argument in auth mode oauth.
func conformanceAuthClientMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: conformance-auth-client <server url>")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := mockAuthUpstreamConfig(args[len(args)-1], conformanceBase, os.Getenv("TOOLGATE_TEST_MODEL"), os.Getenv("MCP_CONFORMANCE_CONTEXT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(filepath.Dir(cfg))
	gw, code := startGateway(context.Background(), cfg, log)
	if gw == nil {
		return code
	}
	defer gw.Close()
	endpoint := gw.MCPHandler()
	srv := httptest.NewUnstartedServer(gw.WithConnectPages(endpoint))
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()
	defer endpoint.Shutdown(context.Background())
	if err := driveAuthScenario(gw, srv); err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		return 1
	}
	return 0
}

// mockAuthUpstreamConfig writes a config with the mock at upstream as the one unprefixed upstream, in
// auth mode oauth (with the scenario's pre-registered client, if it gives one), and an anonymous
// principal allowed everything of it.
func mockAuthUpstreamConfig(upstream, base, modelPath, scenarioContext string) (string, error) {
	var sc conformanceContext
	if scenarioContext != "" {
		_ = json.Unmarshal([]byte(scenarioContext), &sc)
	}
	dir, err := os.MkdirTemp("", "toolgate-conformance-auth")
	if err != nil {
		return "", err
	}
	model, err := os.ReadFile(modelPath)
	if err != nil {
		return "", err
	}
	auth := "{mode: oauth, list_as: conformance}"
	if sc.ClientID != "" {
		os.Setenv("TG_CONFORMANCE_SECRET", sc.ClientSecret)
		// A client secret is bound to its authorization server (auth.issuer): the operator reads it
		// once from the upstream's protected-resource metadata, as this does.
		issuer, err := metadataIssuer(upstream)
		if err != nil {
			return "", err
		}
		auth = fmt.Sprintf("{mode: oauth, list_as: conformance, issuer: %q, client_id: %q, client_secret: \"${TG_CONFORMANCE_SECRET}\"}", issuer, sc.ClientID)
		if sc.ClientSecret == "" {
			auth = fmt.Sprintf("{mode: oauth, list_as: conformance, client_id: %q}", sc.ClientID)
		}
	}
	os.Setenv("TOOLGATE_CREDENTIALS_KEY", "q1ouvDvb0x2fWw4yCwD5yVn0dE6XwTq0Yl2c9S5vY4M=") // a test key: the vault is a temporary file
	files := map[string]string{
		"model.conf": string(model),
		"policy.csv": "p, conformance, mock/*, call, allow\np, conformance, mock/*, read, allow\np, conformance, mock/*, get, allow\n",
		"toolgate.yaml": fmt.Sprintf("auth:\n  allow_anonymous: conformance\nconnect:\n  base_url: %q\n  client_metadata_url: %q\n"+
			"mcpServers:\n  mock:\n    url: %q\n    prefix: \"\"\n    egress: {allow: [loopback]}\n    auth: %s\n",
			base, base+"/client-metadata.json", upstream, auth),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "toolgate.yaml"), nil
}

// driveAuthScenario connects the principal through the connect page, then lists and calls the mock's
// tools through toolgate.
func driveAuthScenario(gw *gateway.Gateway, srv *httptest.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	up := make(chan struct{}, 1)
	gw.Upstreams().OnStatusChange(func(server string, isUp bool, _ string) {
		if isUp {
			select {
			case up <- struct{}{}:
			default:
			}
		}
	})
	link, err := gw.ConnectLink("conformance", "mock")
	if err != nil {
		return err
	}
	if err := openConnectLink(ctx, srv, link); err != nil {
		return err
	}
	select { // the event, not Status, which says up before the catalog lists the tools
	case <-up:
	case <-ctx.Done():
		_, why := gw.Upstreams().Status("mock")
		return fmt.Errorf("the upstream did not come up after connecting: %s", why)
	}
	return callEveryTool(ctx, srv)
}

// connectLinkIn is the connect link in an authorization_required answer.
var connectLinkIn = regexp.MustCompile(`https://\S+/connect/\?\S+`)

// openConnectLink is the user's browser: it opens the link, presses the connect button and follows
// the redirects through the authorization server back to the callback, which must say "Connected".
func openConnectLink(ctx context.Context, srv *httptest.Server, link string) error {
	jar, _ := cookiejar.New(nil)
	gatewayAddr := srv.Listener.Addr().String()
	browser := &http.Client{Jar: jar, Transport: &http.Transport{
		// conformance-test.local is the gateway: the name its test certificate does not carry, and
		// that resolves nowhere.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasPrefix(addr, "conformance-test.local:") {
				addr = gatewayAddr
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"},
	}}
	defer browser.CloseIdleConnections()
	u, err := url.Parse(link)
	if err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, conformanceBase+"/connect/authorize", strings.NewReader(u.RawQuery))
	req.URL.RawQuery = ""
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := browser.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Connected") {
		return errors.New("the consent flow did not end connected: " + resp.Status)
	}
	return nil
}

func callEveryTool(ctx context.Context, srv *httptest.Server) error {
	tr, err := transport.NewStreamableHTTP(srv.URL+"/mcp", transport.WithHTTPBasicClient(srv.Client()))
	if err != nil {
		return err
	}
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "toolgate-conformance-driver", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return err
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	for _, tool := range tools.Tools {
		if err := callAsUser(ctx, c, srv, tool.Name); err != nil {
			return err
		}
	}
	return nil
}

// callAsUser calls tool; when the answer is authorization_required (the upstream wants more scope),
// the user opens its link and the call is repeated, once.
func callAsUser(ctx context.Context, c *client.Client, srv *httptest.Server, tool string) error {
	for attempt := 0; ; attempt++ {
		call := mcp.CallToolRequest{}
		call.Params.Name, call.Params.Arguments = tool, map[string]any{}
		res, err := c.CallTool(ctx, call)
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		out, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintf(os.Stderr, "%s -> %s\n", tool, out)
		var env struct {
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
		}
		_ = json.Unmarshal(out, &env)
		link := connectLinkIn.FindString(env.Message)
		if env.ErrorCode != "authorization_required" || link == "" || attempt > 0 {
			return nil
		}
		if err := openConnectLink(ctx, srv, link); err != nil {
			return err
		}
	}
}

// TestCheckSkipsOAuthUpstreams: toolgate check holds no user's token, so an auth mode oauth upstream
// is not connected by it: a warning says so, and the config checks clean.
func TestCheckSkipsOAuthUpstreams(t *testing.T) {
	t.Setenv("TOOLGATE_CREDENTIALS_KEY", "q1ouvDvb0x2fWw4yCwD5yVn0dE6XwTq0Yl2c9S5vY4M=")
	cfg := writeConfig(t, "  crm:\n    url: \"https://mcp.crm.example.com/mcp\"\n    auth: {mode: oauth, list_as: alice}\n")
	var out strings.Builder
	if code := check(cfg, false, &out); code != 0 || !strings.Contains(out.String(), "warning: mcpServers.crm: not checked: it acts as each user (auth mode oauth)") {
		t.Errorf("toolgate check: exit %d\n%s", code, out.String())
	}
}

// metadataIssuer is the first authorization server the upstream's protected-resource metadata (at
// the path-aware well-known location) names.
func metadataIssuer(upstream string) (string, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return "", err
	}
	resp, err := http.Get(u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.Path, "/"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var m struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m.AuthorizationServers) == 0 {
		return "", fmt.Errorf("the upstream's protected-resource metadata names no authorization server (HTTP %d, %v)", resp.StatusCode, err)
	}
	return m.AuthorizationServers[0], nil
}
