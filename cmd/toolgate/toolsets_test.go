package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// toolsetsYAML gives the test upstream's tools two toolsets: ide (echo and
// big) for clients that call themselves ide-*, support (every tool but
// echo) for requests with the header X-Toolset: support. The rule on the
// header comes first, so it wins over the client's name.
const toolsetsYAML = `toolsets:
  ide: {tools: [ops/echo, ops/big]}
  support: {tools: ["ops/*"], exclude: [ops/echo]}
toolset_rules:
  - {header: {X-Toolset: support}, toolset: support}
  - {client: "ide-*", toolset: ide}
`

// connectHTTPAs is connectHTTP with the client calling itself name at
// initialize.
func connectHTTPAs(t testing.TB, url, key, name string, extra ...transport.StreamableHTTPCOption) *client.Client {
	return connectHTTPAsAt(t, url, key, name, mcp.LATEST_PROTOCOL_VERSION, extra...)
}

// connectHTTPAsAt is connectHTTPAs at a protocol version: 2026-07-28 sends
// the clientInfo with every request, the 2025 versions once, at
// initialize, for the session.
func connectHTTPAsAt(t testing.TB, url, key, name, version string, extra ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	opts := extra // the caller's WithHTTPHeaders carries the key with its other headers
	if len(opts) == 0 {
		opts = []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key})}
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// Two clients of one principal (alice), through real mcp-go clients over
// Streamable HTTP, see different tools: one by the header it sends, one by
// the clientInfo name it gave (in every 2026-07-28 request, or once for a
// 2025-11-25 session); a tool outside a client's toolset answers
// tool_not_found, as a name that does not exist; a client no rule picks
// sees every tool the policy allows. toolgate tools shows each view.
func TestToolsetsPerClient(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", ""))
	write(t, cfg, mustRead(t, cfg)+toolsetsYAML)
	url, logs := httpGateway(t, cfg)

	support := connectHTTPAs(t, url, aliceKey, "ide-but-told-otherwise",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceKey, "X-Toolset": "support"}))
	ide := connectHTTPAs(t, url, aliceKey, "ide-vscode")
	plain := connectHTTP(t, url, aliceKey)
	ideSession := connectHTTPAsAt(t, url, aliceKey, "ide-jetbrains", "2025-11-25") // its name is kept with its session

	ideTools, supportTools, plainTools := toolNames(t, ide), toolNames(t, support), toolNames(t, plain)
	sessionTools := toolNames(t, ideSession)
	slices.Sort(ideTools)
	slices.Sort(sessionTools)
	if strings.Join(ideTools, ",") != "ops__big,ops__echo" || strings.Join(sessionTools, ",") != "ops__big,ops__echo" {
		t.Errorf("ide clients see %v (2026-07-28) and %v (2025-11-25), want ops__big, ops__echo", ideTools, sessionTools)
	}
	if contains(supportTools, "ops__echo") || !contains(supportTools, "ops__fail") || !contains(supportTools, "ops__big") {
		t.Errorf("support client sees %v, want every ops tool but echo", supportTools)
	}
	if len(plainTools) != len(supportTools)+1 || !contains(plainTools, "ops__echo") {
		t.Errorf("a client no rule picks sees %v, want every tool (support's %d and echo)", plainTools, len(supportTools))
	}

	for _, tc := range []struct {
		name string
		c    *client.Client
		tool string
		code any
	}{
		{"ide calls a tool of its set", ide, "ops__echo", nil},
		{"ide calls one outside its set", ide, "ops__fail", "tool_not_found"},
		{"a 2025 ide client calls one outside its set", ideSession, "ops__fail", "tool_not_found"},
		{"a 2025 ide client calls one of its set", ideSession, "ops__big", nil},
		{"support calls one outside its set", support, "ops__echo", "tool_not_found"},
		{"support calls one of its set", support, "ops__big", nil},
		{"plain calls echo", plain, "ops__echo", nil},
	} {
		args := `{"bytes":1}`
		if tc.tool != "ops__big" {
			args = `{}`
		}
		_, env := callE2E(t, tc.c, tc.tool, args)
		if env["error_code"] != tc.code {
			t.Errorf("%s: %v, want error_code %v", tc.name, env, tc.code)
		}
		if tc.code == "tool_not_found" && env["message"] != `no tool named "`+tc.tool+`"; call tools/list for the tools you may use` {
			t.Errorf("%s: message %q, want the answer a name that does not exist gets", tc.name, env["message"])
		}
	}
	if !strings.Contains(logs.String(), "outside toolset ide") {
		t.Errorf("the log does not say why ops__fail was not found:\n%s", logs)
	}

	for _, tc := range []struct {
		args       []string
		head       string
		has, hasnt string
	}{
		{[]string{"--as", "alice", "--client", "ide-cursor"}, "toolset ide (toolset_rules[1])", "ops__echo", "ops__fail"},
		{[]string{"--as", "alice", "--header", "X-Toolset=support"}, "toolset support (toolset_rules[0])", "ops__fail", "ops__echo"},
		{[]string{"--as", "alice", "--toolset", "ide"}, "toolset ide (--toolset)", "ops__big", "ops__fail"},
		{[]string{"--as", "alice"}, "no toolset: no toolset_rules entry matches", "ops__echo", ""},
	} {
		var out bytes.Buffer
		if code := tools(append([]string{"--config", cfg}, tc.args...), &out); code != 0 {
			t.Fatalf("tools %v: exit %d: %s", tc.args, code, out.String())
		}
		first, rest, _ := strings.Cut(out.String(), "\n")
		if !strings.HasPrefix(first, tc.head) || !strings.Contains(rest, tc.has+" ") || (tc.hasnt != "" && strings.Contains(rest, tc.hasnt+" ")) {
			t.Errorf("toolgate tools %v:\n%s\nwant first line %q, %s listed, %q not", tc.args, out.String(), tc.head, tc.has, tc.hasnt)
		}
	}
}

// connectStdioAs is connectStdio with the client calling itself name at
// initialize.
func connectStdioAs(t *testing.T, cfg, name string) *client.Client {
	t.Helper()
	own := strings.TrimSuffix(cfg, ".yaml") + "-stdio.yaml"
	write(t, own, mustRead(t, cfg)+"audit: {file: stdio.audit.log}\n")
	tr := transport.NewStdio(self(t), []string{execRole + "=toolgate", "GORACE=atexit_sleep_ms=0"}, "serve", "--stdio", "--config", own)
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// Over stdio the clientInfo name alone picks the toolset.
func TestToolsetByClientNameOverStdio(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", ""))
	write(t, cfg, mustRead(t, cfg)+toolsetsYAML)
	c := connectStdioAs(t, cfg, "ide-zed")
	names := toolNames(t, c)
	slices.Sort(names)
	if strings.Join(names, ",") != "ops__big,ops__echo" {
		t.Errorf("stdio client ide-zed sees %v, want ops__big, ops__echo", names)
	}
	if _, env := callE2E(t, c, "ops__fail", `{}`); env["error_code"] != "tool_not_found" {
		t.Errorf("ops__fail over stdio: %v", env)
	}
}

// toolgate check warns of a toolset pattern that matches no tool the
// servers list (a typo narrows a toolset silently), and of no other.
func TestCheckWarnsOfUnmatchedToolsetPatterns(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "ops", ""))
	write(t, cfg, mustRead(t, cfg)+"toolsets:\n  s: {tools: [ops/echo, ops/ehco, \"ops/b*\"], exclude: [\"ops/nothing_*\"]}\n")
	var out bytes.Buffer
	check(cfg, false, &out)
	var warned []string
	for l := range strings.Lines(out.String()) {
		if strings.HasPrefix(l, "warning: toolsets.") {
			warned = append(warned, strings.TrimSpace(l))
		}
	}
	want := []string{
		`warning: toolsets.s: pattern "ops/ehco" matches no tool the servers list`,
		`warning: toolsets.s: pattern "ops/nothing_*" matches no tool the servers list`,
	}
	if !slices.Equal(warned, want) {
		t.Errorf("toolgate check warned %q, want %q; output:\n%s", warned, want, out.String())
	}
}
