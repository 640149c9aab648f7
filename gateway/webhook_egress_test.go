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
	"testing"
	"time"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// TestWebhookToMetadataAddressRefusedEndToEnd: the attack is an approval webhook whose host name
// resolves (by mistake, or by whoever answers its DNS) to the cloud metadata service, where the
// gateway would POST from inside the machine. Through the whole gateway and a real MCP client, a
// held call is announced to two webhooks of its rule: the one whose name resolves to
// 169.254.169.254 is refused (even with link_local allowed) without a connection reaching that
// address, logged as an egress refusal naming the webhook and never its URL, and given up at the
// first attempt; the one on loopback, which says so in its config (egress: {allow: [loopback]}),
// is delivered.
func TestWebhookToMetadataAddressRefusedEndToEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	trap := metadataTrap{ln}
	names := &testNames{addrs: map[string]netip.Addr{}}
	names.set("hooks.test", "169.254.169.254")
	names.set("receiver.test", "127.0.0.1")
	delivered := make(chan string, 2)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered <- r.URL.Path
	}))
	defer receiver.Close()
	_, receiverPort, _ := net.SplitHostPort(receiver.Listener.Addr().String())
	plain := startPlainUpstream(t)
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())

	dir := t.TempDir()
	model, err := os.ReadFile("../model.conf")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
audit: {file: %q}
auth:
  api_keys:
    - {principal: carol, sha256: %q}
mcpServers:
  plain:
    url: "http://receiver.test:%s/mcp"
    egress: {allow: [loopback]}
approvals:
  rules:
    - tools: [plain/ping]
      webhooks:
        - {url: "https://hooks.test/services/T0/B0/XXXXSECRET", format: slack, egress: {allow: [link_local]}}
        - {url: "http://127.0.0.1:%s/hook", format: slack, egress: {allow: [loopback]}}
`, filepath.Join(dir, "audit.jsonl"), authn.HashKey(carolKey), plainPort, receiverPort)
	for name, content := range map[string]string{"model.conf": string(model), "toolgate.yaml": cfg,
		"policy.csv": "p, carol, plain/*, call, allow\na, carol, plain/ping, call\n"} {
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

	if env := callAs(t, ctx, gw, carolKey, "plain__ping"); env.ErrorCode != "approval_required" {
		t.Fatalf("the call was not held: %+v", env)
	}
	if path := <-delivered; path != "/hook" {
		t.Errorf("the loopback webhook got %s", path)
	}
	redistest.WaitFor(t, func() bool { return len(logs.Records("approval webhook given up")) == 1 })
	trap.assertUntouched(t)
	if given := logs.Records("approval webhook given up")[0]; given["webhook"] != "approvals.rules[0].webhooks[0]" || given["attempts"] != float64(1) ||
		!strings.Contains(fmt.Sprint(given["err"]), "hooks.test resolves to 169.254.169.254, a metadata address") {
		t.Errorf("given up as %v", given)
	}
	refused := logs.Records("egress refused")
	if len(refused) != 1 || refused[0]["webhook"] != "approvals.rules[0].webhooks[0]" || refused[0]["class"] != "metadata" {
		t.Errorf("refusals logged: %v", refused)
	}
	if strings.Contains(logs.String(), "XXXXSECRET") {
		t.Error("the webhook's URL is in the log")
	}
}
