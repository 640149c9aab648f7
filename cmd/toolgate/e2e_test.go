package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/testupstream"
)

// hostileServers: "hostile" serves every test tool (with a short timeout
// on sleep and a small cap on big), "crashy" is crashed by its own test,
// "broken" never starts.
func hostileServers(t *testing.T) string {
	return stdioUpstream(t, "hostile", "    tools:\n      sleep: {timeout: 300ms}\n      big: {max_result_bytes: 65536}\n", "-hostile-schemas", "-stderr-line", "hello from hostile") +
		stdioUpstream(t, "crashy", "") +
		stdioUpstream(t, "broken", "", "-exit-at-start", "3")
}

type codeCase struct {
	name, tool, args string
	wantCode         string // "" = ok
	wantInMsg        string
}

// every error code the core gateway produces, from real upstream processes.
var codeCases = []codeCase{
	{"ok", "hostile__echo", `{"a":1}`, "", ""},
	{"tool_not_found", "hostile__nope", `{}`, "tool_not_found", "hostile__nope"},
	{"tool_not_allowed", "hostile__headers", `{}`, "tool_not_allowed", ""},
	{"invalid_arguments", "hostile__sleep", `{"ms":"soon"}`, "invalid_arguments", "ms"},
	{"arguments not an object", "hostile__echo", `[1,2]`, "invalid_arguments", "object"},
	{"upstream_unavailable (never started)", "broken__echo", `{}`, "upstream_unavailable", "not connected"},
	{"tool_timeout", "hostile__sleep", `{"ms":5000}`, "tool_timeout", "300ms"},
	{"tool_failed (isError)", "hostile__fail", `{"message":"m"}`, "tool_failed", "boom: red"},
	{"tool_failed (JSON-RPC error)", "hostile__rpc_error", `{}`, "tool_failed", ""},
	{"upstream_error (garbage)", "hostile__garbage", `{}`, "upstream_error", ""},
	{"upstream_error (unknown content type)", "hostile__unknown_content", `{}`, "upstream_error", "content"},
	{"result_too_large", "hostile__big", `{"bytes":10485760}`, "result_too_large", "65536"},
	{"invalid_result", "hostile__bad_output", `{}`, "invalid_result", "value"},
}

func checkCodes(t *testing.T, c *client.Client) {
	for _, tc := range codeCases {
		t.Run(tc.name, func(t *testing.T) {
			res, env := callE2E(t, c, tc.tool, tc.args)
			code, _ := env["error_code"].(string)
			if code != tc.wantCode {
				t.Fatalf("error_code %q, want %q; envelope %v", code, tc.wantCode, env)
			}
			if res.IsError != (tc.wantCode != "") || env["ok"] != (tc.wantCode == "") {
				t.Fatalf("isError=%v ok=%v for code %q", res.IsError, env["ok"], code)
			}
			if msg, _ := env["message"].(string); !strings.Contains(msg, tc.wantInMsg) {
				t.Errorf("message %q lacks %q", msg, tc.wantInMsg)
			}
			if strings.ContainsAny(fmt.Sprint(env["message"]), "\x1b\x07") {
				t.Errorf("control characters reached the client: %q", env["message"])
			}
		})
	}
}

func TestErrorCodesOverHTTP(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, hostileServers(t)))
	checkCodes(t, connectHTTP(t, url, aliceKey))
}

func TestErrorCodesOverStdio(t *testing.T) {
	checkCodes(t, connectStdio(t, writeConfig(t, hostileServers(t))))
}

// A crashing upstream breaks only its own call (outcome unknown) and then
// answers upstream_unavailable; the other upstream keeps serving.
func TestCrashedUpstreamIsolated(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, hostileServers(t)))
	c := connectHTTP(t, url, aliceKey)
	_, env := callE2E(t, c, "crashy__crash", `{}`)
	if env["error_code"] != "upstream_error" {
		t.Fatalf("crash mid-call: %v, want upstream_error", env)
	}
	_, env = callE2E(t, c, "crashy__echo", `{}`)
	if env["error_code"] != "upstream_unavailable" || env["retryable"] != true {
		t.Fatalf("after the crash: %v, want upstream_unavailable retryable", env)
	}
	if _, env = callE2E(t, c, "hostile__echo", `{"still":"here"}`); env["ok"] != true {
		t.Fatalf("other upstream hurt: %v", env)
	}
}

func TestUnauthenticatedHTTPGets401(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	cases := []struct{ name, auth string }{
		{"no credential", ""},
		{"wrong key", "Bearer tg_wrong"},
		{"not bearer", "Basic YWxpY2U6eA=="},
		{"empty bearer", "Bearer "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("status %d, WWW-Authenticate %q; want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// DNS rebinding: a loopback listener refuses a request whose Host is not
// loopback, even with a valid key.
func TestForeignHostRefused(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Host = "evil.example:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d for a foreign Host, want 403", resp.StatusCode)
	}
}

func TestForeignOriginRefused(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d for a foreign Origin, want 403", resp.StatusCode)
	}
}

func TestToolsListFilteredPerPrincipal(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	alice := toolNames(t, connectHTTP(t, url, aliceKey))
	bob := toolNames(t, connectHTTP(t, url, bobKey))
	if !contains(alice, "hostile__echo") || !contains(alice, "hostile__sleep") || contains(alice, "hostile__headers") {
		t.Errorf("alice sees %v", alice)
	}
	if len(bob) != 1 || bob[0] != "hostile__echo" {
		t.Errorf("bob sees %v, want only hostile__echo", bob)
	}
	for _, n := range append(alice, bob...) {
		if strings.Contains(n, ":") {
			t.Errorf("internal tool %q listed", n)
		}
	}
}

// Hostile schemas quarantine only their own tool, quickly, and check shows why.
func TestHostileSchemasQuarantined(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", "", "-hostile-schemas"))
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	names := toolNames(t, c)
	for _, bad := range []string{"remote_ref", "file_ref", "self_ref", "deep_allof"} {
		if contains(names, "hostile__"+bad) {
			t.Errorf("%s is listed", bad)
		}
		if _, env := callE2E(t, c, "hostile__"+bad, `{}`); env["error_code"] != "tool_not_found" {
			t.Errorf("%s callable: %v", bad, env)
		}
	}
	if _, env := callE2E(t, c, "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("a healthy tool of the same server suffered: %v", env)
	}
	var out bytes.Buffer
	if code := check(cfg, false, &out); code == 0 {
		t.Errorf("check passed with quarantined tools:\n%s", out.String())
	}
	for _, bad := range []string{"remote_ref", "file_ref", "self_ref", "deep_allof"} {
		if !strings.Contains(out.String(), fmt.Sprintf("tool %q quarantined", bad)) {
			t.Errorf("check does not report %s:\n%s", bad, out.String())
		}
	}
}

// An integer above 2^53 reaches the upstream and comes back exactly.
func TestBigIntegerExact(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	res, _ := callE2E(t, connectHTTP(t, url, aliceKey), "hostile__echo", `{"id":9007199254740993}`)
	if !strings.Contains(string(res.RawStructuredContent), `"data":{"id":9007199254740993}`) {
		t.Fatalf("big integer altered: %s", res.RawStructuredContent)
	}
}

// The child gets the allowlist plus its configured env, never the
// gateway's other variables; its stderr is logged tagged with its name.
func TestStdioUpstreamEnvironmentAndStderr(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_SECRET", "must-not-leak")
	url, logs := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "", "-stderr-line", "hello from hostile")))
	_, env := callE2E(t, connectHTTP(t, url, aliceKey), "hostile__env", `{}`)
	data, _ := env["data"].(map[string]any)
	if _, leaked := data["TOOLGATE_TEST_SECRET"]; leaked || data[execRole] != "upstream" || data["PATH"] == nil {
		t.Fatalf("child environment wrong: %v", data)
	}
	logs.AwaitText(t, "hello from hostile") // read from the child's stderr on a goroutine of its own
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "hello from hostile") && !strings.Contains(line, `"server":"hostile"`) {
			t.Fatalf("stderr line not logged with the server tag: %s", line)
		}
	}
}

// Upstreams over Streamable HTTP and legacy SSE both work.
func TestHTTPAndSSEUpstreams(t *testing.T) {
	httpURL, stopHTTP, err := testupstream.StartHTTP(testupstream.Options{Name: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopHTTP()
	sseURL, stopSSE, err := testupstream.StartSSE(testupstream.Options{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopSSE()
	servers := fmt.Sprintf("  hostile:\n    url: %q\n    egress: {allow: [loopback]}\n  viasse:\n    url: %q\n    egress: {allow: [loopback]}\n    type: sse\n", httpURL, sseURL)
	url, _ := httpGateway(t, writeConfig(t, servers))
	c := connectHTTP(t, url, aliceKey)
	for _, tool := range []string{"hostile__echo", "viasse__echo"} {
		if res, env := callE2E(t, c, tool, `{"n":9007199254740993}`); env["ok"] != true || !strings.Contains(string(res.RawStructuredContent), "9007199254740993") {
			t.Errorf("%s: %v", tool, env)
		}
	}
	if _, env := callE2E(t, c, "hostile__big", `{"bytes":10485760}`); env["error_code"] != "result_too_large" {
		t.Errorf("10 MiB over Streamable HTTP: %v", env)
	}
}

// The seed's scenario on the built-in demo, as the README shows it.
func TestDemoScenario(t *testing.T) {
	t.Setenv("TOOLGATE_SELF", self(t))
	cfg := writeConfig(t, fmt.Sprintf("  orders:\n    command: \"${TOOLGATE_SELF}\"\n    args: [demo-orders]\n    env: {%s: toolgate, GORACE: \"atexit_sleep_ms=0\"}\n", execRole))
	write(t, strings.TrimSuffix(cfg, "toolgate.yaml")+"policy.csv", mustRead(t, "../../policy.csv")+"\ng, "+"alice_demo, support_agent\n")
	url, _ := httpGateway(t, cfg)
	c := connectHTTP(t, url, aliceKey) // alice is support_agent in the repo policy
	if _, env := callE2E(t, c, "orders__update_order_status", `{"order_id":4821,"status":"shipped"}`); env["ok"] != true ||
		env["data"].(map[string]any)["updated"] != true {
		t.Fatalf("support agent update: %v", env)
	}
	if _, env := callE2E(t, connectHTTP(t, url, bobKey), "orders__update_order_status", `{"order_id":4821,"status":"shipped"}`); env["error_code"] != "tool_not_allowed" {
		t.Fatalf("viewer update: %v", env)
	}
	if _, env := callE2E(t, c, "orders__update_order_status", `{"order_id":4821,"status":"teleported"}`); env["error_code"] != "invalid_arguments" {
		t.Fatalf("bad status: %v", env)
	}
	// The repo policy lets support agents refund up to 100: the condition
	// is decided on the validated arguments, at its boundary.
	if _, env := callE2E(t, c, "orders__refund_order", `{"order_id":4821,"amount":100.01,"reason":"damaged"}`); env["error_code"] != "tool_not_allowed" {
		t.Fatalf("refund over the limit: %v", env)
	}
	if _, env := callE2E(t, c, "orders__refund_order", `{"order_id":4821,"amount":100,"reason":"damaged"}`); env["ok"] != true {
		t.Fatalf("refund at the limit: %v", env)
	}
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var _ = json.Valid
var _ = mcp.LATEST_PROTOCOL_VERSION
var _ = context.Background

// The client's credential never reaches an upstream; the upstream's own
// configured headers do.
func TestClientCredentialNeverForwarded(t *testing.T) {
	upURL, stop, err := testupstream.StartHTTP(testupstream.Options{Name: "rec"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	t.Setenv("REC_TOKEN", "upstream-secret")
	url, _ := httpGateway(t, writeConfig(t, fmt.Sprintf("  rec:\n    url: %q\n    egress: {allow: [loopback]}\n    headers: {X-Upstream-Token: \"${REC_TOKEN}\"}\n", upURL)))
	_, env := callE2E(t, connectHTTP(t, url, aliceKey), "rec__headers", `{}`)
	got := fmt.Sprint(env["data"])
	if env["ok"] != true || !strings.Contains(got, "upstream-secret") {
		t.Fatalf("configured upstream header missing: %v", env)
	}
	if strings.Contains(got, aliceKey) || strings.Contains(got, "Authorization") {
		t.Fatalf("client credential forwarded upstream: %s", got)
	}
}

// Whatever an upstream writes reaches the client cleaned: control and
// escape characters in content and in data (even as JSON escapes), and no
// upstream _meta.
func TestUpstreamTextSanitised(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	c := connectHTTP(t, url, aliceKey)
	res, _ := callE2E(t, c, "hostile__ansi", `{}`)
	for _, b := range res.Content {
		if text, ok := b.(mcp.TextContent); ok && strings.ContainsAny(text.Text, "\x1b\x00\u202e\r") {
			t.Errorf("content text not sanitised: %q", text.Text)
		}
	}
	res, env := callE2E(t, c, "hostile__with_meta", `{}`)
	if raw, _ := json.Marshal(res); env["ok"] != true || strings.Contains(string(raw), "upstream-internal") {
		t.Errorf("upstream _meta leaked: %s", raw)
	}
	_, env = callE2E(t, c, "hostile__echo", `{"s":"a\u001b]0;PWNED\u0007b\u202ec"}`)
	if data, _ := env["data"].(map[string]any); data["s"] != "abc" {
		t.Errorf("escaped control characters in data survived: %q", data["s"])
	}
}
