package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/console"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams"
)

// The console's upstreams page and pin approval against a real upstream process: the test upstream
// redefines its tool target (a rug pull), pinning blocks it, the page's data shows the upstream, the
// blocked tool and its diff, and carol's approval (policy: pin) pins the new definition (refused
// first for a hash she did not see), makes the tool callable again and is in the audit trail under
// her name. The live calls' lines are the audit trail's own, with the stage that stopped a call.
func TestConsolePagesOnARealUpstream(t *testing.T) {
	cfg := writeGateway(t, "", "console:\n  approvers:\n    - {name: carol, sha256: \""+authn.HashKey("tg_carol_console")+"\"}\n")
	policy := "p, alice, echoes/*, call, allow\np, carol, echoes/*, pin, allow\n"
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "policy.csv"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: cfg, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		gw.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan struct{}, 1)
	gw.Upstreams().OnCatalogChange(func(cat *upstreams.Catalog) {
		if len(cat.Changed()) > 0 {
			select {
			case blocked <- struct{}{}:
			default:
			}
		}
	})
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey}))
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
	call := func(name, args string) map[string]any {
		t.Helper()
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}})
		if err != nil {
			t.Fatal(err)
		}
		var env map[string]any
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &env)
		return env
	}
	// waitBlocked waits for a catalog change that blocks target with a hash other than not.
	waitBlocked := func(not string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			for _, ch := range gw.Upstreams().Catalog().Changed() {
				if ch.ID == "echoes/target" && ch.NewHash != not {
					return
				}
			}
			select {
			case <-blocked:
			case <-deadline:
				t.Fatal("the redefined tool was never blocked")
			}
		}
	}
	if env := call("echoes__rug_pull", `{"variant":"description"}`); env["ok"] != true {
		t.Fatalf("rug_pull: %v", env)
	}
	waitBlocked("")
	if env := call("echoes__target", `{"id":1}`); env["error_code"] != "tool_changed" {
		t.Fatalf("the changed tool answered %v", env)
	}

	pages := gw.consolePages()
	ups := pages.Upstreams()
	if len(ups) != 1 || ups[0].Name != "echoes" || !ups[0].Connected || ups[0].Breaker != "closed" || ups[0].MaxFlight == 0 {
		t.Fatalf("upstreams: %+v", ups)
	}
	var target console.UpstreamTool
	for _, tool := range ups[0].Tools {
		if tool.ID == "echoes/target" {
			target = tool
		}
	}
	if target.Pin != console.PinChanged || !strings.Contains(target.Diff, "send_customer_reply") || target.OldHash == "" {
		t.Fatalf("the blocked tool as the page gets it: %+v", target)
	}

	if err := pages.ApprovePin(ctx, "carol", "echoes/target", "sha256:not-what-she-saw"); !errors.Is(err, console.ErrPinMoved) {
		t.Fatalf("approving a hash not shown: %v, want ErrPinMoved", err)
	}
	if err := pages.ApprovePin(ctx, "carol", "echoes/target", target.Hash); err != nil {
		t.Fatal(err)
	}
	if env := call("echoes__target", `{"id":1}`); env["ok"] != true {
		t.Fatalf("the approved tool answered %v", env)
	}
	if err := pages.ApprovePin(ctx, "carol", "echoes/target", target.Hash); !errors.Is(err, console.ErrNotBlocked) {
		t.Fatalf("approving again: %v, want ErrNotBlocked", err)
	}

	// The operator's path: another rug pull, approved in the pin file as `toolgate pins approve`
	// does (a store of its own on the same file); the gateway records it, without a name.
	if env := call("echoes__rug_pull", `{"variant":"schema"}`); env["ok"] != true {
		t.Fatalf("rug_pull: %v", env)
	}
	waitBlocked(target.Hash)
	cli, err := OpenPins(gw.Config())
	if err != nil {
		t.Fatal(err)
	}
	changed := gw.Upstreams().Catalog().Changed()
	if len(changed) != 1 {
		t.Fatalf("blocked: %+v", changed)
	}
	if err := cli.Approve(changed[0].ID, changed[0].New); err != nil {
		t.Fatal(err)
	}
	if err := gw.Upstreams().ReloadPins(); err != nil {
		t.Fatal(err)
	}

	// The pin file's approval is recorded by whichever reload saw the file change first: this
	// ReloadPins, or the gateway's own watch of the file, on its goroutine. Wait for the record.
	var approvals []audit.Record
	var refused *audit.Record
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		approvals, refused = nil, nil
		for _, ln := range pages.Recent(0) {
			var r audit.Record
			if err := json.Unmarshal(ln, &r); err != nil {
				t.Fatal(err)
			}
			switch {
			case r.Kind == audit.KindPinChange && r.Decision == audit.DecisionApproved:
				approvals = append(approvals, r) // newest first
			case r.Kind == audit.KindCall && r.ErrorCode == "tool_changed" && refused == nil:
				refused = &r
			}
		}
		if len(approvals) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(approvals) != 2 {
		t.Fatalf("%d pin approvals recorded, want 2 (carol's once, the pin file's): %+v", len(approvals), approvals)
	}
	if a := approvals[1]; a.Principal != "carol" || a.Tool != "echoes/target" || a.Details["new_hash"] != target.Hash || a.Details["via"] != "console" {
		t.Fatalf("the console approval's audit record: %+v", a)
	}
	if a := approvals[0]; a.Principal != "" || a.Details["new_hash"] != changed[0].NewHash || a.Details["via"] != "pin file" {
		t.Fatalf("the pin file approval's audit record: %+v", a)
	}
	if refused == nil || refused.Stage != "validate" && refused.Stage != "resolve" {
		t.Fatalf("the refused call's record names no stage: %+v", refused)
	}
	if pages.AuditPath != gw.Config().AuditPath() || len(pages.Stages) == 0 || pages.Stages[0] != "record" {
		t.Fatalf("pages: audit %q, stages %v", pages.AuditPath, pages.Stages)
	}
}

// The status history counts a restart each time an upstream that was up goes down, and keeps the
// last failure with its time.
func TestUpstreamHistory(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h := &upstreamHistory{now: func() time.Time { return now }, by: map[string]*upstreamEvents{"a": {up: true}}}
	h.changed("a", false, "process exited: exit status 2")
	h.changed("a", false, "spawn failed: no such file")
	now = now.Add(time.Minute)
	h.changed("a", true, "")
	h.changed("a", false, "")
	got := h.get("a")
	if got.restarts != 2 || got.lastError != "spawn failed: no such file" || !got.at.Equal(now.Add(-time.Minute)) || got.up {
		t.Fatalf("history: %+v", got)
	}
}

// console.oidc reaches the console: the sign-in page offers the provider, and an approver listed
// without a key hash is accepted.
func TestConsoleOIDCFromConfig(t *testing.T) {
	extra := "console:\n  approvers:\n    - {name: erin}\n  oidc:\n    issuer: http://127.0.0.1:1\n    client_id: toolgate-console\n" +
		"    redirect_url: http://127.0.0.1:8081/ui/oidc/callback\n    principal_claim: preferred_username\n"
	gw, err := New(context.Background(), Options{ConfigPath: writeGateway(t, "", extra)})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	h, err := gw.AdminListenerHandler()
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/signin", nil))
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `href="/ui/oidc/start"`) || strings.Contains(body, `name="key"`) {
		t.Fatalf("sign-in page: %d\n%s", w.Code, body)
	}
}
