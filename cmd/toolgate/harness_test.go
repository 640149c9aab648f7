package main

import (
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testkit"

	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/conformanceserver"
	"github.com/toolgate/toolgate/internal/testupstream"
)

// The test binary plays three roles, chosen by TOOLGATE_TEST_EXEC: the
// tests themselves, a test upstream process, and toolgate itself (for the
// stdio end-to-end tests and the demo upstream). Re-executing the test
// binary gives real processes without a separate build step.
const execRole = "TOOLGATE_TEST_EXEC"

func TestMain(m *testing.M) {
	switch os.Getenv(execRole) {
	case "upstream":
		os.Exit(testupstream.Main(os.Args[1:]))
	case "toolgate":
		os.Exit(run(os.Args[1:]))
	case "conformance":
		os.Exit(conformanceserver.Main(os.Args[1:]))
	case "conformance-client":
		os.Exit(conformanceClientMain(os.Args[1:]))
	case "conformance-auth-client":
		os.Exit(conformanceAuthClientMain(os.Args[1:]))
	}
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections' loops alive briefly after a test.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		// Not internal/poll.runtime_pollWait: a goroutine blocked there is a
		// connection someone left open (a server's, or an idle client's
		// readLoop whose server was never closed).
		// mcp-go v1.2.1: a GET stream that arrives while the HTTP endpoint
		// shuts down can start a listening pump Shutdown has passed by (see
		// internal/conformanceserver's TestMain); the race is in mcp-go.
		goleak.IgnoreTopFunction("github.com/mark3labs/mcp-go/server.(*StreamableHTTPServer).startListeningPump.func1"),
	)
}

// self is the test binary, started as an upstream or as toolgate.
func self(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// Demo keys: the plain values of the hashes written into test configs.
const (
	aliceKey = "tg_test_alice"
	bobKey   = "tg_test_bob"
)

// testPolicy: alice may call every tool of every configured server except
// hostile/headers; bob may only call hostile/echo; local (stdio) is alice's
// twin. The lint wants every object to name a configured server, so the
// lines follow the servers in the config.
func testPolicy(servers string) string {
	var b strings.Builder
	for _, m := range serverName.FindAllStringSubmatch(servers, -1) {
		fmt.Fprintf(&b, "p, caller, %s/*, call, allow\n", m[1])
		fmt.Fprintf(&b, "p, caller, %s/*, read, allow\np, caller, %s/*, get, allow\n", m[1], m[1])
		if m[1] == "hostile" {
			b.WriteString("p, caller, hostile/headers, call, deny\np, reader, hostile/echo, call, allow\n")
		}
	}
	b.WriteString("g, alice, caller\ng, local, caller\ng, bob, reader\n")
	return b.String()
}

var serverName = regexp.MustCompile(`(?m)^  ([A-Za-z0-9_-]+):$`)

// writeConfig writes toolgate.yaml (with servers as YAML under
// mcpServers), model.conf and policy.csv into a fresh directory.
//
// It leaves listen and admin out, for the tests to add (an in-process
// gateway, httpGateway, never opens either listener: it serves through
// httptest on a port the kernel picks). A test that opens them, running
// `toolgate serve`, goes through serveProcess, which wants port 0 for both.
func writeConfig(t testing.TB, servers string) string {
	t.Helper()
	dir := t.TempDir()
	model, err := os.ReadFile("../../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate suppression only joins calls in flight here (window 0s):
	// most tests repeat identical calls on purpose and mean them to run.
	// The duplicate-suppression tests set a window of their own.
	cfg := fmt.Sprintf(`limits:
  dedup: {window: 0s}
auth:
  stdio_principal: local
  api_keys:
    - {principal: alice, sha256: %q}
    - {principal: bob, sha256: %q}
mcpServers:
%s`, authn.HashKey(aliceKey), authn.HashKey(bobKey), servers)
	write(t, filepath.Join(dir, "model.conf"), string(model))
	write(t, filepath.Join(dir, "policy.csv"), testPolicy(servers))
	write(t, filepath.Join(dir, "toolgate.yaml"), cfg)
	return filepath.Join(dir, "toolgate.yaml")
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// stdioUpstream is the YAML of a server entry that runs the test upstream.
func stdioUpstream(t testing.TB, name string, extra string, flags ...string) string {
	args := `["-name", "` + name + `"`
	for _, f := range flags {
		args += fmt.Sprintf(", %q", f)
	}
	args += "]"
	return fmt.Sprintf("  %s:\n    command: %q\n    args: %s\n    env: {%s: upstream, GORACE: \"atexit_sleep_ms=0\"}\n%s", name, self(t), args, execRole, extra)
}

// stdioConfigs numbers the config copies connectStdio writes.
var stdioConfigs atomic.Int64

// syncBuffer is the shared concurrent log sink.
type syncBuffer = testkit.LogBuffer

// httpGateway runs the gateway in-process on a loopback port and returns
// its /mcp URL and its log.
func httpGateway(t testing.TB, cfgPath string) (string, *syncBuffer) {
	t.Helper()
	url, logs, _ := httpGatewayFull(t, cfgPath)
	return url, logs
}

// httpGatewayFull is httpGateway that also returns the gateway itself.
func httpGatewayFull(t testing.TB, cfgPath string) (string, *syncBuffer, *gateway.Gateway) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw, code := startGateway(context.Background(), cfgPath, log)
	if gw == nil {
		t.Fatalf("gateway did not start (exit %d); log:\n%s", code, logs)
	}
	endpoint := gw.MCPHandler()
	srv := httptest.NewServer(endpoint)
	t.Cleanup(func() {
		srv.Close()
		_ = endpoint.Shutdown(context.Background())
		gw.Close()
	})
	return srv.URL + "/mcp", logs, gw
}

// connectHTTP is a real mcp-go client over Streamable HTTP.
func connectHTTP(t testing.TB, url, key string, extra ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	opts := append([]transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(ownHTTPClient(t))}, extra...)
	if key != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return initClient(t, client.NewClient(tr))
}

// connectStdio starts `toolgate serve --stdio` as a real process and
// connects mcp-go's stdio client to it.
//
// The process gets a copy of the config with an audit file of its own: a
// test may run an in-process gateway on the same config, and each gateway
// process holds its audit trail alone.
func connectStdio(t testing.TB, cfgPath string) *client.Client {
	t.Helper()
	own := strings.TrimSuffix(cfgPath, ".yaml") + fmt.Sprintf("-stdio-%d.yaml", stdioConfigs.Add(1))
	write(t, own, mustRead(t, cfgPath)+"audit: {file: "+filepath.Base(own)+".audit.log}\n")
	tr := transport.NewStdio(self(t), []string{execRole + "=toolgate", "GORACE=atexit_sleep_ms=0"}, "serve", "--stdio", "--config", own)
	return initClient(t, client.NewClient(tr))
}

// ownHTTPClient is an HTTP client for one mcp-go client alone, with no
// connection reuse. mcp-go's Streamable HTTP transport defaults to
// http.DefaultTransport, whose pool every client of the process shares,
// and it cancels requests whose answer is already on its way: the POST of
// its answer to a server's request (sampling, elicitation, roots) ends with
// the stream that carried the request, or at Close, often while the
// server's 202 travels. net/http (go1.26) puts a connection back in the
// pool before it hands a body-less response to its request; a cancellation
// in between closes the connection under whichever request took it next,
// and that request fails with "context canceled" on a live context (the
// next client's initialize, or this client's next call). With a connection
// per request, a cancellation breaks only its own request.
func ownHTTPClient(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func initClient(t testing.TB, c *client.Client) *client.Client {
	t.Helper()
	return initClientVersion(t, c, mcp.LATEST_PROTOCOL_VERSION)
}

// initClientVersion starts c and initializes it at version.
func initClientVersion(t testing.TB, c *client.Client, version string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Start's context owns a stdio child for its whole life (mcp-go trap 2).
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize %s: %v", version, err)
	}
	return c
}

// callE2E calls name with raw JSON arguments and returns the result and
// the envelope's raw bytes.
func callE2E(t testing.TB, c *client.Client, name, args string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = jsonRaw(args)
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	env, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("call %s: structuredContent is %T, want the envelope", name, res.StructuredContent)
	}
	return res, env
}

func toolNames(t testing.TB, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func jsonRaw(s string) any {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return json.RawMessage(s)
}

// clientWithNotes counts the notifications a client receives.
type clientWithNotes struct {
	*client.Client
	progress, foreign, listChanged atomic.Int32
	changed                        chan struct{}

	mu       sync.Mutex
	messages []string // the messages of the progress notifications under the client's token
}

// progressMessages is what the client's progress notifications said so far.
func (n *clientWithNotes) progressMessages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.messages)
}

func notesOf(c *client.Client) *clientWithNotes {
	n := &clientWithNotes{Client: c, changed: make(chan struct{}, 64)}
	c.OnNotification(func(note mcp.JSONRPCNotification) {
		switch note.Method {
		case string(mcp.MethodNotificationProgress):
			if note.Params.AdditionalFields["progressToken"] == "client-token-7" {
				if m, ok := note.Params.AdditionalFields["message"].(string); ok {
					n.mu.Lock()
					n.messages = append(n.messages, m)
					n.mu.Unlock()
				}
				n.progress.Add(1)
			} else {
				n.foreign.Add(1)
			}
		case string(mcp.MethodNotificationToolsListChanged):
			n.listChanged.Add(1)
		}
		select {
		case n.changed <- struct{}{}:
		default:
		}
	})
	return n
}

// portZero is a config's listeners on ports the kernel picks: a test never
// opens a fixed port (the defaults 8080 and 8081 may be anyone's).
const portZero = "listen: {http: \"127.0.0.1:0\"}\nadmin: {listen: \"127.0.0.1:0\"}\n"

// gatewayProcess is `toolgate serve` (over HTTP) run as a real process.
type gatewayProcess struct {
	cmd    *exec.Cmd
	stderr *syncBuffer // the gateway's log
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// serveProcess runs `toolgate serve --config cfgPath` and returns once both
// its listeners are open. The config must put both on port 0. If the
// gateway exits first, the test fails with its log. On every path the
// process is stopped (SIGTERM, then SIGKILL) and reaped when the test ends,
// and a failed test prints the gateway's log.
func serveProcess(t *testing.T, cfgPath string) *gatewayProcess {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for key, addr := range map[string]string{"listen.http": cfg.HTTPAddr(), "admin.listen": cfg.AdminAddr()} {
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			t.Fatalf("%s is %s: a test listens on port 0 only (add portZero to the config)", key, addr)
		}
	}
	p := &gatewayProcess{stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(self(t), "serve", "--config", cfgPath)
	p.cmd.Env = append(os.Environ(), execRole+"=toolgate", "GORACE=atexit_sleep_ms=0")
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("gateway log (exit: %v):\n%s", p.err, p.stderr)
		}
	})
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.stderr.String(), "serving the admin API") {
		select {
		case <-p.done:
			t.Fatalf("gateway exited before serving (%v)", p.err)
		case <-deadline:
			t.Fatal("gateway not serving after 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return p
}

// stop asks the gateway to stop, kills it after grace, and reaps it.
func (p *gatewayProcess) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill() // its upstreams die with it (Pdeathsig)
		<-p.done
	}
}
