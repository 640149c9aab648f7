package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// testNames is a resolver without DNS whose answers a test changes.
type testNames struct {
	mu    sync.Mutex
	addrs map[string]netip.Addr
}

func (n *testNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.addrs[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (n *testNames) set(host, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addrs[host] = netip.MustParseAddr(addr)
}

// metadataTrap listens where a connection to 169.254.169.254 would arrive:
// the gateway's dialer routes that address here, so a connection the guard
// wrongly let through is seen.
type metadataTrap struct{ ln net.Listener }

func (m metadataTrap) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if strings.HasPrefix(address, "169.254.169.254:") {
		address = m.ln.Addr().String()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// assertUntouched connects a canary and requires it to be the first
// connection the trap accepts (the accept queue is first in, first out).
func (m metadataTrap) assertUntouched(t *testing.T) {
	t.Helper()
	canary, err := net.Dial("tcp", m.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()
	if _, err := canary.Write([]byte("canary")); err != nil {
		t.Fatal(err)
	}
	conn, err := m.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	first := make([]byte, 6)
	if _, err := io.ReadFull(conn, first); err != nil || string(first) != "canary" {
		t.Fatalf("a connection reached the metadata address before the canary (read %q, %v)", first, err)
	}
}

// startPlainUpstream is a Streamable HTTP MCP server on loopback with one
// tool, ping.
func startPlainUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := server.NewMCPServer("plain", "1.0.0")
	s.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	// The gateway reaches it as rebind.test, a name mcp-go's own
	// DNS-rebinding check refuses on a loopback listener: it gets the
	// loopback Host it expects.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = "127.0.0.1"
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		_ = h.Shutdown(context.Background())
		srv.Close()
	})
	return srv
}

// TestEgressGuardEndToEnd: through the whole gateway and a real MCP
// client, a server whose host name resolves to 169.254.169.254 (even with
// every class allowed) and a server that redirects there are refused
// without a connection reaching that address; a server on loopback that
// says so in its config serves; and when its name later rebinds to the
// metadata address, the next connection is refused and the call answers
// upstream_unavailable without naming the address. Every refusal is logged
// with the address class.
func TestEgressGuardEndToEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	trap := metadataTrap{ln}
	_, trapPort, _ := net.SplitHostPort(ln.Addr().String())
	names := &testNames{addrs: map[string]netip.Addr{}}
	names.set("metadata.test", "169.254.169.254")
	names.set("rebind.test", "127.0.0.1")

	plain := startPlainUpstream(t)
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://metadata.test:"+trapPort+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()

	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
limits: {dedup: {window: 0s}}   # each ping runs: none is a replay of the one before
audit: {file: %q}
auth:
  api_keys:
    - {principal: carol, sha256: %q}
mcpServers:
  meta:
    url: "http://metadata.test:%s/mcp"
    egress: {allow: [loopback, private, link_local, 169.254.0.0/16]}
  redir:
    url: %q
    egress: {allow: [loopback]}
  plain:
    url: "http://rebind.test:%s/mcp"
    egress: {allow: [loopback]}
`, filepath.Join(dir, "audit.jsonl"), authn.HashKey(carolKey), trapPort, redirect.URL+"/mcp", plainPort)
	for name, content := range map[string]string{"model.conf": string(model), "toolgate.yaml": cfg,
		"policy.csv": "p, carol, meta/*, call, allow\np, carol, redir/*, call, allow\np, carol, plain/*, call, allow\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: filepath.Join(dir, "toolgate.yaml"),
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Egress: egress.Options{Resolver: names, Dial: trap.dial}})
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

	if env := callAs(t, ctx, gw, carolKey, "plain__ping"); !env.OK || env.Data != "pong" {
		t.Fatalf("the loopback server allowed in its config: %+v", env)
	}
	for _, tool := range []string{"meta__ping", "redir__ping"} {
		env := callAs(t, ctx, gw, carolKey, tool)
		if env.OK || env.ErrorCode != "upstream_unavailable" {
			t.Errorf("%s: %+v, want upstream_unavailable", tool, env)
		}
		assertNoInternals(t, env.Message)
	}

	// The name rebinds to the metadata address; the upstream drops its
	// connections, so the next request needs a new one.
	names.set("rebind.test", "169.254.169.254")
	plain.CloseClientConnections()
	env := callAs(t, ctx, gw, carolKey, "plain__ping")
	if env.OK || env.ErrorCode != "upstream_unavailable" || !strings.Contains(env.Message, "the call was not sent") {
		t.Fatalf("after rebinding: %+v, want upstream_unavailable, not sent", env)
	}
	assertNoInternals(t, env.Message)
	trap.assertUntouched(t)

	refused := map[string]bool{}
	for _, rec := range logs.Records("egress refused") {
		if rec["class"] != "metadata" || rec["address"] != "169.254.169.254" {
			t.Errorf("refusal logged as %v", rec)
		}
		refused[fmt.Sprint(rec["server"])] = true
	}
	if !refused["meta"] || !refused["plain"] {
		t.Errorf("refusals logged for %v, want meta and plain", refused)
	}
	rec := httptest.NewRecorder()
	gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, series := range []string{`toolgate_egress_refused_total{class="metadata",server="meta"}`, `toolgate_egress_refused_total{class="metadata",server="plain"}`} {
		if !strings.Contains(rec.Body.String(), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
}

// assertNoInternals: a client's message names no address, host or guard.
func assertNoInternals(t *testing.T, msg string) {
	t.Helper()
	for _, leak := range []string{"169.254", "127.0.0.1", "metadata", "egress", ".test"} {
		if strings.Contains(msg, leak) {
			t.Errorf("the client's message %q names %q", msg, leak)
		}
	}
}
