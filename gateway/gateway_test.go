package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/testauthserver"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/internal/testupstream"
)

// The test binary is also the upstream: with upstreamRole set it runs the
// test upstream on stdio, a real process the gateway starts.
const upstreamRole = "TOOLGATE_GATEWAY_TEST_UPSTREAM"

// TestMain fails the package if a test leaves a goroutine behind: a New
// that failed halfway, or a Close, that left a part running.
func TestMain(m *testing.M) {
	if os.Getenv(upstreamRole) != "" {
		os.Exit(testupstream.Main(os.Args[1:]))
	}
	if os.Getenv(testauthserver.UpstreamRole) != "" {
		os.Exit(testauthserver.UpstreamMain())
	}
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections' loops alive briefly after a test.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

const aliceKey = "tg_test_alice"

// writeGateway writes a config with one stdio upstream ("echoes", the test
// upstream) that alice may call, listeners on free loopback ports, and the
// audit trail on; extra is appended to it.
func writeGateway(t *testing.T, command, extra string) string {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if command == "" {
		command = self
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
audit: {file: %q}
auth:
  api_keys:
    - {principal: alice, sha256: %q}
mcpServers:
  echoes:
    command: %q
    args: ["-name", "echoes"]
    env: {%s: "1", GORACE: "atexit_sleep_ms=0"}
%s`, filepath.Join(dir, "audit.jsonl"), authn.HashKey(aliceKey), command, upstreamRole, extra)
	for name, content := range map[string]string{
		"model.conf":    string(model),
		"policy.csv":    "p, alice, echoes/*, call, allow\n",
		"toolgate.yaml": cfg,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "toolgate.yaml")
}

// A gateway built in-process serves a real MCP client over HTTP after
// Start, on the ports it reports; Close ends the listeners, the upstream
// process and everything else it started (goleak checks the rest).
func TestGatewayLifecycle(t *testing.T) {
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: writeGateway(t, "", ""), Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			gw.Close()
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echoes__echo", Arguments: map[string]any{"said": "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		OK bool `json:"ok"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &env); err != nil || !env.OK {
		t.Fatalf("echoes__echo answered %s", raw)
	}
	_ = c.Close()
	resp, err := http.Get("http://" + gw.AdminAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("admin /healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	addr := gw.Addr()
	gw.Close()
	closed = true
	if _, err := http.Get("http://" + addr + "/mcp"); err == nil {
		t.Fatalf("%s still answers after Close", addr)
	}
	// Close ended the watchers Start began, although ctx is still live.
	goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// When the admin listener cannot open, Start fails saying so, and serves
// nothing: the MCP listener it had opened is closed again.
func TestStartFailsWhole(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := writeGateway(t, "", "")
	write(t, cfg, strings.Replace(string(mustRead(t, cfg)), `admin: {listen: "127.0.0.1:0"}`, `admin: {listen: "`+busy.Addr().String()+`"}`, 1))
	gw, err := New(context.Background(), Options{ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	err = gw.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "admin API on "+busy.Addr().String()) {
		t.Fatalf("Start: %v, want the admin listener named", err)
	}
	if gw.Addr() != "" {
		t.Fatalf("the MCP listener %s is still open after Start failed", gw.Addr())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A New that fails halfway reports which part failed, under the heading an
// operator reads, and releases what it had opened before (the audit trail,
// the authenticator, the tracer: goleak finds any left running).
func TestNewFailureReleasesWhatItOpened(t *testing.T) {
	// A broken pin file fails one of the last parts New builds.
	bad := writeGateway(t, "", "")
	if err := os.WriteFile(filepath.Join(filepath.Dir(bad), "toolgate.pins.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Options{ConfigPath: bad})
	var se *StartError
	if !errors.As(err, &se) || se.What != "invalid tool pins" {
		t.Fatalf("New: %v, want a StartError for the pins", err)
	}
}

// A mistake in a file is reported before anything starts.
func TestNewRefusesBadPolicy(t *testing.T) {
	cfg := writeGateway(t, "", "")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "policy.csv"), []byte("p, alice, nowhere/*, call, allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Options{ConfigPath: cfg})
	var se *StartError
	if !errors.As(err, &se) || se.What != "invalid policy" || !strings.Contains(se.Err.Error(), "policy.csv:1") {
		t.Fatalf("New: %v, want invalid policy naming policy.csv:1", err)
	}
}

// The cleanup stack releases in the reverse of the order things were
// opened, once.
func TestCleanupRunsBackwardsOnce(t *testing.T) {
	var c cleanup
	var order []int
	for i := range 3 {
		c.add(func() { order = append(order, i) })
	}
	c.run()
	c.run()
	if fmt.Sprint(order) != "[2 1 0]" {
		t.Fatalf("released in order %v", order)
	}
}
