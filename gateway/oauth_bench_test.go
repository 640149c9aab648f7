package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/testauthserver"
)

// BenchmarkCallOAuthVsStatic is one tools/call through the whole gateway (a real mcp-go client, the
// chain, the upstream over loopback HTTP) to two upstreams of the same kind that verify the same kind
// of token: crm in auth mode oauth with alice's token cached, plain with a static Authorization header.
// The difference is what auth mode oauth adds to a call once its caller is connected.
func BenchmarkCallOAuthVsStatic(b *testing.B) {
	as := testauthserver.Start(b)
	crm, plain := testauthserver.StartUpstream(b, as), testauthserver.StartUpstream(b, as)
	b.Setenv("TOOLGATE_CREDENTIALS_KEY", "q1ouvDvb0x2fWw4yCwD5yVn0dE6XwTq0Yl2c9S5vY4M=")
	b.Setenv("TG_BENCH_PLAIN_TOKEN", as.Issue("alice@idp", plain.URL))
	dir := b.TempDir()
	model, _ := os.ReadFile("../model.conf")
	cfg := fmt.Sprintf(`listen: {http: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
audit: {disabled: true}
auth:
  api_keys:
    - {principal: alice, sha256: %q}
mcpServers:
  crm:
    url: %q
    retry_safe: true
    auth: {mode: oauth, list_as: alice}
    egress: {allow: [loopback]}
  plain:
    url: %q
    retry_safe: true
    headers: {Authorization: "Bearer ${TG_BENCH_PLAIN_TOKEN}"}
    egress: {allow: [loopback]}
`, authn.HashKey(aliceOAuthKey), crm.URL, plain.URL)
	for name, content := range map[string]string{"model.conf": string(model), "toolgate.yaml": cfg,
		"policy.csv": "p, alice, crm/*, call, allow\np, alice, plain/*, call, allow\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	gw, err := New(context.Background(), Options{ConfigPath: filepath.Join(dir, "toolgate.yaml"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crmUp := waitUp(b, ctx, gw, "crm")
	if err := gw.Start(ctx); err != nil {
		b.Fatal(err)
	}
	link, _ := gw.ConnectLink("alice", "crm")
	if status, page, err := testauthserver.NewBrowser().Connect(link, "alice@idp", as); err != nil || status != 200 {
		b.Fatalf("connect: %d %v %s", status, err, page)
	}
	crmUp()
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceOAuthKey}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION}}); err != nil {
		b.Fatal(err)
	}
	for _, tool := range []string{"plain__whoami", "crm__whoami"} {
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool}})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", tool, err, res)
				}
			}
		})
	}
}
