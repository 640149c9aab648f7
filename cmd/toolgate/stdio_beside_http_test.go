package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/audit"
)

// stdioProcess is `toolgate serve --stdio --config cfgPath` started by a
// real mcp-go stdio client, with its stderr kept (and printed if the test
// fails). The client is not started.
func stdioProcess(t *testing.T, cfgPath string) (*client.Client, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	tr := transport.NewStdioWithOptions(self(t), []string{execRole + "=toolgate", "GORACE=atexit_sleep_ms=0"},
		[]string{"serve", "--stdio", "--config", cfgPath}, transport.WithCommandStderrWriter(stderr))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdio gateway log:\n%s", stderr)
		}
	})
	return client.NewClient(tr), stderr
}

// servingURL is the /mcp URL a gateway process logged.
func servingURL(t *testing.T, p *gatewayProcess) string {
	t.Helper()
	for _, ln := range strings.Split(p.stderr.String(), "\n") {
		var entry struct{ Msg, URL string }
		if json.Unmarshal([]byte(ln), &entry) == nil && entry.Msg == "serving Streamable HTTP" {
			return entry.URL
		}
	}
	t.Fatalf("the gateway did not log its URL")
	return ""
}

// The Claude Desktop setup beside the HTTP demo (issue 16, item 10): a
// `serve --stdio` on the config an HTTP gateway process is serving starts
// (before, it exited 2: the audit file was held), serves its client, and
// writes a trail of its own beside the HTTP gateway's; `toolgate audit
// verify --config` checks both, each its own chain.
func TestStdioBesideRunningHTTPGateway(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, portZero+mustRead(t, cfg))
	httpGw := serveProcess(t, cfg)
	overHTTP := connectHTTP(t, servingURL(t, httpGw), aliceKey)
	if _, env := callE2E(t, overHTTP, "hostile__echo", `{"via":"http"}`); env["ok"] != true {
		t.Fatalf("over HTTP: %v", env)
	}

	c, stderr := stdioProcess(t, cfg)
	initClient(t, c) // registers c.Close (which reaps the process) as a cleanup
	if names := toolNames(t, c); !contains(names, "hostile__echo") {
		t.Fatalf("tools over stdio: %v", names)
	}
	if _, env := callE2E(t, c, "hostile__echo", `{"via":"stdio"}`); env["ok"] != true {
		t.Fatalf("over stdio: %v", env)
	}
	trail := filepath.Join(filepath.Dir(cfg), "toolgate.audit.log")
	slot := audit.SlotPath(trail, 2)
	// Its log reaches stderr a few ms after it is written (internal/logsink), not ordered by the
	// answers: waited for, not looked at once.
	stderr.AwaitText(t, "slot of its own", slot) // which trail it writes, and why

	code, out, errOut := runAudit("verify", "--config", cfg)
	if code != 0 || strings.Count(out, "intact: ") != 2 || !strings.Contains(out, "trail "+trail+"\n") || !strings.Contains(out, "trail "+slot+"\n") {
		t.Fatalf("audit verify --config: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// Each call is in its own process's trail.
	for path, want := range map[string]string{trail: "alice", slot: "local"} {
		var principals []string
		for _, r := range auditRecords(t, path) {
			if r.Kind == audit.KindCall {
				principals = append(principals, r.Principal)
			}
		}
		if len(principals) != 1 || principals[0] != want {
			t.Errorf("%s: calls by %v, want one by %s", path, principals, want)
		}
	}
}

// A `serve --stdio` that cannot start answers the client's initialize with
// the startup error (what failed, and the file) instead of closing the
// connection with nothing said (issue 16, item 10); it answers later
// requests the same way, and exits non-zero once the client closes stdin.
func TestStdioStartupErrorReachesClient(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+"authz: {model: model.conf, policy: missing-policy.csv}\n")
	c, _ := stdioProcess(t, cfg)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	_, err := c.Initialize(ctx, req)
	if err == nil {
		t.Fatal("initialize succeeded on a config whose policy file does not exist")
	}
	missing := filepath.Join(filepath.Dir(cfg), "missing-policy.csv")
	for _, want := range []string{"invalid policy", missing} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("initialize error %q does not say %q", err, want)
		}
	}
	// Another request (straight through the transport: the client sends
	// nothing else before a successful initialize) gets the same answer.
	tr := c.GetTransport()
	if err := tr.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(99)), Method: "tools/list"})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if resp.Error == nil || !strings.Contains(resp.Error.Message, missing) {
		t.Errorf("tools/list answer: %+v", resp)
	}

	closed = true
	err = c.Close() // closes stdin and reaps the process
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("exit after stdin closed: %v, want a non-zero status", err)
	}
}
